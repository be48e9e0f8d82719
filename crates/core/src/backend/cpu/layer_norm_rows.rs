//! One row of a layer norm, forward and backward, as PyTorch's CPU kernels
//! compute it (`layer_norm_kernel.cpp`, `moments_utils.h`), operation for
//! operation: the mean and variance by Welford's algorithm in vector lanes
//! of chunks of 16, merged pairwise (a cascade), then the tail and the
//! lanes by the scalar merge; the input gradient from PyTorch's sums and
//! coefficients. Where PyTorch's x86-64 build fuses a multiply and an add
//! (its compiler contracts them, or the code calls `fmadd`), so does this
//! file (`mul_add`), and nowhere else, so results are PyTorch's bit for bit.

use super::norm::Real;

/// The most lanes of a row's vectors (f32's 8; f64 has 4).
const MAX_LANES: usize = 8;

/// Welford's chunks: 16 vectors each (PyTorch's `kChunkSize`).
const CHUNK: usize = 16;

/// A vector of `lanes` partial moments and the count each lane holds.
#[derive(Clone, Copy)]
struct Moments<T> {
    count: usize,
    m1: [T; MAX_LANES],
    m2: [T; MAX_LANES],
}

impl<T: Real> Moments<T> {
    fn zero() -> Self {
        Moments {
            count: 0,
            m1: [T::ZERO; MAX_LANES],
            m2: [T::ZERO; MAX_LANES],
        }
    }

    /// PyTorch's `AddMomentsVec`: merges `add` into `self`, lane by lane.
    #[inline(always)]
    fn merge(&mut self, add: &Moments<T>, lanes: usize) {
        let n = self.count + add.count;
        let c = if n == 0 {
            T::ZERO
        } else {
            T::of(add.count as f64) / T::of(n as f64)
        };
        let m0 = T::of(self.count as f64);
        for l in 0..lanes {
            let delta = add.m1[l] - self.m1[l];
            let m2_sum = self.m2[l] + add.m2[l];
            let c_delta = c * delta;
            let m0_delta = delta * m0;
            self.m1[l] = self.m1[l] + c_delta;
            self.m2[l] = m0_delta.fma(c_delta, m2_sum);
        }
        self.count = n;
    }
}

/// PyTorch's `utils::CeilLog2`.
fn ceil_log2(x: usize) -> usize {
    if x <= 1 {
        0
    } else {
        (usize::BITS - (x - 1).leading_zeros()) as usize
    }
}

/// The mean and the biased variance of a row (PyTorch's `RowwiseMoments`).
#[inline(always)]
pub(crate) fn rowwise_moments<T: Real>(x: &[T]) -> (T, T) {
    let lanes = T::LANES;
    let len = x.len();
    let vecs = len / lanes;
    let chunks = vecs.div_ceil(CHUNK);
    let depth = ceil_log2(chunks);
    let mut stack = [Moments::<T>::zero(); 64];
    let mut recip = [T::ZERO; CHUNK];
    for (j, r) in recip.iter_mut().enumerate() {
        *r = T::ONE / T::of((j + 1) as f64);
    }
    for i in 0..chunks {
        let count = CHUNK.min(vecs - i * CHUNK);
        let mut chunk = Moments::zero();
        let base = i * CHUNK * lanes;
        for (j, &c) in recip.iter().enumerate().take(count) {
            let row = &x[base + j * lanes..base + (j + 1) * lanes];
            for (l, &v) in row.iter().enumerate() {
                let delta = v - chunk.m1[l];
                chunk.m1[l] = c.fma(delta, chunk.m1[l]);
                chunk.m2[l] = delta.fma(v - chunk.m1[l], chunk.m2[l]);
            }
        }
        chunk.count = count;
        stack[0].merge(&chunk, lanes);
        let mut mask = i + 1;
        let mut j = 1;
        while j < depth && mask & 1 == 0 {
            let lower = stack[j - 1];
            stack[j].merge(&lower, lanes);
            stack[j - 1] = Moments::zero();
            mask >>= 1;
            j += 1;
        }
    }
    for i in 1..depth {
        let upper = stack[i];
        stack[0].merge(&upper, lanes);
    }
    // The elements past the last whole vector, then each lane, by the
    // scalar merge (`AddMoments`).
    let (mut m0, mut m1, mut m2) = (0usize, T::ZERO, T::ZERO);
    for &v in &x[vecs * lanes..] {
        let delta = v - m1;
        m0 += 1;
        m1 = m1 + delta / T::of(m0 as f64);
        m2 = m2 + delta * (v - m1);
    }
    for l in 0..lanes {
        let n = m0 + vecs;
        let c = if n == 0 {
            T::ZERO
        } else {
            T::of(vecs as f64) / T::of(n as f64)
        };
        let delta = stack[0].m1[l] - m1;
        m1 = c.fma(delta, m1);
        m2 = m2 + (delta * delta * c).fma(T::of(m0 as f64), stack[0].m2[l]);
        m0 = n;
    }
    (m1, m2 / T::of(len as f64))
}

/// Layer norm of one row; returns its mean and reciprocal standard
/// deviation.
#[inline(always)]
pub(crate) fn forward_row<T: Real>(x: &[T], y: &mut [T], w: Option<&[T]>, b: Option<&[T]>, eps: T) -> (T, T) {
    let (mean, var) = rowwise_moments(x);
    let rstd = T::ONE / (var + eps).root();
    let bias = -mean;
    // Every slice cut to the row's length first: the loops then carry no
    // bounds checks and vectorise (indexing `w[j]` of a longer slice kept
    // them scalar, four times slower).
    let n = x.len();
    let y = &mut y[..n];
    match (w.map(|w| &w[..n]), b.map(|b| &b[..n])) {
        (Some(w), Some(b)) => {
            for (((o, &v), &g), &s) in y.iter_mut().zip(x).zip(w).zip(b) {
                *o = ((v + bias) * rstd).fma(g, s);
            }
        }
        (Some(w), None) => {
            for ((o, &v), &g) in y.iter_mut().zip(x).zip(w) {
                *o = ((v + bias) * rstd).fma(g, T::ZERO);
            }
        }
        (None, Some(b)) => {
            for ((o, &v), &s) in y.iter_mut().zip(x).zip(b) {
                *o = ((v + bias) * rstd).fma(T::ONE, s);
            }
        }
        (None, None) => {
            for (o, &v) in y.iter_mut().zip(x) {
                *o = ((v + bias) * rstd).fma(T::ONE, T::ZERO);
            }
        }
    }
    (mean, rstd)
}

/// `Σ p(j) * q(j)` as PyTorch's `vec::map*_reduce_all` sums it: whole
/// vectors lane by lane (the first one as the start, each later product
/// rounded, then added), the tail fused into its lanes, then the lanes'
/// pairwise tree; a row shorter than one vector is summed in order.
#[inline(always)]
fn reduce_products<T: Real>(len: usize, term: impl Fn(usize) -> (T, T)) -> T {
    let lanes = T::LANES;
    let product = |j: usize| {
        let (p, q) = term(j);
        p * q
    };
    if len < lanes {
        return (1..len).fold(if len == 0 { T::ZERO } else { product(0) }, |acc, j| acc + product(j));
    }
    let mut acc = [T::ZERO; MAX_LANES];
    for (l, a) in acc.iter_mut().enumerate().take(lanes) {
        *a = product(l);
    }
    let mut d = lanes;
    // While a whole vector remains (`d + lanes <= len` rather than `d <
    // whole`: the same steps, in a form that proves the reads in bounds).
    while d + lanes <= len {
        for (l, a) in acc.iter_mut().enumerate().take(lanes) {
            *a = *a + product(d + l);
        }
        d += lanes;
    }
    for (l, a) in acc.iter_mut().enumerate().take(len - d) {
        let (p, q) = term(d + l);
        *a = p.fma(q, *a);
    }
    let mut w = lanes / 2;
    while w > 0 {
        let prev = acc;
        for (l, a) in acc.iter_mut().enumerate().take(lanes) {
            *a = prev[l] + prev[l ^ w];
        }
        w /= 2;
    }
    acc[0]
}

/// The input gradient of one row (`dx`), from its `dy`, `x`, mean `m`,
/// rstd `a` and the weight, PyTorch's `layer_norm_backward_frame`.
#[inline(always)]
pub(crate) fn input_grad_row<T: Real>(dy: &[T], x: &[T], w: Option<&[T]>, m: T, a: T, dx: &mut [T]) {
    let n = x.len();
    // Slices cut to the row's length: no bounds checks, vectorised loops.
    let (dy, w, dx) = (&dy[..n], w.map(|w| &w[..n]), &mut dx[..n]);
    let scale = T::ONE / T::of(n as f64);
    let (ds, db) = match w {
        Some(w) => (
            reduce_products(n, |j| (dy[j] * x[j], w[j])),
            reduce_products(n, |j| (dy[j], w[j])),
        ),
        None => (
            reduce_products(n, |j| (dy[j], x[j])),
            reduce_products(n, |j| (dy[j], T::ONE)),
        ),
    };
    let b = db.fma(m, -ds) * a * a * a * scale;
    let c = (-b).fma(m, -(db * a * scale));
    match w {
        Some(w) => {
            for (((o, &v), &d), &g) in dx.iter_mut().zip(x).zip(dy).zip(w) {
                *o = b.fma(v, a * d * g) + c;
            }
        }
        None => {
            for ((o, &v), &d) in dx.iter_mut().zip(x).zip(dy) {
                *o = b.fma(v, a * d) + c;
            }
        }
    }
}

/// Adds one row's terms to the weight's and bias's gradient sums:
/// `dw += dy * (a * x - a * m)`, `db += dy`.
#[inline(always)]
pub(crate) fn param_grad_row<T: Real>(dy: &[T], x: &[T], m: T, a: T, dw: Option<&mut [T]>, db: Option<&mut [T]>) {
    if let Some(dw) = dw {
        let shift = -a * m;
        for ((o, &d), &v) in dw.iter_mut().zip(dy).zip(x) {
            *o = d.fma(a.fma(v, shift), *o);
        }
    }
    if let Some(db) = db {
        for (o, &d) in db.iter_mut().zip(dy) {
            *o = *o + d;
        }
    }
}
