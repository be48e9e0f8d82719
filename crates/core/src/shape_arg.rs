//! The one argument type for sizes and dims: [`IntoShape`].

use smallvec::SmallVec;

use crate::layout::Dims;
use crate::{Error, Result};

/// The sizes or dims an [`IntoShape`] argument holds, as signed integers.
pub type ShapeVec = SmallVec<[i64; 6]>;

/// An integer usable as one size or dim of an [`IntoShape`] argument: every
/// primitive Rust integer type.
pub trait ShapeInt: Copy {
    /// The value as `i64` (unsigned values above `i64::MAX` saturate).
    fn to_i64(self) -> i64;
}

macro_rules! shape_int {
    ($($t:ty),*) => {$(
        impl ShapeInt for $t {
            #[inline]
            fn to_i64(self) -> i64 {
                i64::try_from(self).unwrap_or(i64::MAX)
            }
        }

        impl IntoShape for $t {
            #[inline]
            fn into_shape(self) -> ShapeVec {
                let mut v = ShapeVec::new();
                v.push(self.to_i64());
                v
            }
        }
    )*};
}

/// Sizes or dims, in any of the forms PyTorch accepts.
///
/// PyTorch takes an `IntArrayRef` (or a single int) wherever a call wants
/// sizes or dims: `torch.zeros(2, 3)`, `x.view(-1, 4)`, `x.sum((0, 1))`,
/// `x.permute([1, 0])`, `x.reshape(y.shape)`. Every such ferrotorch call takes
/// `impl IntoShape`, which a single integer, `()`, a tuple, an array, a
/// slice, a `Vec` (of any Rust integer type) and `x.shape()` all are:
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::zeros((2, 3))?;                // a tuple
/// let y = Tensor::zeros([2, 3])?;                // an array
/// let z = Tensor::zeros(x.shape())?;             // another tensor's shape
/// let w = Tensor::zeros(vec![2usize, 3])?;       // a Vec
/// assert_eq!(y.shape(), z.shape());
/// assert_eq!(w.reshape(-1)?.shape(), &[6]);      // one size, inferred
/// assert_eq!(x.reshape((3, -1))?.shape(), &[3, 2]);
/// assert_eq!(x.permute([1, 0])?.shape(), &[3, 2]);
/// assert_eq!(x.sum_dim(-1, false)?.shape(), &[2]);  // a single dim
/// assert_eq!(Tensor::zeros(())?.ndim(), 0);      // a 0-d tensor
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
///
/// Sizes are signed, as PyTorch's are: `-1` asks `view`/`reshape` to infer
/// a size and `expand` to keep one, and a negative size given to a
/// creation function is an error naming it. Dims count from the end when
/// negative. A `usize` above `i64::MAX` becomes `i64::MAX`, which no
/// allocation can satisfy (an overflow error, not a silent wrap).
///
/// An empty slice literal `&[]` has no element type for the compiler to
/// pick; write `()` for an empty shape, as Python's `torch.zeros(())`.
pub trait IntoShape {
    /// The sizes or dims, in order.
    fn into_shape(self) -> ShapeVec;
}

shape_int!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl IntoShape for () {
    #[inline]
    fn into_shape(self) -> ShapeVec {
        ShapeVec::new()
    }
}

impl<T: ShapeInt> IntoShape for &[T] {
    #[inline]
    fn into_shape(self) -> ShapeVec {
        self.iter().map(|&s| s.to_i64()).collect()
    }
}

impl<T: ShapeInt> IntoShape for &mut [T] {
    #[inline]
    fn into_shape(self) -> ShapeVec {
        (&*self).into_shape()
    }
}

impl<T: ShapeInt, const N: usize> IntoShape for [T; N] {
    #[inline]
    fn into_shape(self) -> ShapeVec {
        self.as_slice().into_shape()
    }
}

impl<T: ShapeInt, const N: usize> IntoShape for &[T; N] {
    #[inline]
    fn into_shape(self) -> ShapeVec {
        self.as_slice().into_shape()
    }
}

impl<T: ShapeInt> IntoShape for Vec<T> {
    #[inline]
    fn into_shape(self) -> ShapeVec {
        self.as_slice().into_shape()
    }
}

impl<T: ShapeInt> IntoShape for &Vec<T> {
    #[inline]
    fn into_shape(self) -> ShapeVec {
        self.as_slice().into_shape()
    }
}

impl<T: ShapeInt, const N: usize> IntoShape for SmallVec<[T; N]>
where
    [T; N]: smallvec::Array<Item = T>,
{
    #[inline]
    fn into_shape(self) -> ShapeVec {
        self.as_slice().into_shape()
    }
}

impl<T: ShapeInt, const N: usize> IntoShape for &SmallVec<[T; N]>
where
    [T; N]: smallvec::Array<Item = T>,
{
    #[inline]
    fn into_shape(self) -> ShapeVec {
        self.as_slice().into_shape()
    }
}

macro_rules! shape_tuple {
    ($($name:ident),+) => {
        impl<$($name: ShapeInt),+> IntoShape for ($($name,)+) {
            #[inline]
            #[allow(non_snake_case)]
            fn into_shape(self) -> ShapeVec {
                let ($($name,)+) = self;
                let mut v = ShapeVec::new();
                $(v.push($name.to_i64());)+
                v
            }
        }
    };
}

shape_tuple!(A);
shape_tuple!(A, B);
shape_tuple!(A, B, C);
shape_tuple!(A, B, C, D);
shape_tuple!(A, B, C, D, E);
shape_tuple!(A, B, C, D, E, F);
shape_tuple!(A, B, C, D, E, F, G);
shape_tuple!(A, B, C, D, E, F, G, H);

/// The sizes of a new tensor: every entry must be non-negative (PyTorch's
/// errors otherwise: "Trying to create tensor with negative dimension",
/// and its own message for `zeros`).
pub(crate) fn new_sizes(op: &'static str, shape: &[i64]) -> Result<Dims> {
    if let Some(&s) = shape.iter().find(|&&s| s < 0) {
        let detail = if op == "zeros" {
            "zeros: Dimension size must be non-negative.".to_string()
        } else {
            format!("Trying to create tensor with negative dimension {s}: {shape:?}")
        };
        return Err(Error::invalid(op, detail));
    }
    Ok(shape.iter().map(|&s| s as usize).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: impl IntoShape) -> Vec<i64> {
        s.into_shape().to_vec()
    }

    #[test]
    fn every_form_gives_the_same_entries() {
        let want = vec![2i64, -1];
        assert_eq!(v((2, -1)), want);
        assert_eq!(v([2, -1]), want);
        assert_eq!(v([2, -1]), want);
        assert_eq!(v(&[2i64, -1][..]), want);
        assert_eq!(v(vec![2i32, -1]), want);
        assert_eq!(v(vec![2i8, -1]), want);
        assert_eq!(v((2usize, -1i64)), want);
        assert_eq!(v(5u8), vec![5]);
        assert_eq!(v(()), Vec::<i64>::new());
        let d: Dims = [4usize, 5].into_iter().collect();
        assert_eq!(v(&d), vec![4, 5]);
        assert_eq!(v(d), vec![4, 5]);
    }

    #[test]
    fn huge_unsigned_sizes_saturate() {
        assert_eq!(v([usize::MAX]), vec![i64::MAX]);
        assert_eq!(v(u64::MAX), vec![i64::MAX]);
    }

    #[test]
    fn negative_sizes_are_refused_for_new_tensors() {
        let e = new_sizes("ones", &[2, -3]).unwrap_err().to_string();
        assert!(
            e.contains("ones") && e.contains("negative dimension -3: [2, -3]"),
            "{e}"
        );
        let e = new_sizes("zeros", &[2, -3]).unwrap_err().to_string();
        assert!(e.contains("Dimension size must be non-negative."), "{e}");
        assert_eq!(new_sizes("zeros", &[2, 0]).unwrap().as_slice(), &[2, 0]);
    }
}
