//! The pointwise engine: runs an elementwise function over operands of any
//! strides (broadcast dims have stride 0).
//!
//! The iteration space is ordered by the output's strides and adjacent dims
//! are merged where every operand allows. It is then cut into blocks of up to
//! [`BLOCK`] elements. For each block, an operand whose elements lie
//! contiguously in memory is passed in place; any other (strided, broadcast,
//! or aliasing the output) is first gathered into a small buffer. The
//! function therefore always sees plain contiguous slices and vectorises;
//! results are written to the output in place or scattered from a buffer.
//! An operand whose dtype is not the function's element type is converted
//! on the way (read into the buffer converted, or written from it
//! converted), as PyTorch's TensorIterator casts inside its loop: mixed-dtype
//! ops need no separate casting copy.
//! Blocks are spread over threads in fixed chunks; each element's result
//! depends only on its inputs, so the output is the same for any thread count.

use std::marker::PhantomData;
use std::mem::MaybeUninit;

use smallvec::SmallVec;

use std::sync::RwLockReadGuard;

use super::access::access;
use super::copy::{CastFn, caster};
use crate::layout::{Dims, Layout};
use crate::storage::Buffer;
use crate::{DType, Element, Result, Tensor};

/// Elements per block.
pub(crate) const BLOCK: usize = 1024;
/// Shortest rows the engine runs one by one in place rather than gathering
/// several into a buffer (when every operand's rows are contiguous).
const DIRECT_ROWS: usize = 16;
/// Most inputs a pointwise function takes.
pub(crate) const MAX_INPUTS: usize = 4;

/// How much work one element is, which sets the parallel grain.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Cost {
    /// A load, an add, a store.
    Cheap,
    /// A transcendental function or more.
    Heavy,
}

impl Cost {
    fn grain(self) -> usize {
        match self {
            Cost::Cheap => 1 << 16,
            Cost::Heavy => 1 << 13,
        }
    }
}

/// One operand: data pointer to its first element, strides in elements
/// (already broadcast to the iteration shape), element size in bytes.
#[derive(Clone)]
pub(crate) struct Operand {
    pub ptr: usize,
    pub strides: Dims,
    pub esize: usize,
    /// When the operand's dtype is not the block function's: the conversion
    /// from the operand's dtype to the function's (an input) or from the
    /// function's to the operand's (the output), and the size of the
    /// function's elements. The operand then always goes through a buffer.
    pub cast: Option<(CastFn, usize)>,
    /// For an input: shares memory with the output (must be gathered before
    /// writing). For the output: has internal overlap (several elements at
    /// one address, e.g. `fill_` of an expanded tensor), so it is written
    /// from one thread only.
    pub aliases_out: bool,
}

/// A block function: reads `n` contiguous elements at each input pointer and
/// writes `n` at the output pointer. Running it is `unsafe`: the pointers
/// are raw, and only the engine knows they are valid.
pub(crate) trait BlockFn: Sync {
    /// Runs the function over one block.
    ///
    /// # Safety
    /// Each `ins[k]` is aligned and valid for reads of `n` elements of the
    /// function's `k`-th input type, `out` aligned and valid for writes of
    /// `n` elements of its output type, and no input overlaps the output.
    unsafe fn run(&self, ins: &[*const u8], out: *mut u8, n: usize);
}

/// Marks the element types a block function is for (`Send + Sync` whatever they are).
type Types<T> = PhantomData<fn() -> T>;

/// The block function of [`map1`]: `out = f(a)` on typed slices.
struct Map1<F, A, O>(F, Types<(A, O)>);

impl<F: Fn(&[A], &mut [O]) + Sync, A: Element, O: Element> BlockFn for Map1<F, A, O> {
    unsafe fn run(&self, i: &[*const u8], o: *mut u8, n: usize) {
        // SAFETY: the caller's contract: `n` valid, aligned, contiguous
        // elements at each pointer, the output overlapping no input.
        let (x, y) = unsafe {
            (
                std::slice::from_raw_parts(i[0] as *const A, n),
                std::slice::from_raw_parts_mut(o as *mut O, n),
            )
        };
        (self.0)(x, y)
    }
}

/// The block function of [`map2`]: `out = f(a, b)` on typed slices.
struct Map2<F, A, B, O>(F, Types<(A, B, O)>);

impl<F: Fn(&[A], &[B], &mut [O]) + Sync, A: Element, B: Element, O: Element> BlockFn for Map2<F, A, B, O> {
    unsafe fn run(&self, i: &[*const u8], o: *mut u8, n: usize) {
        // SAFETY: as in Map1.
        let (x, y, z) = unsafe {
            (
                std::slice::from_raw_parts(i[0] as *const A, n),
                std::slice::from_raw_parts(i[1] as *const B, n),
                std::slice::from_raw_parts_mut(o as *mut O, n),
            )
        };
        (self.0)(x, y, z)
    }
}

/// The block function of [`map3`]: `out = f(a, b, c)` on typed slices.
struct Map3<F, A, B, C, O>(F, Types<(A, B, C, O)>);

impl<F, A: Element, B: Element, C: Element, O: Element> BlockFn for Map3<F, A, B, C, O>
where
    F: Fn(&[A], &[B], &[C], &mut [O]) + Sync,
{
    unsafe fn run(&self, i: &[*const u8], o: *mut u8, n: usize) {
        // SAFETY: as in Map1.
        let (x, y, z, w) = unsafe {
            (
                std::slice::from_raw_parts(i[0] as *const A, n),
                std::slice::from_raw_parts(i[1] as *const B, n),
                std::slice::from_raw_parts(i[2] as *const C, n),
                std::slice::from_raw_parts_mut(o as *mut O, n),
            )
        };
        (self.0)(x, y, z, w)
    }
}

/// The block function of [`fill_with`]: `out = f()` on a typed slice.
struct Fill<F, O>(F, Types<O>);

impl<F: Fn(&mut [O]) + Sync, O: Element> BlockFn for Fill<F, O> {
    unsafe fn run(&self, _: &[*const u8], o: *mut u8, n: usize) {
        // SAFETY: as in Map1.
        (self.0)(unsafe { std::slice::from_raw_parts_mut(o as *mut O, n) })
    }
}

struct Plan {
    shape: Dims,
    out_strides: Dims,
    in_strides: SmallVec<[Dims; MAX_INPUTS]>,
    /// Whether the output / each input is row-major contiguous over the whole
    /// iteration space (then any linear range of it is one run of memory).
    out_dense: bool,
    in_dense: SmallVec<[bool; MAX_INPUTS]>,
}

fn plan(shape: &[usize], out: &Operand, ins: &[Operand]) -> Plan {
    // Order dims by the output's strides, outermost first (stable for ties).
    let mut order: SmallVec<[usize; 6]> = (0..shape.len()).collect();
    order.sort_by(|&a, &b| out.strides[b].cmp(&out.strides[a]));
    let permuted_shape: Dims = order.iter().map(|&d| shape[d]).collect();
    let mut all: SmallVec<[Dims; 5]> = SmallVec::new();
    all.push(order.iter().map(|&d| out.strides[d]).collect());
    for op in ins {
        all.push(order.iter().map(|&d| op.strides[d]).collect());
    }
    let refs: SmallVec<[&[usize]; 5]> = all.iter().map(|d| d.as_slice()).collect();
    let (mut cshape, mut cstrides) = Layout::coalesce(&permuted_shape, &refs);
    if cshape.is_empty() {
        cshape.push(1);
        for s in cstrides.iter_mut() {
            s.push(0);
        }
    }
    let out_strides = cstrides.remove(0);
    let dense = crate::layout::contiguous_strides(&cshape);
    let is_dense = |st: &Dims| st.iter().zip(&dense).zip(&cshape).all(|((a, b), &n)| n == 1 || a == b);
    Plan {
        out_dense: is_dense(&out_strides),
        in_dense: cstrides.iter().map(is_dense).collect(),
        shape: cshape,
        out_strides,
        in_strides: cstrides.into_iter().collect(),
    }
}

/// Copies `n` elements of size `esize` with element stride `stride` from `src` to contiguous `dst`.
///
/// # Safety
/// `src` must be valid for the strided reads and `dst` for `n * esize` bytes.
#[inline]
unsafe fn gather(src: *const u8, stride: usize, n: usize, esize: usize, dst: *mut u8) {
    // SAFETY: this function's contract: `src` readable for n elements `stride` elements apart, `dst` writable for n
    // contiguous elements of esize bytes.
    unsafe {
        if stride == 1 {
            std::ptr::copy_nonoverlapping(src, dst, n * esize);
            return;
        }
        macro_rules! typed {
            ($t:ty) => {{
                let s = src as *const $t;
                let d = dst as *mut $t;
                if stride == 0 {
                    let v = s.read_unaligned();
                    for i in 0..n {
                        d.add(i).write(v);
                    }
                } else {
                    for i in 0..n {
                        d.add(i).write(s.add(i * stride).read_unaligned());
                    }
                }
            }};
        }
        match esize {
            1 => typed!(u8),
            2 => typed!(u16),
            4 => typed!(u32),
            _ => typed!(u64),
        }
    }
}

/// Copies `n` contiguous elements from `src` to `dst` with element stride `stride`.
///
/// # Safety
/// As [`gather`], reversed.
#[inline]
unsafe fn scatter(src: *const u8, n: usize, esize: usize, dst: *mut u8, stride: usize) {
    // SAFETY: this function's contract: `src` readable for n contiguous elements, `dst` writable for n elements
    // `stride` elements apart, esize bytes each.
    unsafe {
        if stride == 1 {
            std::ptr::copy_nonoverlapping(src, dst, n * esize);
            return;
        }
        macro_rules! typed {
            ($t:ty) => {{
                let s = src as *const $t;
                let d = dst as *mut $t;
                for i in 0..n {
                    d.add(i * stride).write_unaligned(s.add(i).read());
                }
            }};
        }
        match esize {
            1 => typed!(u8),
            2 => typed!(u16),
            4 => typed!(u32),
            _ => typed!(u64),
        }
    }
}

/// Reads `n` elements of input `op` at `src`, `stride` elements apart, into
/// contiguous `dst` as the block function's type (converted if `op.cast`).
///
/// # Safety
/// As [`gather`] for the operand's element size; `dst` holds `n` elements
/// of the function's type.
#[inline]
unsafe fn load(op: &Operand, src: *const u8, stride: usize, n: usize, dst: *mut u8) {
    // SAFETY: this function's contract, which is the cast's and gather's.
    unsafe {
        match op.cast {
            Some((cast, _)) => cast(src, stride, dst, 1, n),
            None => gather(src, stride, n, op.esize, dst),
        }
    }
}

/// Writes `n` contiguous results at `src` (the block function's type) to
/// the output `out` at `dst`, `stride` elements apart (converted if `out.cast`).
///
/// # Safety
/// As [`scatter`] for the output's element size; `src` holds `n` elements
/// of the function's type.
#[inline]
unsafe fn store(out: &Operand, src: *const u8, n: usize, dst: *mut u8, stride: usize) {
    // SAFETY: this function's contract, which is the cast's and scatter's.
    unsafe {
        match out.cast {
            Some((cast, _)) => cast(src, 1, dst, stride, n),
            None => scatter(src, n, out.esize, dst, stride),
        }
    }
}

/// Runs `f` over the linear range `[start, end)` of the planned iteration space.
///
/// # Safety
/// As [`pointwise`], for the plan `p` made from its operands; `end` is at
/// most the iteration space's size.
unsafe fn run_range(p: &Plan, out: &Operand, ins: &[Operand], start: usize, end: usize, f: &dyn BlockFn) {
    let nd = p.shape.len();
    let inner = p.shape[nd - 1];
    // Scratch for gathered operands: never initialised (only written slots are read).
    let mut scratch = MaybeUninit::<[[u64; BLOCK]; MAX_INPUTS + 1]>::uninit();
    let base_buf = scratch.as_mut_ptr() as *mut u64;
    let buf = |k: usize| base_buf.wrapping_add(k * BLOCK) as *mut u8;
    let mut in_ptrs: SmallVec<[*const u8; MAX_INPUTS]> = SmallVec::new();
    // An input that is the output itself (an in-place op's `self`: same
    // address, same strides): in the direct rows below, each of its rows is
    // copied to its buffer just before the row runs.
    let exact_alias: SmallVec<[bool; MAX_INPUTS]> = ins
        .iter()
        .enumerate()
        .map(|(k, op)| {
            op.aliases_out
                && !out.aliases_out
                && op.ptr == out.ptr
                && op.esize == out.esize
                && op.cast.is_none()
                && p.in_strides[k] == p.out_strides
        })
        .collect();
    // Rows long enough to be run one by one in place when every operand's
    // rows are contiguous runs (a gather would copy each row anyway).
    let direct_rows = inner >= DIRECT_ROWS
        && out.cast.is_none()
        && (p.out_dense || p.out_strides[nd - 1] == 1)
        && ins.iter().enumerate().all(|(k, op)| {
            (p.in_dense[k] || p.in_strides[k][nd - 1] == 1) && op.cast.is_none() && (!op.aliases_out || exact_alias[k])
        });
    let mut pos = start;
    while pos < end {
        // Multi-index of `pos`.
        let mut idx: SmallVec<[usize; 6]> = smallvec::smallvec![0; nd];
        let mut rem = pos;
        for d in (0..nd).rev() {
            idx[d] = rem % p.shape[d];
            rem /= p.shape[d];
        }
        let in_row = idx[nd - 1];
        let remaining = end - pos;
        // A block is either a piece of one row, or several whole rows.
        let (n, rows_mode) = if in_row > 0 || inner >= BLOCK || remaining < inner {
            ((inner - in_row).min(BLOCK).min(remaining), false)
        } else if direct_rows && remaining / inner > 1 {
            // Direct rows use no block buffer across rows: take them all.
            (remaining / inner * inner, true)
        } else {
            let rows = (BLOCK / inner).min(remaining / inner);
            (rows * inner, rows > 1)
        };
        let offset_of = |strides: &Dims, idx: &[usize]| -> usize { idx.iter().zip(strides).map(|(i, s)| i * s).sum() };
        if rows_mode && direct_rows {
            // Whole rows whose every operand is a contiguous run: the function
            // runs on each row in place, with no gather and no scatter.
            // The rows' offsets are carried from row to row (one add per
            // operand, more only where an outer index wraps).
            let mut ridx = idx.clone();
            let mut in_offs: SmallVec<[usize; MAX_INPUTS]> =
                (0..ins.len()).map(|k| offset_of(&p.in_strides[k], &ridx)).collect();
            let mut out_off = offset_of(&p.out_strides, &ridx);
            let mut done = 0;
            while done < n {
                in_ptrs.clear();
                for (k, op) in ins.iter().enumerate() {
                    let row = (op.ptr + in_offs[k] * op.esize) as *const u8;
                    if exact_alias[k] {
                        // SAFETY: the row is `inner` contiguous elements inside the
                        // input; rows mode has inner < BLOCK, so they fit buffer k
                        // (BLOCK slots of 8 >= esize bytes), which overlaps nothing.
                        unsafe { std::ptr::copy_nonoverlapping(row, buf(k), inner * op.esize) };
                        in_ptrs.push(buf(k) as *const u8);
                    } else {
                        in_ptrs.push(row);
                    }
                }
                let ob = out.ptr + out_off * out.esize;
                // SAFETY: in-bounds by construction of the plan; each input row
                // is a contiguous run of `inner` elements (stride 1, no cast,
                // not sharing the output's memory: the output's own rows were
                // copied to their buffers), and so is the output row.
                unsafe { f.run(&in_ptrs, ob as *mut u8, inner) };
                done += inner;
                let mut d = nd - 1;
                while d > 0 {
                    d -= 1;
                    ridx[d] += 1;
                    if ridx[d] < p.shape[d] {
                        out_off += p.out_strides[d];
                        for (k, o) in in_offs.iter_mut().enumerate() {
                            *o += p.in_strides[k][d];
                        }
                        break;
                    }
                    // Index d wraps to 0: take back its whole span.
                    ridx[d] = 0;
                    out_off -= p.out_strides[d] * (p.shape[d] - 1);
                    for (k, o) in in_offs.iter_mut().enumerate() {
                        *o -= p.in_strides[k][d] * (p.shape[d] - 1);
                    }
                }
            }
            pos += n;
            continue;
        }
        in_ptrs.clear();
        for (k, op) in ins.iter().enumerate() {
            let base = op.ptr + offset_of(&p.in_strides[k], &idx) * op.esize;
            let st = p.in_strides[k][nd - 1];
            if (p.in_dense[k] || (!rows_mode && (st == 1 || n == 1))) && !op.aliases_out && op.cast.is_none() {
                in_ptrs.push(base as *const u8);
            } else {
                let dst = buf(k);
                // The function's element size: the buffer holds its elements.
                let kesize = op.cast.map_or(op.esize, |(_, s)| s);
                if rows_mode {
                    let mut ridx = idx.clone();
                    let mut done = 0;
                    while done < n {
                        let b = op.ptr + offset_of(&p.in_strides[k], &ridx) * op.esize;
                        // SAFETY: in-bounds by construction of the plan; dst has BLOCK >= n slots of 8 >= kesize bytes.
                        unsafe { load(op, b as *const u8, st, inner, dst.add(done * kesize)) };
                        done += inner;
                        advance_row(&mut ridx, &p.shape);
                    }
                } else {
                    // SAFETY: as above.
                    unsafe { load(op, base as *const u8, st, n, dst) };
                }
                in_ptrs.push(dst as *const u8);
            }
        }
        let ost = p.out_strides[nd - 1];
        let obase = out.ptr + offset_of(&p.out_strides, &idx) * out.esize;
        if (p.out_dense || (!rows_mode && (ost == 1 || n == 1))) && out.cast.is_none() {
            // SAFETY: each input pointer is a contiguous run of n elements of
            // the operand (dense or stride 1, not aliasing the output) or a
            // scratch slot of BLOCK >= n elements just gathered; the output's
            // n elements are a contiguous run of it.
            unsafe { f.run(&in_ptrs, obase as *mut u8, n) };
        } else {
            let ob = buf(MAX_INPUTS);
            // SAFETY: as above, the output being the last scratch slot.
            unsafe { f.run(&in_ptrs, ob, n) };
            let kesize = out.cast.map_or(out.esize, |(_, s)| s);
            if rows_mode {
                let mut ridx = idx.clone();
                let mut done = 0;
                while done < n {
                    let b = out.ptr + offset_of(&p.out_strides, &ridx) * out.esize;
                    // SAFETY: in-bounds by construction of the plan; the scratch slot holds n results.
                    unsafe { store(out, ob.add(done * kesize), inner, b as *mut u8, ost) };
                    done += inner;
                    advance_row(&mut ridx, &p.shape);
                }
            } else {
                // SAFETY: as above.
                unsafe { store(out, ob, n, obase as *mut u8, ost) };
            }
        }
        pos += n;
    }
}

/// Moves a multi-index whose last entry is 0 to the start of the next row.
fn advance_row(idx: &mut [usize], shape: &[usize]) {
    let nd = idx.len();
    let mut d = nd - 1;
    while d > 0 {
        d -= 1;
        idx[d] += 1;
        if idx[d] < shape[d] {
            return;
        }
        idx[d] = 0;
    }
}

/// Rows and columns of a tile of a transposing 2-D iteration (measured best
/// on the bench's 3163 x 3163 transposed add).
const TILE_ROWS: usize = 8;
const TILE_COLS: usize = 512;

/// Whether some input walks the 2-D iteration space transposed (its
/// contiguous dim is the outer one), so that row-by-row iteration would
/// touch one cache line per element of it.
fn transposing(p: &Plan) -> bool {
    p.shape.len() == 2 && p.in_strides.iter().any(|st| st[0] == 1 && st[1] > 1)
}

/// Runs tiles `[t0, t1)` of a 2-D iteration: `TILE_ROWS` rows of
/// `TILE_COLS` columns at a time, so the transposed operand's cache lines are
/// used whole before they are evicted.
///
/// # Safety
/// As [`run_range`]; `t1` is at most the number of tiles.
unsafe fn run_tiles(p: &Plan, out: &Operand, ins: &[Operand], t0: usize, t1: usize, f: &dyn BlockFn) {
    let (rows, cols) = (p.shape[0], p.shape[1]);
    let tiles_c = cols.div_ceil(TILE_COLS);
    for t in t0..t1 {
        let (tr, tc) = (t / tiles_c, t % tiles_c);
        let (c0, c1) = (tc * TILE_COLS, ((tc + 1) * TILE_COLS).min(cols));
        for r in tr * TILE_ROWS..((tr + 1) * TILE_ROWS).min(rows) {
            // SAFETY: the caller's contract; the range is a piece of row r.
            unsafe { run_range(p, out, ins, r * cols + c0, r * cols + c1, f) };
        }
    }
}

/// Runs `f` over every element of `shape` (see the module docs).
///
/// # Safety
/// `out.ptr` points to the first element of a buffer valid for writes at
/// every offset its strides reach over `shape`, each `ins[k].ptr` likewise
/// for reads with its (broadcast) strides, each with its element size; the
/// buffers stay locked for the call; an input sharing memory with the output
/// has `aliases_out` set; `f`'s types match the operands' element sizes, or
/// an operand's `cast` converts between its dtype and `f`'s type; and
/// distinct elements of `shape` map to distinct output elements unless the
/// output's `aliases_out` is set (it is then written from this thread only).
pub(crate) unsafe fn pointwise(shape: &[usize], out: &Operand, ins: &[Operand], cost: Cost, f: &dyn BlockFn) {
    let numel: usize = shape.iter().product();
    if numel == 0 {
        return;
    }
    debug_assert!(ins.len() <= MAX_INPUTS);
    let p = plan(shape, out, ins);
    let grain = cost.grain();
    let serial = numel <= grain || rayon::current_num_threads() == 1 || out.aliases_out;
    if transposing(&p) && numel > TILE_ROWS * TILE_COLS {
        let tiles = p.shape[0].div_ceil(TILE_ROWS) * p.shape[1].div_ceil(TILE_COLS);
        if serial {
            // SAFETY: the caller's contract, over every tile.
            unsafe { run_tiles(&p, out, ins, 0, tiles, f) };
        } else {
            let per = (grain / (TILE_ROWS * TILE_COLS)).max(1);
            super::warm::par_for_each(tiles.div_ceil(per), |g| {
                // SAFETY: the caller's contract; tasks write disjoint tiles.
                unsafe { run_tiles(&p, out, ins, g * per, ((g + 1) * per).min(tiles), f) };
            });
        }
        return;
    }
    if serial {
        // SAFETY: the caller's contract, over the whole space.
        unsafe { run_range(&p, out, ins, 0, numel, f) };
    } else {
        let tasks = numel.div_ceil(grain);
        super::warm::par_for_each(tasks, |t| {
            // SAFETY: the caller's contract; tasks write disjoint ranges.
            unsafe { run_range(&p, out, ins, t * grain, ((t + 1) * grain).min(numel), f) };
        });
    }
}

/// The fast path of small calls (the common case of scalar-sized autograd
/// work), straight from the tensors without operand plans or the general
/// operand locking: a row-major output of at most [`BLOCK`] elements and
/// inputs that are row-major with as many elements (broadcasting only adds
/// size-1 dims then, so element `i` is the output's element `i`) or a single
/// value (one element, or one expanded). Inputs sharing the output's memory,
/// and single values, are read from copies.
///
/// The locks are only tried (the output's for writing, each other storage's
/// for reading): no call waits here, so the order of taking them does not
/// matter. Runs `f` once and returns true; returns false, having done
/// nothing, for any other case or when a lock is busy (the general path
/// then takes the locks in order and waits).
fn small_call(out: &Tensor, ins: &[&Tensor], f: &dyn BlockFn) -> bool {
    let numel = out.numel();
    if numel == 0 || numel > BLOCK || !out.is_contiguous() || ins.len() > MAX_INPUTS {
        return false;
    }
    let out_st = out.storage();
    // Bit k: input k is read from a copy (a single value, or the output's memory).
    let mut copied = 0u32;
    for (k, t) in ins.iter().enumerate() {
        let aliased = t.storage().same(out_st);
        if t.numel() == numel && t.is_contiguous() {
            copied |= (aliased as u32) << k;
        } else if t.shape().iter().zip(t.strides()).all(|(&n, &st)| n == 1 || st == 0) {
            copied |= 1 << k;
        } else {
            return false;
        }
    }
    let Some(out_guard) = out_st.try_write() else {
        return false;
    };
    let Buffer::Cpu(ob) = &*out_guard else {
        return false;
    };
    // SAFETY: a tensor's offset lies inside its storage (checked when the tensor was made), so the output's first
    // element is inside the locked buffer.
    let out_ptr = unsafe { ob.as_ptr().add(out.storage_offset() * out.element_size()) };
    let mut guards: [Option<RwLockReadGuard<'_, Buffer>>; MAX_INPUTS] = [None, None, None, None];
    let mut ptrs = [std::ptr::null::<u8>(); MAX_INPUTS];
    for (k, t) in ins.iter().enumerate() {
        let st = t.storage();
        let base = if st.same(out_st) {
            ob.as_ptr() as *const u8
        } else if let Some(j) = (0..k).find(|&j| ins[j].storage().same(st)) {
            // Already locked for an earlier input: base of that storage.
            // SAFETY: undoes the earlier input's offset within the same storage.
            unsafe { ptrs[j].sub(ins[j].storage_offset() * ins[j].element_size()) }
        } else {
            let Some(g) = st.try_read() else {
                return false;
            };
            let Buffer::Cpu(b) = &*g else {
                return false;
            };
            let p = b.as_ptr() as *const u8;
            guards[k] = Some(g);
            p
        };
        // SAFETY: as above, each input's offset lies inside its storage, whose buffer is locked for this call.
        ptrs[k] = unsafe { base.add(t.storage_offset() * t.element_size()) };
    }
    if copied == 0 {
        // SAFETY: every input has `numel` dense elements at its pointer and
        // does not share the output's memory (else it would be copied); the
        // output has `numel` dense elements; all locked for this call.
        unsafe { f.run(&ptrs[..ins.len()], out_ptr, numel) };
    } else {
        // SAFETY: every input has `numel` dense elements or a single one at its
        // pointer (the checks above), the output `numel` dense elements, all
        // in buffers locked for this call; `f` handles exactly `numel`.
        unsafe { run_with_copies(ins, &ptrs, copied, out_ptr, numel, f) };
    }
    true
}

/// [`small_call`]'s run when some inputs are read from copies (bit `k` of
/// `copied`): each such input is gathered (a single value repeated, or the
/// elements as they are) into a scratch block first.
///
/// # Safety
/// Each `ptrs[k]` is readable for `numel` elements of its input (or one, for
/// an input of a single element), `out_ptr` is writable for `numel` output
/// elements, and `f` reads and writes only that many.
#[inline(never)]
unsafe fn run_with_copies(
    ins: &[&Tensor],
    ptrs: &[*const u8],
    copied: u32,
    out_ptr: *mut u8,
    numel: usize,
    f: &dyn BlockFn,
) {
    let mut scratch = MaybeUninit::<[[u64; BLOCK]; MAX_INPUTS]>::uninit();
    let base_buf = scratch.as_mut_ptr() as *mut u64;
    let mut srcs = [std::ptr::null::<u8>(); MAX_INPUTS];
    for (k, t) in ins.iter().enumerate() {
        srcs[k] = if copied >> k & 1 == 1 {
            let dst = base_buf.wrapping_add(k * BLOCK) as *mut u8;
            let stride = usize::from(t.numel() == numel && t.is_contiguous());
            // SAFETY: the input has `numel` readable elements (stride 1) or
            // one (stride 0) at its pointer; dst has BLOCK u64 slots.
            unsafe { gather(ptrs[k], stride, numel, t.element_size(), dst) };
            dst
        } else {
            ptrs[k]
        };
    }
    // SAFETY: the caller's contract for the inputs used in place (which do
    // not share the output's memory); the copies hold numel <= BLOCK elements.
    unsafe { f.run(&srcs[..ins.len()], out_ptr, numel) };
}

/// The input operand of `t` for a block function whose element type is `kernel`.
fn operand(t: &Tensor, ptr: *const u8, shape: &[usize], out: &Tensor, kernel: DType) -> Operand {
    Operand {
        ptr: ptr as usize,
        strides: t.layout().broadcast_strides(shape),
        esize: t.element_size(),
        cast: (t.dtype() != kernel).then(|| (caster(t.dtype(), kernel), kernel.element_size())),
        aliases_out: t.storage().same(out.storage()),
    }
}

/// The output operand of `out` for a block function whose element type is `kernel`.
fn out_operand(out: &Tensor, ptr: *mut u8, kernel: DType) -> Operand {
    Operand {
        ptr: ptr as usize,
        strides: out.strides().into(),
        esize: out.element_size(),
        cast: (out.dtype() != kernel).then(|| (caster(kernel, out.dtype()), kernel.element_size())),
        aliases_out: out.layout().may_have_overlapping_elements(),
    }
}

/// Whether every tensor has its block function's dtype (`small_call` takes
/// no casts).
fn uncast(pairs: &[(&Tensor, DType)]) -> bool {
    pairs.iter().all(|(t, d)| t.dtype() == *d)
}

/// Applies `f` blockwise: `out = f(a)`, `a` broadcast to `out`'s shape.
pub(crate) fn map1<A: Element, O: Element>(
    op: &'static str,
    out: &Tensor,
    a: &Tensor,
    cost: Cost,
    f: impl Fn(&[A], &mut [O]) + Sync,
) -> Result<()> {
    let block = Map1(f, PhantomData);
    if uncast(&[(a, A::DTYPE), (out, O::DTYPE)]) && small_call(out, &[a], &block) {
        return Ok(());
    }
    let acc = access(op, &[a], &[out])?;
    let shape = out.shape();
    let ins = [operand(a, acc.ins[0], shape, out, A::DTYPE)];
    // SAFETY: the operands come from the tensors' locked buffers with their
    // own strides (broadcast to the output's shape); inputs sharing the
    // output's memory and an output with internal overlap are marked.
    unsafe { pointwise(shape, &out_operand(out, acc.outs[0], O::DTYPE), &ins, cost, &block) };
    Ok(())
}

/// Applies `f` blockwise: `out = f(a, b)` with broadcasting.
pub(crate) fn map2<A: Element, B: Element, O: Element>(
    op: &'static str,
    out: &Tensor,
    a: &Tensor,
    b: &Tensor,
    cost: Cost,
    f: impl Fn(&[A], &[B], &mut [O]) + Sync,
) -> Result<()> {
    let block = Map2(f, PhantomData);
    if uncast(&[(a, A::DTYPE), (b, B::DTYPE), (out, O::DTYPE)]) && small_call(out, &[a, b], &block) {
        return Ok(());
    }
    let acc = access(op, &[a, b], &[out])?;
    let shape = out.shape();
    let ins = [
        operand(a, acc.ins[0], shape, out, A::DTYPE),
        operand(b, acc.ins[1], shape, out, B::DTYPE),
    ];
    // SAFETY: the operands come from the tensors' locked buffers with their
    // own strides (broadcast to the output's shape); inputs sharing the
    // output's memory and an output with internal overlap are marked.
    unsafe { pointwise(shape, &out_operand(out, acc.outs[0], O::DTYPE), &ins, cost, &block) };
    Ok(())
}

/// Applies `f` blockwise: `out = f(a, b, c)` with broadcasting.
#[allow(clippy::too_many_arguments)]
pub(crate) fn map3<A: Element, B: Element, C: Element, O: Element>(
    op: &'static str,
    out: &Tensor,
    a: &Tensor,
    b: &Tensor,
    c: &Tensor,
    cost: Cost,
    f: impl Fn(&[A], &[B], &[C], &mut [O]) + Sync,
) -> Result<()> {
    let block = Map3(f, PhantomData);
    let types = [(a, A::DTYPE), (b, B::DTYPE), (c, C::DTYPE), (out, O::DTYPE)];
    if uncast(&types) && small_call(out, &[a, b, c], &block) {
        return Ok(());
    }
    let acc = access(op, &[a, b, c], &[out])?;
    let shape = out.shape();
    let ins = [
        operand(a, acc.ins[0], shape, out, A::DTYPE),
        operand(b, acc.ins[1], shape, out, B::DTYPE),
        operand(c, acc.ins[2], shape, out, C::DTYPE),
    ];
    // SAFETY: the operands come from the tensors' locked buffers with their
    // own strides (broadcast to the output's shape); inputs sharing the
    // output's memory and an output with internal overlap are marked.
    unsafe { pointwise(shape, &out_operand(out, acc.outs[0], O::DTYPE), &ins, cost, &block) };
    Ok(())
}

/// Fills `out` blockwise from `f` (no inputs).
pub(crate) fn fill_with<O: Element>(
    op: &'static str,
    out: &Tensor,
    cost: Cost,
    f: impl Fn(&mut [O]) + Sync,
) -> Result<()> {
    let block = Fill(f, PhantomData);
    if uncast(&[(out, O::DTYPE)]) && small_call(out, &[], &block) {
        return Ok(());
    }
    let acc = access(op, &[], &[out])?;
    // SAFETY: as in map1.
    unsafe { pointwise(out.shape(), &out_operand(out, acc.outs[0], O::DTYPE), &[], cost, &block) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::Tensor;

    fn vals(t: &Tensor) -> Vec<f32> {
        t.to_vec::<f32>().expect("f32 values")
    }

    /// The small-call path with operands that share memory (with the output,
    /// with each other) and with an expanded single value.
    #[test]
    fn small_calls_with_shared_memory() -> crate::Result<()> {
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]);
        a.add_(&a)?; // both inputs and the output on one storage
        assert_eq!(vals(&a), [2.0, 4.0, 6.0, 8.0]);
        let two = Tensor::from_slice(&[2.0f32]);
        a.mul_(&two.expand([4])?)?; // a single value, expanded
        assert_eq!(vals(&a), [4.0, 8.0, 12.0, 16.0]);
        let t = Tensor::arange(8)?.to_dtype(crate::DType::F32)?;
        let (lo, hi) = (t.narrow(0, 0, 4)?, t.narrow(0, 4, 4)?);
        assert_eq!(vals(&lo.add(&hi)?), [4.0, 6.0, 8.0, 10.0]); // inputs on one storage
        assert_eq!(vals(&hi.sub(&lo)?), [4.0; 4]);
        hi.sub_(&lo)?; // output and input on one storage, apart
        assert_eq!(vals(&t), [0.0, 1.0, 2.0, 3.0, 4.0, 4.0, 4.0, 4.0]);
        Ok(())
    }

    /// When another thread holds an operand's lock, a small call does not
    /// fail or skip: it waits in the general path and computes the same.
    #[test]
    fn small_call_waits_for_a_held_lock() -> crate::Result<()> {
        let a = Tensor::from_slice(&[1.0f32, 2.0]);
        let b = Tensor::from_slice(&[10.0f32, 20.0]);
        let (locked_tx, locked_rx) = std::sync::mpsc::channel();
        let held = a.clone();
        let reader = std::thread::spawn(move || {
            let _g = held.storage().read();
            locked_tx.send(()).expect("main thread waiting");
            std::thread::sleep(std::time::Duration::from_millis(50));
        });
        locked_rx.recv().expect("reader started");
        a.add_(&b)?; // the output's lock is busy: try_write fails
        reader.join().expect("reader thread");
        assert_eq!(vals(&a), [11.0, 22.0]);
        Ok(())
    }
}
