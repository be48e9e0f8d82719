//! Moving data between tensors and Rust values: `Tensor::new` from nested
//! arrays and Vecs, `to_vec`, `item`.

use crate::layout::Dims;
use crate::{Device, Element, Error, Result, Tensor};

/// Data a tensor can be built from: a number, or (nested) arrays, slices
/// and Vecs of numbers. Ragged nesting is an error.
pub trait TensorData {
    /// The element type.
    type Elem: Element;
    /// The shape of the data; `Err` with the offending sizes when ragged.
    fn shape(&self) -> Result<Dims>;
    /// Appends the elements in row-major order.
    fn flatten_into(&self, out: &mut Vec<Self::Elem>);
}

macro_rules! leaf {
    ($($t:ty),*) => {$(
        impl TensorData for $t {
            type Elem = $t;
            fn shape(&self) -> Result<Dims> {
                Ok(Dims::new())
            }
            fn flatten_into(&self, out: &mut Vec<$t>) {
                out.push(*self);
            }
        }
    )*};
}
leaf!(f32, f64, i32, i64, u8, bool, half::f16, half::bf16);

fn seq_shape<T: TensorData>(items: &[T]) -> Result<Dims> {
    let inner = match items.first() {
        Some(first) => first.shape()?,
        None => Dims::new(),
    };
    for it in items.iter().skip(1) {
        let s = it.shape()?;
        if s != inner {
            return Err(Error::shape("tensor", &inner, &s, "nested data is ragged"));
        }
    }
    let mut shape = Dims::new();
    shape.push(items.len());
    shape.extend_from_slice(&inner);
    Ok(shape)
}

impl<T: TensorData, const N: usize> TensorData for [T; N] {
    type Elem = T::Elem;
    fn shape(&self) -> Result<Dims> {
        seq_shape(self)
    }
    fn flatten_into(&self, out: &mut Vec<T::Elem>) {
        self.iter().for_each(|x| x.flatten_into(out));
    }
}

impl<T: TensorData> TensorData for [T] {
    type Elem = T::Elem;
    fn shape(&self) -> Result<Dims> {
        seq_shape(self)
    }
    fn flatten_into(&self, out: &mut Vec<T::Elem>) {
        self.iter().for_each(|x| x.flatten_into(out));
    }
}

impl<T: TensorData> TensorData for Vec<T> {
    type Elem = T::Elem;
    fn shape(&self) -> Result<Dims> {
        seq_shape(self)
    }
    fn flatten_into(&self, out: &mut Vec<T::Elem>) {
        self.iter().for_each(|x| x.flatten_into(out));
    }
}

impl<T: TensorData + ?Sized> TensorData for &T {
    type Elem = T::Elem;
    fn shape(&self) -> Result<Dims> {
        (**self).shape()
    }
    fn flatten_into(&self, out: &mut Vec<T::Elem>) {
        (**self).flatten_into(out)
    }
}

/// # Data in and out
///
/// From Rust values (`torch.tensor`) and back (`tolist`, `item`).
///
/// ```
/// use ferrotorch_core::Tensor;
/// let x = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]])?;  // torch.tensor([[1., 2.], [3., 4.]])
/// assert_eq!(x.to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0]);
/// assert_eq!(x.to_vec2::<f32>()?, [[1.0, 2.0], [3.0, 4.0]]);
/// assert_eq!(x.sum()?.item::<f32>()?, 10.0);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// A tensor from (nested) data, as `torch.tensor(data)`; the dtype is the
    /// element type's.
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// let t = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]])?;
    /// assert_eq!(t.shape(), &[2, 2]);
    /// assert!(Tensor::new(vec![vec![1i64, 2], vec![3]]).is_err()); // ragged
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn new<D: TensorData>(data: D) -> Result<Tensor> {
        let shape = data.shape()?;
        let n = crate::layout::checked_numel("tensor", &shape)?;
        let mut v = Vec::new();
        v.try_reserve_exact(n).map_err(|_| Error::OutOfMemory {
            op: "tensor",
            nbytes: n.saturating_mul(std::mem::size_of::<D::Elem>()),
            device: Device::Cpu,
        })?;
        data.flatten_into(&mut v);
        Tensor::from_elems(&v, shape)
    }

    /// The elements in row-major order, converted to `T` (as `to_dtype`
    /// would) and copied to the host.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.device() == Device::Meta {
            return Err(Error::NoData {
                op: "to_vec",
                device: Device::Meta,
            });
        }
        let t = self.to_dtype(T::DTYPE)?.to_device(Device::Cpu)?.contiguous()?;
        let n = t.numel();
        let guard = t.storage().read();
        // (a CPU storage without memory was released: release_cpu)
        let released = matches!(*guard, crate::backend::storage::Buffer::Meta);
        let buf = guard.as_cpu().ok_or(if released {
            Error::Released { op: "to_vec" }
        } else {
            Error::NoData {
                op: "to_vec",
                device: t.device(),
            }
        })?;
        let mut out = Vec::with_capacity(n);
        // SAFETY: the contiguous tensor's n elements of T start at its offset.
        unsafe {
            let src = (buf.as_ptr() as *const T).add(t.storage_offset());
            std::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), n);
            out.set_len(n);
        }
        Ok(out)
    }

    /// The single element of a one-element tensor, converted to `T`.
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(Error::invalid(
                "item",
                format!("a Tensor with {} elements cannot be converted to Scalar", self.numel()),
            ));
        }
        Ok(self.to_vec::<T>()?[0])
    }

    /// Rows of a 2-d tensor as nested Vecs.
    pub fn to_vec2<T: Element>(&self) -> Result<Vec<Vec<T>>> {
        if self.ndim() != 2 {
            return Err(Error::invalid(
                "to_vec2",
                format!("expected a 2-d tensor, got {}-d", self.ndim()),
            ));
        }
        let cols = self.shape()[1];
        let flat = self.to_vec::<T>()?;
        Ok(if cols == 0 {
            vec![Vec::new(); self.shape()[0]]
        } else {
            flat.chunks(cols).map(|c| c.to_vec()).collect()
        })
    }
}
