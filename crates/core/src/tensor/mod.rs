//! [`Tensor`]: a strided view of a shared storage.

mod access;
pub(crate) mod autograd_slot;
pub(crate) mod creation;
pub(crate) mod display;
mod index;
pub(crate) mod index_op;
mod options;
mod recycle;

use std::mem::ManuallyDrop;
use std::sync::Arc;

pub use access::TensorData;
pub use index::TensorIndex;
pub use options::TensorOptions;

use crate::dispatch::{DispatchKeySet, OutSpec, backend_for};
use crate::layout::{Dims, Layout};
use crate::storage::Storage;
use crate::{DType, Device, Error, Result};

/// The error for an output whose bytes do not fit `isize` (PyTorch's
/// "Storage size calculation overflowed").
fn overflow_error(op: &'static str, shape: &[usize], element_size: usize) -> Error {
    Error::overflow(
        op,
        format!("a tensor of shape {shape:?} with {element_size}-byte elements needs more than isize::MAX bytes"),
    )
}

/// `count * element_size` bytes, or the overflow error past `isize::MAX`.
fn checked_nbytes(op: &'static str, shape: &[usize], count: usize, element_size: usize) -> Result<usize> {
    count
        .checked_mul(element_size)
        .filter(|&n| n <= isize::MAX as usize)
        .ok_or_else(|| overflow_error(op, shape, element_size))
}

/// Element and byte counts of a contiguous output of `shape`, checked
/// (counts, bytes, and the strides of a shape with a zero-size dim).
fn contiguous_sizes(op: &'static str, shape: &[usize], element_size: usize) -> Result<(usize, usize)> {
    let numel = crate::layout::checked_numel(op, shape)?;
    if numel == 0 {
        check_contiguous_strides(op, shape)?;
    }
    Ok((numel, checked_nbytes(op, shape, numel, element_size)?))
}

/// A tensor from the per-thread cache of dead ones, with fresh uninitialised
/// memory of `nbytes` for `dtype` and its layout set by `set_layout`
/// (`numel` elements, `contiguous` or not); `None` when the cache is empty.
///
/// # Safety
///
/// Every element must be written before anything reads the tensor.
unsafe fn reuse_cached(
    op: &'static str,
    nbytes: usize,
    dtype: DType,
    numel: usize,
    contiguous: bool,
    set_layout: impl FnOnce(&mut Layout),
) -> Result<Option<Tensor>> {
    let Some(mut arc) = recycle::take() else {
        return Ok(None);
    };
    let imp = crate::storage::unique_mut(&mut arc).expect("cached tensors are unique");
    // SAFETY: the caller writes every element before reading (this function's contract).
    if !unsafe { imp.storage.refill_cpu(nbytes, dtype) }.map_err(|e| e.in_op(op))? {
        return Ok(None);
    }
    set_layout(&mut imp.layout);
    imp.numel = numel;
    imp.contiguous = contiguous;
    imp.dtype = dtype;
    Ok(Some(Tensor::wrap(arc)))
}

/// With a zero-size dim, the row-major strides of the other dims can exceed
/// what the element count bounds: [`Error::SizeOverflow`] when they do not fit
/// an `i64` (PyTorch: "Stride calculation overflowed").
fn check_contiguous_strides(op: &'static str, shape: &[usize]) -> Result<()> {
    let fits = shape
        .iter()
        .skip(1)
        .try_fold(1usize, |acc, &s| acc.checked_mul(s.max(1)))
        .is_some_and(|largest| largest <= i64::MAX as usize);
    if fits {
        Ok(())
    } else {
        Err(Error::overflow(
            op,
            format!("stride calculation overflowed for shape {shape:?}"),
        ))
    }
}

/// Validates a layout for a tensor of `dtype` on `storage` (see
/// [`Tensor::from_parts`]) and returns its element count.
fn check_layout(op: &'static str, layout: &Layout, dtype: DType, storage: &Storage) -> Result<usize> {
    if layout.shape.len() != layout.strides.len() {
        return Err(Error::invalid(
            op,
            format!(
                "shape {:?} and strides {:?} have different lengths",
                layout.shape.as_slice(),
                layout.strides.as_slice()
            ),
        ));
    }
    let numel = crate::layout::checked_numel(op, &layout.shape)?;
    if numel == 0 || storage.device() == Device::Meta {
        return Ok(numel);
    }
    let es = dtype.element_size();
    let fits = layout
        .checked_storage_end()
        .and_then(|end| end.checked_mul(es))
        .is_some_and(|end| end <= storage.nbytes());
    if !fits {
        return Err(Error::invalid(
            op,
            format!(
                "the layout (shape {:?}, strides {:?}, offset {}) of {dtype} elements reaches past the storage of {} bytes",
                layout.shape.as_slice(),
                layout.strides.as_slice(),
                layout.offset,
                storage.nbytes()
            ),
        ));
    }
    Ok(numel)
}

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
    /// For views: the base's version when the view was made (a view of a
    /// base that gains a history through an in-place write afterwards
    /// takes its part of that history, as in PyTorch).
    pub(crate) base_version: u64,
    pub(crate) autograd: autograd_slot::AutogradSlot,
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
        let base_version = base.as_ref().map_or(0, Tensor::version);
        Arc::new(TensorImpl {
            storage,
            layout,
            numel,
            contiguous,
            dtype,
            base,
            base_version,
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

/// # Properties
///
/// Shape, strides, dtype, device and version: what `x.shape`, `x.stride()`,
/// `x.dtype`, `x.device` and `x._version` give in PyTorch.
///
/// ```
/// use ferrotorch_core::{DType, Device, Tensor};
/// let x = Tensor::zeros((2, 3))?;
/// assert_eq!((x.shape(), x.ndim(), x.numel()), (&[2, 3][..], 2, 6));
/// assert_eq!((x.dtype(), x.device()), (DType::F32, Device::Cpu));
/// assert_eq!(x.t()?.strides(), &[1, 3]);
/// assert!(x.is_contiguous() && !x.t()?.is_contiguous());
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// A handle owning `arc`.
    #[inline]
    pub(crate) fn wrap(arc: Arc<TensorImpl>) -> Tensor {
        Tensor(ManuallyDrop::new(arc))
    }

    /// Builds a tensor from its parts, checking the layout against the
    /// storage (see [`TensorExt::from_parts`](crate::backend::TensorExt::from_parts)).
    pub(crate) fn from_parts(mut storage: Storage, layout: Layout, dtype: DType) -> Result<Tensor> {
        let numel = check_layout("from_parts", &layout, dtype, &storage)?;
        storage.claim_for("from_parts", dtype)?;
        let contiguous = layout.is_contiguous();
        Ok(Tensor::wrap(TensorImpl::arc_with_counts(
            storage, layout, dtype, None, numel, contiguous,
        )))
    }

    /// A tensor over storage the crate just made for it (no checks).
    pub(crate) fn from_fresh(storage: Storage, layout: Layout, dtype: DType) -> Tensor {
        Tensor::wrap(TensorImpl::arc(storage, layout, dtype, None))
    }

    /// A view of this tensor's storage with another layout (shares the
    /// version counter). The layout must fit the storage, as in
    /// [`Tensor::from_parts`]: an error names the layout and the storage's
    /// size otherwise.
    pub(crate) fn view_with_layout(&self, layout: Layout) -> Result<Tensor> {
        self.view_for("view_with_layout", layout)
    }

    /// [`Tensor::view_with_layout`] for the view operator `op` (named in errors).
    pub(crate) fn view_for(&self, op: &'static str, layout: Layout) -> Result<Tensor> {
        self.view_impl(op, layout, true)
    }

    /// [`Tensor::view_for`] whose result is not a view for autograd (no
    /// base): `_unsafe_view`, whose input is a temporary no one else sees.
    pub(crate) fn unsafe_view_for(&self, op: &'static str, layout: Layout) -> Result<Tensor> {
        self.view_impl(op, layout, false)
    }

    fn view_impl(&self, op: &'static str, layout: Layout, as_view: bool) -> Result<Tensor> {
        let numel = check_layout(op, &layout, self.dtype(), self.storage())?;
        let base = as_view.then(|| self.0.base.clone().unwrap_or_else(|| self.clone()));
        let contiguous = layout.is_contiguous();
        Ok(Tensor::wrap(TensorImpl::arc_with_counts(
            self.0.storage.clone(),
            layout,
            self.0.dtype,
            base,
            numel,
            contiguous,
        )))
    }

    /// Zeroed memory for an output described by `spec` on `device` (the
    /// dispatcher gives structured kernels uninitialised memory instead).
    /// Sizes that overflow are [`Error::SizeOverflow`], memory the system
    /// cannot provide [`Error::OutOfMemory`].
    pub(crate) fn empty_for_spec(spec: &OutSpec, device: Device) -> Result<Tensor> {
        Tensor::alloc_for_spec("empty", spec, device, true)
    }

    /// Uninitialised memory for an output of `op` described by `spec`.
    ///
    /// # Safety
    ///
    /// Every element must be written (bool ones with 0 or 1) before anything
    /// reads the tensor.
    pub(crate) unsafe fn uninit_for_spec(op: &'static str, spec: &OutSpec, device: Device) -> Result<Tensor> {
        Tensor::alloc_for_spec(op, spec, device, false)
    }

    fn alloc_for_spec(op: &'static str, spec: &OutSpec, device: Device, zeroed: bool) -> Result<Tensor> {
        if device == Device::Meta {
            crate::storage::meta_ledger::note_op(op);
        }
        let es = spec.dtype.element_size();
        let reuse = device == Device::Cpu && !zeroed;
        let (layout, numel, contiguous, nbytes) = match &spec.strides {
            None => {
                let (numel, nbytes) = contiguous_sizes(op, &spec.shape, es)?;
                // The common case, a contiguous CPU output: a reused tensor
                // whose layout is rewritten in place (no layout built and moved).
                // SAFETY: the caller writes every element before reading (this function's contract).
                let cached = reuse.then(|| unsafe {
                    reuse_cached(op, nbytes, spec.dtype, numel, true, |l| {
                        l.set_contiguous(&spec.shape);
                    })
                });
                if let Some(t) = cached.transpose()?.flatten() {
                    return Ok(t);
                }
                (Layout::contiguous(&spec.shape), numel, true, nbytes)
            }
            Some(st) => {
                let layout = Layout {
                    shape: spec.shape.clone(),
                    strides: st.clone(),
                    offset: 0,
                };
                let numel = crate::layout::checked_numel(op, &layout.shape)?;
                let contiguous = layout.is_contiguous();
                let nbytes = if numel == 0 {
                    0
                } else {
                    let end = layout
                        .checked_storage_end()
                        .ok_or_else(|| overflow_error(op, &spec.shape, es))?;
                    checked_nbytes(op, &spec.shape, end, es)?
                };
                if reuse {
                    let set = |l: &mut Layout| *l = layout.clone();
                    // SAFETY: the caller writes every element before reading (this function's contract).
                    if let Some(t) = unsafe { reuse_cached(op, nbytes, spec.dtype, numel, contiguous, set)? } {
                        return Ok(t);
                    }
                }
                (layout, numel, contiguous, nbytes)
            }
        };
        let storage = if device == Device::Cpu {
            let s = if zeroed {
                Storage::cpu(nbytes)
            } else {
                // SAFETY: the caller writes every element before reading (this function's contract).
                unsafe { Storage::cpu_uninit(nbytes, spec.dtype) }
            };
            s.map_err(|e| e.in_op(op))?
        } else {
            let buffer = backend_for(device)?
                .allocate(device, nbytes, zeroed)
                .map_err(|e| e.in_op(op))?;
            Storage::new_for(device, nbytes, buffer, spec.dtype)
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
        let d = crate::layout::normalize_dim_strict("size", dim, self.ndim())?;
        Ok(if self.ndim() == 0 { 1 } else { self.shape()[d] })
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[usize] {
        &self.0.layout.strides
    }

    /// Stride of one dimension.
    pub fn stride(&self, dim: i64) -> Result<usize> {
        let d = crate::layout::normalize_dim_strict("stride", dim, self.ndim())?;
        Ok(if self.ndim() == 0 { 1 } else { self.strides()[d] })
    }

    /// Offset of the first element in the storage, in elements.
    pub fn storage_offset(&self) -> usize {
        self.0.layout.offset
    }

    /// Shape, strides and offset.
    pub(crate) fn layout(&self) -> &Layout {
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
    pub(crate) fn storage(&self) -> &Storage {
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
    pub(crate) fn bump_version(&self) {
        self.0.storage.bump_version();
    }

    /// A kernel's result as a tensor of its own, as PyTorch's non-view
    /// operators return: a copy when it shares storage with one of
    /// `inputs`, and never a view for autograd (a reshape of a temporary
    /// the kernel made is rewrapped without its base).
    pub(crate) fn into_result(self, inputs: &[&Tensor]) -> Result<Tensor> {
        if inputs.iter().any(|i| i.storage().same(self.storage())) {
            return self.clone_tensor();
        }
        if self.0.base.is_some() {
            return self.unsafe_view_for("result", self.layout().clone());
        }
        Ok(self)
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

/// A tensor is a list of one for the list-taking ops (`Tensor::cat`,
/// `Tensor::stack`, ...), which accept `&[Tensor]` and `&[&Tensor]` alike.
impl AsRef<Tensor> for Tensor {
    fn as_ref(&self) -> &Tensor {
        self
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}
