//! Collation: how a [`DataLoader`](crate::DataLoader) turns a list of
//! items into a batch (`collate_fn`, PyTorch's `default_collate`).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

use ferrotorch_core::Tensor;

use crate::error::{DataError, Result};

/// Items that [`DefaultCollate`] can batch (PyTorch's `default_collate`
/// rules, by type):
///
/// - a [`Tensor`]: the items stacked along a new dim 0 (an error when
///   their shapes differ);
/// - a number: a 1-d tensor of the batch, `i64`/`usize` as int64, `f64` as
///   float64 (Python's `int` and `float`), `f32`, `i32`, `u8` and `bool`
///   in their own dtype (as NumPy scalars);
/// - a tuple (up to 8 fields) or a `Vec`: collated field by field (for a
///   `Vec`, every item must have the same length);
/// - a `HashMap` or `BTreeMap`: collated key by key (the keys of the first
///   item; an error when another item lacks one);
/// - a `String`: the batch's strings as a `Vec` (PyTorch keeps a list).
///
/// [`convert`](Collate::convert) is what the loader does to each item when
/// batching is off (`batch_size(None)`, PyTorch's `default_convert`): a
/// tensor stays as it is, a number becomes a 0-d tensor (PyTorch leaves a
/// Python number alone; here the item and batch types must agree).
pub trait Collate: Sized {
    /// The batch type.
    type Batch;

    /// Collates a non-empty batch of items.
    fn collate(items: Vec<Self>) -> Result<Self::Batch>;

    /// One item, unbatched.
    fn convert(self) -> Result<Self::Batch>;
}

impl Collate for Tensor {
    type Batch = Tensor;
    fn collate(items: Vec<Tensor>) -> Result<Tensor> {
        let refs: Vec<&Tensor> = items.iter().collect();
        Ok(Tensor::stack(&refs, 0)?)
    }
    fn convert(self) -> Result<Tensor> {
        Ok(self)
    }
}

macro_rules! collate_number {
    ($($t:ty => $as:ty),* $(,)?) => {$(
        impl Collate for $t {
            type Batch = Tensor;
            fn collate(items: Vec<$t>) -> Result<Tensor> {
                let v: Vec<$as> = items.into_iter().map(|x| x as $as).collect();
                Ok(Tensor::from_slice(&v))
            }
            fn convert(self) -> Result<Tensor> {
                Ok(Tensor::scalar(self as $as))
            }
        }
    )*};
}

collate_number!(i64 => i64, usize => i64, i32 => i32, u8 => u8, f64 => f64, f32 => f32);

impl Collate for bool {
    type Batch = Tensor;
    fn collate(items: Vec<bool>) -> Result<Tensor> {
        Ok(Tensor::from_slice(&items))
    }
    fn convert(self) -> Result<Tensor> {
        Ok(Tensor::scalar(self))
    }
}

impl Collate for String {
    type Batch = Vec<String>;
    fn collate(items: Vec<String>) -> Result<Vec<String>> {
        Ok(items)
    }
    fn convert(self) -> Result<Vec<String>> {
        Ok(vec![self])
    }
}

macro_rules! collate_tuple {
    ($($name:ident $idx:tt),+) => {
        impl<$($name: Collate),+> Collate for ($($name,)+) {
            type Batch = ($($name::Batch,)+);
            #[allow(non_snake_case)]
            fn collate(items: Vec<Self>) -> Result<Self::Batch> {
                $(let mut $name = Vec::with_capacity(items.len());)+
                for item in items {
                    $($name.push(item.$idx);)+
                }
                Ok(($($name::collate($name)?,)+))
            }
            fn convert(self) -> Result<Self::Batch> {
                Ok(($(self.$idx.convert()?,)+))
            }
        }
    };
}

collate_tuple!(A 0);
collate_tuple!(A 0, B 1);
collate_tuple!(A 0, B 1, C 2);
collate_tuple!(A 0, B 1, C 2, D 3);
collate_tuple!(A 0, B 1, C 2, D 3, E 4);
collate_tuple!(A 0, B 1, C 2, D 3, E 4, F 5);
collate_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
collate_tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

impl<T: Collate> Collate for Vec<T> {
    type Batch = Vec<T::Batch>;
    fn collate(items: Vec<Self>) -> Result<Self::Batch> {
        let width = items.first().map_or(0, Vec::len);
        if items.iter().any(|v| v.len() != width) {
            return Err(DataError::invalid(
                "default_collate",
                "each element in list of batch should be of equal size",
            ));
        }
        let mut columns: Vec<Vec<T>> = (0..width).map(|_| Vec::with_capacity(items.len())).collect();
        for item in items {
            for (c, x) in columns.iter_mut().zip(item) {
                c.push(x);
            }
        }
        columns.into_iter().map(T::collate).collect()
    }
    fn convert(self) -> Result<Self::Batch> {
        self.into_iter().map(T::convert).collect()
    }
}

macro_rules! collate_map {
    ($map:ident, $($bound:tt)+) => {
        impl<K: $($bound)+, V: Collate> Collate for $map<K, V> {
            type Batch = $map<K, V::Batch>;
            fn collate(items: Vec<Self>) -> Result<Self::Batch> {
                let keys: Vec<K> = items.first().map(|m| m.keys().cloned().collect()).unwrap_or_default();
                let mut columns: Vec<Vec<V>> = (0..keys.len()).map(|_| Vec::with_capacity(items.len())).collect();
                for (i, mut item) in items.into_iter().enumerate() {
                    for (k, c) in keys.iter().zip(columns.iter_mut()) {
                        let v = item.remove(k).ok_or_else(|| {
                            DataError::invalid(
                                "default_collate",
                                format!("item {i} of the batch lacks key {k:?} of the first item"),
                            )
                        })?;
                        c.push(v);
                    }
                }
                keys.into_iter().zip(columns).map(|(k, c)| Ok((k, V::collate(c)?))).collect()
            }
            fn convert(self) -> Result<Self::Batch> {
                self.into_iter().map(|(k, v)| Ok((k, v.convert()?))).collect()
            }
        }
    };
}

collate_map!(HashMap, Eq + Hash + Clone + std::fmt::Debug);
collate_map!(BTreeMap, Ord + Clone + std::fmt::Debug);

/// A collate function: turns a list of items into a batch (PyTorch's
/// `collate_fn`). Closures `Fn(Vec<T>) -> Result<B>` are collate
/// functions; [`DefaultCollate`] is the default.
pub trait CollateFn<T> {
    /// The batch type.
    type Output;

    /// Collates one batch of items (never empty).
    fn collate(&self, items: Vec<T>) -> Result<Self::Output>;

    /// One item when batching is off (`batch_size(None)`). PyTorch calls
    /// `collate_fn(item)` there; a closure here gets the one-item list
    /// `vec![item]`, as its argument type requires.
    fn convert(&self, item: T) -> Result<Self::Output> {
        self.collate(vec![item])
    }
}

/// PyTorch's `default_collate` (and, unbatched, `default_convert`) for
/// every item type that implements [`Collate`].
///
/// ```
/// use ferrotorch_core::{DType, Tensor};
/// use ferrotorch_data::{CollateFn, DefaultCollate};
/// let items = vec![(Tensor::zeros(3)?, 1i64), (Tensor::ones(3)?, 2i64)];
/// let (x, y) = DefaultCollate.collate(items)?;
/// assert_eq!((x.shape(), y.dtype()), (&[2usize, 3][..], DType::I64));
/// # Ok::<(), ferrotorch_data::DataError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultCollate;

impl<T: Collate> CollateFn<T> for DefaultCollate {
    type Output = T::Batch;
    fn collate(&self, items: Vec<T>) -> Result<T::Batch> {
        T::collate(items)
    }
    fn convert(&self, item: T) -> Result<T::Batch> {
        item.convert()
    }
}

impl<T, B, F: Fn(Vec<T>) -> Result<B>> CollateFn<T> for F {
    type Output = B;
    fn collate(&self, items: Vec<T>) -> Result<B> {
        self(items)
    }
}
