//! [`TensorExt`]: the `Tensor` methods that only backend and operator
//! authors need.

use crate::backend::dispatch::OutSpec;
use crate::backend::layout::Layout;
use crate::backend::storage::Storage;
use crate::{DType, Device, Result, Tensor};

/// Building tensors from raw parts and reaching their storage and layout:
/// what a backend or an out-of-tree operator needs and a model does not.
/// Bring it into scope with `use ferrotorch::backend::TensorExt`.
pub trait TensorExt: Sized {
    /// Builds a tensor from its parts. The version counter is the storage's:
    /// tensors built on one storage share it, as views do.
    ///
    /// The layout is checked against the storage, since kernels trust it:
    /// its element count must fit an `i64` and every element it addresses
    /// must lie inside the storage ([`Error::SizeOverflow`](crate::Error::SizeOverflow) /
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) otherwise).
    /// A bool tensor's bytes must all be 0 or 1, and bool and non-bool
    /// tensors never share a storage (a non-bool tensor could write other
    /// bytes, and any byte but 0 and 1 is undefined behaviour in a Rust
    /// `bool`): the storage must then be otherwise unused, or already hold
    /// tensors of that kind.
    ///
    /// ```
    /// use ferrotorch_core::backend::{Layout, TensorExt, storage::Storage};
    /// use ferrotorch_core::{DType, Tensor};
    /// let s = Storage::cpu_from_bytes(&1.5f32.to_le_bytes())?;
    /// let t = Tensor::from_parts(s.clone(), Layout::contiguous(&[1]), DType::F32)?;
    /// assert_eq!(t.to_vec::<f32>()?, [1.5]);
    /// // Four elements do not fit a 4-byte storage.
    /// assert!(Tensor::from_parts(s, Layout::contiguous(&[4]), DType::F32).is_err());
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    fn from_parts(storage: Storage, layout: Layout, dtype: DType) -> Result<Self>;

    /// A view of this tensor's storage with another layout (shares the
    /// version counter). The layout must fit the storage, as in
    /// [`TensorExt::from_parts`]: an error names the layout and the
    /// storage's size otherwise.
    fn view_with_layout(&self, layout: Layout) -> Result<Self>;

    /// Zeroed memory for an output described by `spec` on `device` (the
    /// dispatcher gives structured kernels uninitialised memory instead).
    /// Sizes that overflow are [`Error::SizeOverflow`](crate::Error::SizeOverflow),
    /// memory the system cannot provide [`Error::OutOfMemory`](crate::Error::OutOfMemory).
    fn empty_for_spec(spec: &OutSpec, device: Device) -> Result<Self>;

    /// Records an in-place write in the shared version counter (the
    /// dispatcher does this for in-place calls; a kernel that writes a
    /// tensor behind the dispatcher's back calls it).
    fn bump_version(&self);

    /// The shared storage.
    fn storage(&self) -> &Storage;

    /// Shape, strides and offset.
    fn layout(&self) -> &Layout;
}

impl TensorExt for Tensor {
    fn from_parts(storage: Storage, layout: Layout, dtype: DType) -> Result<Tensor> {
        Tensor::from_parts(storage, layout, dtype)
    }

    fn view_with_layout(&self, layout: Layout) -> Result<Tensor> {
        Tensor::view_with_layout(self, layout)
    }

    fn empty_for_spec(spec: &OutSpec, device: Device) -> Result<Tensor> {
        Tensor::empty_for_spec(spec, device)
    }

    fn bump_version(&self) {
        Tensor::bump_version(self)
    }

    fn storage(&self) -> &Storage {
        Tensor::storage(self)
    }

    fn layout(&self) -> &Layout {
        Tensor::layout(self)
    }
}
