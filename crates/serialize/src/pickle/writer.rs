//! A protocol-2 pickle writer for [`Value`]s, producing what `torch.save`
//! produces: tensors as `torch._utils._rebuild_tensor_v2` calls on
//! persistent storage ids, state dicts as `collections.OrderedDict`,
//! `bytes` through `_codecs.encode`. Every global it writes is on
//! `torch.load(weights_only=True)`'s allow-list.

use std::collections::HashMap;

use ferrotorch_core::backend::TensorExt;
use ferrotorch_core::backend::storage::Storage;
use ferrotorch_core::{DType, Tensor};

use super::op;
use crate::error::{Error, Result};
use crate::tensor_io::storage_type_name;
use crate::value::MAX_DEPTH;
use crate::value::{Dict, DictKind, Key, Value};

/// The storages a pickle refers to, in key order (`"0"`, `"1"`, ...): each
/// storage once, however many tensors view it.
#[derive(Default)]
pub(crate) struct StorageTable {
    /// Storage id -> index in `storages`.
    by_id: HashMap<usize, usize>,
    /// The storages with the dtype they are written as.
    pub(crate) storages: Vec<(Storage, DType)>,
}

impl StorageTable {
    /// The key of `t`'s storage, registering it on first sight.
    fn key(&mut self, t: &Tensor) -> Result<(usize, usize)> {
        let storage = t.storage();
        let dtype = t.dtype();
        if let Some(&i) = self.by_id.get(&storage.id()) {
            let (s, d) = &self.storages[i];
            if *d != dtype {
                return Err(Error::Unsupported(format!(
                    "two tensors view one storage as {} and as {} (PyTorch cannot save that either)",
                    d.name(),
                    dtype.name()
                )));
            }
            return Ok((i, s.nbytes() / dtype.element_size()));
        }
        if storage.device() != ferrotorch_core::Device::Cpu {
            return Err(Error::Unsupported(format!(
                "saving a tensor on device {}: move it to the CPU first",
                storage.device()
            )));
        }
        if !storage.nbytes().is_multiple_of(dtype.element_size()) {
            return Err(Error::tensor(format!(
                "a storage of {} bytes is not a whole number of {} elements",
                storage.nbytes(),
                dtype.name()
            )));
        }
        let i = self.storages.len();
        self.by_id.insert(storage.id(), i);
        self.storages.push((storage.clone(), dtype));
        Ok((i, storage.nbytes() / dtype.element_size()))
    }
}

/// Pickles `value` (protocol 2), registering the tensors' storages in `table`.
pub(crate) fn write(value: &Value, table: &mut StorageTable) -> Result<Vec<u8>> {
    let mut w = Writer {
        out: vec![op::PROTO, 2],
        table,
    };
    w.value(value, 0)?;
    w.out.push(op::STOP);
    Ok(w.out)
}

struct Writer<'a> {
    out: Vec<u8>,
    table: &'a mut StorageTable,
}

impl Writer<'_> {
    fn global(&mut self, module: &str, name: &str) {
        self.out.push(op::GLOBAL);
        self.out.extend_from_slice(module.as_bytes());
        self.out.push(b'\n');
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(b'\n');
    }

    fn int(&mut self, i: i64) {
        if (0..=0xff).contains(&i) {
            self.out.extend_from_slice(&[op::BININT1, i as u8]);
        } else if (0..=0xffff).contains(&i) {
            self.out.push(op::BININT2);
            self.out.extend_from_slice(&(i as u16).to_le_bytes());
        } else if let Ok(v) = i32::try_from(i) {
            self.out.push(op::BININT);
            self.out.extend_from_slice(&v.to_le_bytes());
        } else {
            // The shortest two's-complement form, as Python's encode_long.
            let bytes = i.to_le_bytes();
            let mut n = 8;
            while n > 1 {
                let (last, prev) = (bytes[n - 1], bytes[n - 2]);
                let redundant = (last == 0 && prev & 0x80 == 0) || (last == 0xff && prev & 0x80 != 0);
                if !redundant {
                    break;
                }
                n -= 1;
            }
            self.out.extend_from_slice(&[op::LONG1, n as u8]);
            self.out.extend_from_slice(&bytes[..n]);
        }
    }

    fn str(&mut self, s: &str) -> Result<()> {
        let n = u32::try_from(s.len())
            .map_err(|_| Error::Unsupported("a string of 4 GiB or more in a protocol-2 pickle".into()))?;
        self.out.push(op::BINUNICODE);
        self.out.extend_from_slice(&n.to_le_bytes());
        self.out.extend_from_slice(s.as_bytes());
        Ok(())
    }

    fn bool(&mut self, b: bool) {
        self.out.push(if b { op::NEWTRUE } else { op::NEWFALSE });
    }

    fn value(&mut self, v: &Value, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(Error::schema(format!("the value nests deeper than {MAX_DEPTH} levels")));
        }
        match v {
            Value::None => self.out.push(op::NONE),
            Value::Bool(b) => self.bool(*b),
            Value::Int(i) => self.int(*i),
            Value::Float(x) => {
                self.out.push(op::BINFLOAT);
                self.out.extend_from_slice(&x.to_be_bytes());
            }
            Value::Str(s) => self.str(s)?,
            Value::Bytes(b) => {
                // Protocol 2 has no bytes opcode: Python 3 writes
                // `_codecs.encode(b.decode('latin1'), 'latin1')`.
                self.global("_codecs", "encode");
                let latin1: String = b.iter().map(|&c| char::from(c)).collect();
                self.str(&latin1)?;
                self.str("latin1")?;
                self.out.push(op::TUPLE2);
                self.out.push(op::REDUCE);
            }
            Value::List(items) => {
                self.out.push(op::EMPTY_LIST);
                if !items.is_empty() {
                    self.out.push(op::MARK);
                    for it in items {
                        self.value(it, depth + 1)?;
                    }
                    self.out.push(op::APPENDS);
                }
            }
            Value::Tuple(items) => self.tuple(items, depth)?,
            Value::Dict(d) => self.dict(d, depth)?,
            Value::Tensor(t) => self.tensor(t)?,
        }
        Ok(())
    }

    fn tuple(&mut self, items: &[Value], depth: usize) -> Result<()> {
        match items.len() {
            0 => self.out.push(op::EMPTY_TUPLE),
            n @ 1..=3 => {
                for it in items {
                    self.value(it, depth + 1)?;
                }
                self.out.push(op::TUPLE1 + (n as u8 - 1));
            }
            _ => {
                self.out.push(op::MARK);
                for it in items {
                    self.value(it, depth + 1)?;
                }
                self.out.push(op::TUPLE);
            }
        }
        Ok(())
    }

    fn dict(&mut self, d: &Dict, depth: usize) -> Result<()> {
        match d.kind() {
            DictKind::Dict => self.out.push(op::EMPTY_DICT),
            DictKind::OrderedDict => {
                self.global("collections", "OrderedDict");
                self.out.push(op::EMPTY_TUPLE);
                self.out.push(op::REDUCE);
            }
            // Counter.__reduce__: Counter(dict), the dict's items set below.
            DictKind::Counter => self.global("collections", "Counter"),
        }
        if d.kind() == DictKind::Counter {
            self.out.push(op::EMPTY_DICT);
        }
        if !d.is_empty() {
            self.out.push(op::MARK);
            for (k, v) in d.iter() {
                match k {
                    Key::Str(s) => self.str(s)?,
                    Key::Int(i) => self.int(*i),
                }
                self.value(v, depth + 1)?;
            }
            self.out.push(op::SETITEMS);
        }
        if d.kind() == DictKind::Counter {
            self.out.push(op::TUPLE1);
            self.out.push(op::REDUCE);
        }
        if let Some(attrs) = d.attributes()
            && d.kind() != DictKind::Dict
            && !attrs.is_empty()
        {
            // obj.__dict__.update(attrs), as pickle's BUILD with a dict state.
            let mut plain = attrs.clone();
            plain.set_kind(DictKind::Dict);
            self.dict(&plain, depth + 1)?;
            self.out.push(op::BUILD);
        }
        Ok(())
    }

    fn usizes(&mut self, xs: &[usize]) -> Result<()> {
        let vals = xs
            .iter()
            .map(|&x| i64::try_from(x).map(Value::Int))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| Error::tensor("a size or stride past i64"))?;
        self.tuple(&vals, 0)
    }

    /// `_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, OrderedDict())`.
    fn tensor(&mut self, t: &Tensor) -> Result<()> {
        let (key, numel) = self.table.key(t)?;
        self.global("torch._utils", "_rebuild_tensor_v2");
        self.out.push(op::MARK);
        // The persistent id ('storage', torch.FloatStorage, key, 'cpu', numel).
        self.out.push(op::MARK);
        self.str("storage")?;
        self.global("torch", storage_type_name(t.dtype()));
        self.str(&key.to_string())?;
        self.str("cpu")?;
        self.int(i64::try_from(numel).map_err(|_| Error::tensor("storage size past i64"))?);
        self.out.push(op::TUPLE);
        self.out.push(op::BINPERSID);
        self.int(i64::try_from(t.storage_offset()).map_err(|_| Error::tensor("storage offset past i64"))?);
        self.usizes(t.shape())?;
        self.usizes(t.strides())?;
        self.bool(t.requires_grad());
        self.global("collections", "OrderedDict");
        self.out.push(op::EMPTY_TUPLE);
        self.out.push(op::REDUCE);
        self.out.push(op::TUPLE);
        self.out.push(op::REDUCE);
        Ok(())
    }
}
