//! The Autocast layer's kernels: cast the inputs as the operator's list
//! says, then redispatch below the Autocast key.

use smallvec::SmallVec;

use crate::backend::dispatch::registration::{Registration, Stage};
use crate::backend::dispatch::{
    Call, DispatchKey, DispatchKeySet, Kernel, Slot, Tensors, exclude_keys, find_op_builtin, redispatch,
};
use crate::ops::autocast_lists::{CastPolicy, FP32, LOWER_PRECISION};
use crate::{DType, Device, Error, Result, Tensor};

use super::{State, cached_cast, state};

inventory::submit! {
    Registration {
        stage: Stage::Layers,
        what: "autocast kernels",
        run: register_autocast_kernels,
    }
}

/// Registers the Autocast kernel of every listed operator (at start-up).
fn register_autocast_kernels() -> Result<()> {
    let lists: [(&[&str], CastPolicy); 2] = [(LOWER_PRECISION, CastPolicy::LowerPrecision), (FP32, CastPolicy::Fp32)];
    for (names, policy) in lists {
        let kernel = match policy {
            CastPolicy::LowerPrecision => lower_precision as crate::backend::dispatch::LayerFn,
            CastPolicy::Fp32 => fp32,
        };
        for name in names {
            let entry = find_op_builtin(name).ok_or_else(|| Error::Registration {
                what: format!("autocast kernel of {name}"),
                detail: "no operator of this name is registered".into(),
            })?;
            entry.register_builtin(Slot::Key(DispatchKey::Autocast), Kernel::Layer(kernel))?;
        }
    }
    Ok(())
}

/// Whether autocast applies to the call: enabled, not writing into given
/// outputs (in-place and `out=` calls keep their dtypes, as in PyTorch),
/// on the CPU or the meta device (which stands for it when planning).
fn applies(call: &Call, st: State) -> bool {
    st.enabled
        && call.out.is_none()
        && call
            .inputs
            .iter()
            .all(|t| matches!(t.device(), Device::Cpu | Device::Meta))
}

/// Runs `call` below the Autocast key, with autocast off for the operators
/// its kernels dispatch (a bf16 kernel computing through f32 products must
/// not be cast back), as PyTorch's autocast wrappers exclude their key.
fn below_autocast(call: &Call, keys: DispatchKeySet) -> Result<Tensors> {
    let _off = exclude_keys(DispatchKeySet::of(DispatchKey::Autocast));
    redispatch(call, keys)
}

/// Runs `call` with each floating input that `cast` picks converted.
fn with_cast(
    call: &Call,
    keys: DispatchKeySet,
    st: State,
    to: DType,
    pick: fn(DType, DType) -> bool,
) -> Result<Tensors> {
    if !call.inputs.iter().any(|t| pick(t.dtype(), to)) {
        return below_autocast(call, keys);
    }
    let cast: SmallVec<[Tensor; 4]> = call
        .inputs
        .iter()
        .map(|t| {
            if pick(t.dtype(), to) {
                cached_cast(t, to, st)
            } else {
                Ok((*t).clone())
            }
        })
        .collect::<Result<_>>()?;
    let refs: SmallVec<[&Tensor; 4]> = cast.iter().collect();
    below_autocast(
        &Call {
            op: call.op,
            inputs: &refs,
            out: None,
        },
        keys,
    )
}

/// The lower-precision policy: f32 inputs (and those in the other half
/// dtype) cast to the autocast dtype; f64 inputs are left alone, as
/// PyTorch's `is_eligible` leaves them.
fn lower_precision(call: &Call, keys: DispatchKeySet) -> Result<Tensors> {
    let st = state();
    if !applies(call, st) {
        return redispatch(call, keys);
    }
    with_cast(call, keys, st, st.dtype, |d, to| {
        matches!(d, DType::F32 | DType::F16 | DType::BF16) && d != to
    })
}

/// The f32 policy: bf16 / f16 inputs cast to f32.
fn fp32(call: &Call, keys: DispatchKeySet) -> Result<Tensors> {
    let st = state();
    if !applies(call, st) {
        return redispatch(call, keys);
    }
    with_cast(call, keys, st, DType::F32, |d, _| matches!(d, DType::BF16 | DType::F16))
}
