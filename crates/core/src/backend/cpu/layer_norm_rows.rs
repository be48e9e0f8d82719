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

    /// One Welford step of a chunk: the vector `row` (one value per lane)
    /// added with `c`, the reciprocal of the chunk's new count.
    #[inline(always)]
    fn add_vector(&mut self, row: &[T], c: T) {
        for (l, &v) in row.iter().enumerate() {
            let delta = v - self.m1[l];
            self.m1[l] = c.fma(delta, self.m1[l]);
            self.m2[l] = delta.fma(v - self.m1[l], self.m2[l]);
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
    let chunks = (x.len() / T::LANES).div_ceil(CHUNK);
    // The cascade's stack sized for the row: clearing 64 levels for every
    // row cost more than summing a row of 768.
    if ceil_log2(chunks) <= 8 {
        moments_with_stack::<T, 8>(x)
    } else {
        moments_with_stack::<T, 64>(x)
    }
}

/// Merges chunk `i`'s moments into the cascade (PyTorch's order of merges).
/// A function, not a closure, so that it inlines into the vectorised
/// callers (out of line, its fused adds became calls to libm's `fmaf`).
#[inline(always)]
fn push<T: Real>(stack: &mut [Moments<T>], chunk: Moments<T>, i: usize, depth: usize, lanes: usize) {
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

/// [`rowwise_moments`] with a cascade of at most `LEVELS` levels.
#[inline(always)]
fn moments_with_stack<T: Real, const LEVELS: usize>(x: &[T]) -> (T, T) {
    let lanes = T::LANES;
    let len = x.len();
    let vecs = len / lanes;
    let chunks = vecs.div_ceil(CHUNK);
    let depth = ceil_log2(chunks);
    let mut stack = [Moments::<T>::zero(); LEVELS];
    let mut recip = [T::ZERO; CHUNK];
    for (j, r) in recip.iter_mut().enumerate() {
        *r = T::ONE / T::of((j + 1) as f64);
    }
    let full = vecs / CHUNK;
    let span = CHUNK * lanes;
    let mut i = 0;
    // Two whole chunks at a time: their Welford chains are independent, so
    // the core runs them side by side (one chain waits on its own adds);
    // each chunk's arithmetic, and the merges, are unchanged.
    while i + 1 < full {
        let (a, b) = (&x[i * span..(i + 1) * span], &x[(i + 1) * span..(i + 2) * span]);
        let (mut ca, mut cb) = (Moments::zero(), Moments::zero());
        for (j, &c) in recip.iter().enumerate() {
            ca.add_vector(&a[j * lanes..(j + 1) * lanes], c);
            cb.add_vector(&b[j * lanes..(j + 1) * lanes], c);
        }
        ca.count = CHUNK;
        cb.count = CHUNK;
        push(&mut stack, ca, i, depth, lanes);
        push(&mut stack, cb, i + 1, depth, lanes);
        i += 2;
    }
    while i < chunks {
        let count = CHUNK.min(vecs - i * CHUNK);
        let mut chunk = Moments::zero();
        let base = i * span;
        for (j, &c) in recip.iter().enumerate().take(count) {
            chunk.add_vector(&x[base + j * lanes..base + (j + 1) * lanes], c);
        }
        chunk.count = count;
        push(&mut stack, chunk, i, depth, lanes);
        i += 1;
    }
    finish(&mut stack, depth, x)
}

/// The end of [`rowwise_moments`]: the cascade's levels merged, then the
/// elements past the last whole vector and each lane by the scalar merge
/// (`AddMoments`); returns the mean and the biased variance.
#[inline(always)]
fn finish<T: Real>(stack: &mut [Moments<T>], depth: usize, x: &[T]) -> (T, T) {
    let lanes = T::LANES;
    let vecs = x.len() / lanes;
    for i in 1..depth {
        let upper = stack[i];
        stack[0].merge(&upper, lanes);
    }
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
    (m1, m2 / T::of(x.len() as f64))
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

/// `Σ p(j) * q(j)`, where `(p(j), q(j)) = term(a[j], b[j], c[j])`, as
/// PyTorch's `vec::map*_reduce_all` sums it: whole vectors lane by lane
/// (the first one as the start, each later product rounded, then added),
/// the tail fused into its lanes, then the lanes' pairwise tree; a row
/// shorter than one vector is summed in order. The three slices have the
/// row's length (`b` and `c` are cut to `a`'s): the loops over whole
/// vectors then index chunks of a known length and vectorise.
#[inline(always)]
fn reduce_products<T: Real>(a: &[T], b: &[T], c: &[T], term: impl Fn(T, T, T) -> (T, T)) -> T {
    let lanes = T::LANES;
    let len = a.len();
    let (b, c) = (&b[..len], &c[..len]);
    let product = |j: usize| {
        let (p, q) = term(a[j], b[j], c[j]);
        p * q
    };
    if len < lanes {
        return (1..len).fold(if len == 0 { T::ZERO } else { product(0) }, |acc, j| acc + product(j));
    }
    let mut acc = [T::ZERO; MAX_LANES];
    for (l, v) in acc.iter_mut().enumerate().take(lanes) {
        *v = product(l);
    }
    let whole = len - len % lanes;
    for ((ca, cb), cc) in a[lanes..whole]
        .chunks_exact(lanes)
        .zip(b[lanes..whole].chunks_exact(lanes))
        .zip(c[lanes..whole].chunks_exact(lanes))
    {
        for l in 0..lanes {
            let (p, q) = term(ca[l], cb[l], cc[l]);
            acc[l] = acc[l] + p * q;
        }
    }
    for l in 0..len - whole {
        let (p, q) = term(a[whole + l], b[whole + l], c[whole + l]);
        acc[l] = p.fma(q, acc[l]);
    }
    let mut w = lanes / 2;
    while w > 0 {
        let prev = acc;
        for (l, v) in acc.iter_mut().enumerate().take(lanes) {
            *v = prev[l] + prev[l ^ w];
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
            reduce_products(dy, x, w, |d, v, g| (d * v, g)),
            reduce_products(dy, w, w, |d, g, _| (d, g)),
        ),
        None => (
            reduce_products(dy, x, x, |d, v, _| (d, v)),
            reduce_products(dy, dy, dy, |d, _, _| (d, T::ONE)),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// PyTorch's `RowwiseMoments` written plainly: one chunk after another,
    /// a 64-level cascade (the shared `push` and `finish`).
    fn plain_moments<T: Real>(x: &[T]) -> (T, T) {
        let lanes = T::LANES;
        let vecs = x.len() / lanes;
        let chunks = vecs.div_ceil(CHUNK);
        let depth = ceil_log2(chunks);
        let mut stack = [Moments::<T>::zero(); 64];
        for i in 0..chunks {
            let count = CHUNK.min(vecs - i * CHUNK);
            let mut chunk = Moments::zero();
            for j in 0..count {
                let c = T::ONE / T::of((j + 1) as f64);
                for l in 0..lanes {
                    let v = x[(i * CHUNK + j) * lanes + l];
                    let delta = v - chunk.m1[l];
                    chunk.m1[l] = c.fma(delta, chunk.m1[l]);
                    chunk.m2[l] = delta.fma(v - chunk.m1[l], chunk.m2[l]);
                }
            }
            chunk.count = count;
            push(&mut stack, chunk, i, depth, lanes);
        }
        finish(&mut stack, depth, x)
    }

    fn data(len: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 11) as f64 / (1u64 << 53) as f64 * 6.0 - 2.0
            })
            .collect()
    }

    #[test]
    fn paired_chunks_and_sized_stacks_keep_the_plain_bits() {
        // Lengths around chunk (128 f32 / 64 f64 values) and stack-size edges.
        let mut lens: Vec<usize> = (0..300).collect();
        lens.extend([
            383, 384, 385, 511, 512, 767, 768, 769, 1000, 4096, 4097, 32768, 32769, 40000,
        ]);
        for (k, &len) in lens.iter().enumerate() {
            let x = data(len, k as u64);
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let (a, b) = (rowwise_moments(&x32), plain_moments(&x32));
            assert!(
                a.0.to_bits() == b.0.to_bits() && a.1.to_bits() == b.1.to_bits(),
                "f32 len {len}"
            );
            let (a, b) = (rowwise_moments(&x), plain_moments(&x));
            assert!(
                a.0.to_bits() == b.0.to_bits() && a.1.to_bits() == b.1.to_bits(),
                "f64 len {len}"
            );
        }
    }

    /// PyTorch's `map*_reduce_all` sum written plainly, index by index.
    fn plain_reduce<T: Real>(p: &[T], q: &[T]) -> T {
        let (lanes, len) = (T::LANES, p.len());
        if len < lanes {
            return (1..len).fold(if len == 0 { T::ZERO } else { p[0] * q[0] }, |acc, j| acc + p[j] * q[j]);
        }
        let mut acc: Vec<T> = (0..lanes).map(|l| p[l] * q[l]).collect();
        let mut d = lanes;
        while d + lanes <= len {
            for l in 0..lanes {
                acc[l] = acc[l] + p[d + l] * q[d + l];
            }
            d += lanes;
        }
        for l in 0..len - d {
            acc[l] = p[d + l].fma(q[d + l], acc[l]);
        }
        let mut w = lanes / 2;
        while w > 0 {
            let prev = acc.clone();
            for l in 0..lanes {
                acc[l] = prev[l] + prev[l ^ w];
            }
            w /= 2;
        }
        acc[0]
    }

    #[test]
    fn chunked_reductions_keep_the_plain_bits() {
        for len in (0..200).chain([767, 768, 769, 1029]) {
            let (dy, x, w) = (data(len, 1), data(len, 2), data(len, 3));
            let dyx: Vec<f64> = dy.iter().zip(&x).map(|(a, b)| a * b).collect();
            let got = reduce_products(&dy, &x, &w, |d, v, g| (d * v, g));
            assert_eq!(got.to_bits(), plain_reduce(&dyx, &w).to_bits(), "len {len}");
            let f = |v: &[f64]| v.iter().map(|&a| a as f32).collect::<Vec<f32>>();
            let (dy, w) = (f(&dy), f(&w));
            let ones = vec![1f32; len];
            let got = reduce_products(&dy, &dy, &dy, |d, _, _| (d, 1.0));
            assert_eq!(got.to_bits(), plain_reduce(&dy, &ones).to_bits(), "len {len}");
            let got = reduce_products(&dy, &w, &w, |d, g, _| (d, g));
            assert_eq!(got.to_bits(), plain_reduce(&dy, &w).to_bits(), "len {len}");
        }
    }
}
