//! The dispatcher: every operator call goes through here.
//!
//! A call ([`Call`]) carries an operator instance and its tensors. The
//! dispatcher computes the call's key set (the backend key of the inputs'
//! device, plus layer keys switched on for this thread, minus excluded ones),
//! picks the highest key, and runs the kernel the operator's table
//! ([`OpEntry`]) holds for it. Lookup is an array index; no strings are
//! hashed and nothing is allocated on the way.
//!
//! Structured kernels get their outputs preallocated from the operator's
//! shape rule, which is also how in-place and `out=` calls work (the
//! outputs are given) and how the meta device runs every such operator
//! without a kernel of its own.

mod backend;
mod backward;
mod key;
mod op;
pub(crate) mod registration;
mod spec;

use std::cell::Cell;
use std::sync::OnceLock;

use smallvec::SmallVec;

pub use crate::device::private_use1_name;
pub use backend::{Backend, backend_for, register_backend};
pub(crate) use backward::SavedValues;
pub use backward::{BackwardCtx, Saves, TensorMeta};
pub use key::{ALL_KEYS, DispatchKey, DispatchKeySet, NUM_KEYS};
pub(crate) use op::find_op_builtin;
pub use op::{
    Call, FunctionalFn, Kernel, LayerFn, Op, OpClone, OpEntry, Slot, StructuredFn, Tensors, downcast_op, find_op,
    registered_ops,
};
pub use spec::{OutSpec, OutSpecs};

use crate::{Device, Error, Result, Tensor};

/// The outcome of start-up registration (run once, on first use).
static INIT: OnceLock<Result<()>> = OnceLock::new();

/// Runs start-up registration once, on first use ([`registration`]): the
/// CPU and backend-independent kernels, the layers and the copy behind
/// `out=` writes ([`set_out_copy`]), each registered by the module that
/// defines it. The dispatcher itself names no operator, kernel or autograd
/// code.
#[inline]
pub(crate) fn ensure_init() -> Result<()> {
    match INIT.get_or_init(registration::run_all) {
        Ok(()) => Ok(()),
        Err(e) => Err(e.clone()),
    }
}

/// Writes `src` into `dst`, broadcast to its shape, cast to its dtype and
/// moved to its device (the caller has checked that the shapes and dtypes
/// agree): how the dispatcher fills the outputs of an `out=` or in-place
/// call whose kernel could not write them directly.
pub(crate) type CopyFn = fn(dst: &Tensor, src: &Tensor) -> Result<()>;

static OUT_COPY: OnceLock<CopyFn> = OnceLock::new();

/// Sets the copy the dispatcher writes `out=` results with (start-up
/// registration does, once).
pub(crate) fn set_out_copy(f: CopyFn) -> Result<()> {
    OUT_COPY.set(f).map_err(|_| Error::Registration {
        what: "the copy for out= writes".into(),
        detail: "already registered".into(),
    })
}

/// The copy for `out=` writes (an error if start-up registration set none).
fn out_copy(name: &'static str) -> Result<CopyFn> {
    OUT_COPY
        .get()
        .copied()
        .ok_or_else(|| Error::invalid(name, "no copy is registered for writing into output tensors"))
}

static FALLBACKS: [OnceLock<LayerFn>; NUM_KEYS] = [const { OnceLock::new() }; NUM_KEYS];

/// Registers the kernel a layer key runs for operators without a kernel of
/// their own at that key (PyTorch's boxed fallback; e.g. the profiler).
/// Built-in fallbacks (autograd) are registered first, whenever this is
/// called.
pub fn register_fallback(key: DispatchKey, f: LayerFn) -> Result<()> {
    ensure_init()?;
    register_fallback_builtin(key, f)
}

/// [`register_fallback`] during start-up registration (which `register_fallback` would wait for).
pub(crate) fn register_fallback_builtin(key: DispatchKey, f: LayerFn) -> Result<()> {
    if key.is_backend() {
        return Err(Error::Registration {
            what: format!("fallback for {key}"),
            detail: "fallbacks are for layer keys".into(),
        });
    }
    FALLBACKS[key as usize].set(f).map_err(|_| Error::Registration {
        what: format!("fallback for {key}"),
        detail: "already registered".into(),
    })
}

thread_local! {
    static TLS_INCLUDED: Cell<DispatchKeySet> = const { Cell::new(DispatchKeySet::EMPTY) };
    static TLS_EXCLUDED: Cell<DispatchKeySet> = const { Cell::new(DispatchKeySet::EMPTY) };
}

/// Restores the thread's included/excluded keys when dropped.
#[must_use = "the keys are restored when the guard is dropped"]
pub struct KeyGuard {
    included: DispatchKeySet,
    excluded: DispatchKeySet,
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        TLS_INCLUDED.with(|c| c.set(self.included));
        TLS_EXCLUDED.with(|c| c.set(self.excluded));
    }
}

fn guard() -> KeyGuard {
    KeyGuard {
        included: TLS_INCLUDED.with(Cell::get),
        excluded: TLS_EXCLUDED.with(Cell::get),
    }
}

/// Adds `keys` to every call on this thread until the guard drops
/// (how autocast and the profiler switch themselves on).
pub fn include_keys(keys: DispatchKeySet) -> KeyGuard {
    let g = guard();
    TLS_INCLUDED.with(|c| c.set(c.get().union(keys)));
    g
}

/// Removes `keys` from every call on this thread until the guard drops
/// (how a layer keeps itself out of the ops it runs).
pub fn exclude_keys(keys: DispatchKeySet) -> KeyGuard {
    let g = guard();
    TLS_EXCLUDED.with(|c| c.set(c.get().union(keys)));
    g
}

/// Switches `key` on (included, and no longer excluded) or off (excluded,
/// and no longer included) for every call on this thread until the guard
/// drops: how a nested `autocast(enabled=...)` overrides an outer one.
pub fn set_key_enabled(key: DispatchKey, on: bool) -> KeyGuard {
    let g = guard();
    let k = DispatchKeySet::of(key);
    let (inc, exc) = (TLS_INCLUDED.with(Cell::get), TLS_EXCLUDED.with(Cell::get));
    if on {
        TLS_INCLUDED.with(|c| c.set(inc.union(k)));
        TLS_EXCLUDED.with(|c| c.set(exc.minus(k)));
    } else {
        TLS_INCLUDED.with(|c| c.set(inc.minus(k)));
        TLS_EXCLUDED.with(|c| c.set(exc.union(k)));
    }
    g
}

/// The device a call runs on: that of its tensors (0-d CPU tensors, like
/// Python scalars, may join a call on any device), or the factory op's.
pub fn call_device(call: &Call) -> Result<Device> {
    // The common case first: CPU tensors, an operator without a device of its own.
    if call.op.device().is_none()
        && call.inputs.iter().all(|t| t.device() == Device::Cpu)
        && call.out.is_none_or(|o| o.iter().all(|t| t.device() == Device::Cpu))
    {
        return Ok(Device::Cpu);
    }
    let mut device: Option<Device> = None;
    let mut scalar_cpu = false;
    let mut visit = |t: &Tensor| -> Result<()> {
        let d = t.device();
        if d == Device::Cpu && t.ndim() == 0 {
            scalar_cpu = true;
            return Ok(());
        }
        match device {
            None => device = Some(d),
            Some(x) if x == d => {}
            Some(x) => {
                return Err(Error::DeviceMismatch {
                    op: call.op.entry().base_name(),
                    a: x,
                    b: d,
                });
            }
        }
        Ok(())
    };
    for t in call.inputs {
        visit(t)?;
    }
    if let Some(out) = call.out {
        for t in out {
            visit(t)?;
        }
    }
    if let Some(d) = call.op.device() {
        match device {
            Some(x) if x != d => {
                return Err(Error::DeviceMismatch {
                    op: call.op.entry().base_name(),
                    a: x,
                    b: d,
                });
            }
            None if !scalar_cpu => {
                backend_for(d)?;
            }
            _ => {}
        }
        return Ok(d);
    }
    Ok(device.unwrap_or(Device::Cpu))
}

/// Runs a call: computes its key set and runs the highest key's kernel.
pub fn dispatch(call: &Call) -> Result<Tensors> {
    ensure_init()?;
    if let Some(out) = call.out
        && out.iter().any(|o| o.storage().is_read_only())
    {
        return Err(Error::invalid(
            call.op.entry().base_name(),
            "cannot write in place into a shared cached constant (a wrapped scalar); clone() it first",
        ));
    }
    let device = call_device(call)?;
    let mut keys = DispatchKeySet::of(DispatchKey::for_device(device));
    for t in call.inputs.iter().chain(call.out.unwrap_or(&[])) {
        keys = keys.union(t.layer_keys());
    }
    // A write into a view (made in no-grad mode) of a tensor that requires
    // grad goes through autograd's checks too.
    if let Some(out) = call.out
        && out
            .iter()
            .any(|o| o.base().is_some_and(|b| b.layer_keys() != DispatchKeySet::EMPTY))
    {
        keys = keys.union(DispatchKeySet::of(DispatchKey::Autograd));
    }
    let keys = keys
        .union(TLS_INCLUDED.with(Cell::get))
        .minus(TLS_EXCLUDED.with(Cell::get));
    redispatch(call, keys)
}

/// Runs a call with an explicit key set (what a layer kernel does with the
/// keys below its own).
pub fn redispatch(call: &Call, mut keys: DispatchKeySet) -> Result<Tensors> {
    let entry = call.op.entry();
    while let Some(key) = keys.highest() {
        let below = keys.below(key);
        if !key.is_backend() {
            if let Some(Kernel::Layer(f)) = entry.kernel(Slot::Key(key)) {
                return f(call, below);
            }
            if key == DispatchKey::Autograd
                && let Some(k) = entry.kernel(Slot::Decomposition)
            {
                return run_kernel(call, k, None);
            }
            if let Some(f) = FALLBACKS[key as usize].get() {
                return f(call, below);
            }
            keys = below;
            continue;
        }
        let kernel = entry
            .kernel(Slot::Key(key))
            .or_else(|| entry.kernel(Slot::AnyBackend))
            .or_else(|| entry.kernel(Slot::Decomposition));
        return match kernel {
            Some(k) => run_kernel(call, k, Some(key)),
            None if key == DispatchKey::Meta => run_structured(call, None, Some(key)),
            None => Err(Error::NoKernel {
                op: entry.name(),
                key: key.to_string(),
                keys: keys.to_string(),
            }),
        };
    }
    Err(Error::NoKernel {
        op: entry.name(),
        key: "none".into(),
        keys: keys.to_string(),
    })
}

/// Runs `kernel` for `call`; `backend` is the backend key it was chosen
/// for (`None` for a decomposition chosen by a layer).
fn run_kernel(call: &Call, kernel: Kernel, backend: Option<DispatchKey>) -> Result<Tensors> {
    match kernel {
        Kernel::Structured(f) => run_structured(call, Some(f), backend),
        Kernel::Functional(f) => match call.out {
            None => f(call),
            Some(out) => {
                let results = f(&Call { out: None, ..*call })?;
                write_results(call, out, &results)
            }
        },
        Kernel::Layer(_) => Err(Error::invalid(
            call.op.entry().base_name(),
            "layer kernel in a backend slot",
        )),
    }
}

/// Copies computed results into the caller's outputs (casting if allowed).
fn write_results(call: &Call, out: &[&Tensor], results: &[Tensor]) -> Result<Tensors> {
    let name = call.op.entry().base_name();
    if out.len() != results.len() {
        return Err(Error::invalid(
            name,
            format!("expected {} output tensors, got {}", results.len(), out.len()),
        ));
    }
    for (o, r) in out.iter().zip(results) {
        check_out(name, o, r.shape(), r.dtype())?;
        out_copy(name)?(o, r)?;
    }
    Ok(out.iter().map(|t| (*t).clone()).collect())
}

fn check_out(name: &'static str, o: &Tensor, shape: &[usize], dtype: crate::DType) -> Result<()> {
    if o.shape() != shape {
        return Err(Error::invalid(
            name,
            format!(
                "output with shape {:?} doesn't match the broadcast shape {shape:?}",
                o.shape()
            ),
        ));
    }
    if !o.dtype().can_cast_from(dtype) {
        return Err(Error::DTypeMismatch {
            op: name,
            detail: format!(
                "result type {} can't be cast to the desired output type {}",
                dtype.scalar_type_name(),
                o.dtype().scalar_type_name()
            ),
        });
    }
    Ok(())
}

/// Whether an output may be written while inputs are read from it.
fn may_write_directly(call: &Call, o: &Tensor) -> bool {
    call.inputs.iter().enumerate().all(|(k, i)| {
        !i.storage().same(o.storage())
            || (call.op.alias_safe_input(k) && i.layout() == o.layout() && i.dtype() == o.dtype())
    })
}

fn run_structured(call: &Call, f: Option<StructuredFn>, backend: Option<DispatchKey>) -> Result<Tensors> {
    // The CPU key means CPU memory; other devices carry an index, found again.
    let device = match backend {
        Some(DispatchKey::Cpu) => Device::Cpu,
        _ => call_device(call)?,
    };
    let specs = call.op.infer(call.inputs)?;
    match call.out {
        None => {
            let name = call.op.entry().base_name();
            let mut outs = Tensors::new();
            for s in &specs {
                // SAFETY: a structured kernel writes every element of its
                // outputs (bool ones with 0 or 1), and they reach no one
                // before it has (the meta device has no memory to read).
                outs.push(unsafe { Tensor::uninit_for_spec(name, s, device)? });
            }
            if let Some(f) = f {
                let refs: SmallVec<[&Tensor; 2]> = outs.iter().collect();
                f(call.op, call.inputs, &refs)?;
            }
            Ok(outs)
        }
        Some(out) => {
            let name = call.op.entry().base_name();
            if out.len() != specs.len() {
                return Err(Error::invalid(
                    name,
                    format!("expected {} output tensors, got {}", specs.len(), out.len()),
                ));
            }
            for (o, s) in out.iter().zip(&specs) {
                check_out(name, o, &s.shape, s.dtype)?;
                if !call.op.allows_overlapping_out() && o.layout().has_internal_overlap() {
                    return Err(Error::invalid(
                        name,
                        "unsupported operation: more than one element of the written-to tensor refers to a single \
                         memory location; clone() the tensor before performing the operation",
                    ));
                }
            }
            let direct = out
                .iter()
                .zip(&specs)
                .all(|(o, s)| o.dtype() == s.dtype && may_write_directly(call, o));
            if let Some(f) = f {
                if direct {
                    f(call.op, call.inputs, out)?;
                    for o in out {
                        o.bump_version();
                    }
                } else {
                    let tmp: Tensors = specs
                        .iter()
                        .map(|s| {
                            let spec = OutSpec {
                                strides: None,
                                ..s.clone()
                            };
                            // SAFETY: the kernel writes every element of these
                            // temporaries before they are copied out.
                            unsafe { Tensor::uninit_for_spec(name, &spec, device) }
                        })
                        .collect::<Result<_>>()?;
                    let refs: SmallVec<[&Tensor; 2]> = tmp.iter().collect();
                    f(call.op, call.inputs, &refs)?;
                    // The copies bump the versions.
                    let copy = out_copy(name)?;
                    for (o, t) in out.iter().zip(&tmp) {
                        copy(o, t)?;
                    }
                }
            } else {
                for o in out {
                    o.bump_version();
                }
            }
            Ok(out.iter().map(|t| (*t).clone()).collect())
        }
    }
}

/// Runs `op` on `inputs` and returns its single output.
pub fn call1(op: &dyn Op, inputs: &[&Tensor]) -> Result<Tensor> {
    let mut outs = dispatch(&Call { op, inputs, out: None })?;
    if outs.is_empty() {
        return Err(Error::invalid(op.entry().base_name(), "operator returned no output"));
    }
    Ok(outs.swap_remove(0))
}

/// Runs a two-output `op` (values and indices, `(var, mean)`, ...) on
/// `inputs` and returns both outputs; an error if it gave fewer.
pub fn call2(op: &dyn Op, inputs: &[&Tensor]) -> Result<(Tensor, Tensor)> {
    let mut outs = dispatch(&Call { op, inputs, out: None })?.into_iter();
    match (outs.next(), outs.next()) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(Error::invalid(
            op.entry().base_name(),
            "operator returned fewer than two outputs",
        )),
    }
}

/// Runs `op` on `inputs` and returns all its outputs.
pub fn call(op: &dyn Op, inputs: &[&Tensor]) -> Result<Tensors> {
    dispatch(&Call { op, inputs, out: None })
}

/// Runs `op` writing its result into `out` (in-place ops and `out=`).
pub fn call_out(op: &dyn Op, inputs: &[&Tensor], out: &[&Tensor]) -> Result<()> {
    dispatch(&Call {
        op,
        inputs,
        out: Some(out),
    })
    .map(|_| ())
}
