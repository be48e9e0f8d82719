//! Shapes, strides and the arithmetic of views: broadcasting, dim
//! normalisation, PyTorch's view-stride rule, contiguity tests.

use smallvec::SmallVec;

use crate::{Error, Result};

/// A list of sizes or strides; up to five dims live inline without allocating
/// (five, not more: shapes are copied on every op, and a larger inline
/// buffer made those copies measurably slower).
pub type Dims = SmallVec<[usize; DIMS_INLINE]>;

/// Dims kept inline by [`Dims`] (more spill to the heap).
const DIMS_INLINE: usize = 5;

/// Where a tensor's elements sit in its storage: element `(i0, i1, ...)` is at
/// `offset + i0*strides[0] + i1*strides[1] + ...` (in elements, not bytes).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Size of each dimension.
    pub shape: Dims,
    /// Elements to skip to advance one step in each dimension (0 for broadcast dims).
    pub strides: Dims,
    /// Position of the first element in the storage.
    pub offset: usize,
}

/// `n` zeros (inline up to five dims, without the generic fill loop).
pub(crate) fn zero_dims(n: usize) -> Dims {
    if n <= DIMS_INLINE {
        Dims::from_buf_and_len([0; DIMS_INLINE], n)
    } else {
        smallvec::smallvec![0; n]
    }
}

/// A copy of `d` (inline up to five dims without a `memcpy` call: shapes are
/// short and copied on every op).
#[inline]
pub(crate) fn dims_of(d: &[usize]) -> Dims {
    if d.len() <= DIMS_INLINE {
        let mut buf = [0; DIMS_INLINE];
        for (b, &x) in buf.iter_mut().zip(d) {
            *b = x;
        }
        Dims::from_buf_and_len(buf, d.len())
    } else {
        Dims::from_slice(d)
    }
}

/// Row-major strides of a contiguous tensor of `shape`. (A shape whose
/// element count fits `usize` has strides that fit too; with a zero-size dim
/// the strides of huge other dims saturate, as no element is ever addressed.)
pub fn contiguous_strides(shape: &[usize]) -> Dims {
    let mut strides = zero_dims(shape.len());
    let mut acc = 1usize;
    for d in (0..shape.len()).rev() {
        strides[d] = acc;
        acc = acc.saturating_mul(shape[d].max(1));
    }
    strides
}

/// Whether `strides` walk `shape` row-major without gaps (size-1 dims may
/// have any stride, as in PyTorch).
fn is_row_major(shape: &[usize], strides: &[usize]) -> bool {
    let mut expected = 1usize;
    for (&n, &st) in shape.iter().zip(strides).rev() {
        if n != 1 {
            if st != expected {
                return false;
            }
            expected = expected.wrapping_mul(n);
        }
    }
    true
}

/// Whether two shapes are equal (an inline loop: shapes are short, and a
/// slice comparison calls `memcmp`).
#[inline]
pub(crate) fn same_dims(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Number of elements of a shape (1 for a 0-d tensor). The shape of a
/// tensor always has a count that fits; for shapes from elsewhere use
/// [`checked_numel`].
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().fold(1usize, |n, &s| n.wrapping_mul(s))
}

/// Number of elements of a shape, or [`Error::SizeOverflow`] naming `op` and
/// the shape when it exceeds `i64::MAX` (PyTorch's limit).
///
/// ```
/// use ferrotorch_core::backend::layout::checked_numel;
/// assert_eq!(checked_numel("zeros", &[2, 3])?, 6);
/// assert_eq!(checked_numel("zeros", &[0, usize::MAX, 2])?, 0);
/// assert!(checked_numel("zeros", &[1 << 62, 4]).is_err());
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub fn checked_numel(op: &'static str, shape: &[usize]) -> Result<usize> {
    if shape.contains(&0) {
        return Ok(0);
    }
    shape
        .iter()
        .try_fold(1usize, |n, &s| n.checked_mul(s))
        .filter(|&n| n <= i64::MAX as usize)
        .ok_or_else(|| {
            Error::overflow(
                op,
                format!("the number of elements of shape {shape:?} does not fit in int64"),
            )
        })
}

/// Turns a possibly negative `dim` into an index in `[0, ndim)`.
/// A 0-d tensor accepts -1 and 0, as in PyTorch.
pub fn normalize_dim(op: &'static str, dim: i64, ndim: usize) -> Result<usize> {
    let n = ndim.max(1) as i64;
    let d = if dim < 0 { dim + n } else { dim };
    if d < 0 || d >= n {
        return Err(Error::DimOutOfRange { op, dim, ndim });
    }
    Ok(d as usize)
}

/// [`normalize_dim`] for an argument PyTorch does not wrap on a 0-d tensor
/// (`maybe_wrap_dim(dim, ndim, wrap_scalar=false)`: `size`, `stride`,
/// `roll`): a 0-d tensor has no dim at all, and any `dim` is PyTorch's
/// "Dimension specified as ... but tensor has no dimensions".
pub fn normalize_dim_strict(op: &'static str, dim: i64, ndim: usize) -> Result<usize> {
    if ndim == 0 {
        return Err(no_dims(op, dim));
    }
    normalize_dim(op, dim, ndim)
}

/// PyTorch's error for a dim of a 0-d tensor where it wraps none.
pub fn no_dims(op: &'static str, dim: i64) -> Error {
    Error::invalid(op, format!("Dimension specified as {dim} but tensor has no dimensions"))
}

/// Like [`normalize_dim`] for a position where a new dim is inserted
/// (`unsqueeze`, `stack`): valid range is `[-ndim-1, ndim]`.
pub fn normalize_insert_dim(op: &'static str, dim: i64, ndim: usize) -> Result<usize> {
    normalize_dim(op, dim, ndim + 1)
}

/// Normalises a list of dims and rejects repeats.
pub fn normalize_dims(op: &'static str, dims: &[i64], ndim: usize) -> Result<Dims> {
    let mut out = Dims::new();
    for &d in dims {
        let nd = normalize_dim(op, d, ndim)?;
        if out.contains(&nd) {
            return Err(Error::invalid(
                op,
                format!("dim {nd} appears multiple times in the list of dims"),
            ));
        }
        out.push(nd);
    }
    Ok(out)
}

/// The broadcast shape of two shapes (NumPy / PyTorch rules).
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Dims> {
    let n = a.len().max(b.len());
    let mut out: Dims = smallvec::smallvec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::shape(
                op,
                a,
                b,
                format!(
                    "the size of tensor a ({da}) must match the size of tensor b ({db}) at non-singleton dimension {i}"
                ),
            ));
        };
    }
    Ok(out)
}

/// Resolves a shape with at most one `-1` against `numel` (as `view`/`reshape`).
pub fn infer_shape(op: &'static str, shape: &[i64], numel: usize) -> Result<Dims> {
    let mut out = Dims::with_capacity(shape.len());
    let mut infer_at = None;
    let mut known = 1usize;
    for (i, &s) in shape.iter().enumerate() {
        if s == -1 {
            if infer_at.is_some() {
                return Err(Error::invalid(op, "only one dimension can be inferred"));
            }
            infer_at = Some(i);
            out.push(1);
        } else if s < 0 {
            return Err(Error::invalid(
                op,
                format!("invalid shape dimension {s} at index {i} of shape {shape:?}"),
            ));
        } else {
            known = known.saturating_mul(s as usize);
            out.push(s as usize);
        }
    }
    let bad = || Error::invalid(op, format!("shape '{shape:?}' is invalid for input of size {numel}"));
    match infer_at {
        Some(i) => {
            if known == 0 || !numel.is_multiple_of(known) {
                return Err(bad());
            }
            out[i] = numel / known;
        }
        None if known != numel => return Err(bad()),
        None => {}
    }
    Ok(out)
}

/// PyTorch's `computeStride`: strides that let a tensor of `old_shape` and
/// `old_strides` be viewed as `new_shape` without copying, or `None` when
/// some new dim would span two non-contiguous chunks.
pub fn view_strides(old_shape: &[usize], old_strides: &[usize], new_shape: &[usize]) -> Option<Dims> {
    if old_shape.is_empty() {
        return Some(smallvec::smallvec![1; new_shape.len()]);
    }
    let n = numel(old_shape);
    if n == 0 && old_shape == new_shape {
        return Some(old_strides.into());
    }
    let mut new_strides: Dims = smallvec::smallvec![0; new_shape.len()];
    if n == 0 {
        for d in (0..new_shape.len()).rev() {
            new_strides[d] = if d + 1 == new_shape.len() {
                1
            } else {
                new_shape[d + 1].max(1) * new_strides[d + 1]
            };
        }
        return Some(new_strides);
    }
    let mut view_d = new_shape.len() as isize - 1;
    let mut chunk_base_stride = *old_strides.last().unwrap();
    let mut tensor_numel = 1usize;
    let mut view_numel = 1usize;
    for tensor_d in (0..old_shape.len()).rev() {
        tensor_numel *= old_shape[tensor_d];
        let chunk_ends = tensor_d == 0
            || (old_shape[tensor_d - 1] != 1 && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
        if chunk_ends {
            while view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d as usize] == 1) {
                new_strides[view_d as usize] = view_numel * chunk_base_stride;
                view_numel *= new_shape[view_d as usize];
                view_d -= 1;
            }
            if view_numel != tensor_numel {
                return None;
            }
            if tensor_d > 0 {
                chunk_base_stride = old_strides[tensor_d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    if view_d != -1 {
        return None;
    }
    Some(new_strides)
}

impl Clone for Layout {
    /// A copy (the dims copied as slices, not element by element).
    fn clone(&self) -> Self {
        Layout {
            shape: dims_of(&self.shape),
            strides: dims_of(&self.strides),
            offset: self.offset,
        }
    }
}

impl Layout {
    /// A contiguous row-major layout of `shape` starting at offset 0.
    pub fn contiguous(shape: &[usize]) -> Self {
        Layout {
            shape: dims_of(shape),
            strides: contiguous_strides(shape),
            offset: 0,
        }
    }

    /// Makes this the row-major layout of `shape` (offset 0), rewriting the
    /// lists in place (no new layout built and moved: this runs for nearly
    /// every op output); returns the number of elements.
    pub(crate) fn set_contiguous(&mut self, shape: &[usize]) -> usize {
        let n = shape.len();
        self.shape.clear();
        self.strides.clear();
        for &s in shape {
            self.shape.push(s);
            self.strides.push(0);
        }
        let mut acc = 1usize;
        for d in (0..n).rev() {
            self.strides[d] = acc;
            acc = acc.saturating_mul(shape[d].max(1));
        }
        self.offset = 0;
        numel(shape)
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    /// True when elements are laid out row-major without gaps (size-1 dims
    /// may have any stride, as in PyTorch).
    pub fn is_contiguous(&self) -> bool {
        self.numel() == 0 || is_row_major(&self.shape, &self.strides)
    }

    /// True when the elements occupy exactly `numel` consecutive storage
    /// slots in some order of the dims (a permuted contiguous tensor).
    pub fn is_non_overlapping_and_dense(&self) -> bool {
        if self.is_contiguous() {
            return true;
        }
        let mut dims: SmallVec<[usize; 6]> = (0..self.ndim()).collect();
        dims.sort_by_key(|&d| (self.strides[d], self.shape[d]));
        let mut expected = 1usize;
        for &d in &dims {
            let s = self.shape[d];
            if s == 1 {
                continue;
            }
            if self.strides[d] != expected {
                return false;
            }
            expected = expected.wrapping_mul(s);
        }
        true
    }

    /// The strides of a copy in PyTorch's `preserve_format` (`empty_like`,
    /// `clone`, `.to(dtype)`): `self`'s own strides, verbatim, when the
    /// layout is non-overlapping and dense (size-0 and size-1 dims with
    /// any stride included); otherwise PyTorch's `infer_dense_strides`,
    /// which orders the dims by stride. `None` when that is the contiguous
    /// layout.
    pub fn preserve_format_strides(&self) -> Option<Dims> {
        let strides: Dims = if self.numel() == 0 || self.is_non_overlapping_and_dense() {
            self.strides.clone()
        } else {
            infer_dense_strides(&self.shape, &self.strides)
        };
        (strides[..] != contiguous_strides(&self.shape)[..]).then_some(strides)
    }

    /// One past the largest storage index this layout touches (its span from 0).
    pub fn storage_end(&self) -> usize {
        self.checked_storage_end().unwrap_or(usize::MAX)
    }

    /// [`Layout::storage_end`], or `None` when it overflows `usize`.
    pub fn checked_storage_end(&self) -> Option<usize> {
        if self.numel() == 0 {
            return Some(self.offset);
        }
        let mut end = self.offset.checked_add(1)?;
        for (&s, &st) in self.shape.iter().zip(&self.strides) {
            end = end.checked_add((s - 1).checked_mul(st)?)?;
        }
        Some(end)
    }

    /// Whether two elements of this layout share a storage slot in an
    /// obvious way (a dim of size > 1 with stride 0, as after `expand`); a
    /// layout without elements has none (as PyTorch's `has_internal_overlap`).
    pub fn has_internal_overlap(&self) -> bool {
        !self.shape.contains(&0) && self.shape.iter().zip(&self.strides).any(|(&s, &st)| s > 1 && st == 0)
    }

    /// Whether any two elements of this layout share a storage slot, exactly
    /// (unlike [`Layout::has_internal_overlap`]): stride tests settle the
    /// common layouts, the rest are enumerated.
    pub(crate) fn has_overlapping_elements(&self) -> bool {
        if !self.may_have_overlapping_elements() {
            return false;
        }
        if self.has_internal_overlap() {
            return true;
        }
        let mut slots = vec![0usize];
        for (s, n) in self.sorted_strides() {
            slots = slots.iter().flat_map(|&a| (0..n).map(move |i| a + i * s)).collect();
        }
        slots.sort_unstable();
        slots.windows(2).any(|w| w[0] == w[1])
    }

    /// Whether two elements of this layout may share a storage slot, from
    /// the strides alone (no allocation): false when each stride, smallest
    /// first, steps beyond the reach of the smaller ones (every layout made
    /// by views of a contiguous tensor without `expand` or `as_strided`);
    /// true otherwise, also for some layouts without overlap.
    pub(crate) fn may_have_overlapping_elements(&self) -> bool {
        if self.shape.contains(&0) {
            return false;
        }
        let mut reach = 0usize;
        !self.sorted_strides().into_iter().all(|(s, n)| {
            let beyond = s > reach;
            reach += (n - 1) * s;
            beyond
        })
    }

    /// `(stride, size)` of the dims of more than one element, by stride.
    fn sorted_strides(&self) -> SmallVec<[(usize, usize); DIMS_INLINE]> {
        let mut dims: SmallVec<[(usize, usize); DIMS_INLINE]> = self
            .strides
            .iter()
            .zip(&self.shape)
            .filter(|&(_, &n)| n > 1)
            .map(|(&s, &n)| (s, n))
            .collect();
        dims.sort_unstable();
        dims
    }

    /// Reorders the dims; `perm` must be a permutation of `0..ndim`.
    pub fn permute(&self, op: &'static str, perm: &[i64]) -> Result<Layout> {
        let nd = self.ndim();
        if perm.len() != nd {
            return Err(Error::invalid(
                op,
                format!(
                    "number of dimensions in the tensor input does not match the length of the desired ordering \
                     of dimensions i.e. input.dim() = {nd} is not equal to len(dims) = {}",
                    perm.len()
                ),
            ));
        }
        let perm = normalize_dims(op, perm, nd)?;
        Ok(Layout {
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        })
    }

    /// Swaps two dims.
    pub fn transpose(&self, op: &'static str, d0: i64, d1: i64) -> Result<Layout> {
        let nd = self.ndim();
        let a = normalize_dim(op, d0, nd)?;
        let b = normalize_dim(op, d1, nd)?;
        let mut l = self.clone();
        if nd > 0 {
            l.shape.swap(a, b);
            l.strides.swap(a, b);
        }
        Ok(l)
    }

    /// Elements `start, start+step, ...` below `end` of one dim; `start`/`end`
    /// may be negative (counted from the end) and are clamped like Python slices.
    pub fn slice(&self, op: &'static str, dim: i64, start: Option<i64>, end: Option<i64>, step: i64) -> Result<Layout> {
        let d = normalize_dim(op, dim, self.ndim())?;
        if self.ndim() == 0 {
            return Err(Error::invalid(op, "cannot slice a 0-d tensor"));
        }
        if step <= 0 {
            return Err(Error::invalid(op, format!("slice step must be positive, got {step}")));
        }
        let size = self.shape[d] as i64;
        let clamp = |v: i64| -> i64 {
            let v = if v < 0 { v + size } else { v };
            v.clamp(0, size)
        };
        let s = start.map_or(0, clamp);
        let e = end.map_or(size, clamp).max(s);
        let len = if e > s { (e - s - 1) / step + 1 } else { 0 };
        let mut l = self.clone();
        if len > 0 {
            l.offset += s as usize * l.strides[d];
        }
        l.shape[d] = len as usize;
        l.strides[d] *= step as usize;
        Ok(l)
    }

    /// `length` elements of one dim starting at `start` (which may be negative).
    pub fn narrow(&self, op: &'static str, dim: i64, start: i64, length: usize) -> Result<Layout> {
        if self.ndim() == 0 {
            return Err(Error::invalid(op, "narrow() cannot be applied to a 0-dim tensor."));
        }
        let d = normalize_dim(op, dim, self.ndim())?;
        let size = self.shape[d] as i64;
        let s = if start < 0 { start + size } else { start };
        if s < 0 || s > size {
            return Err(Error::IndexOutOfRange {
                op,
                index: start,
                dim: d,
                size: size as usize,
            });
        }
        if s + length as i64 > size {
            return Err(Error::invalid(
                op,
                format!("start ({start}) + length ({length}) exceeds dimension size ({size})"),
            ));
        }
        let mut l = self.clone();
        l.offset += s as usize * l.strides[d];
        l.shape[d] = length;
        Ok(l)
    }

    /// The `offset`-th diagonal of dims `dim1` and `dim2` as a new last dim
    /// (`torch.diagonal`): the two dims are removed. Errors when the dims
    /// coincide or are out of range.
    pub fn diagonal(&self, op: &'static str, offset: i64, dim1: i64, dim2: i64) -> Result<Layout> {
        let nd = self.ndim();
        let (d1, d2) = (normalize_dim(op, dim1, nd)?, normalize_dim(op, dim2, nd)?);
        if d1 == d2 {
            return Err(Error::invalid(
                op,
                format!("diagonal dimensions cannot be identical {dim1}, {dim2}"),
            ));
        }
        let (n1, n2) = (self.shape[d1] as i64, self.shape[d2] as i64);
        let (len, start) = if offset >= 0 {
            ((n1).min(n2 - offset).max(0), offset as usize * self.strides[d2])
        } else {
            ((n1 + offset).min(n2).max(0), (-offset) as usize * self.strides[d1])
        };
        let mut l = self.clone();
        // An empty diagonal keeps the storage offset (it reads nothing).
        if len > 0 {
            l.offset += start;
        }
        let step = self.strides[d1] + self.strides[d2];
        let (hi, lo) = (d1.max(d2), d1.min(d2));
        l.shape.remove(hi);
        l.strides.remove(hi);
        l.shape.remove(lo);
        l.strides.remove(lo);
        l.shape.push(len as usize);
        l.strides.push(step);
        Ok(l)
    }

    /// Windows of `size` elements every `step` along `dim` (`Tensor.unfold`):
    /// `dim` becomes the window count and a last dim of `size` is added.
    pub fn unfold(&self, op: &'static str, dim: i64, size: usize, step: usize) -> Result<Layout> {
        let nd = self.ndim();
        // A 0-d tensor takes dim 0 or -1, as PyTorch's maybe_wrap_dim.
        let d = normalize_dim(op, dim, nd)?;
        let n = if nd == 0 { 1 } else { self.shape[d] };
        if size > n {
            return Err(Error::invalid(
                op,
                format!("maximum size for tensor at dimension {d} is {n} but size is {size}"),
            ));
        }
        if step == 0 {
            return Err(Error::invalid(op, format!("step is {step} but must be > 0")));
        }
        let mut l = self.clone();
        if nd == 0 {
            l.shape.push(size);
            l.strides.push(1);
            return Ok(l);
        }
        let st = self.strides[d];
        l.shape[d] = (n - size) / step + 1;
        l.strides[d] = st * step;
        l.shape.push(size);
        l.strides.push(st);
        Ok(l)
    }

    /// Removes dim `d` by fixing its index (`x[..., i, ...]`).
    pub fn select(&self, op: &'static str, dim: i64, index: i64) -> Result<Layout> {
        if self.ndim() == 0 {
            return Err(Error::invalid(op, "select() cannot be applied to a 0-dim tensor."));
        }
        let d = normalize_dim(op, dim, self.ndim())?;
        let size = self.shape[d] as i64;
        let i = if index < 0 { index + size } else { index };
        if i < 0 || i >= size {
            return Err(Error::IndexOutOfRange {
                op,
                index,
                dim: d,
                size: size as usize,
            });
        }
        let mut l = self.clone();
        l.offset += i as usize * l.strides[d];
        l.shape.remove(d);
        l.strides.remove(d);
        Ok(l)
    }

    /// Broadcasts to `shape` by giving new and size-1 dims stride 0;
    /// `-1` keeps a dim's size.
    pub fn expand(&self, op: &'static str, shape: &[i64]) -> Result<Layout> {
        let nd = self.ndim();
        if shape.len() < nd {
            return Err(Error::invalid(
                op,
                format!(
                    "the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({nd})",
                    shape.len()
                ),
            ));
        }
        let lead = shape.len() - nd;
        let mut out_shape = Dims::with_capacity(shape.len());
        let mut out_strides = Dims::with_capacity(shape.len());
        for (i, &s) in shape.iter().enumerate() {
            if i < lead {
                if s < 0 {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "the expanded size of the tensor ({s}) isn't allowed in a leading, non-existing dimension {i}"
                        ),
                    ));
                }
                out_shape.push(s as usize);
                out_strides.push(0);
                continue;
            }
            let d = i - lead;
            let cur = self.shape[d];
            if s == -1 || s as usize == cur {
                out_shape.push(cur);
                out_strides.push(self.strides[d]);
            } else if cur == 1 && s >= 0 {
                out_shape.push(s as usize);
                out_strides.push(0);
            } else {
                return Err(Error::invalid(
                    op,
                    format!(
                        "the expanded size of the tensor ({s}) must match the existing size ({cur}) at non-singleton dimension {i}. \
                         Target sizes: {shape:?}. Tensor sizes: {:?}",
                        self.shape.as_slice()
                    ),
                ));
            }
        }
        Ok(Layout {
            shape: out_shape,
            strides: out_strides,
            offset: self.offset,
        })
    }

    /// Strides of this layout broadcast to `shape` (which must be a valid
    /// broadcast target): new leading dims and expanded size-1 dims get stride 0.
    pub fn broadcast_strides(&self, shape: &[usize]) -> Dims {
        let lead = shape.len() - self.ndim();
        let mut st = zero_dims(shape.len());
        for d in 0..self.ndim() {
            st[lead + d] = if self.shape[d] == 1 && shape[lead + d] != 1 {
                0
            } else {
                self.strides[d]
            };
        }
        st
    }

    /// Inserts a size-1 dim at `dim`.
    pub fn unsqueeze(&self, op: &'static str, dim: i64) -> Result<Layout> {
        let d = normalize_insert_dim(op, dim, self.ndim())?;
        let mut l = self.clone();
        let stride = if d < self.ndim() {
            self.strides[d] * self.shape[d]
        } else {
            1
        };
        l.shape.insert(d, 1);
        l.strides.insert(d, stride);
        Ok(l)
    }

    /// Removes the given size-1 dims (dims of other sizes are left alone, as
    /// in PyTorch); `None` removes every size-1 dim.
    pub fn squeeze(&self, op: &'static str, dims: Option<&[i64]>) -> Result<Layout> {
        let nd = self.ndim();
        let remove: Dims = match dims {
            None => (0..nd).filter(|&d| self.shape[d] == 1).collect(),
            Some(ds) => normalize_dims(op, ds, nd)?
                .into_iter()
                .filter(|&d| nd > 0 && self.shape[d] == 1)
                .collect(),
        };
        let mut l = Layout {
            shape: Dims::new(),
            strides: Dims::new(),
            offset: self.offset,
        };
        for d in 0..nd {
            if !remove.contains(&d) {
                l.shape.push(self.shape[d]);
                l.strides.push(self.strides[d]);
            }
        }
        Ok(l)
    }

    /// The same elements seen with `shape`, without copying; an error when the
    /// strides make that impossible (use reshape).
    pub fn view(&self, op: &'static str, shape: &[i64]) -> Result<Layout> {
        let new_shape = infer_shape(op, shape, self.numel())?;
        match view_strides(&self.shape, &self.strides, &new_shape) {
            Some(strides) => Ok(Layout {
                shape: new_shape,
                strides,
                offset: self.offset,
            }),
            None => Err(Error::InvalidView {
                op,
                shape: self.shape.to_vec(),
                strides: self.strides.to_vec(),
            }),
        }
    }

    /// Merges adjacent dims that can be walked as one (`stride[d] == shape[d+1]*stride[d+1]`
    /// for every given layout) and drops size-1 dims. Returns the merged
    /// shape and, for each layout, its merged strides. All layouts must have `shape`.
    pub fn coalesce(shape: &[usize], strides: &[&[usize]]) -> (Dims, SmallVec<[Dims; 4]>) {
        let mut out_shape = Dims::new();
        let mut out_strides: SmallVec<[Dims; 4]> = strides.iter().map(|_| Dims::new()).collect();
        for d in 0..shape.len() {
            let s = shape[d];
            if s == 1 {
                continue;
            }
            if let Some(&last) = out_shape.last() {
                let mergeable = strides
                    .iter()
                    .zip(out_strides.iter())
                    .all(|(st, os)| *os.last().unwrap() == st[d] * s);
                if mergeable {
                    *out_shape.last_mut().unwrap() = last * s;
                    for (st, os) in strides.iter().zip(out_strides.iter_mut()) {
                        *os.last_mut().unwrap() = st[d];
                    }
                    continue;
                }
            }
            out_shape.push(s);
            for (st, os) in strides.iter().zip(out_strides.iter_mut()) {
                os.push(st[d]);
            }
        }
        (out_shape, out_strides)
    }
}

/// PyTorch's `infer_dense_strides`: dense strides that follow the order
/// of `strides` (TensorIterator's permutation: an insertion sort from the
/// last dim, where a 0 stride compares equal to anything and equal strides
/// put the smaller dim inside); size-0 and size-1 dims take the current
/// stride without advancing it.
pub fn infer_dense_strides(sizes: &[usize], strides: &[usize]) -> Dims {
    let n = sizes.len();
    if n == 0 {
        return Dims::new();
    }
    if n == 1 {
        return Dims::from_slice(&[1]);
    }
    let should_swap = |d0: usize, d1: usize| -> i32 {
        let (s0, s1) = (strides[d0], strides[d1]);
        if s0 == 0 || s1 == 0 {
            0
        } else if s0 < s1 {
            -1
        } else if s0 > s1 || sizes[d0] > sizes[d1] {
            1
        } else {
            0
        }
    };
    let mut perm: SmallVec<[usize; 6]> = (0..n).rev().collect();
    for i in 1..n {
        let mut dim1 = i;
        for dim0 in (0..i).rev() {
            match should_swap(perm[dim0], perm[dim1]) {
                c if c > 0 => {
                    perm.swap(dim0, dim1);
                    dim1 = dim0;
                }
                c if c < 0 => break,
                _ => {}
            }
        }
    }
    let mut out: Dims = smallvec::smallvec![0; n];
    let mut curr = 1usize;
    for &idx in &perm {
        out[idx] = curr;
        if sizes[idx] > 1 {
            curr = curr.saturating_mul(sizes[idx]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_rule_matches_pytorch() {
        // a transposed 2x3 cannot be flattened
        assert!(view_strides(&[3, 2], &[1, 3], &[6]).is_none());
        // splitting a contiguous dim is fine
        assert_eq!(view_strides(&[6], &[1], &[2, 3]).unwrap().as_slice(), &[3, 1]);
        // a narrowed row keeps its stride
        assert_eq!(
            view_strides(&[2, 3], &[4, 1], &[2, 3, 1]).unwrap().as_slice(),
            &[4, 1, 1]
        );
        // merging dims 1,2 of a permuted tensor whose inner dims are contiguous
        assert_eq!(
            view_strides(&[2, 3, 4], &[1, 8, 2], &[2, 12]).unwrap().as_slice(),
            &[1, 2]
        );
    }

    /// The stride test's contract: no layout made by views of a contiguous
    /// tensor (transpose, permute, narrow, step slices) may overlap, and a
    /// dim of stride 0 or strides that reach into each other may.
    #[test]
    fn stride_test_of_overlap() {
        let l = |shape: &[usize], strides: &[usize]| Layout {
            shape: shape.into(),
            strides: strides.into(),
            offset: 0,
        };
        for (shape, strides) in [
            (&[2usize, 3, 4][..], &[12usize, 4, 1][..]),
            (&[4, 3, 2], &[1, 4, 12]),
            (&[3, 4, 2], &[4, 1, 12]),
            (&[2, 2, 3], &[12, 4, 1]),
            (&[3, 2], &[8, 2]),
            (&[5, 1, 3], &[3, 100, 1]),
        ] {
            assert!(
                !l(shape, strides).may_have_overlapping_elements(),
                "{shape:?} {strides:?}"
            );
            assert!(!l(shape, strides).has_overlapping_elements(), "{shape:?} {strides:?}");
        }
        for (shape, strides, exact) in [
            (&[3usize, 4][..], &[0usize, 1][..], true),
            (&[3, 4], &[2, 1], true),
            (&[2, 3], &[3, 2], false),
        ] {
            assert!(
                l(shape, strides).may_have_overlapping_elements(),
                "{shape:?} {strides:?}"
            );
            assert_eq!(
                l(shape, strides).has_overlapping_elements(),
                exact,
                "{shape:?} {strides:?}"
            );
        }
        assert!(!l(&[3, 0], &[0, 1]).may_have_overlapping_elements());
    }

    #[test]
    fn broadcasting() {
        assert_eq!(
            broadcast_shapes("add", &[5, 1, 2], &[3, 1]).unwrap().as_slice(),
            &[5, 3, 2]
        );
        let e = broadcast_shapes("add", &[2, 3], &[4]).unwrap_err();
        assert!(e.to_string().contains("[2, 3] and [4]"));
    }

    #[test]
    fn slicing_and_contiguity() {
        let l = Layout::contiguous(&[7, 6, 4]);
        let s = l.slice("slice", 0, Some(1), None, 2).unwrap();
        assert_eq!(s.shape.as_slice(), &[3, 6, 4]);
        assert_eq!(s.offset, 24);
        assert!(!s.is_contiguous());
        let s = l.slice("slice", 0, Some(-3), Some(-1), 1).unwrap();
        assert_eq!(s.shape[0], 2);
        let t = Layout::contiguous(&[3, 4]).transpose("t", 0, 1).unwrap();
        assert!(!t.is_contiguous());
        assert!(t.is_non_overlapping_and_dense());
        let (shape, st) = Layout::coalesce(&[2, 3, 4], &[&[12, 4, 1]]);
        assert_eq!(shape.as_slice(), &[24]);
        assert_eq!(st[0].as_slice(), &[1]);
    }

    #[test]
    fn infer_shapes() {
        assert_eq!(infer_shape("view", &[9, -1, 1], 18).unwrap().as_slice(), &[9, 2, 1]);
        assert!(infer_shape("view", &[-1, -1], 18).is_err());
        assert!(infer_shape("view", &[5, -1], 18).is_err());
    }
}
