//! A pickle reader that builds [`Value`]s and executes nothing: the
//! equivalent of `torch.load(weights_only=True)`'s unpickler.
//!
//! Objects live in an arena and the stack, marks and memo hold arena
//! indices, so Python's shared references (a list appended to after it was
//! memoized and fetched again) behave as in Python. Every opcode creates at
//! most one object and every length is checked against the bytes left, so
//! memory stays proportional to the input; turning the arena into a
//! [`Value`] tree is bounded in depth ([`MAX_DEPTH`]) and in the number of
//! values (shared references could otherwise expand exponentially).

use std::collections::HashMap;

use ferrotorch_core::DType;
use ferrotorch_core::Tensor;
use ferrotorch_core::backend::storage::Storage;

use super::globals::{self, Global};
use super::op;
use crate::error::{Error, Result};
use crate::tensor_io::{rebuild_tensor, to_usize};
use crate::value::{Dict, DictKind, Key, Value};

use crate::value::MAX_DEPTH;

type Id = usize;

/// What turning the arena into values may still build.
struct Budget {
    /// Values (each container, scalar and tensor counts one).
    values: usize,
    /// Bytes of strings and bytes objects.
    bytes: usize,
}

/// One Python object under construction.
#[derive(Debug)]
enum Obj {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Id>),
    Tuple(Vec<Id>),
    Dict {
        items: Vec<(Id, Id)>,
        kind: DictKind,
        /// The state `BUILD` gave it (an OrderedDict's `__dict__`).
        attrs: Option<Id>,
    },
    Global(Global),
    Storage {
        storage: Storage,
        dtype: DType,
    },
    Tensor(Tensor),
}

impl Obj {
    fn kind(&self) -> &'static str {
        match self {
            Obj::None => "None",
            Obj::Bool(_) => "bool",
            Obj::Int(_) => "int",
            Obj::Float(_) => "float",
            Obj::Str(_) => "str",
            Obj::Bytes(_) => "bytes",
            Obj::List(_) => "list",
            Obj::Tuple(_) => "tuple",
            Obj::Dict { .. } => "dict",
            Obj::Global(_) => "global",
            Obj::Storage { .. } => "storage",
            Obj::Tensor(_) => "Tensor",
        }
    }
}

/// The unpickler's state.
struct Machine<'a, F> {
    data: &'a [u8],
    pos: usize,
    /// Where the opcode being run starts (for messages).
    op_pos: usize,
    arena: Vec<Obj>,
    stack: Vec<Id>,
    marks: Vec<usize>,
    memo: HashMap<u32, Id>,
    storages: HashMap<String, (Storage, DType)>,
    loader: F,
}

/// Reads the pickle `data`. Persistent ids of storages are resolved through
/// `loader(key, dtype, numel)` (the archive's `data/<key>` entry), once per
/// storage key: later references share the storage.
pub(crate) fn read<F>(data: &[u8], loader: F) -> Result<Value>
where
    F: FnMut(&str, DType, usize) -> Result<Storage>,
{
    let mut m = Machine {
        data,
        pos: 0,
        op_pos: 0,
        arena: Vec::new(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        storages: HashMap::new(),
        loader,
    };
    let root = m.run()?;
    // Budgets on the values built: each arena object a few times over, and
    // the bytes of strings a few times the pickle's size; enough for shared
    // tensors and dicts, not for exponential expansion of shared
    // references or a long string referenced a million times.
    let mut budget = Budget {
        values: m.arena.len().saturating_mul(16).saturating_add(1 << 16),
        bytes: data.len().saturating_mul(16).saturating_add(1 << 20),
    };
    m.to_value(root, 0, &mut budget)
}

impl<F> Machine<'_, F>
where
    F: FnMut(&str, DType, usize) -> Result<Storage>,
{
    fn err(&self, detail: impl Into<String>) -> Error {
        Error::Pickle {
            offset: self.op_pos,
            detail: detail.into(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| {
                self.err(format!(
                    "truncated: needs {n} more bytes, {} left",
                    self.data.len() - self.pos
                ))
            })?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// A length given as a `u64` / `u32`, checked against the bytes left.
    fn len(&mut self, raw: u64) -> Result<usize> {
        let left = self.data.len() - self.pos;
        usize::try_from(raw).ok().filter(|&n| n <= left).ok_or_else(|| {
            self.err(format!(
                "length {raw} runs past the end of the data ({left} bytes left)"
            ))
        })
    }

    fn line(&mut self) -> Result<String> {
        let rest = &self.data[self.pos..];
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| self.err("truncated: GLOBAL without a newline"))?;
        let s = std::str::from_utf8(&rest[..n])
            .map_err(|_| self.err("GLOBAL name is not UTF-8"))?
            .to_string();
        self.pos += n + 1;
        Ok(s)
    }

    fn string(&mut self, n: usize) -> Result<String> {
        let bytes = self.take(n)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => Err(self.err("string is not valid UTF-8")),
        }
    }

    fn new_obj(&mut self, obj: Obj) -> Id {
        self.arena.push(obj);
        self.arena.len() - 1
    }

    fn push(&mut self, obj: Obj) {
        let id = self.new_obj(obj);
        self.stack.push(id);
    }

    fn pop(&mut self) -> Result<Id> {
        self.stack.pop().ok_or_else(|| self.err("stack underflow"))
    }

    fn top(&self) -> Result<Id> {
        self.stack.last().copied().ok_or_else(|| self.err("stack underflow"))
    }

    /// Pops everything above the topmost mark, and the mark.
    fn pop_mark(&mut self) -> Result<Vec<Id>> {
        let m = self.marks.pop().ok_or_else(|| self.err("no MARK on the stack"))?;
        if m > self.stack.len() {
            return Err(self.err("MARK above the stack top"));
        }
        Ok(self.stack.split_off(m))
    }

    fn memo_get(&self, i: u32) -> Result<Id> {
        self.memo
            .get(&i)
            .copied()
            .ok_or_else(|| self.err(format!("memo entry {i} was never stored")))
    }

    fn memo_put(&mut self, i: u32) -> Result<()> {
        let top = self.top()?;
        self.memo.insert(i, top);
        Ok(())
    }

    fn run(&mut self) -> Result<Id> {
        loop {
            self.op_pos = self.pos;
            let code = self.u8().map_err(|_| self.err("truncated: no STOP opcode"))?;
            match code {
                op::PROTO => {
                    let v = self.u8()?;
                    if v > 5 {
                        return Err(self.err(format!("unsupported pickle protocol {v}")));
                    }
                }
                op::FRAME => {
                    self.array::<8>()?;
                }
                op::STOP => return self.pop(),
                op::MARK => self.marks.push(self.stack.len()),
                op::POP => {
                    self.pop()?;
                }
                op::POP_MARK => {
                    self.pop_mark()?;
                }
                op::DUP => {
                    let t = self.top()?;
                    self.stack.push(t);
                }
                op::NONE => self.push(Obj::None),
                op::NEWTRUE => self.push(Obj::Bool(true)),
                op::NEWFALSE => self.push(Obj::Bool(false)),
                op::BININT => {
                    let v = i32::from_le_bytes(self.array()?);
                    self.push(Obj::Int(i64::from(v)));
                }
                op::BININT1 => {
                    let v = self.u8()?;
                    self.push(Obj::Int(i64::from(v)));
                }
                op::BININT2 => {
                    let v = u16::from_le_bytes(self.array()?);
                    self.push(Obj::Int(i64::from(v)));
                }
                op::LONG1 => {
                    let n = usize::from(self.u8()?);
                    let v = self.long(n)?;
                    self.push(Obj::Int(v));
                }
                op::LONG4 => {
                    let raw = u32::from_le_bytes(self.array()?);
                    let n = self.len(u64::from(raw))?;
                    let v = self.long(n)?;
                    self.push(Obj::Int(v));
                }
                op::BINFLOAT => {
                    let v = f64::from_be_bytes(self.array()?);
                    self.push(Obj::Float(v));
                }
                op::SHORT_BINUNICODE => {
                    let n = usize::from(self.u8()?);
                    let s = self.string(n)?;
                    self.push(Obj::Str(s));
                }
                op::BINUNICODE => {
                    let raw = u32::from_le_bytes(self.array()?);
                    let n = self.len(u64::from(raw))?;
                    let s = self.string(n)?;
                    self.push(Obj::Str(s));
                }
                op::BINUNICODE8 => {
                    let raw = u64::from_le_bytes(self.array()?);
                    let n = self.len(raw)?;
                    let s = self.string(n)?;
                    self.push(Obj::Str(s));
                }
                op::SHORT_BINBYTES => {
                    let n = usize::from(self.u8()?);
                    let b = self.take(n)?.to_vec();
                    self.push(Obj::Bytes(b));
                }
                op::BINBYTES => {
                    let raw = u32::from_le_bytes(self.array()?);
                    let n = self.len(u64::from(raw))?;
                    let b = self.take(n)?.to_vec();
                    self.push(Obj::Bytes(b));
                }
                op::BINBYTES8 | op::BYTEARRAY8 => {
                    let raw = u64::from_le_bytes(self.array()?);
                    let n = self.len(raw)?;
                    let b = self.take(n)?.to_vec();
                    self.push(Obj::Bytes(b));
                }
                op::EMPTY_LIST => self.push(Obj::List(Vec::new())),
                op::EMPTY_TUPLE => self.push(Obj::Tuple(Vec::new())),
                op::EMPTY_DICT => self.push(Obj::Dict {
                    items: Vec::new(),
                    kind: DictKind::Dict,
                    attrs: None,
                }),
                op::LIST => {
                    let items = self.pop_mark()?;
                    self.push(Obj::List(items));
                }
                op::TUPLE => {
                    let items = self.pop_mark()?;
                    self.push(Obj::Tuple(items));
                }
                op::TUPLE1 | op::TUPLE2 | op::TUPLE3 => {
                    let n = usize::from(code - op::TUPLE1 + 1);
                    if self.stack.len() < n {
                        return Err(self.err("stack underflow"));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.push(Obj::Tuple(items));
                }
                op::DICT => {
                    let items = self.pop_mark()?;
                    let pairs = self.pairs(items)?;
                    self.push(Obj::Dict {
                        items: pairs,
                        kind: DictKind::Dict,
                        attrs: None,
                    });
                }
                op::APPEND => {
                    let item = self.pop()?;
                    let list = self.top()?;
                    self.append(list, vec![item])?;
                }
                op::APPENDS => {
                    let items = self.pop_mark()?;
                    let list = self.top()?;
                    self.append(list, items)?;
                }
                op::SETITEM => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    let d = self.top()?;
                    self.set_items(d, vec![(k, v)])?;
                }
                op::SETITEMS => {
                    let items = self.pop_mark()?;
                    let pairs = self.pairs(items)?;
                    let d = self.top()?;
                    self.set_items(d, pairs)?;
                }
                op::EMPTY_SET | op::ADDITEMS | op::FROZENSET => {
                    return Err(Error::Unsupported(
                        "the checkpoint holds a Python set, which ferrotorch has no value for".into(),
                    ));
                }
                op::GLOBAL => {
                    let module = self.line()?;
                    let name = self.line()?;
                    let g = globals::resolve(&module, &name)?;
                    self.push(Obj::Global(g));
                }
                op::STACK_GLOBAL => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (Obj::Str(module), Obj::Str(name)) = (&self.arena[module], &self.arena[name]) else {
                        return Err(self.err("STACK_GLOBAL needs two strings"));
                    };
                    let g = globals::resolve(module, name)?;
                    self.push(Obj::Global(g));
                }
                op::REDUCE | op::NEWOBJ => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    let obj = self.call(callable, args)?;
                    self.push(obj);
                }
                op::NEWOBJ_EX => {
                    return Err(Error::Unsupported("the NEWOBJ_EX opcode (keyword arguments)".into()));
                }
                op::BUILD => {
                    let state = self.pop()?;
                    let inst = self.top()?;
                    self.build(inst, state)?;
                }
                op::BINPERSID => {
                    let pid = self.pop()?;
                    let obj = self.persistent_load(pid)?;
                    self.push(obj);
                }
                op::BINPUT => {
                    let i = self.u8()?;
                    self.memo_put(u32::from(i))?;
                }
                op::LONG_BINPUT => {
                    let i = u32::from_le_bytes(self.array()?);
                    self.memo_put(i)?;
                }
                op::MEMOIZE => {
                    let i = u32::try_from(self.memo.len()).map_err(|_| self.err("memo is full"))?;
                    self.memo_put(i)?;
                }
                op::BINGET => {
                    let i = self.u8()?;
                    let id = self.memo_get(u32::from(i))?;
                    self.stack.push(id);
                }
                op::LONG_BINGET => {
                    let i = u32::from_le_bytes(self.array()?);
                    let id = self.memo_get(i)?;
                    self.stack.push(id);
                }
                other => {
                    return Err(self.err(format!(
                        "opcode {other:#04x} ({:?}) is not one torch.save writes",
                        char::from(other)
                    )));
                }
            }
        }
    }

    /// A little-endian two's-complement integer of `n` bytes, which must
    /// fit an `i64`.
    fn long(&mut self, n: usize) -> Result<i64> {
        let bytes = self.take(n)?;
        if bytes.is_empty() {
            return Ok(0);
        }
        let negative = bytes[bytes.len() - 1] & 0x80 != 0;
        let fill = if negative { 0xff } else { 0 };
        // Bytes past the eighth must be sign extension.
        let fits = bytes.len() <= 8 || (bytes[8..].iter().all(|&b| b == fill) && (bytes[7] & 0x80 != 0) == negative);
        if !fits {
            return Err(self.err("integer does not fit 64 bits"));
        }
        let mut buf = [fill; 8];
        let k = bytes.len().min(8);
        buf[..k].copy_from_slice(&bytes[..k]);
        Ok(i64::from_le_bytes(buf))
    }

    fn pairs(&self, items: Vec<Id>) -> Result<Vec<(Id, Id)>> {
        if !items.len().is_multiple_of(2) {
            return Err(self.err("odd number of items for a dict"));
        }
        Ok(items.chunks_exact(2).map(|c| (c[0], c[1])).collect())
    }

    fn append(&mut self, list: Id, items: Vec<Id>) -> Result<()> {
        match &mut self.arena[list] {
            Obj::List(v) => {
                v.extend(items);
                Ok(())
            }
            other => {
                let kind = other.kind();
                Err(self.err(format!("APPEND to a {kind} (only lists are allowed)")))
            }
        }
    }

    fn set_items(&mut self, dict: Id, pairs: Vec<(Id, Id)>) -> Result<()> {
        match &mut self.arena[dict] {
            Obj::Dict { items, .. } => {
                items.extend(pairs);
                Ok(())
            }
            other => {
                let kind = other.kind();
                Err(self.err(format!("SETITEM on a {kind} (only dicts are allowed)")))
            }
        }
    }

    fn tuple_items(&self, id: Id, what: &str) -> Result<Vec<Id>> {
        match &self.arena[id] {
            Obj::Tuple(v) => Ok(v.clone()),
            other => Err(self.err(format!("{what}: expected a tuple, got a {}", other.kind()))),
        }
    }

    fn int(&self, id: Id, what: &str) -> Result<i64> {
        match &self.arena[id] {
            Obj::Int(i) => Ok(*i),
            Obj::Bool(b) => Ok(i64::from(*b)),
            other => Err(self.err(format!("{what}: expected an int, got a {}", other.kind()))),
        }
    }

    fn bool(&self, id: Id, what: &str) -> Result<bool> {
        match &self.arena[id] {
            Obj::Bool(b) => Ok(*b),
            Obj::Int(i) => Ok(*i != 0),
            other => Err(self.err(format!("{what}: expected a bool, got a {}", other.kind()))),
        }
    }

    fn usizes(&self, id: Id, what: &str) -> Result<Vec<usize>> {
        let items = self.tuple_items(id, what)?;
        items
            .iter()
            .map(|&i| self.int(i, what).and_then(|v| to_usize(v, what)))
            .collect()
    }

    fn tensor(&self, id: Id, what: &str) -> Result<Tensor> {
        match &self.arena[id] {
            Obj::Tensor(t) => Ok(t.clone()),
            other => Err(self.err(format!("{what}: expected a tensor, got a {}", other.kind()))),
        }
    }

    /// Whether `id` is an empty dict, `None` or an empty tuple (hooks,
    /// metadata and states that carry nothing).
    fn is_empty_state(&self, id: Id) -> bool {
        match &self.arena[id] {
            Obj::None => true,
            Obj::Dict { items, .. } => items.is_empty(),
            Obj::Tuple(v) => v.iter().all(|&i| self.is_empty_state(i)),
            _ => false,
        }
    }

    fn set_requires_grad(&self, t: Tensor, requires_grad: bool) -> Result<Tensor> {
        if requires_grad && !t.is_floating_point() {
            return Err(self.err(format!("a tensor of dtype {} cannot require grad", t.dtype().name())));
        }
        if requires_grad {
            Ok(t.requires_grad_(true)?)
        } else {
            Ok(t)
        }
    }

    /// `REDUCE` / `NEWOBJ`: interprets an allowed global with its arguments.
    fn call(&mut self, callable: Id, args: Id) -> Result<Obj> {
        let Obj::Global(g) = self.arena[callable] else {
            return Err(self.err(format!("REDUCE on a {} (not a global)", self.arena[callable].kind())));
        };
        let what = g.name();
        let a = self.tuple_items(args, &what)?;
        match g {
            Global::Counter => {
                // Counter.__reduce__: (Counter, (dict(self),)) or (Counter, ()).
                let items = match a.as_slice() {
                    [] => Vec::new(),
                    [d] => match &self.arena[*d] {
                        Obj::Dict { items, .. } => items.clone(),
                        other => return Err(self.err(format!("Counter of a {}", other.kind()))),
                    },
                    _ => return Err(self.err("Counter takes at most one argument")),
                };
                Ok(Obj::Dict {
                    items,
                    kind: DictKind::Counter,
                    attrs: None,
                })
            }
            Global::OrderedDict => {
                let mut items = Vec::new();
                if let Some(&list) = a.first() {
                    let pairs = match &self.arena[list] {
                        Obj::List(v) | Obj::Tuple(v) => v.clone(),
                        other => return Err(self.err(format!("OrderedDict of a {}", other.kind()))),
                    };
                    for p in pairs {
                        match &self.arena[p] {
                            Obj::Tuple(kv) | Obj::List(kv) if kv.len() == 2 => items.push((kv[0], kv[1])),
                            _ => return Err(self.err("OrderedDict items must be pairs")),
                        }
                    }
                }
                if a.len() > 1 {
                    return Err(self.err("OrderedDict takes at most one argument"));
                }
                Ok(Obj::Dict {
                    items,
                    kind: DictKind::OrderedDict,
                    attrs: None,
                })
            }
            Global::RebuildTensorV2 => {
                if !(6..=7).contains(&a.len()) {
                    return Err(self.err(format!("{what} takes 6 or 7 arguments, got {}", a.len())));
                }
                let Obj::Storage { storage, dtype } = &self.arena[a[0]] else {
                    return Err(self.err(format!("{what}: the first argument is not a storage")));
                };
                let (storage, dtype) = (storage.clone(), *dtype);
                let offset = to_usize(self.int(a[1], "storage offset")?, "storage offset")?;
                let size = self.usizes(a[2], "size")?;
                let stride = self.usizes(a[3], "stride")?;
                let requires_grad = self.bool(a[4], "requires_grad")?;
                if !self.is_empty_state(a[5]) {
                    return Err(Error::Unsupported("a tensor with backward hooks".into()));
                }
                if a.len() == 7 && !self.is_empty_state(a[6]) {
                    return Err(Error::Unsupported(
                        "a tensor with metadata (conjugate or negative bit)".into(),
                    ));
                }
                let t = rebuild_tensor(&storage, dtype, offset, &size, &stride)?;
                Ok(Obj::Tensor(self.set_requires_grad(t, requires_grad)?))
            }
            Global::RebuildParameter | Global::RebuildParameterWithState => {
                let n = if g == Global::RebuildParameter { 3 } else { 4 };
                if a.len() != n {
                    return Err(self.err(format!("{what} takes {n} arguments, got {}", a.len())));
                }
                let t = self.tensor(a[0], &what)?;
                let requires_grad = self.bool(a[1], "requires_grad")?;
                if !self.is_empty_state(a[2]) {
                    return Err(Error::Unsupported("a parameter with backward hooks".into()));
                }
                if n == 4 && !self.is_empty_state(a[3]) {
                    return Err(Error::Unsupported("a parameter with Python attributes".into()));
                }
                Ok(Obj::Tensor(self.set_requires_grad(t.detach(), requires_grad)?))
            }
            Global::Parameter => {
                let t = match a.first() {
                    Some(&t) => self.tensor(t, &what)?,
                    None => return Err(self.err("Parameter() without data")),
                };
                let requires_grad = match a.get(1) {
                    Some(&r) => self.bool(r, "requires_grad")?,
                    None => true,
                };
                Ok(Obj::Tensor(self.set_requires_grad(t.detach(), requires_grad)?))
            }
            Global::TorchSize => match a.as_slice() {
                [] => Ok(Obj::Tuple(Vec::new())),
                [t] => {
                    let items = match &self.arena[*t] {
                        Obj::Tuple(v) | Obj::List(v) => v.clone(),
                        other => return Err(self.err(format!("torch.Size of a {}", other.kind()))),
                    };
                    for &i in &items {
                        self.int(i, "torch.Size")?;
                    }
                    Ok(Obj::Tuple(items))
                }
                _ => Err(self.err("torch.Size takes one argument")),
            },
            Global::CodecsEncode | Global::Bytearray => match a.as_slice() {
                [] if g == Global::Bytearray => Ok(Obj::Bytes(Vec::new())),
                [b] => match &self.arena[*b] {
                    Obj::Bytes(b) => Ok(Obj::Bytes(b.clone())),
                    other => Err(self.err(format!("{what} of a {}", other.kind()))),
                },
                [s, enc] => {
                    let (Obj::Str(s), Obj::Str(enc)) = (&self.arena[*s], &self.arena[*enc]) else {
                        return Err(self.err(format!("{what} takes a str and an encoding")));
                    };
                    match enc.as_str() {
                        "latin1" | "latin-1" => s
                            .chars()
                            .map(|c| u8::try_from(u32::from(c)).ok())
                            .collect::<Option<Vec<u8>>>()
                            .map(Obj::Bytes)
                            .ok_or_else(|| self.err("latin1 string with characters past U+00FF")),
                        "utf-8" | "utf8" => Ok(Obj::Bytes(s.as_bytes().to_vec())),
                        other => Err(Error::Unsupported(format!("{what} with the encoding {other:?}"))),
                    }
                }
                _ => Err(self.err(format!("{what}: unexpected arguments"))),
            },
            Global::StorageType(_) => Err(self.err(format!("{what} is not callable in a checkpoint"))),
        }
    }

    /// `BUILD`: an `OrderedDict`'s or `Counter`'s attributes (a state
    /// dict's `_metadata`) are kept when the state is a dict of them (a
    /// `(dict, slots)` state is dropped); a tensor may only get an empty
    /// state.
    fn build(&mut self, inst: Id, state: Id) -> Result<()> {
        let is_attr_dict = matches!(
            &self.arena[state],
            Obj::Dict {
                kind: DictKind::Dict,
                ..
            }
        );
        let empty = self.is_empty_state(state);
        let err = match &mut self.arena[inst] {
            Obj::Dict {
                kind: DictKind::OrderedDict | DictKind::Counter,
                attrs,
                ..
            } => {
                if is_attr_dict {
                    *attrs = Some(state);
                }
                return Ok(());
            }
            Obj::Tensor(_) if empty => return Ok(()),
            Obj::Tensor(_) => return Err(Error::Unsupported("a tensor with Python attributes".into())),
            other => format!("BUILD on a {} (only OrderedDict and Tensor)", other.kind()),
        };
        Err(self.err(err))
    }

    /// `BINPERSID`: `('storage', torch.FloatStorage, key, location, numel)`.
    fn persistent_load(&mut self, pid: Id) -> Result<Obj> {
        let items = self.tuple_items(pid, "persistent id")?;
        let [tag, ty, key, _location, numel] = items.as_slice() else {
            return Err(self.err(format!("persistent id with {} items (expected 5)", items.len())));
        };
        if !matches!(&self.arena[*tag], Obj::Str(s) if s == "storage") {
            return Err(self.err("persistent id is not a storage"));
        }
        let Obj::Global(Global::StorageType(dtype)) = self.arena[*ty] else {
            return Err(self.err("persistent id without a storage type"));
        };
        let Obj::Str(key) = &self.arena[*key] else {
            return Err(self.err("storage key is not a string"));
        };
        let key = key.clone();
        let numel = to_usize(self.int(*numel, "storage size")?, "storage size")?;
        if let Some((storage, d)) = self.storages.get(&key) {
            if *d != dtype {
                return Err(Error::Unsupported(format!(
                    "storage {key} is used as {} and as {}",
                    d.name(),
                    dtype.name()
                )));
            }
            if storage.nbytes() / dtype.element_size() != numel {
                return Err(self.err(format!("storage {key} is referenced with two sizes")));
            }
            return Ok(Obj::Storage {
                storage: storage.clone(),
                dtype,
            });
        }
        let storage = (self.loader)(&key, dtype, numel)?;
        self.storages.insert(key, (storage.clone(), dtype));
        Ok(Obj::Storage { storage, dtype })
    }

    fn to_value(&self, id: Id, depth: usize, budget: &mut Budget) -> Result<Value> {
        if depth > MAX_DEPTH {
            return Err(self.err(format!(
                "containers nest deeper than {MAX_DEPTH} levels (or refer to themselves)"
            )));
        }
        if budget.values == 0 {
            return Err(self.err("shared references expand to too many objects"));
        }
        budget.values -= 1;
        if let Obj::Str(s) = &self.arena[id] {
            budget.bytes = budget
                .bytes
                .checked_sub(s.len())
                .ok_or_else(|| self.err("shared references expand to too many bytes"))?;
        }
        if let Obj::Bytes(b) = &self.arena[id] {
            budget.bytes = budget
                .bytes
                .checked_sub(b.len())
                .ok_or_else(|| self.err("shared references expand to too many bytes"))?;
        }
        Ok(match &self.arena[id] {
            Obj::None => Value::None,
            Obj::Bool(b) => Value::Bool(*b),
            Obj::Int(i) => Value::Int(*i),
            Obj::Float(x) => Value::Float(*x),
            Obj::Str(s) => Value::Str(s.clone()),
            Obj::Bytes(b) => Value::Bytes(b.clone()),
            Obj::List(v) => Value::List(self.values(v, depth, budget)?),
            Obj::Tuple(v) => Value::Tuple(self.values(v, depth, budget)?),
            Obj::Dict { items, kind, attrs } => {
                let mut d = Dict::with_kind(*kind);
                if let Some(a) = attrs {
                    match self.to_value(*a, depth + 1, budget)? {
                        Value::Dict(a) if a.keys().all(|k| matches!(k, Key::Str(_))) => d.set_attributes(Some(a)),
                        _ => {}
                    }
                }
                for &(k, v) in items {
                    let key = match &self.arena[k] {
                        Obj::Str(s) => Key::Str(s.clone()),
                        Obj::Int(i) => Key::Int(*i),
                        other => {
                            return Err(Error::Unsupported(format!(
                                "a dict key of type {} (only str and int keys)",
                                other.kind()
                            )));
                        }
                    };
                    d.insert(key, self.to_value(v, depth + 1, budget)?);
                }
                Value::Dict(d)
            }
            Obj::Tensor(t) => Value::Tensor(t.clone()),
            Obj::Global(g) => {
                return Err(Error::Unsupported(format!("the object {} as a value", g.name())));
            }
            Obj::Storage { .. } => return Err(Error::Unsupported("a bare storage as a value".into())),
        })
    }

    fn values(&self, ids: &[Id], depth: usize, budget: &mut Budget) -> Result<Vec<Value>> {
        ids.iter().map(|&i| self.to_value(i, depth + 1, budget)).collect()
    }
}
