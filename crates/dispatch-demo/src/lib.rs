//! An out-of-tree extension of ferrotorch, written only against the public
//! API of `ferrotorch-core` (as a third-party crate would be):
//!
//! - a custom operator, `demo::scaled_square` (`alpha * x * x`), declared
//!   with its shape rule and backward formula and given a CPU kernel through
//!   the registry (so it records in the autograd graph like a built-in op);
//! - a toy device backend (`toydev`, in the `PrivateUse1` slot) whose memory
//!   is a plain `Vec<u8>`, with kernels for `add`, `mul`, `neg`, `sin`,
//!   `cos`, `fill`, f32 copies and the custom op (enough for autograd through `sin`,
//!   `cos` and `x * x`, whose backward formulas the core composes from these).
//!
//! Call [`register`] once; after that `Tensor::to(Device::PrivateUse1(0))`,
//! `a.add(&b)` on toy tensors and `scaled_square(&x, 3.0)` work through the
//! normal dispatcher.

use ferrotorch_core::backend::TensorExt;
use std::any::Any;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use ferrotorch_core::autograd::{BackwardCtx, Saves};
use ferrotorch_core::backend::dispatch::{
    Backend, DispatchKey, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, call1, downcast_op, register_backend,
};
use ferrotorch_core::backend::storage::{Buffer, DeviceBuffer};
use ferrotorch_core::ops::unary::{Unary, UnaryKind};
use ferrotorch_core::ops::{Binary, BinaryKind, Cast, Fill};
use ferrotorch_core::{DType, Device, Error, Result, Tensor};

/// Dispatch table of the custom operator (differentiable: the autograd layer
/// records it and calls [`Op::backward`]).
pub static SCALED_SQUARE: OpEntry = OpEntry::differentiable("demo::scaled_square");

/// `alpha * x * x`, elementwise, for f32 and f64 tensors (the toy device:
/// f32 only).
#[derive(Debug, Clone)]
pub struct ScaledSquare {
    /// The factor.
    pub alpha: f32,
}

impl Op for ScaledSquare {
    fn entry(&self) -> &'static OpEntry {
        &SCALED_SQUARE
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        if !matches!(x.dtype(), DType::F32 | DType::F64) {
            return Err(Error::dtype(
                "demo::scaled_square",
                x.dtype(),
                "only f32 and f64 are supported",
            ));
        }
        Ok([OutSpec::new(x.dims(), x.dtype())].into_iter().collect())
    }

    fn saves(&self) -> Saves {
        Saves::INPUTS
    }

    fn backward_name(&self) -> String {
        "ScaledSquareBackward0".into()
    }

    /// d(alpha x^2)/dx = 2 alpha x, written with differentiable ops so that
    /// second derivatives work too.
    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grads[0]
            .as_ref()
            .ok_or_else(|| Error::invalid("demo::scaled_square", "missing output gradient"))?;
        let x = ctx.input(0)?;
        Ok(vec![Some(g.mul(&x)?.mul(2.0 * self.alpha as f64)?)])
    }
}

/// Runs the custom operator through the dispatcher.
pub fn scaled_square(x: &Tensor, alpha: f32) -> Result<Tensor> {
    call1(&ScaledSquare { alpha }, &[x])
}

/// How many kernels ran on the toy device (to show calls really went there).
pub static TOY_KERNEL_CALLS: AtomicUsize = AtomicUsize::new(0);

/// Memory of the toy device.
pub struct ToyBuffer(pub Vec<u8>);

impl DeviceBuffer for ToyBuffer {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// The toy device type.
pub struct ToyBackend;

impl Backend for ToyBackend {
    fn name(&self) -> &'static str {
        "toydev"
    }

    fn check_device(&self, device: Device) -> Result<()> {
        if device.index() > 0 {
            return Err(Error::DeviceUnavailable {
                device,
                reason: "the toy backend has a single device".into(),
            });
        }
        Ok(())
    }

    fn allocate(&self, _device: Device, nbytes: usize, _zeroed: bool) -> Result<Buffer> {
        Ok(Buffer::Device(Box::new(ToyBuffer(vec![0; nbytes]))))
    }

    fn copy_from_host(&self, _device: Device, bytes: &[u8]) -> Result<Buffer> {
        Ok(Buffer::Device(Box::new(ToyBuffer(bytes.to_vec()))))
    }

    fn copy_to_host(&self, buf: &Buffer, offset: usize, out: &mut [u8]) -> Result<()> {
        let b = buf
            .downcast_ref::<ToyBuffer>()
            .ok_or_else(|| Error::invalid("to", "not a toy buffer"))?;
        out.copy_from_slice(&b.0[offset..offset + out.len()]);
        Ok(())
    }
}

/// The f32 values of a contiguous tensor (on the toy device, or a 0-d CPU scalar).
fn read_f32(t: &Tensor) -> Result<Vec<f32>> {
    if t.device() == Device::Cpu {
        return t.to_vec::<f32>();
    }
    if !t.is_contiguous() || t.dtype() != DType::F32 {
        return Err(Error::invalid("toydev", "toy kernels take contiguous f32 tensors only"));
    }
    let g = t.storage().read();
    let b = g
        .downcast_ref::<ToyBuffer>()
        .ok_or_else(|| Error::invalid("toydev", "not a toy buffer"))?;
    let start = t.storage_offset() * 4;
    Ok(b.0[start..start + t.numel() * 4]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn write_f32(t: &Tensor, vals: &[f32]) -> Result<()> {
    let mut g = t.storage().write();
    let b = g
        .downcast_mut::<ToyBuffer>()
        .ok_or_else(|| Error::invalid("toydev", "not a toy buffer"))?;
    let start = t.storage_offset() * 4;
    for (i, v) in vals.iter().enumerate() {
        b.0[start + 4 * i..start + 4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
    TOY_KERNEL_CALLS.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

fn toy_binary(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op: &Binary = downcast_op(op)?;
    let alpha = op.alpha.to_f64() as f32;
    let f: fn(f32, f32, f32) -> f32 = match op.kind {
        BinaryKind::Add => |a, b, alpha| a + alpha * b,
        BinaryKind::Mul => |a, b, _| a * b,
        _ => return Err(Error::invalid("toydev", "only add and mul are implemented")),
    };
    let (a, b) = (read_f32(inputs[0])?, read_f32(inputs[1])?);
    let n = outputs[0].numel();
    let pick = |v: &[f32], i: usize| if v.len() == 1 { v[0] } else { v[i] };
    if (a.len() != n && a.len() != 1) || (b.len() != n && b.len() != 1) {
        return Err(Error::invalid("toydev", "toy binary ops broadcast only scalars"));
    }
    let out: Vec<f32> = (0..n).map(|i| f(pick(&a, i), pick(&b, i), alpha)).collect();
    write_f32(outputs[0], &out)
}

fn toy_unary(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op: &Unary = downcast_op(op)?;
    let f: fn(f32) -> f32 = match op.0 {
        UnaryKind::Neg => |x| -x,
        UnaryKind::Sin => f32::sin,
        UnaryKind::Cos => f32::cos,
        _ => return Err(Error::invalid("toydev", "only neg, sin and cos are implemented")),
    };
    let x = read_f32(inputs[0])?;
    write_f32(outputs[0], &x.into_iter().map(f).collect::<Vec<_>>())
}

fn toy_copy(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op: &Cast = downcast_op(op)?;
    if op.dtype != DType::F32 || !outputs[0].is_contiguous() {
        return Err(Error::invalid("toydev", "toy copies are f32 to contiguous f32 only"));
    }
    write_f32(outputs[0], &read_f32(inputs[0])?)
}

fn toy_fill(op: &dyn Op, _inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op: &Fill = downcast_op(op)?;
    write_f32(outputs[0], &vec![op.value.to_f64() as f32; outputs[0].numel()])
}

fn toy_scaled_square(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op: &ScaledSquare = downcast_op(op)?;
    let x = read_f32(inputs[0])?;
    write_f32(outputs[0], &x.iter().map(|v| op.alpha * v * v).collect::<Vec<_>>())
}

fn cpu_scaled_square(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op: &ScaledSquare = downcast_op(op)?;
    // A CPU kernel may be written with other operators.
    let y = inputs[0].mul(inputs[0])?.mul(op.alpha as f64)?;
    outputs[0].copy_(&y).map(|_| ())
}

/// Registers the custom operator's kernels and the toy backend (idempotent:
/// later calls return the first call's result, an error included).
pub fn register() -> Result<()> {
    static RESULT: OnceLock<Result<()>> = OnceLock::new();
    RESULT
        .get_or_init(|| {
            register_backend(DispatchKey::PrivateUse1, &ToyBackend)?;
            let pu = Slot::Key(DispatchKey::PrivateUse1);
            SCALED_SQUARE.register(Slot::Key(DispatchKey::Cpu), Kernel::Structured(cpu_scaled_square))?;
            SCALED_SQUARE.register(pu, Kernel::Structured(toy_scaled_square))?;
            for kind in [BinaryKind::Add, BinaryKind::Mul] {
                kind.entry().register(pu, Kernel::Structured(toy_binary))?;
            }
            for kind in [UnaryKind::Neg, UnaryKind::Sin, UnaryKind::Cos] {
                kind.entry().register(pu, Kernel::Structured(toy_unary))?;
            }
            ferrotorch_core::ops::copy::FILL.register(pu, Kernel::Structured(toy_fill))?;
            ferrotorch_core::ops::copy::TO_COPY.register(pu, Kernel::Structured(toy_copy))?;
            Ok(())
        })
        .clone()
}
