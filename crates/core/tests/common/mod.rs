//! Shared helpers of the property tests: a naive N-d reference array, an
//! independent model of PyTorch's dtype rules (conversions, `promote_types`,
//! `result_type`), exact tensor construction/readback, value generators and
//! comparisons.
//!
//! Nothing here calls a ferrotorch operator to compute an expected value:
//! tensors are only built from typed `Vec`s (`Tensor::from_vec`) and read
//! back in their own dtype (`to_vec::<T>` with `T` the tensor's own element
//! type, which performs no conversion).

#![allow(dead_code)]

use std::panic::{AssertUnwindSafe, catch_unwind};

use ferrotorch_core::half::{bf16, f16};
use ferrotorch_core::{DType, Tensor};
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// Scalar values
// ---------------------------------------------------------------------------

/// One element: integers (and bools, as 0/1) exactly, floats as f64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum V {
    /// An integer or bool element.
    I(i64),
    /// A floating-point element.
    F(f64),
}

impl V {
    pub fn f(self) -> f64 {
        match self {
            V::I(i) => i as f64,
            V::F(f) => f,
        }
    }

    pub fn i(self) -> i64 {
        match self {
            V::I(i) => i,
            V::F(f) => f as i64,
        }
    }

    pub fn nonzero(self) -> bool {
        match self {
            V::I(i) => i != 0,
            V::F(f) => f != 0.0,
        }
    }
}

/// Every dtype.
pub const DTYPES: [DType; 8] = [
    DType::Bool,
    DType::U8,
    DType::I32,
    DType::I64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
];

pub fn is_float(dt: DType) -> bool {
    matches!(dt, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

/// Machine epsilon of a float dtype (0 for exact types).
pub fn eps(dt: DType) -> f64 {
    match dt {
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        DType::F32 => 2f64.powi(-23),
        DType::F64 => 2f64.powi(-52),
        _ => 0.0,
    }
}

/// `static_cast` of a value to `dt`, as PyTorch's CPU kernels do it:
/// integers wrap, floats truncate toward zero into integers (as x86-64 does:
/// int32 saturates to its minimum, uint8 takes the int64 cast's low byte),
/// integers become f16/bf16 through float, anything nonzero is `true`.
pub fn cast(v: V, dt: DType) -> V {
    match dt {
        DType::Bool => V::I(v.nonzero() as i64),
        DType::U8 => V::I(int_of(v) as u8 as i64),
        DType::I32 => V::I(match v {
            // x86-64's cvttsd2si into 32 bits: NaN and out-of-range give i32::MIN.
            V::F(f) if f.is_nan() || f.trunc() < i32::MIN as f64 || f.trunc() > i32::MAX as f64 => i32::MIN as i64,
            _ => int_of(v) as i32 as i64,
        }),
        DType::I64 => V::I(int_of(v)),
        DType::F16 => V::F(match v {
            V::I(i) => f16::from_f32(i as f32).to_f64(),
            V::F(f) => f16::from_f64(f).to_f64(),
        }),
        DType::BF16 => V::F(match v {
            V::I(i) => bf16::from_f32(i as f32).to_f64(),
            V::F(f) => bf16::from_f64(f).to_f64(),
        }),
        DType::F32 => V::F(match v {
            V::I(i) => i as f32 as f64,
            V::F(f) => f as f32 as f64,
        }),
        DType::F64 => V::F(match v {
            V::I(i) => i as f64,
            V::F(f) => f,
        }),
    }
}

/// An integer value; a float truncated as x86-64's cvttsd2si into 64 bits
/// (NaN and out-of-range give i64::MIN, as PyTorch's casts there).
fn int_of(v: V) -> i64 {
    match v {
        V::I(i) => i,
        V::F(f) if f.is_nan() || f.trunc() < i64::MIN as f64 || f.trunc() >= 9.223_372_036_854_776e18 => i64::MIN,
        V::F(f) => f as i64,
    }
}

// ---------------------------------------------------------------------------
// Type promotion, written from PyTorch's documented table (independently of
// ferrotorch's `DType::promote`).
// ---------------------------------------------------------------------------

fn idx(dt: DType) -> usize {
    match dt {
        DType::U8 => 0,
        DType::I32 => 1,
        DType::I64 => 2,
        DType::F16 => 3,
        DType::BF16 => 4,
        DType::F32 => 5,
        DType::F64 => 6,
        DType::Bool => 7,
    }
}

/// `torch.promote_types`, as a literal table (rows/cols: u8 i32 i64 f16 bf16 f32 f64 bool).
pub fn promote_types(a: DType, b: DType) -> DType {
    use DType::*;
    const T: [[DType; 8]; 8] = [
        /* u8   */ [U8, I32, I64, F16, BF16, F32, F64, U8],
        /* i32  */ [I32, I32, I64, F16, BF16, F32, F64, I32],
        /* i64  */ [I64, I64, I64, F16, BF16, F32, F64, I64],
        /* f16  */ [F16, F16, F16, F16, F32, F32, F64, F16],
        /* bf16 */ [BF16, BF16, BF16, F32, BF16, F32, F64, BF16],
        /* f32  */ [F32, F32, F32, F32, F32, F32, F64, F32],
        /* f64  */ [F64, F64, F64, F64, F64, F64, F64, F64],
        /* bool */ [U8, I32, I64, F16, BF16, F32, F64, Bool],
    ];
    T[idx(a)][idx(b)]
}

/// An operand as type promotion sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// A tensor with at least one dim.
    Dim(DType),
    /// A 0-d tensor.
    Zero(DType),
    /// A Python scalar of this kind (Bool / I64 / F64 stand for bool, int, float).
    Wrapped(DType),
}

#[derive(PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
enum Cat {
    Bool,
    Int,
    Float,
}

fn category(dt: DType) -> Cat {
    match dt {
        DType::Bool => Cat::Bool,
        d if is_float(d) => Cat::Float,
        _ => Cat::Int,
    }
}

/// `torch.result_type` (c10's `ResultTypeState`): dim tensors, then 0-d
/// tensors, then wrapped numbers; a lower priority class only matters when
/// its category is higher. Wrapped floats are the default dtype (f32), wrapped
/// ints int64.
pub fn result_type(args: &[Arg]) -> DType {
    let mut classes: [Option<DType>; 3] = [None; 3];
    for a in args {
        let (slot, dt) = match *a {
            Arg::Dim(d) => (0, d),
            Arg::Zero(d) => (1, d),
            Arg::Wrapped(d) => (
                2,
                match category(d) {
                    Cat::Bool => DType::Bool,
                    Cat::Int => DType::I64,
                    Cat::Float => DType::F32,
                },
            ),
        };
        classes[slot] = Some(match classes[slot] {
            None => dt,
            Some(p) => promote_types(p, dt),
        });
    }
    let combine = |higher: Option<DType>, lower: Option<DType>| -> Option<DType> {
        match (higher, lower) {
            (None, l) => l,
            (h, None) => h,
            (Some(h), Some(l)) => {
                if category(l) > category(h) {
                    Some(promote_types(h, l))
                } else {
                    Some(h)
                }
            }
        }
    };
    combine(classes[0], combine(classes[1], classes[2])).unwrap_or(DType::F32)
}

/// PyTorch's `canCast(from, to)` for writing results in place.
pub fn can_cast(from: DType, to: DType) -> bool {
    category(from) <= category(to)
}

// ---------------------------------------------------------------------------
// The naive N-d array
// ---------------------------------------------------------------------------

/// A row-major N-d array: a shape and its elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Nd<T> {
    pub shape: Vec<usize>,
    pub data: Vec<T>,
}

/// All multi-indices of `shape` in row-major order.
pub fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    if n == 0 {
        return out;
    }
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        out.push(idx.clone());
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// Row-major linear position of `idx` in `shape`.
pub fn ravel(shape: &[usize], idx: &[usize]) -> usize {
    assert_eq!(shape.len(), idx.len());
    let mut p = 0;
    for d in 0..shape.len() {
        assert!(idx[d] < shape[d], "index {idx:?} out of shape {shape:?}");
        p = p * shape[d] + idx[d];
    }
    p
}

/// Multi-index of linear position `p` in `shape`.
pub fn unravel(shape: &[usize], mut p: usize) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = p % shape[d];
        p /= shape[d];
    }
    idx
}

pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// The broadcast of two shapes, or `None` when they do not broadcast.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = if da == db {
            da
        } else if da == 1 {
            db
        } else if db == 1 {
            da
        } else {
            return None;
        };
    }
    Some(out)
}

impl<T: Copy> Nd<T> {
    pub fn new(shape: &[usize], data: Vec<T>) -> Self {
        assert_eq!(numel(shape), data.len(), "shape {shape:?}");
        Nd {
            shape: shape.to_vec(),
            data,
        }
    }

    pub fn scalar(v: T) -> Self {
        Nd {
            shape: vec![],
            data: vec![v],
        }
    }

    pub fn from_fn(shape: &[usize], mut f: impl FnMut(&[usize]) -> T) -> Self {
        let data = indices(shape).iter().map(|i| f(i)).collect();
        Nd {
            shape: shape.to_vec(),
            data,
        }
    }

    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    pub fn numel(&self) -> usize {
        self.data.len()
    }

    pub fn at(&self, idx: &[usize]) -> T {
        self.data[ravel(&self.shape, idx)]
    }

    pub fn set(&mut self, idx: &[usize], v: T) {
        let p = ravel(&self.shape, idx);
        self.data[p] = v;
    }

    pub fn map<U: Copy>(&self, f: impl FnMut(T) -> U) -> Nd<U> {
        Nd {
            shape: self.shape.clone(),
            data: self.data.iter().copied().map(f).collect(),
        }
    }

    /// `out[i] = self[i[perm^-1]]`: dim `k` of the result is dim `perm[k]` of `self`.
    pub fn permute(&self, perm: &[usize]) -> Self {
        let shape: Vec<usize> = perm.iter().map(|&p| self.shape[p]).collect();
        Nd::from_fn(&shape, |i| {
            let mut src = vec![0; perm.len()];
            for (k, &p) in perm.iter().enumerate() {
                src[p] = i[k];
            }
            self.at(&src)
        })
    }

    pub fn transpose(&self, a: usize, b: usize) -> Self {
        let mut perm: Vec<usize> = (0..self.ndim()).collect();
        perm.swap(a, b);
        self.permute(&perm)
    }

    /// Elements `start, start + step, ...` (`len` of them) of `dim`.
    pub fn slice(&self, dim: usize, start: usize, len: usize, step: usize) -> Self {
        let mut shape = self.shape.clone();
        shape[dim] = len;
        Nd::from_fn(&shape, |i| {
            let mut src = i.to_vec();
            src[dim] = start + i[dim] * step;
            self.at(&src)
        })
    }

    pub fn select(&self, dim: usize, index: usize) -> Self {
        let mut shape = self.shape.clone();
        shape.remove(dim);
        Nd::from_fn(&shape, |i| {
            let mut src = i.to_vec();
            src.insert(dim, index);
            self.at(&src)
        })
    }

    /// Broadcasts to `shape` (which must be a broadcast of `self.shape`).
    pub fn broadcast_to(&self, shape: &[usize]) -> Self {
        let lead = shape.len() - self.ndim();
        Nd::from_fn(shape, |i| {
            let src: Vec<usize> = (0..self.ndim())
                .map(|d| if self.shape[d] == 1 { 0 } else { i[lead + d] })
                .collect();
            self.at(&src)
        })
    }

    pub fn reshape(&self, shape: &[usize]) -> Self {
        Nd::new(shape, self.data.clone())
    }

    pub fn unsqueeze(&self, dim: usize) -> Self {
        let mut shape = self.shape.clone();
        shape.insert(dim, 1);
        self.reshape(&shape)
    }

    /// Removes the listed dims (which must have size 1).
    pub fn squeeze_dims(&self, dims: &[usize]) -> Self {
        let shape: Vec<usize> = (0..self.ndim())
            .filter(|d| !dims.contains(d))
            .map(|d| self.shape[d])
            .collect();
        self.reshape(&shape)
    }

    /// Concatenation along `dim` (all other dims equal).
    pub fn cat(parts: &[Nd<T>], dim: usize) -> Self {
        let mut shape = parts[0].shape.clone();
        shape[dim] = parts.iter().map(|p| p.shape[dim]).sum();
        Nd::from_fn(&shape, |i| {
            let mut k = i[dim];
            for p in parts {
                if k < p.shape[dim] {
                    let mut src = i.to_vec();
                    src[dim] = k;
                    return p.at(&src);
                }
                k -= p.shape[dim];
            }
            unreachable!()
        })
    }
}

/// Elementwise combination of two broadcastable arrays.
pub fn zip_broadcast<A: Copy, B: Copy, C: Copy>(a: &Nd<A>, b: &Nd<B>, mut f: impl FnMut(A, B) -> C) -> Nd<C> {
    let shape = broadcast_shapes(&a.shape, &b.shape).expect("broadcastable");
    let (a, b) = (a.broadcast_to(&shape), b.broadcast_to(&shape));
    Nd {
        shape,
        data: a.data.iter().zip(&b.data).map(|(x, y)| f(*x, *y)).collect(),
    }
}

// ---------------------------------------------------------------------------
// Tensors <-> reference arrays
// ---------------------------------------------------------------------------

/// A tensor of `dt` holding `a`'s values, built from a typed Vec. The
/// values must already be representable in `dt` (they are converted with
/// plain Rust casts here).
pub fn make(dt: DType, a: &Nd<V>) -> Tensor {
    let s = &a.shape;
    let r = match dt {
        DType::Bool => Tensor::from_vec(a.data.iter().map(|v| v.nonzero()).collect(), s),
        DType::U8 => Tensor::from_vec(a.data.iter().map(|v| v.i() as u8).collect(), s),
        DType::I32 => Tensor::from_vec(a.data.iter().map(|v| v.i() as i32).collect(), s),
        DType::I64 => Tensor::from_vec(a.data.iter().map(|v| v.i()).collect(), s),
        DType::F16 => Tensor::from_vec(a.data.iter().map(|v| f16::from_f64(v.f())).collect(), s),
        DType::BF16 => Tensor::from_vec(a.data.iter().map(|v| bf16::from_f64(v.f())).collect(), s),
        DType::F32 => Tensor::from_vec(a.data.iter().map(|v| v.f() as f32).collect(), s),
        DType::F64 => Tensor::from_vec(a.data.iter().map(|v| v.f()).collect(), s),
    };
    r.expect("from_vec")
}

/// The elements of `t`, read in its own dtype.
pub fn read(t: &Tensor) -> Nd<V> {
    let data: Vec<V> = match t.dtype() {
        DType::Bool => t
            .to_vec::<bool>()
            .unwrap()
            .into_iter()
            .map(|x| V::I(x as i64))
            .collect(),
        DType::U8 => t.to_vec::<u8>().unwrap().into_iter().map(|x| V::I(x as i64)).collect(),
        DType::I32 => t.to_vec::<i32>().unwrap().into_iter().map(|x| V::I(x as i64)).collect(),
        DType::I64 => t.to_vec::<i64>().unwrap().into_iter().map(V::I).collect(),
        DType::F16 => t
            .to_vec::<f16>()
            .unwrap()
            .into_iter()
            .map(|x| V::F(x.to_f64()))
            .collect(),
        DType::BF16 => t
            .to_vec::<bf16>()
            .unwrap()
            .into_iter()
            .map(|x| V::F(x.to_f64()))
            .collect(),
        DType::F32 => t.to_vec::<f32>().unwrap().into_iter().map(|x| V::F(x as f64)).collect(),
        DType::F64 => t.to_vec::<f64>().unwrap().into_iter().map(V::F).collect(),
    };
    Nd::new(t.shape(), data)
}

// ---------------------------------------------------------------------------
// Random values
// ---------------------------------------------------------------------------

/// splitmix64: a tiny deterministic generator for bulk values (proptest
/// drives the seed, so failures reproduce and shrink over shapes).
#[derive(Clone)]
pub struct Prng(pub u64);

impl Prng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % ((hi - lo + 1) as u64)) as i64
    }
}

/// Which values to draw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Vals {
    /// Small values: floats k/8 with |k| <= 40 (exact in every float dtype),
    /// integers in -20..=20 (0..=20 for u8).
    Small,
    /// Small values plus, now and then, NaN, +-inf, -0.0, and integers at or
    /// near the extremes of their type (to exercise wrap-around).
    Wild,
    /// Floats uniform in [-4, 4) with all the dtype's mantissa bits (so sums
    /// round); integers as `Small`.
    Dense,
}

/// One random value of `dt`.
pub fn value(dt: DType, rng: &mut Prng, vals: Vals) -> V {
    let wild = vals == Vals::Wild && rng.below(8) == 0;
    match dt {
        DType::Bool => V::I(rng.below(2) as i64),
        DType::U8 => V::I(if wild { rng.range(200, 255) } else { rng.range(0, 20) }),
        DType::I32 => V::I(if wild {
            match rng.below(3) {
                0 => i32::MIN as i64 + rng.range(0, 3),
                1 => i32::MAX as i64 - rng.range(0, 3),
                _ => rng.next() as i32 as i64,
            }
        } else {
            rng.range(-20, 20)
        }),
        DType::I64 => V::I(if wild {
            match rng.below(3) {
                0 => i64::MIN + rng.range(0, 3),
                1 => i64::MAX - rng.range(0, 3),
                _ => rng.next() as i64,
            }
        } else {
            rng.range(-20, 20)
        }),
        _ if vals == Vals::Dense => cast(V::F((rng.next() >> 11) as f64 / (1u64 << 53) as f64 * 8.0 - 4.0), dt),
        _ => {
            if wild {
                V::F(match rng.below(5) {
                    0 => f64::NAN,
                    1 => f64::INFINITY,
                    2 => f64::NEG_INFINITY,
                    3 => -0.0,
                    _ => 0.0,
                })
            } else {
                V::F(rng.range(-40, 40) as f64 / 8.0)
            }
        }
    }
}

pub fn values(dt: DType, n: usize, rng: &mut Prng, vals: Vals) -> Vec<V> {
    (0..n).map(|_| value(dt, rng, vals)).collect()
}

pub fn random_nd(dt: DType, shape: &[usize], rng: &mut Prng, vals: Vals) -> Nd<V> {
    Nd::new(shape, values(dt, numel(shape), rng, vals))
}

// ---------------------------------------------------------------------------
// Strided inputs: a tensor of a given shape whose layout is not contiguous
// ---------------------------------------------------------------------------

/// How an input tensor is laid out in memory.
#[derive(Clone, Debug)]
pub enum Recipe {
    /// Freshly allocated, row-major.
    Contiguous,
    /// A permutation of a contiguous base (the rotation by `k` of the dims).
    Permuted(usize),
    /// Every `step`-th element of a larger base, starting at `start`.
    Sliced { start: usize, step: usize },
    /// Dims whose bit is set in `mask` are expanded from size 1 (stride 0).
    Expanded(u32),
    /// Sliced, then permuted.
    SlicedPermuted { start: usize, step: usize, rot: usize },
}

pub fn recipe() -> impl Strategy<Value = Recipe> {
    prop_oneof![
        2 => Just(Recipe::Contiguous),
        2 => (1usize..4).prop_map(Recipe::Permuted),
        2 => (0usize..2, 1usize..3).prop_map(|(start, step)| Recipe::Sliced { start, step }),
        2 => any::<u32>().prop_map(Recipe::Expanded),
        1 => (0usize..2, 1usize..3, 1usize..4).prop_map(|(start, step, rot)| Recipe::SlicedPermuted { start, step, rot }),
    ]
}

fn rotation(n: usize, k: usize) -> Vec<usize> {
    (0..n).map(|d| (d + k) % n.max(1)).collect()
}

fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (k, &p) in perm.iter().enumerate() {
        inv[p] = k;
    }
    inv
}

/// A tensor laid out as a [`Recipe`] says, with its base (a contiguous
/// tensor owning the storage), the base's values, and for each element of
/// the tensor its position in the base.
pub struct Built {
    pub base: Tensor,
    pub base_vals: Nd<V>,
    pub t: Tensor,
    pub pos: Nd<usize>,
}

impl Built {
    /// The reference values of the tensor.
    pub fn vals(&self) -> Nd<V> {
        self.pos.map(|p| self.base_vals.data[p])
    }

    /// Whether two elements of the tensor share a storage slot.
    pub fn overlapping(&self) -> bool {
        let mut seen = vec![false; self.base_vals.numel()];
        self.pos.data.iter().any(|&p| std::mem::replace(&mut seen[p], true))
    }
}

/// The base shape a recipe starts from and the views it applies, as a
/// function that applies them to a tensor and to the position array.
fn layout_plan(shape: &[usize], recipe: &Recipe) -> (Vec<usize>, Vec<ViewStep>) {
    let nd = shape.len();
    match recipe {
        Recipe::Contiguous => (shape.to_vec(), vec![]),
        Recipe::Permuted(k) => {
            // base[j] has shape[perm[j]] so that base.permute(inv) has `shape`.
            let perm = rotation(nd, *k);
            let inv = inverse(&perm);
            (perm.iter().map(|&p| shape[p]).collect(), vec![ViewStep::Permute(inv)])
        }
        Recipe::Sliced { start, step } => (
            shape.iter().map(|&s| start + s * step + 1).collect(),
            (0..nd)
                .map(|d| ViewStep::Slice {
                    dim: d,
                    start: *start,
                    len: shape[d],
                    step: *step,
                })
                .collect(),
        ),
        Recipe::Expanded(mask) => (
            (0..nd).map(|d| if mask >> d & 1 == 1 { 1 } else { shape[d] }).collect(),
            vec![ViewStep::Expand(shape.to_vec())],
        ),
        Recipe::SlicedPermuted { start, step, rot } => {
            let perm = rotation(nd, *rot);
            let inv = inverse(&perm);
            let mid: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
            let (base, mut steps) = layout_plan(
                &mid,
                &Recipe::Sliced {
                    start: *start,
                    step: *step,
                },
            );
            steps.push(ViewStep::Permute(inv));
            (base, steps)
        }
    }
}

enum ViewStep {
    Permute(Vec<usize>),
    Slice {
        dim: usize,
        start: usize,
        len: usize,
        step: usize,
    },
    Expand(Vec<usize>),
}

/// A tensor of `dt` and `shape` laid out as `recipe` says, with random values.
pub fn build(dt: DType, shape: &[usize], recipe: &Recipe, rng: &mut Prng, vals: Vals) -> Built {
    let (base_shape, steps) = layout_plan(shape, recipe);
    let base_vals = random_nd(dt, &base_shape, rng, vals);
    let base = make(dt, &base_vals);
    let mut t = base.clone();
    let mut pos = Nd::new(&base_shape, (0..numel(&base_shape)).collect());
    for s in &steps {
        match s {
            ViewStep::Permute(p) => {
                t = t.permute(to_i64(p)).unwrap();
                pos = pos.permute(p);
            }
            ViewStep::Slice { dim, start, len, step } => {
                t = t
                    .slice(
                        *dim as i64,
                        Some(*start as i64),
                        Some((start + len * step) as i64),
                        *step as i64,
                    )
                    .unwrap();
                pos = pos.slice(*dim, *start, *len, *step);
            }
            ViewStep::Expand(s) => {
                t = t.expand(to_i64(s)).unwrap();
                pos = pos.broadcast_to(s);
            }
        }
    }
    Built {
        base,
        base_vals,
        t,
        pos,
    }
}

/// A tensor holding exactly `vals`, laid out as `recipe` says (an expanded
/// recipe, which cannot hold arbitrary values, is taken as contiguous); the
/// base's other slots hold junk.
pub fn build_from(dt: DType, vals: &Nd<V>, recipe: &Recipe, rng: &mut Prng) -> Tensor {
    let recipe = if matches!(recipe, Recipe::Expanded(_)) {
        &Recipe::Contiguous
    } else {
        recipe
    };
    let (base_shape, steps) = layout_plan(&vals.shape, recipe);
    let mut pos = Nd::new(&base_shape, (0..numel(&base_shape)).collect());
    let mut base_vals = random_nd(dt, &base_shape, rng, Vals::Wild);
    for s in &steps {
        pos = match s {
            ViewStep::Permute(p) => pos.permute(p),
            ViewStep::Slice { dim, start, len, step } => pos.slice(*dim, *start, *len, *step),
            ViewStep::Expand(_) => unreachable!(),
        };
    }
    for (i, &p) in pos.data.iter().enumerate() {
        base_vals.data[p] = vals.data[i];
    }
    let mut t = make(dt, &base_vals);
    for s in &steps {
        t = match s {
            ViewStep::Permute(p) => t.permute(to_i64(p)).unwrap(),
            ViewStep::Slice { dim, start, len, step } => t
                .slice(
                    *dim as i64,
                    Some(*start as i64),
                    Some((start + len * step) as i64),
                    *step as i64,
                )
                .unwrap(),
            ViewStep::Expand(_) => unreachable!(),
        };
    }
    t
}

/// A tensor of `dt` and `shape` laid out as `recipe` says, with random
/// values, and the reference array of its elements.
pub fn strided(dt: DType, shape: &[usize], recipe: &Recipe, rng: &mut Prng, vals: Vals) -> (Tensor, Nd<V>) {
    let b = build(dt, shape, recipe, rng, vals);
    let v = b.vals();
    (b.t, v)
}

pub fn to_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&x| x as i64).collect()
}

// ---------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------

/// A shape of 0..=`max_dims` dims with sizes 0..=`max_size`.
pub fn shape(max_dims: usize, max_size: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..=max_size, 0..=max_dims)
}

/// A shape that broadcasts to `out`: a suffix of it with some dims set to 1.
pub fn broadcastable_to(out: &[usize], keep: usize, ones_mask: u32) -> Vec<usize> {
    let k = keep.min(out.len());
    let suffix = &out[out.len() - k..];
    suffix
        .iter()
        .enumerate()
        .map(|(i, &s)| if ones_mask >> i & 1 == 1 { 1 } else { s })
        .collect()
}

// ---------------------------------------------------------------------------
// Comparisons
// ---------------------------------------------------------------------------

/// Whether `got` matches `want` within `atol + rtol * |want|` (floats; NaN
/// matches NaN, infinities must match exactly) or exactly (integers).
pub fn close(got: V, want: V, atol: f64, rtol: f64) -> bool {
    match (got, want) {
        (V::I(a), V::I(b)) => a == b,
        _ => {
            let (a, b) = (got.f(), want.f());
            if a.is_nan() || b.is_nan() {
                return a.is_nan() && b.is_nan();
            }
            if a.is_infinite() || b.is_infinite() {
                return a == b;
            }
            (a - b).abs() <= atol + rtol * b.abs()
        }
    }
}

/// Asserts shape and elementwise closeness, with the first mismatch in the message.
pub fn check_close(
    what: &str,
    got: &Nd<V>,
    want: &Nd<V>,
    atol: &dyn Fn(usize) -> f64,
    rtol: f64,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(&got.shape, &want.shape, "{}: shape", what);
    for (i, (g, w)) in got.data.iter().zip(&want.data).enumerate() {
        prop_assert!(
            close(*g, *w, atol(i), rtol),
            "{}: element {} (index {:?}) is {:?}, expected {:?} (atol {}, rtol {})\n got  {:?}\n want {:?}",
            what,
            i,
            unravel(&want.shape, i),
            g,
            w,
            atol(i),
            rtol,
            got.data,
            want.data
        );
    }
    Ok(())
}

/// Exact equality (NaN == NaN, -0.0 == 0.0).
pub fn check_exact(what: &str, got: &Nd<V>, want: &Nd<V>) -> Result<(), TestCaseError> {
    check_close(what, got, want, &|_| 0.0, 0.0)
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// Runs `f` catching panics; a panic fails the test case with its message.
pub fn no_panic<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, TestCaseError> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Ok(v),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(TestCaseError::fail(format!("{what} panicked: {msg}")))
        }
    }
}

/// Asserts that `r` is an error whose message contains one of `names`.
pub fn expect_err<T: std::fmt::Debug>(
    what: &str,
    r: ferrotorch_core::Result<T>,
    names: &[&str],
) -> Result<(), TestCaseError> {
    match r {
        Ok(v) => Err(TestCaseError::fail(format!("{what}: expected an error, got Ok({v:?})"))),
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(
                names.iter().any(|n| msg.contains(n)),
                "{}: error message {:?} does not name the op (one of {:?})",
                what,
                msg,
                names
            );
            Ok(())
        }
    }
}
