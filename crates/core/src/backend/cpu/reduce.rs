//! CPU reductions with a fixed blocking.
//!
//! Every output element reduces its inputs in the same order whatever the
//! number of threads: the reduced index space is cut into chunks of
//! [`CHUNK`] elements; each chunk is folded run by run (a run is a stretch
//! along the innermost reduced dim, folded with a fixed set of lanes), and
//! chunk results are merged left to right. Threads take whole outputs, or
//! whole chunks of one output; neither changes the arithmetic.

use half::{bf16, f16};
use rayon::prelude::*;
use smallvec::SmallVec;

use super::access::access;
use super::pointwise::BLOCK;
use super::simd::multiversion;
use crate::dispatch::{Op, downcast_op};
use crate::layout::{Dims, Layout};
use crate::ops::{IndexReduce, Reduce, ReduceKind, Scan};
use crate::{DType, Element, Result, Tensor, with_dtype};

/// Elements per chunk of one output's reduction.
const CHUNK: usize = 1 << 14;
/// Work (elements) below which a reduction runs on one thread.
const PAR_MIN: usize = 1 << 15;
/// Lanes of the contiguous folds (independent of the SIMD width, so every
/// instruction set gives the same bits).
const LANES: usize = 64;

/// A reduction: folds contiguous slices of `T` into an accumulator.
trait Reducer<T>: Sync {
    type Acc: Copy + Send + Sync;
    fn init(&self) -> Self::Acc;
    fn fold(&self, xs: &[T]) -> Self::Acc;
    fn merge(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// `fold` of four equally long slices (the same four results); a reducer
    /// may read them together, which keeps more memory loads in flight.
    fn fold4(&self, xs: [&[T]; 4]) -> [Self::Acc; 4] {
        xs.map(|x| self.fold(x))
    }
}

/// Kept dims (in order) and reduced dims (merged where possible) of a layout.
struct Plan {
    outer_shape: Dims,
    outer_strides: Dims,
    inner_shape: Dims,
    inner_strides: Dims,
}

fn plan(l: &Layout, dims: Option<&[usize]>) -> Plan {
    let reduced = |d: usize| dims.is_none_or(|ds| ds.contains(&d));
    let mut p = Plan {
        outer_shape: Dims::new(),
        outer_strides: Dims::new(),
        inner_shape: Dims::new(),
        inner_strides: Dims::new(),
    };
    let mut inner: SmallVec<[(usize, usize); 6]> = SmallVec::new();
    for d in 0..l.ndim() {
        if reduced(d) {
            inner.push((l.shape[d], l.strides[d]));
        } else {
            p.outer_shape.push(l.shape[d]);
            p.outer_strides.push(l.strides[d]);
        }
    }
    // Innermost = smallest stride; then merge what is contiguous.
    inner.sort_by_key(|a| std::cmp::Reverse(a.1));
    let shape: Dims = inner.iter().map(|x| x.0).collect();
    let strides: Dims = inner.iter().map(|x| x.1).collect();
    let (s, st) = Layout::coalesce(&shape, &[&strides]);
    p.inner_shape = s;
    p.inner_strides = st.into_iter().next().unwrap_or_default();
    p
}

fn offset_of(idx_linear: usize, shape: &[usize], strides: &[usize]) -> usize {
    let mut rem = idx_linear;
    let mut off = 0;
    for d in (0..shape.len()).rev() {
        off += (rem % shape[d]) * strides[d];
        rem /= shape[d];
    }
    off
}

/// Folds the inner linear range `[start, end)` of one output at `base`.
///
/// # Safety
/// `xp` points into a buffer (locked for the call) that holds every element
/// `base` plus the plan's inner offsets reach for positions below `end`,
/// which is at most the product of the plan's inner shape.
unsafe fn fold_range<T: Element, R: Reducer<T>>(
    r: &R,
    xp: *const T,
    base: usize,
    p: &Plan,
    start: usize,
    end: usize,
) -> R::Acc {
    let nd = p.inner_shape.len();
    if nd == 0 {
        // SAFETY: base is a valid element offset.
        return r.fold(unsafe { std::slice::from_raw_parts(xp.add(base), 1) });
    }
    let inner = p.inner_shape[nd - 1];
    let st = p.inner_strides[nd - 1];
    let mut acc: Option<R::Acc> = None;
    // Gather buffer for strided runs (not initialised: only written slots are read).
    let mut buf = [std::mem::MaybeUninit::<T>::uninit(); BLOCK];
    let mut pos = start;
    while pos < end {
        let in_row = pos % inner;
        let n = (inner - in_row).min(end - pos);
        let off = base + offset_of(pos, &p.inner_shape, &p.inner_strides);
        let mut done = 0;
        while done < n {
            let m = if st == 1 { n - done } else { (n - done).min(BLOCK) };
            let part = if st == 1 {
                // SAFETY: a contiguous run inside the tensor.
                r.fold(unsafe { std::slice::from_raw_parts(xp.add(off + done), m) })
            } else {
                for (k, b) in buf[..m].iter_mut().enumerate() {
                    // SAFETY: in-bounds strided element.
                    b.write(unsafe { *xp.add(off + (done + k) * st) });
                }
                // SAFETY: the first m slots were just written.
                r.fold(unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const T, m) })
            };
            acc = Some(match acc {
                None => part,
                Some(a) => r.merge(a, part),
            });
            done += m;
        }
        pos += n;
    }
    acc.unwrap_or_else(|| r.init())
}

/// Runs reducer `r` over `x` into `out` (contiguous, one element per kept index).
fn run<T: Element, O: Element, R: Reducer<T>>(
    name: &'static str,
    x: &Tensor,
    out: &Tensor,
    dims: Option<&[usize]>,
    r: &R,
    finish: impl Fn(R::Acc) -> O + Sync,
) -> Result<()> {
    let acc = access(name, &[x], &[out])?;
    if out.numel() == 1 && x.is_contiguous() && (1..=CHUNK).contains(&x.numel()) {
        // One output over one contiguous run, small enough for one chunk:
        // the general path would fold exactly this slice (same bits).
        // SAFETY: x's numel contiguous elements; out has one element.
        unsafe {
            let xs = std::slice::from_raw_parts(acc.ins[0] as *const T, x.numel());
            *(acc.outs[0] as *mut O) = finish(r.fold(xs));
        }
        return Ok(());
    }
    let p = plan(x.layout(), dims);
    let xp = acc.ins[0] as usize;
    let op = acc.outs[0] as usize;
    let n_out: usize = p.outer_shape.iter().product();
    let n_in: usize = p.inner_shape.iter().product();
    let chunks = n_in.div_ceil(CHUNK).max(1);
    let reduce_one = |o: usize, parallel_chunks: bool| -> O {
        if n_in == 0 {
            return finish(r.init());
        }
        let base = offset_of(o, &p.outer_shape, &p.outer_strides);
        // SAFETY: offset_of wraps every index into its dim, so base is the
        // offset of some output's first input element, and every chunk's
        // range is clipped to [0, n_in) (empty past it).
        let chunk =
            |c: usize| unsafe { fold_range(r, xp as *const T, base, &p, c * CHUNK, ((c + 1) * CHUNK).min(n_in)) };
        let total = if parallel_chunks && chunks > 1 {
            let parts: Vec<R::Acc> = (0..chunks).into_par_iter().map(chunk).collect();
            super::warm::keep_warm();
            parts.into_iter().reduce(|a, b| r.merge(a, b)).unwrap()
        } else {
            (1..chunks).fold(chunk(0), |a, c| r.merge(a, chunk(c)))
        };
        finish(total)
    };
    let write = |o: usize, v: O| {
        assert!(o < n_out, "output index in range");
        // SAFETY: o < n_out, the contiguous output's length.
        unsafe { *(op as *mut O).add(o) = v };
    };
    let work = n_out * n_in.max(1);
    if n_out >= 4 && p.inner_shape.len() == 1 && p.inner_strides[0] == 1 && (1..=CHUNK).contains(&n_in) {
        // Every output folds one contiguous run in one piece: fold them four
        // at a time (the same folds, so the same bits).
        let quad = |g: usize| {
            let (lo, hi) = (4 * g, (4 * g + 4).min(n_out));
            // SAFETY: each output's run of n_in contiguous elements is inside x.
            let row = |o: usize| unsafe {
                std::slice::from_raw_parts(
                    (xp as *const T).add(offset_of(o, &p.outer_shape, &p.outer_strides)),
                    n_in,
                )
            };
            if hi - lo == 4 {
                for (k, a) in r
                    .fold4([row(lo), row(lo + 1), row(lo + 2), row(lo + 3)])
                    .into_iter()
                    .enumerate()
                {
                    write(lo + k, finish(a));
                }
            } else {
                (lo..hi).for_each(|o| write(o, finish(r.fold(row(o)))));
            }
        };
        let groups = n_out.div_ceil(4);
        if work < PAR_MIN || rayon::current_num_threads() == 1 {
            (0..groups).for_each(quad);
        } else {
            super::warm::par_for_each(groups, quad);
        }
        return Ok(());
    }
    if work < PAR_MIN || rayon::current_num_threads() == 1 {
        (0..n_out).for_each(|o| write(o, reduce_one(o, false)));
    } else if n_out >= 16 || chunks == 1 {
        super::warm::par_for_each(n_out, |o| write(o, reduce_one(o, false)));
    } else {
        (0..n_out).for_each(|o| write(o, reduce_one(o, true)));
    }
    Ok(())
}

macro_rules! lane_fold {
    ($xs:expr, $acc_t:ty, $init:expr, $load:expr, $op:expr) => {{
        let xs = $xs;
        let mut lanes = [$init; LANES];
        let mut chunks = xs.chunks_exact(LANES);
        for c in &mut chunks {
            for i in 0..LANES {
                lanes[i] = $op(lanes[i], $load(c[i]));
            }
        }
        finish_lanes(lanes, chunks.remainder(), $load, $op)
    }};
}

/// Folds the tail `rest` (shorter than [`LANES`]) into the first lanes, then
/// the lanes pairwise, halving (the fixed end of every contiguous fold).
#[inline(always)]
fn finish_lanes<T: Copy, A: Copy>(
    mut lanes: [A; LANES],
    rest: &[T],
    load: impl Fn(T) -> A,
    op: impl Fn(A, A) -> A,
) -> A {
    for (l, v) in lanes.iter_mut().zip(rest) {
        *l = op(*l, load(*v));
    }
    let mut w = LANES / 2;
    while w > 0 {
        for i in 0..w {
            lanes[i] = op(lanes[i], lanes[i + w]);
        }
        w /= 2;
    }
    lanes[0]
}

multiversion! {
    fn sum_f32(xs: &[f32]) -> f32 {
        lane_fold!(xs, f32, 0.0f32, |v: f32| v, |a: f32, b: f32| a + b)
    }
}

multiversion! {
    /// `sum_f32` of four equally long slices, read together: each keeps its
    /// own lanes and folds in the same order, so the bits are those of four calls.
    fn sum4_f32(xs: [&[f32]; 4]) -> [f32; 4] {
        let n = xs[0].len();
        let full = n - n % LANES;
        let mut lanes = [[0.0f32; LANES]; 4];
        let mut i = 0;
        while i < full {
            for (l, x) in lanes.iter_mut().zip(xs) {
                for (a, v) in l.iter_mut().zip(&x[i..i + LANES]) {
                    *a += *v;
                }
            }
            i += LANES;
        }
        std::array::from_fn(|r| finish_lanes(lanes[r], &xs[r][full..], |v: f32| v, |a: f32, b: f32| a + b))
    }
}

multiversion! {
    fn prod_f32(xs: &[f32]) -> f32 {
        lane_fold!(xs, f32, 1.0f32, |v: f32| v, |a: f32, b: f32| a * b)
    }
}

multiversion! {
    fn sum_f64(xs: &[f64]) -> f64 {
        lane_fold!(xs, f64, 0.0f64, |v: f64| v, |a: f64, b: f64| a + b)
    }
}

multiversion! {
    fn prod_f64(xs: &[f64]) -> f64 {
        lane_fold!(xs, f64, 1.0f64, |v: f64| v, |a: f64, b: f64| a * b)
    }
}

multiversion! {
    /// Max (or min) of a non-empty f32 slice; NaN if any element is NaN.
    fn extreme_f32(xs32: &[f32], max: bool) -> f32 {
        let mut lanes = [xs32[0]; 16];
        let mut nan = false;
        let mut c = xs32.chunks_exact(16);
        for ch in &mut c {
            for i in 0..16 {
                let v = ch[i];
                nan |= v.is_nan();
                lanes[i] = if max { if v > lanes[i] { v } else { lanes[i] } } else if v < lanes[i] { v } else { lanes[i] };
            }
        }
        finish_extreme(&lanes, c.remainder(), max, nan)
    }
}

/// [`extreme_f32`]'s end: the tail into lane 0, then the lanes in order.
/// Kept out of line: inlined, LLVM's SLP vectoriser regroups the main
/// loop's lanes around it (several shuffles per 16 elements).
#[inline(never)]
fn finish_extreme(lanes: &[f32; 16], rest: &[f32], max: bool, mut nan: bool) -> f32 {
    let mut lanes = *lanes;
    for &v in rest {
        nan |= v.is_nan();
        lanes[0] = if max {
            if v > lanes[0] { v } else { lanes[0] }
        } else if v < lanes[0] {
            v
        } else {
            lanes[0]
        };
    }
    if nan {
        f32::NAN
    } else {
        lanes
            .iter()
            .fold(lanes[0], |a, &b| if max { a.max(b) } else { a.min(b) })
    }
}

/// Sum or product of floats, accumulating in f32 (f16/bf16/f32) or f64.
struct FloatArith {
    prod: bool,
}

impl Reducer<f32> for FloatArith {
    type Acc = f32;
    fn init(&self) -> f32 {
        if self.prod { 1.0 } else { 0.0 }
    }
    fn fold(&self, xs: &[f32]) -> f32 {
        if self.prod { prod_f32(xs) } else { sum_f32(xs) }
    }
    fn merge(&self, a: f32, b: f32) -> f32 {
        if self.prod { a * b } else { a + b }
    }
    fn fold4(&self, xs: [&[f32]; 4]) -> [f32; 4] {
        if self.prod { xs.map(prod_f32) } else { sum4_f32(xs) }
    }
}

impl Reducer<f64> for FloatArith {
    type Acc = f64;
    fn init(&self) -> f64 {
        if self.prod { 1.0 } else { 0.0 }
    }
    fn fold(&self, xs: &[f64]) -> f64 {
        if self.prod { prod_f64(xs) } else { sum_f64(xs) }
    }
    fn merge(&self, a: f64, b: f64) -> f64 {
        if self.prod { a * b } else { a + b }
    }
}

macro_rules! half_arith {
    ($t:ty) => {
        impl Reducer<$t> for FloatArith {
            type Acc = f32;
            fn init(&self) -> f32 {
                if self.prod { 1.0 } else { 0.0 }
            }
            fn fold(&self, xs: &[$t]) -> f32 {
                if self.prod {
                    lane_fold!(xs, f32, 1.0f32, |v: $t| v.to_f32(), |a: f32, b: f32| a * b)
                } else {
                    lane_fold!(xs, f32, 0.0f32, |v: $t| v.to_f32(), |a: f32, b: f32| a + b)
                }
            }
            fn merge(&self, a: f32, b: f32) -> f32 {
                if self.prod { a * b } else { a + b }
            }
        }
    };
}
half_arith!(f16);
half_arith!(bf16);

/// Integer (and bool) sum or product in wrapping i64.
struct IntArith {
    prod: bool,
}

impl<T: Element> Reducer<T> for IntArith {
    type Acc = i64;
    fn init(&self) -> i64 {
        self.prod as i64
    }
    fn fold(&self, xs: &[T]) -> i64 {
        if self.prod {
            xs.iter().fold(1i64, |a, v| a.wrapping_mul(v.to_i64()))
        } else {
            xs.iter().fold(0i64, |a, v| a.wrapping_add(v.to_i64()))
        }
    }
    fn merge(&self, a: i64, b: i64) -> i64 {
        if self.prod {
            a.wrapping_mul(b)
        } else {
            a.wrapping_add(b)
        }
    }
}

/// Maximum or minimum; NaN wins.
struct Extreme {
    max: bool,
}

impl Extreme {
    #[inline(always)]
    fn pick<T: Element>(&self, a: T, b: T) -> T {
        // A NaN compares false both ways and is not equal to itself.
        #[allow(clippy::eq_op)]
        let a_nan = a != a;
        #[allow(clippy::eq_op)]
        let b_nan = b != b;
        if a_nan {
            a
        } else if b_nan || (self.max && b > a) || (!self.max && b < a) {
            b
        } else {
            a
        }
    }
}

impl<T: Element> Reducer<T> for Extreme {
    type Acc = T;
    fn init(&self) -> T {
        T::default()
    }
    fn fold(&self, xs: &[T]) -> T {
        let mut it = xs.iter();
        let first = *it.next().expect("extreme of an empty run");
        if T::DTYPE == DType::F32 {
            // SAFETY: T is f32 here.
            let xs32: &[f32] = unsafe { std::slice::from_raw_parts(xs.as_ptr() as *const f32, xs.len()) };
            let v = extreme_f32(xs32, self.max);
            // SAFETY: T is f32.
            return unsafe { *(&v as *const f32 as *const T) };
        }
        it.fold(first, |a, &b| self.pick(a, b))
    }
    fn merge(&self, a: T, b: T) -> T {
        self.pick(a, b)
    }
}

/// All / any of truth values.
struct Truth {
    all: bool,
}

impl<T: Element> Reducer<T> for Truth {
    type Acc = bool;
    fn init(&self) -> bool {
        self.all
    }
    fn fold(&self, xs: &[T]) -> bool {
        if self.all {
            xs.iter().all(|v| v.is_nonzero())
        } else {
            xs.iter().any(|v| v.is_nonzero())
        }
    }
    fn merge(&self, a: bool, b: bool) -> bool {
        if self.all { a && b } else { a || b }
    }
}

multiversion! {
    /// `acc[j] += row[j]` over one row of a column reduction.
    fn add_row_f32(acc: &mut [f32], row: &[f32]) {
        for (a, v) in acc.iter_mut().zip(row) {
            *a += *v;
        }
    }
}

/// The shape of a column sum: `out[b, j] = sum_i x[base(b) + i * stride + j]`
/// for `batch` kept outer dims (`base` walks their strides), `cols`
/// contiguous kept columns and `rows` reduced rows `stride` apart.
struct Columns<'a> {
    batch: &'a [usize],
    batch_strides: &'a [usize],
    rows: usize,
    cols: usize,
    stride: usize,
}

/// A column sum (e.g. a bias gradient, or a broadcast operand's gradient
/// summed over its leading dims): accumulated in f32 (f16 / bf16 rows
/// widened first, the sums rounded once by `finish`), rows added in
/// order, in chunks of [`CHUNK`] rows merged in order; vectorised across
/// columns, in parallel over the batch entries and column blocks.
fn column_sum<T: Element, O: Element>(
    name: &'static str,
    x: &Tensor,
    out: &Tensor,
    c: &Columns<'_>,
    finish: fn(f32) -> O,
) -> Result<()> {
    let acc = access(name, &[x], &[out])?;
    let (xp, op) = (acc.ins[0] as usize, acc.outs[0] as usize);
    const COLS: usize = 256;
    let (rows, cols, stride) = (c.rows, c.cols, c.stride);
    let blocks = cols.div_ceil(COLS);
    let task = |t: usize| {
        let (bi, b) = (t / blocks, t % blocks);
        let base = offset_of(bi, c.batch, c.batch_strides);
        let (j0, j1) = (b * COLS, ((b + 1) * COLS).min(cols));
        assert!(j0 < j1, "column block in range");
        let w = j1 - j0;
        let mut total = [0f32; COLS];
        let mut part = [0f32; COLS];
        let mut r0 = 0;
        while r0 < rows {
            let r1 = (r0 + CHUNK).min(rows);
            part[..w].fill(0.0);
            let mut wide = [0f32; COLS];
            for i in r0..r1 {
                // SAFETY: row i, columns j0..j1 of batch entry bi are inside x.
                let row = unsafe { std::slice::from_raw_parts((xp as *const T).add(base + i * stride + j0), w) };
                if T::DTYPE == DType::F32 {
                    // SAFETY: T is f32 here.
                    add_row_f32(&mut part[..w], unsafe { &*(row as *const [T] as *const [f32]) });
                } else {
                    super::copy::cast_block(row, &mut wide[..w]);
                    add_row_f32(&mut part[..w], &wide[..w]);
                }
            }
            add_row_f32(&mut total[..w], &part[..w]);
            r0 = r1;
        }
        for (j, t) in total[..w].iter().enumerate() {
            // SAFETY: columns j0..j1 of output row bi (the output is contiguous).
            unsafe { *(op as *mut O).add(bi * cols + j0 + j) = finish(*t) };
        }
    };
    let entries: usize = c.batch.iter().product();
    let tasks = entries * blocks;
    if entries * rows * cols < PAR_MIN || rayon::current_num_threads() == 1 {
        (0..tasks).for_each(task);
    } else {
        super::warm::par_for_each(tasks, task);
    }
    Ok(())
}

pub(crate) fn reduce_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<Reduce>(op)?;
    let (x, out) = (inputs[0], outputs[0]);
    let name = op.entry().base_name();
    let dims = op.dims.as_deref();
    if op.kind == ReduceKind::Sum
        && matches!(x.dtype(), DType::F32 | DType::F16 | DType::BF16)
        && out.dtype() == x.dtype()
        && dims.is_some()
    {
        // Column sums (e.g. a bias gradient, or the gradient of an operand
        // broadcast over leading dims): vectorise across the kept columns.
        let p = plan(x.layout(), dims);
        // Kept dims walked as the contiguous output walks them, merged.
        let (kept, kept_strides) = Layout::coalesce(&p.outer_shape, &[&p.outer_strides]);
        if let (Some((&cols, batch)), Some((&1, batch_strides)), [rows], [stride]) = (
            kept.split_last(),
            kept_strides[0].split_last(),
            p.inner_shape.as_slice(),
            p.inner_strides.as_slice(),
        ) && *stride >= cols
        {
            let c = Columns {
                batch,
                batch_strides,
                rows: *rows,
                cols,
                stride: *stride,
            };
            return match x.dtype() {
                DType::F16 => column_sum::<f16, f16>(name, x, out, &c, f16::from_f32),
                DType::BF16 => column_sum::<bf16, bf16>(name, x, out, &c, bf16::from_f32),
                _ => column_sum::<f32, f32>(name, x, out, &c, |v| v),
            };
        }
    }
    match op.kind {
        ReduceKind::Sum | ReduceKind::Prod => {
            let prod = op.kind == ReduceKind::Prod;
            match x.dtype() {
                DType::F32 => run::<f32, f32, _>(name, x, out, dims, &FloatArith { prod }, |a| a),
                DType::F64 => run::<f64, f64, _>(name, x, out, dims, &FloatArith { prod }, |a| a),
                DType::F16 => run::<f16, f16, _>(name, x, out, dims, &FloatArith { prod }, f16::from_f32),
                DType::BF16 => run::<bf16, bf16, _>(name, x, out, dims, &FloatArith { prod }, bf16::from_f32),
                dt => with_dtype!(dt, T => with_dtype!(out.dtype(), O => {
                    run::<T, O, _>(name, x, out, dims, &IntArith { prod }, O::from_i64)
                })),
            }
        }
        ReduceKind::Amax | ReduceKind::Amin => {
            let r = Extreme {
                max: op.kind == ReduceKind::Amax,
            };
            with_dtype!(x.dtype(), T => run::<T, T, _>(name, x, out, dims, &r, |a| a))
        }
        ReduceKind::All | ReduceKind::Any => {
            let r = Truth {
                all: op.kind == ReduceKind::All,
            };
            with_dtype!(x.dtype(), T => run::<T, bool, _>(name, x, out, dims, &r, |a| a))
        }
    }
}

/// max/min along a dim with indices; argmax/argmin (also over the flattened tensor).
pub(crate) fn index_reduce_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<IndexReduce>(op)?;
    if inputs[0].ndim() == 0 && op.with_values {
        // max/min of a 0-d tensor along its dim: the element, index 0.
        super::copy::cast_into(outputs[0], inputs[0])?;
        outputs[1].zero_()?;
        return Ok(());
    }
    let name = op.entry().base_name();
    let (x, dim) = match op.dim {
        Some(d) => (inputs[0].clone(), d),
        None => (inputs[0].contiguous()?.reshape([-1])?, 0),
    };
    let (vals, idxs) = if op.with_values {
        (Some(outputs[0]), outputs[1])
    } else {
        (None, outputs[0])
    };
    let mut outs: Vec<&Tensor> = vals.into_iter().collect();
    outs.push(idxs);
    let acc = access(name, &[&x], &outs)?;
    let l = x.layout();
    let n = l.shape[dim];
    let st = l.strides[dim];
    let outer_shape: Dims = (0..l.ndim()).filter(|&d| d != dim).map(|d| l.shape[d]).collect();
    let outer_strides: Dims = (0..l.ndim()).filter(|&d| d != dim).map(|d| l.strides[d]).collect();
    let n_out: usize = outer_shape.iter().product();
    let xp = acc.ins[0] as usize;
    let (vp, ip) = if op.with_values {
        (acc.outs[0] as usize, acc.outs[1] as usize)
    } else {
        (0, acc.outs[0] as usize)
    };
    let ext = Extreme { max: op.max };
    with_dtype!(x.dtype(), T => {
        let one = |o: usize| {
            let base = offset_of(o, &outer_shape, &outer_strides);
            let xp = xp as *const T;
            // SAFETY: in-bounds by the layout; n > 0 was checked by the shape rule.
            let mut best = unsafe { *xp.add(base) };
            let mut bi = 0usize;
            #[allow(clippy::eq_op)]
            if best == best {
                for i in 1..n {
                    // SAFETY: base + i * st for i < n addresses element i of the reduced dim, inside the input's
                    // layout (checked at its construction).
                    let v = unsafe { *xp.add(base + i * st) };
                    #[allow(clippy::eq_op)]
                    let is_nan = v != v;
                    if is_nan || ext.pick(best, v) != best {
                        best = v;
                        bi = i;
                        if is_nan {
                            break;
                        }
                    }
                }
            }
            // SAFETY: o < n_out, the outputs' length.
            unsafe {
                if vp != 0 {
                    *(vp as *mut T).add(o) = best;
                }
                *(ip as *mut i64).add(o) = bi as i64;
            }
        };
        if n_out * n < PAR_MIN {
            (0..n_out).for_each(one);
        } else {
            super::warm::par_for_each(n_out, one);
        }
    });
    Ok(())
}

/// cumsum / cumprod along a dim; floats accumulate in f64, integers in i64.
/// Calls `line(in_base, out_base)` for every line along `d` of `x` and
/// `out` (same shape), in parallel for big inputs; element `i` of a line is
/// at `in_base + i * x.strides()[d]` and `out_base + i * out.strides()[d]`.
pub(super) fn scan_lines(x: &Tensor, out: &Tensor, d: usize, line: impl Fn(usize, usize) + Sync) {
    let (l, ol) = (x.layout(), out.layout());
    let n = l.shape[d];
    let others: SmallVec<[usize; 6]> = (0..l.ndim()).filter(|&k| k != d).collect();
    let outer_shape: Dims = others.iter().map(|&k| l.shape[k]).collect();
    let in_strides: Dims = others.iter().map(|&k| l.strides[k]).collect();
    let out_strides: Dims = others.iter().map(|&k| ol.strides[k]).collect();
    let n_out: usize = outer_shape.iter().product();
    let each = |o: usize| {
        line(
            offset_of(o, &outer_shape, &in_strides),
            offset_of(o, &outer_shape, &out_strides),
        )
    };
    if n_out * n < PAR_MIN {
        (0..n_out).for_each(each);
    } else {
        super::warm::par_for_each(n_out, each);
    }
}

pub(crate) fn scan_kernel(op: &dyn Op, inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    let op = downcast_op::<Scan>(op)?;
    let (x, out) = (inputs[0], outputs[0]);
    if x.dtype() != out.dtype() {
        // `dtype=`: the input is cast first, as PyTorch's `self.to(dtype)`.
        let xc = x.to_dtype(out.dtype())?;
        return scan_kernel(op, &[&xc], outputs);
    }
    if x.ndim() == 0 {
        // One element: its running sum or product is itself.
        return super::copy::cast_into(out, x);
    }
    let name = op.entry().base_name();
    let acc = access(name, &[x], &[out])?;
    let d = op.dim;
    let n = x.shape()[d];
    let (st, ost) = (x.strides()[d], out.strides()[d]);
    let (xp, op_) = (acc.ins[0] as usize, acc.outs[0] as usize);
    let prod = op.prod;
    with_dtype!(x.dtype(), T => {
        scan_lines(x, out, d, |ib, ob| {
            let (xp, yp) = (xp as *const T, op_ as *mut T);
            if T::DTYPE.is_floating_point() {
                let mut a = if prod { 1.0f64 } else { 0.0 };
                for i in 0..n {
                    // SAFETY: in-bounds by the layouts.
                    let v = unsafe { *xp.add(ib + i * st) }.to_f64();
                    a = if prod { a * v } else { a + v };
                    // SAFETY: ob + i * ost for i < n is element i of this line of the output, inside its layout.
                    unsafe { *yp.add(ob + i * ost) = T::from_f64(a) };
                }
            } else {
                let mut a = prod as i64;
                for i in 0..n {
                    // SAFETY: in-bounds by the layouts.
                    let v = unsafe { *xp.add(ib + i * st) }.to_i64();
                    a = if prod { a.wrapping_mul(v) } else { a.wrapping_add(v) };
                    // SAFETY: ob + i * ost for i < n is element i of this line of the output, inside its layout.
                    unsafe { *yp.add(ob + i * ost) = T::from_i64(a) };
                }
            }
        });
    });
    Ok(())
}
