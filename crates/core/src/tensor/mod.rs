//! [`Tensor`]: a strided view of a shared storage.

mod access;
mod creation;
mod display;
mod index;
mod recycle;

use std::mem::ManuallyDrop;
use std::sync::Arc;

pub use access::TensorData;
pub use creation::TensorOptions;
pub use display::{PrintOptions, set_print_options};
pub use index::TensorIndex;

use crate::dispatch::{DispatchKeySet, OutSpec, backend_for};
use crate::layout::{Dims, Layout};
use crate::storage::Storage;
use crate::{DType, Device, Result};

/// The version counter of a storage's tensors: bumped by every in-place
/// write, shared by all views of one base and by `detach()`ed tensors
/// (autograd checks it to catch in-place changes to tensors it saved). It
/// lives in the storage: every tensor is created with a storage of its own,
/// and all tensors sharing a storage share the counter.
#[derive(Clone)]
pub struct VersionCounter(Storage);

impl VersionCounter {
    /// The current version.
    pub fn get(&self) -> u64 {
        self.0.version()
    }

    /// Records one in-place write.
    pub fn bump(&self) {
        self.0.bump_version();
    }

    /// True when both counters are the same counter.
    pub fn same(&self, other: &VersionCounter) -> bool {
        self.0.same(&other.0)
    }
}

impl std::fmt::Debug for VersionCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VersionCounter({})", self.get())
    }
}

pub(crate) struct TensorImpl {
    pub(crate) storage: Storage,
    pub(crate) layout: Layout,
    /// `layout.numel()`, kept (the layout never changes after creation).
    numel: usize,
    /// `layout.is_contiguous()`, kept likewise.
    contiguous: bool,
    pub(crate) dtype: DType,
    /// For views: the tensor owning the data (never itself a view).
    pub(crate) base: Option<Tensor>,
    pub(crate) autograd: crate::autograd::AutogradSlot,
}

impl TensorImpl {
    /// A shared tensor from its parts, with the layout's element count and
    /// contiguity kept.
    pub(crate) fn arc(storage: Storage, layout: Layout, dtype: DType, base: Option<Tensor>) -> Arc<TensorImpl> {
        let (numel, contiguous) = (layout.numel(), layout.is_contiguous());
        TensorImpl::arc_with_counts(storage, layout, dtype, base, numel, contiguous)
    }

    /// [`TensorImpl::arc`] with the element count and contiguity already known.
    fn arc_with_counts(
        storage: Storage,
        layout: Layout,
        dtype: DType,
        base: Option<Tensor>,
        numel: usize,
        contiguous: bool,
    ) -> Arc<TensorImpl> {
        debug_assert!(numel == layout.numel() && contiguous == layout.is_contiguous());
        Arc::new(TensorImpl {
            storage,
            layout,
            numel,
            contiguous,
            dtype,
            base,
            autograd: Default::default(),
        })
    }
}

/// An n-dimensional array of one [`DType`] on one [`Device`].
///
/// A `Tensor` is a cheap handle (an `Arc`): cloning it gives another handle
/// to the same tensor, as assigning a tensor does in Python. Views
/// (`view`, `permute`, slicing, `expand`, ...) share the storage and its
/// version counter; nothing is copied. Every fallible operation returns
/// [`Result`]; the operator overloads (`&a + &b`) panic with the same message
/// instead, which is their only difference from the methods (`a.add(&b)`).
///
/// ```
/// use ferrotorch_core::Tensor;
/// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).reshape(&[2, 2])?;
/// let b = a.t()?.matmul(&a)?;
/// assert_eq!(b.to_vec::<f32>()?, vec![10.0, 14.0, 14.0, 20.0]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
#[derive(Clone)]
pub struct Tensor(pub(crate) ManuallyDrop<Arc<TensorImpl>>);

impl Drop for Tensor {
    fn drop(&mut self) {
        // SAFETY: the handle is dropped once, here, and not used afterwards.
        recycle::release(unsafe { ManuallyDrop::take(&mut self.0) });
    }
}

impl Tensor {
    /// A handle owning `arc`.
    #[inline]
    pub(crate) fn wrap(arc: Arc<TensorImpl>) -> Tensor {
        Tensor(ManuallyDrop::new(arc))
    }

    /// Builds a tensor from its parts. The version counter is the storage's:
    /// tensors built on one storage share it, as views do.
    pub fn from_parts(storage: Storage, layout: Layout, dtype: DType) -> Tensor {
        Tensor::wrap(TensorImpl::arc(storage, layout, dtype, None))
    }

    /// A view of this tensor's storage with another layout (shares the
    /// version counter). The layout must stay inside the storage.
    pub fn view_with_layout(&self, layout: Layout) -> Tensor {
        debug_assert!(
            layout.numel() == 0
                || self.storage().device() == Device::Meta
                || layout.storage_end() * self.dtype().element_size() <= self.storage().nbytes()
        );
        let base = Some(self.0.base.clone().unwrap_or_else(|| self.clone()));
        Tensor::wrap(TensorImpl::arc(self.0.storage.clone(), layout, self.0.dtype, base))
    }

    /// Uninitialised memory for an output described by `spec` on `device`.
    pub fn empty_for_spec(spec: &OutSpec, device: Device) -> Result<Tensor> {
        // The common case, a contiguous CPU output, in a reused tensor whose
        // layout is rewritten in place.
        if spec.strides.is_none()
            && device == Device::Cpu
            && let Some(mut arc) = recycle::take()
        {
            let imp = crate::storage::unique_mut(&mut arc).expect("cached tensors are unique");
            let numel = imp.layout.set_contiguous(&spec.shape);
            if imp.storage.refill_cpu(numel * spec.dtype.element_size()) {
                imp.numel = numel;
                imp.contiguous = true;
                imp.dtype = spec.dtype;
                return Ok(Tensor::wrap(arc));
            }
        }
        let (layout, numel, contiguous) = match &spec.strides {
            Some(st) => {
                let layout = Layout {
                    shape: spec.shape.clone(),
                    strides: st.clone(),
                    offset: 0,
                };
                let (n, c) = (layout.numel(), layout.is_contiguous());
                (layout, n, c)
            }
            None => {
                let layout = Layout::contiguous(&spec.shape);
                let n = crate::layout::numel(&layout.shape);
                (layout, n, true)
            }
        };
        let nbytes = if numel == 0 {
            0
        } else if contiguous {
            numel * spec.dtype.element_size()
        } else {
            layout.storage_end() * spec.dtype.element_size()
        };
        if device == Device::Cpu
            && let Some(mut arc) = recycle::take()
        {
            let imp = crate::storage::unique_mut(&mut arc).expect("cached tensors are unique");
            if imp.storage.refill_cpu(nbytes) {
                imp.layout = layout;
                imp.numel = numel;
                imp.contiguous = contiguous;
                imp.dtype = spec.dtype;
                return Ok(Tensor::wrap(arc));
            }
        }
        let storage = if device == Device::Cpu {
            Storage::cpu(nbytes, false)
        } else {
            Storage::new(device, nbytes, backend_for(device)?.allocate(device, nbytes, false)?)
        };
        Ok(Tensor::wrap(TensorImpl::arc_with_counts(
            storage, layout, spec.dtype, None, numel, contiguous,
        )))
    }

    /// Size of each dimension (`tensor.shape`).
    pub fn shape(&self) -> &[usize] {
        &self.0.layout.shape
    }

    /// Size of one dimension; negative `dim` counts from the end.
    pub fn size(&self, dim: i64) -> Result<usize> {
        let d = crate::layout::normalize_dim("size", dim, self.ndim())?;
        Ok(if self.ndim() == 0 { 1 } else { self.shape()[d] })
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[usize] {
        &self.0.layout.strides
    }

    /// Stride of one dimension.
    pub fn stride(&self, dim: i64) -> Result<usize> {
        let d = crate::layout::normalize_dim("stride", dim, self.ndim())?;
        Ok(if self.ndim() == 0 { 1 } else { self.strides()[d] })
    }

    /// Offset of the first element in the storage, in elements.
    pub fn storage_offset(&self) -> usize {
        self.0.layout.offset
    }

    /// Shape, strides and offset.
    pub fn layout(&self) -> &Layout {
        &self.0.layout
    }

    /// Number of dimensions (`dim()` in PyTorch).
    pub fn ndim(&self) -> usize {
        self.0.layout.shape.len()
    }

    /// Number of dimensions (PyTorch's name).
    pub fn dim(&self) -> usize {
        self.ndim()
    }

    /// Number of elements.
    #[inline]
    pub fn numel(&self) -> usize {
        self.0.numel
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// Bytes per element.
    pub fn element_size(&self) -> usize {
        self.0.dtype.element_size()
    }

    /// The device of the storage.
    pub fn device(&self) -> Device {
        self.0.storage.device()
    }

    /// The shared storage.
    pub fn storage(&self) -> &Storage {
        &self.0.storage
    }

    /// Whether the elements are laid out row-major without gaps.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.0.contiguous
    }

    /// True for floating-point dtypes.
    pub fn is_floating_point(&self) -> bool {
        self.0.dtype.is_floating_point()
    }

    /// The shape as a `Dims` (for building new shapes).
    pub fn dims(&self) -> Dims {
        crate::layout::dims_of(&self.0.layout.shape)
    }

    /// The version counter shared with all views of this tensor's base.
    pub fn version_counter(&self) -> VersionCounter {
        VersionCounter(self.0.storage.clone())
    }

    /// The current version (`tensor._version`).
    pub fn version(&self) -> u64 {
        self.0.storage.version()
    }

    /// Records an in-place write (done by the dispatcher for in-place calls).
    pub fn bump_version(&self) {
        self.0.storage.bump_version();
    }

    /// True when both handles are the same tensor (not merely equal values).
    pub fn is_same(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Layer dispatch keys this tensor asks for: `Autograd` when it requires
    /// grad and grad mode is on.
    #[inline]
    pub(crate) fn layer_keys(&self) -> DispatchKeySet {
        if self.requires_grad() && crate::autograd::is_grad_enabled() {
            DispatchKeySet::of(crate::dispatch::DispatchKey::Autograd)
        } else {
            DispatchKeySet::EMPTY
        }
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}
