//! Copies, casts, fills and device transfers.

use crate::autograd::BackwardCtx;
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, backend_for, call_out, call1};
use crate::layout::{Dims, Layout};
use crate::ops::grad_util::grad0;
use crate::storage::Storage;
use crate::{DType, Device, Error, Result, Scalar, Tensor};

/// Declaration of `_to_copy`: elementwise copy with a dtype cast (also
/// `clone()`, PyTorch's `clone`, and the writes of `copy_`).
pub static TO_COPY: OpEntry = OpEntry::differentiable("_to_copy");
/// Declaration of `full`: one value everywhere, in a new tensor (`zeros`,
/// `ones`, `full`) or, called with an output, in a given one (`fill_`,
/// `zero_`: PyTorch's `full.out`, as the operator takes no input tensor,
/// only a size, value, dtype and device); differentiable so that `zero_()`
/// on a tensor in the graph cuts its history.
pub static FILL: OpEntry = OpEntry::differentiable("full");
/// Declaration of `copy_`: write another tensor into `self`.
pub static COPY_INPLACE: OpEntry = OpEntry::differentiable("copy_");
/// Declaration of `fill_.Scalar` (and `zero_`): overwrite in place.
pub static FILL_INPLACE: OpEntry = OpEntry::differentiable("fill_.Scalar");
/// Declaration of `ferrotorch::to_device`: copy to another device (not an
/// operator of its own in PyTorch, where `_to_copy` takes the device).
pub static TO_DEVICE: OpEntry = OpEntry::differentiable("ferrotorch::to_device");

/// Copy with cast to `dtype`; the output keeps the input's strides when
/// `preserve_strides` and the input is dense (PyTorch's `preserve_format`),
/// else it is contiguous.
#[derive(Debug, Clone)]
pub struct Cast {
    /// Output dtype.
    pub dtype: DType,
    /// Keep a dense input's memory order.
    pub preserve_strides: bool,
    /// `clone()` (a copy in the input's dtype): the node is `CloneBackward0`
    /// instead of `ToCopyBackward0`, as in PyTorch.
    pub clone: bool,
}

impl Op for Cast {
    fn entry(&self) -> &'static OpEntry {
        &TO_COPY
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        let mut spec = OutSpec::new(x.dims(), self.dtype);
        if self.preserve_strides {
            spec.strides = x.layout().preserve_format_strides();
        }
        Ok(smallvec::smallvec![spec])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn backward_name(&self) -> String {
        if self.clone {
            "CloneBackward0"
        } else {
            "ToCopyBackward0"
        }
        .into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        Ok(vec![Some(g.to_dtype(ctx.meta(0).dtype)?)])
    }
}

/// Fill with a constant; also the factory behind `zeros`/`ones`/`full`.
#[derive(Debug, Clone)]
pub struct Fill {
    /// The value.
    pub value: Scalar,
    /// Output shape.
    pub shape: Dims,
    /// Output dtype.
    pub dtype: DType,
    /// Output device.
    pub device: Device,
}

impl Op for Fill {
    fn entry(&self) -> &'static OpEntry {
        &FILL
    }

    fn infer(&self, _inputs: &[&Tensor]) -> Result<OutSpecs> {
        Ok(smallvec::smallvec![OutSpec::new(self.shape.clone(), self.dtype)])
    }

    fn device(&self) -> Option<Device> {
        Some(self.device)
    }

    fn allows_overlapping_out(&self) -> bool {
        true
    }

    /// `FillBackward0`, the node of an in-place fill.
    fn backward_name(&self) -> String {
        "FillBackward0".into()
    }

    fn backward(&self, _ctx: &BackwardCtx, _grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        Ok(Vec::new())
    }
}

/// Overwrites its input with a constant in place (`fill_`, `zero_`); input
/// `[self]`. As in PyTorch, the node keeps an edge to `self`'s old history
/// and sends it a zero gradient, so the graph is not cut (a later in-place
/// change of a tensor saved on that history is still detected).
#[derive(Debug, Clone, Copy)]
pub struct FillInplace {
    /// The value.
    pub value: Scalar,
    /// Called as `zero_()` (node `ZeroBackward0`).
    pub zero: bool,
}

impl Op for FillInplace {
    fn entry(&self) -> &'static OpEntry {
        &FILL_INPLACE
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let x = inputs[0];
        self.value.check_fits_fill("fill_", x.dtype(), x.numel())?;
        Ok(smallvec::smallvec![OutSpec::new(x.dims(), x.dtype())])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn allows_overlapping_out(&self) -> bool {
        true
    }

    fn backward_name(&self) -> String {
        if self.zero { "ZeroBackward0" } else { "FillBackward2" }.into()
    }

    fn backward(&self, _ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(grad0(grads)?.zeros_like()?)])
    }
}

/// `self.copy_(src)`: writes `src` (already broadcast to `self`'s shape and
/// on its device) into `self`, casting; inputs `[self, src]`. As PyTorch's
/// `CopyBackwards`, the node sends a zero gradient to `self`'s old history
/// and the gradient to `src` (the engine casts it to `src`'s dtype).
#[derive(Debug, Clone, Copy)]
pub struct CopyInplace;

impl Op for CopyInplace {
    fn entry(&self) -> &'static OpEntry {
        &COPY_INPLACE
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (x, src) = (inputs[0], inputs[1]);
        if x.shape() != src.shape() {
            return Err(Error::shape(
                "copy_",
                x.shape(),
                src.shape(),
                "source must broadcast to the destination",
            ));
        }
        Ok(smallvec::smallvec![OutSpec::new(x.dims(), x.dtype())])
    }

    fn alias_safe(&self) -> bool {
        true
    }

    fn backward_name(&self) -> String {
        "CopyBackwards".into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let g = grad0(grads)?;
        let gx = if ctx.needs_grad(0) { Some(g.zeros_like()?) } else { None };
        Ok(vec![gx, ctx.needs_grad(1).then_some(g)])
    }
}

/// Copy to another device (contiguous result).
#[derive(Debug, Clone)]
pub struct ToDevice {
    /// Target device.
    pub device: Device,
}

impl Op for ToDevice {
    fn entry(&self) -> &'static OpEntry {
        &TO_DEVICE
    }

    fn backward_name(&self) -> String {
        "ToCopyBackward0".into()
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(grad0(grads)?.to_device(ctx.meta(0).device)?)])
    }
}

fn to_device_kernel(call: &Call) -> Result<Tensors> {
    let op: &ToDevice = crate::dispatch::downcast_op(call.op)?;
    let x = call.inputs[0];
    let target = op.device;
    let src = x.contiguous()?;
    let es = src.element_size();
    let nbytes = src.numel() * es;
    let dst_backend = backend_for(target)?;
    let buffer = if src.device() == Device::Meta || target == Device::Meta {
        if target != Device::Meta {
            return Err(Error::NoData {
                op: "to",
                device: Device::Meta,
            });
        }
        dst_backend.allocate(target, nbytes, false)?
    } else {
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(nbytes).map_err(|_| Error::OutOfMemory {
            op: "to",
            nbytes,
            device: Device::Cpu,
        })?;
        bytes.resize(nbytes, 0);
        {
            let guard = src.storage().read();
            backend_for(src.device())?.copy_to_host(&guard, src.storage_offset() * es, &mut bytes)?;
        }
        dst_backend.copy_from_host(target, &bytes)?
    };
    let storage = Storage::new(target, nbytes, buffer)?;
    Ok(smallvec::smallvec![Tensor::from_parts(
        storage,
        Layout::contiguous(src.shape()),
        src.dtype()
    )?])
}

pub(crate) fn register() -> Result<()> {
    TO_DEVICE.register_builtin(Slot::AnyBackend, Kernel::Functional(to_device_kernel))
}

inventory::submit! {
    crate::dispatch::registration::Registration {
        stage: crate::dispatch::registration::Stage::OutCopy,
        what: "out= copy",
        run: || crate::dispatch::set_out_copy(copy_into),
    }
}

/// Writes `src` (broadcast to `dst`'s shape, cast to its dtype, moved to its
/// device) into `dst`.
pub(crate) fn copy_into(dst: &Tensor, src: &Tensor) -> Result<()> {
    let src = source_for(dst, src)?;
    call_out(
        &Cast {
            dtype: dst.dtype(),
            preserve_strides: false,
            clone: false,
        },
        &[&src],
        &[dst],
    )
}

/// `src` on `dst`'s device (a 0-d CPU tensor may stay) and broadcast to its
/// shape, for a copy into `dst`.
fn source_for(dst: &Tensor, src: &Tensor) -> Result<Tensor> {
    let src = if src.device() != dst.device() && !(src.ndim() == 0 && src.device() == Device::Cpu) {
        src.to_device(dst.device())?
    } else {
        src.clone()
    };
    let src = if src.shape() != dst.shape() {
        let shape: Vec<i64> = dst.shape().iter().map(|&s| s as i64).collect();
        src.expand(&shape).map_err(|_| {
            Error::shape(
                "copy_",
                dst.shape(),
                src.shape(),
                "source must broadcast to the destination",
            )
        })?
    } else {
        src
    };
    Ok(src)
}

/// # Copies and conversions
///
/// dtype and device conversions, copies, and in-place fills.
///
/// ```
/// use ferrotorch_core::{DType, Tensor};
/// let x = Tensor::new([1.5f32, 2.5])?;
/// assert_eq!(x.to_dtype(DType::I64)?.to_vec::<i64>()?, [1, 2]);
/// let y = x.clone_tensor()?;      // x.clone(): new memory (Tensor::clone is another handle)
/// y.fill_(0)?;
/// assert_eq!((x.to_vec::<f32>()?, y.to_vec::<f32>()?), (vec![1.5, 2.5], vec![0.0, 0.0]));
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// Converts to `dtype` (returns `self` when it already has it).
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        call1(
            &Cast {
                dtype,
                preserve_strides: true,
                clone: false,
            },
            &[self],
        )
    }

    /// Moves to `device` (returns `self` when it is already there).
    pub fn to_device(&self, device: Device) -> Result<Tensor> {
        if device == self.device() {
            return Ok(self.clone());
        }
        call1(&ToDevice { device }, &[self])
    }

    /// Moves to `device` (PyTorch's `tensor.to(device)`).
    pub fn to(&self, device: Device) -> Result<Tensor> {
        self.to_device(device)
    }

    /// Copies to the CPU.
    pub fn cpu(&self) -> Result<Tensor> {
        self.to_device(Device::Cpu)
    }

    /// A copy with its own storage, keeping a dense tensor's memory order.
    pub fn clone_tensor(&self) -> Result<Tensor> {
        call1(
            &Cast {
                dtype: self.dtype(),
                preserve_strides: true,
                clone: true,
            },
            &[self],
        )
    }

    /// A contiguous copy with its own storage, whatever `self`'s layout
    /// (PyTorch's `clone(memory_format=torch.contiguous_format)`; node
    /// `CloneBackward0`).
    pub fn clone_contiguous(&self) -> Result<Tensor> {
        call1(
            &Cast {
                dtype: self.dtype(),
                preserve_strides: false,
                clone: true,
            },
            &[self],
        )
    }

    /// `self` if contiguous, else a contiguous copy (as PyTorch, which
    /// clones with `memory_format=contiguous_format`: node `CloneBackward0`).
    pub fn contiguous(&self) -> Result<Tensor> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        call1(
            &Cast {
                dtype: self.dtype(),
                preserve_strides: false,
                clone: true,
            },
            &[self],
        )
    }

    /// Copies `src` into `self` in place (broadcasting, casting and moving
    /// across devices as needed); returns `self`.
    pub fn copy_(&self, src: &Tensor) -> Result<Tensor> {
        if self.layout().has_internal_overlap() {
            return Err(Error::invalid(
                "copy_",
                "unsupported operation: more than one element of the written-to tensor refers to a single memory \
                 location; clone() the tensor before performing the operation",
            ));
        }
        let src = source_for(self, src)?;
        call_out(&CopyInplace, &[self, &src], &[self])?;
        Ok(self.clone())
    }

    /// Sets every element to `value` (cast to the tensor's dtype) in place;
    /// returns `self`. A value outside the dtype's range is an error
    /// ("value cannot be converted to type uint8_t without overflow"; see
    /// [`Scalar::check_fits`]).
    pub fn fill_(&self, value: impl Into<Scalar>) -> Result<Tensor> {
        let op = FillInplace {
            value: value.into(),
            zero: false,
        };
        call_out(&op, &[self], &[self])?;
        Ok(self.clone())
    }

    /// Sets every element to zero in place; returns `self`.
    pub fn zero_(&self) -> Result<Tensor> {
        let op = FillInplace {
            value: Scalar::Int(0),
            zero: true,
        };
        call_out(&op, &[self], &[self])?;
        Ok(self.clone())
    }
}
