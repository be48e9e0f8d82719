//! Dense factorizations on row-major matrices in `Vec`s, for the `linalg`
//! operators (`ops/decomp.rs`):
//!
//! - blocked LU with partial pivoting (LAPACK's `getrf` pivots; the
//!   trailing updates accumulate into the matrix through the crate's GEMM)
//!   and blocked triangular solves, whose right-hand sides are solved in
//!   independent chunks of [`COLS`] columns on the thread pool;
//! - Cholesky;
//! - Householder QR (LAPACK's `geqrf` signs);
//! - the symmetric eigenproblem: Householder tridiagonalisation, then the
//!   implicit QL algorithm with Wilkinson shifts (EISPACK's `tql2`);
//! - the SVD: Householder bidiagonalisation, then the Golub-Reinsch
//!   implicit-shift QR iteration on the bidiagonal.
//!
//! Plane rotations and reflections act on rows, so vectors are kept as rows
//! (transposed) while they are rotated. Every loop runs in a fixed order,
//! and parallel work is split into pieces whose size does not depend on the
//! thread count: same bits for any number of threads.

use std::sync::Mutex;

use super::gemm::{Mat, dgemm, sgemm};
use super::simd::multiversion;
use super::warm::par_for_each;

/// The float types the factorizations run in (f32, f64).
pub(crate) trait Real:
    Copy
    + PartialOrd
    + std::fmt::Debug
    + Send
    + Sync
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Neg<Output = Self>
    + std::ops::AddAssign
    + std::ops::SubAssign
    + std::ops::MulAssign
    + crate::Element
{
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
    /// `sqrt(self^2 + other^2)` without undue overflow or underflow.
    fn hypot(self, other: Self) -> Self;
    /// `|self|` with the sign of `sign`.
    fn copysign(self, sign: Self) -> Self;
    /// From f64.
    fn of(x: f64) -> Self;
    /// `x . y` (equal lengths) in 8 fixed lanes, folded in a fixed order:
    /// vectorised, and the same bits on every instruction set.
    fn dot(x: &[Self], y: &[Self]) -> Self;
    /// `y += a x`.
    fn axpy(y: &mut [Self], a: Self, x: &[Self]);
    /// The plane rotation `(x, y) <- (c x - s y, s x + c y)`.
    fn rot(x: &mut [Self], y: &mut [Self], c: Self, s: Self);
    /// `z -= a x + b y` (the symmetric rank-2 update of one row).
    fn rank2(z: &mut [Self], a: Self, x: &[Self], b: Self, y: &[Self]);
    /// `C = A * B` (`m x k` times `k x n`), or `C += A * B` with `acc`, `C`
    /// row-major with `ldc`; `parallel` lets a large product use the pool.
    ///
    /// # Safety
    /// As the GEMM's: `a`, `b` readable, `c` writable and not aliased.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        m: usize,
        n: usize,
        k: usize,
        a: Mat<Self>,
        b: Mat<Self>,
        c: *mut Self,
        ldc: usize,
        parallel: bool,
        acc: bool,
    );
}

/// [`Real::dot`]'s body.
#[inline(always)]
fn dot_lanes<T: Copy + Default + std::ops::Add<Output = T> + std::ops::Mul<Output = T>>(x: &[T], y: &[T]) -> T {
    let n = x.len().min(y.len());
    let (x, y) = (&x[..n], &y[..n]);
    let mut acc = [T::default(); 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let mut tail = T::default();
    for (&a, &b) in xc.remainder().iter().zip(yc.remainder()) {
        tail = tail + a * b;
    }
    for (a, b) in xc.zip(yc) {
        for k in 0..8 {
            acc[k] = acc[k] + a[k] * b[k];
        }
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail
}

macro_rules! kernels {
    ($t:ty, $dot:ident, $axpy:ident, $rot:ident, $rank2:ident) => {
        multiversion! {
            fn $dot(x: &[$t], y: &[$t]) -> $t {
                dot_lanes(x, y)
            }
        }
        multiversion! {
            fn $axpy(y: &mut [$t], a: $t, x: &[$t]) {
                for (v, &u) in y.iter_mut().zip(x) {
                    *v += a * u;
                }
            }
        }
        multiversion! {
            fn $rot(x: &mut [$t], y: &mut [$t], c: $t, s: $t) {
                for (a, b) in x.iter_mut().zip(y.iter_mut()) {
                    let (u, v) = (*a, *b);
                    *a = c * u - s * v;
                    *b = s * u + c * v;
                }
            }
        }
        multiversion! {
            fn $rank2(z: &mut [$t], a: $t, x: &[$t], b: $t, y: &[$t]) {
                for ((v, &p), &q) in z.iter_mut().zip(x).zip(y) {
                    *v -= a * p + b * q;
                }
            }
        }
    };
}
kernels!(f32, dot_f32, axpy_f32, rot_f32, rank2_f32);
kernels!(f64, dot_f64, axpy_f64, rot_f64, rank2_f64);

macro_rules! real {
    ($t:ty, $g:ident, $dot:ident, $axpy:ident, $rot:ident, $rank2:ident) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn hypot(self, other: Self) -> Self {
                <$t>::hypot(self, other)
            }
            fn copysign(self, sign: Self) -> Self {
                <$t>::copysign(self, sign)
            }
            fn of(x: f64) -> Self {
                x as $t
            }
            fn dot(x: &[Self], y: &[Self]) -> Self {
                $dot(x, y)
            }
            fn axpy(y: &mut [Self], a: Self, x: &[Self]) {
                $axpy(y, a, x)
            }
            fn rot(x: &mut [Self], y: &mut [Self], c: Self, s: Self) {
                $rot(x, y, c, s)
            }
            fn rank2(z: &mut [Self], a: Self, x: &[Self], b: Self, y: &[Self]) {
                $rank2(z, a, x, b, y)
            }
            unsafe fn gemm(
                m: usize,
                n: usize,
                k: usize,
                a: Mat<Self>,
                b: Mat<Self>,
                c: *mut Self,
                ldc: usize,
                parallel: bool,
                acc: bool,
            ) {
                let parallel = parallel && m * n * k >= 1 << 18;
                // SAFETY: the caller's contract, forwarded.
                unsafe { $g(m, n, k, a, b, c, ldc, parallel, acc) }
            }
        }
    };
}
real!(f32, sgemm, dot_f32, axpy_f32, rot_f32, rank2_f32);
real!(f64, dgemm, dot_f64, axpy_f64, rot_f64, rank2_f64);

/// Block size of the blocked LU and triangular solves.
const NB: usize = 48;

/// Columns of a right-hand side one task solves (fixed, so the work and its
/// rounding never depend on the thread count).
pub(crate) const COLS: usize = 128;

/// `c (m x n, row stride ldc) += a (m x k, lda) * b (k x n, ldb)` through
/// the GEMM (callers pass `a` negated to subtract); `parallel` lets a large
/// product use the pool.
#[allow(clippy::too_many_arguments)]
fn add_product<T: Real>(
    a: &[T],
    lda: usize,
    b: &[T],
    ldb: usize,
    c: &mut [T],
    ldc: usize,
    (m, n, k): (usize, usize, usize),
    parallel: bool,
) {
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    assert!(a.len() >= (m - 1) * lda + k && b.len() >= (k - 1) * ldb + n && c.len() >= (m - 1) * ldc + n);
    // SAFETY: the assert keeps every read of `a`, `b` and every write of `c`
    // (m rows of n values, ldc apart) in bounds; `c` is borrowed mutably, so
    // it aliases neither.
    unsafe {
        T::gemm(
            m,
            n,
            k,
            Mat {
                ptr: a.as_ptr(),
                rs: lda,
                cs: 1,
            },
            Mat {
                ptr: b.as_ptr(),
                rs: ldb,
                cs: 1,
            },
            c.as_mut_ptr(),
            ldc,
            parallel,
            true,
        )
    };
}

/// The `rows x cols` block of `a` (row stride `lda`) at `(r0, c0)`, contiguous.
fn block<T: Real>(a: &[T], lda: usize, (r0, c0): (usize, usize), (rows, cols): (usize, usize)) -> Vec<T> {
    let mut out = Vec::with_capacity(rows * cols);
    for i in r0..r0 + rows {
        out.extend_from_slice(&a[i * lda + c0..i * lda + c0 + cols]);
    }
    out
}

/// The `rows x cols` block of `a` (row stride `lda`) at `(r0, c0)`, negated, contiguous.
fn negated_block<T: Real>(a: &[T], lda: usize, (r0, c0): (usize, usize), (rows, cols): (usize, usize)) -> Vec<T> {
    let mut out = Vec::with_capacity(rows * cols);
    for i in r0..r0 + rows {
        out.extend(a[i * lda + c0..i * lda + c0 + cols].iter().map(|&x| -x));
    }
    out
}

/// Unblocked LU with partial pivoting of a contiguous panel (`rows x nb`,
/// its first row being row `base` of the matrix): pivots (absolute rows)
/// into `piv`, row swaps within the panel. Returns the 1-based index of the
/// first zero pivot, or 0.
fn panel<T: Real>(p: &mut [T], rows: usize, nb: usize, base: usize, piv: &mut [usize]) -> usize {
    let mut info = 0;
    for j in 0..nb.min(rows) {
        let mut best_i = j;
        let mut best = p[j * nb + j].abs();
        for i in j + 1..rows {
            let v = p[i * nb + j].abs();
            if v > best {
                best = v;
                best_i = i;
            }
        }
        piv[j] = base + best_i;
        if best_i != j {
            let (top, bottom) = p.split_at_mut(best_i * nb);
            top[j * nb..j * nb + nb].swap_with_slice(&mut bottom[..nb]);
        }
        let d = p[j * nb + j];
        if d != T::ZERO {
            let r = T::ONE / d;
            for i in j + 1..rows {
                p[i * nb + j] *= r;
            }
        } else if info == 0 {
            info = base + j + 1;
        }
        // Rank-1 update of the rest of the panel.
        let (head, tail) = p.split_at_mut((j + 1) * nb);
        let urow = &head[j * nb + j + 1..j * nb + nb];
        for row in tail.chunks_exact_mut(nb) {
            let l = row[j];
            if l != T::ZERO {
                T::axpy(&mut row[j + 1..], -l, urow);
            }
        }
    }
    info
}

/// Writes the panel `p` (rows `r0..n`, columns `c0..c0 + nb`) back into `a`
/// and applies its row swaps (`piv`, rows `c0..`) to `a`'s other columns.
fn place_panel<T: Real>(a: &mut [T], n: usize, p: &[T], (r0, c0, nb): (usize, usize, usize), piv: &[usize]) {
    for (i, row) in (r0..n).zip(p.chunks_exact(nb)) {
        a[i * n + c0..i * n + c0 + nb].copy_from_slice(row);
    }
    for (j, &q) in (c0..c0 + nb).zip(piv) {
        if q != j {
            let (top, bottom) = a.split_at_mut(q * n);
            let (rj, rq) = (&mut top[j * n..j * n + n], &mut bottom[..n]);
            rj[..c0].swap_with_slice(&mut rq[..c0]);
            rj[c0 + nb..].swap_with_slice(&mut rq[c0 + nb..]);
        }
    }
}

/// LU with partial pivoting in place (`getrf`): `a` becomes `L` (unit,
/// below the diagonal) and `U`; `piv[i]` is the row swapped with `i`.
/// Returns LAPACK's `info`: 0, or the 1-based index of the first zero
/// pivot (the factorization goes on past it, as LAPACK's).
///
/// Right-looking in panels of [`NB`] columns with a look-ahead: once a
/// panel's `U12` is solved and the next panel's columns are updated, the
/// next panel is factored on one thread while the GEMM updates the rest of
/// the trailing matrix on the others. Each element sees the same operations
/// in the same order whoever runs them: same bits for any thread count.
pub(crate) fn lu<T: Real>(a: &mut [T], n: usize, piv: &mut [usize]) -> usize {
    if n == 0 {
        return 0;
    }
    let first = NB.min(n);
    let mut p = block(a, n, (0, 0), (n, first));
    let mut info = panel(&mut p, n, first, 0, &mut piv[..first]);
    place_panel(a, n, &p, (0, 0, first), &piv[..first]);
    let mut j0 = 0;
    loop {
        let j1 = (j0 + NB).min(n);
        if j1 >= n {
            break;
        }
        let (nb, w) = (j1 - j0, n - j1);
        // U12 = L11^-1 A12, its columns in parallel chunks.
        let l11 = negated_block(a, n, (j0, j0), (nb, nb));
        let mut u12 = block(a, n, (j0, j1), (nb, w));
        trsm(&l11, nb, nb, &mut u12, w, true, true);
        for (i, row) in (j0..j1).zip(u12.chunks_exact(w)) {
            a[i * n + j1..i * n + n].copy_from_slice(row);
        }
        // A22 -= L21 U12: the next panel's columns first, then that panel is
        // factored while the GEMM updates the other columns.
        let l21 = negated_block(a, n, (j1, j0), (w, nb));
        let j2 = (j1 + NB).min(n);
        let nb2 = j2 - j1;
        add_product(&l21, nb, &u12, w, &mut a[j1 * n + j1..], n, (w, nb2, nb), false);
        let mut p = block(a, n, (j1, j1), (w, nb2));
        let next_piv = &mut piv[j1..j2];
        let (pinfo, ()) = rayon::join(
            || panel(&mut p, w, nb2, j1, next_piv),
            || {
                add_product(
                    &l21,
                    nb,
                    &u12[nb2..],
                    w,
                    &mut a[j1 * n + j2..],
                    n,
                    (w, w - nb2, nb),
                    true,
                )
            },
        );
        if info == 0 {
            info = pinfo;
        }
        place_panel(a, n, &p, (j1, j1, nb2), &piv[j1..j2]);
        j0 = j1;
    }
    info
}

/// Solves `op(T) X = B` in place for `B` (`n x r`, contiguous), `T` the
/// triangle of the `n x n` matrix `-tneg` (row stride `ldt`; callers pass it
/// negated, which the GEMM accumulates): `lower` (with a `unit` diagonal or
/// not) or upper. Columns are solved in independent chunks of [`COLS`], in
/// parallel.
pub(crate) fn trsm<T: Real>(tneg: &[T], ldt: usize, n: usize, b: &mut [T], r: usize, lower: bool, unit: bool) {
    if r <= COLS {
        trsm_serial(tneg, ldt, n, b, r, lower, unit);
        return;
    }
    let chunks = r.div_ceil(COLS);
    let solved: Vec<Mutex<Vec<T>>> = (0..chunks).map(|_| Mutex::new(Vec::new())).collect();
    let src: &[T] = b;
    par_for_each(chunks, |c| {
        let (c0, c1) = (c * COLS, ((c + 1) * COLS).min(r));
        let w = c1 - c0;
        let mut buf = block(src, r, (0, c0), (n, w));
        trsm_serial(tneg, ldt, n, &mut buf, w, lower, unit);
        if let Ok(mut slot) = solved[c].lock() {
            *slot = buf;
        }
    });
    for (c, slot) in solved.into_iter().enumerate() {
        let buf = slot.into_inner().unwrap_or_else(|e| e.into_inner());
        let (c0, c1) = (c * COLS, ((c + 1) * COLS).min(r));
        let w = c1 - c0;
        for (i, row) in buf.chunks_exact(w).enumerate() {
            b[i * r + c0..i * r + c1].copy_from_slice(row);
        }
    }
}

/// [`trsm`] on one thread: blocks of [`NB`] rows, each first updated with
/// the rows already solved (one GEMM), then solved by substitution.
fn trsm_serial<T: Real>(tneg: &[T], ldt: usize, n: usize, b: &mut [T], r: usize, lower: bool, unit: bool) {
    let blocks: Vec<(usize, usize)> = (0..n.div_ceil(NB)).map(|k| (k * NB, ((k + 1) * NB).min(n))).collect();
    let order: Vec<(usize, usize)> = if lower {
        blocks
    } else {
        blocks.into_iter().rev().collect()
    };
    for &(i0, i1) in &order {
        // B_I -= T_{I, done} X_done.
        if lower && i0 > 0 {
            let (done, rest) = b.split_at_mut(i0 * r);
            add_product(
                &tneg[i0 * ldt..],
                ldt,
                done,
                r,
                &mut rest[..(i1 - i0) * r],
                r,
                (i1 - i0, r, i0),
                false,
            );
        } else if !lower && i1 < n {
            let (head, done) = b.split_at_mut(i1 * r);
            add_product(
                &tneg[i0 * ldt + i1..],
                ldt,
                done,
                r,
                &mut head[i0 * r..],
                r,
                (i1 - i0, r, n - i1),
                false,
            );
        }
        let rows: Vec<usize> = if lower {
            (i0..i1).collect()
        } else {
            (i0..i1).rev().collect()
        };
        for &i in &rows {
            let range = if lower { i0..i } else { i + 1..i1 };
            for p in range {
                let l = tneg[i * ldt + p];
                if l != T::ZERO {
                    let (x, y) = if p < i {
                        let (lo, hi) = b.split_at_mut(i * r);
                        (&mut hi[..r], &lo[p * r..p * r + r])
                    } else {
                        let (lo, hi) = b.split_at_mut(p * r);
                        (&mut lo[i * r..i * r + r], &hi[..r])
                    };
                    T::axpy(x, l, y);
                }
            }
            if !unit {
                let d = -T::ONE / tneg[i * ldt + i];
                for v in &mut b[i * r..i * r + r] {
                    *v *= d;
                }
            }
        }
    }
}

/// Solves `A X = B` from `lu`'s factors (`getrs`), `B` `n x r`.
pub(crate) fn lu_solve<T: Real>(lu: &[T], piv: &[usize], n: usize, b: &mut [T], r: usize) {
    for (i, &p) in piv.iter().enumerate().take(n) {
        if p != i {
            let (top, bottom) = b.split_at_mut(p * r);
            top[i * r..i * r + r].swap_with_slice(&mut bottom[..r]);
        }
    }
    let neg: Vec<T> = lu.iter().map(|&x| -x).collect();
    trsm(&neg, n, n, b, r, true, true);
    trsm(&neg, n, n, b, r, false, false);
}

/// Lower Cholesky factor in place (`potrf`, reading the lower triangle;
/// the upper is zeroed). Err(k): the leading minor of order `k` is not
/// positive-definite.
pub(crate) fn cholesky<T: Real>(a: &mut [T], n: usize) -> Result<(), usize> {
    for j in 0..n {
        let s = a[j * n + j] - T::dot(&a[j * n..j * n + j], &a[j * n..j * n + j]);
        if s.partial_cmp(&T::ZERO) != Some(std::cmp::Ordering::Greater) {
            return Err(j + 1);
        }
        let d = s.sqrt();
        a[j * n + j] = d;
        let (head, tail) = a.split_at_mut((j + 1) * n);
        let rj = &head[j * n..j * n + j];
        for row in tail.chunks_exact_mut(n) {
            row[j] = (row[j] - T::dot(&row[..j], rj)) / d;
        }
        for c in j + 1..n {
            a[j * n + c] = T::ZERO;
        }
    }
    Ok(())
}

/// A Householder reflection `H = I - tau v v^T` (`v[0] = 1`) with `H x =
/// beta e1` (LAPACK's `larfg`: `beta` has the opposite sign of `x[0]`; `tau
/// = 0`, `H = I`, when `x[1..]` is zero). Returns `(v, tau, beta)`.
fn householder<T: Real>(x: &[T]) -> (Vec<T>, T, T) {
    let alpha = x[0];
    let xn = T::dot(&x[1..], &x[1..]);
    let mut v = vec![T::ZERO; x.len()];
    v[0] = T::ONE;
    if xn == T::ZERO {
        return (v, T::ZERO, alpha);
    }
    let beta = -alpha.hypot(xn.sqrt()).copysign(alpha);
    let tau = (beta - alpha) / beta;
    let scale = T::ONE / (alpha - beta);
    for (d, &s) in v[1..].iter_mut().zip(&x[1..]) {
        *d = s * scale;
    }
    (v, tau, beta)
}

/// Applies `H = I - tau v v^T` from the left to the rows `r0..r0 + v.len()`,
/// columns `c0..c1`, of `a` (row stride `lda`): `u = v^T A`, `A -= tau v u`.
fn reflect_rows<T: Real>(a: &mut [T], lda: usize, r0: usize, (c0, c1): (usize, usize), v: &[T], tau: T) {
    if tau == T::ZERO || c0 >= c1 {
        return;
    }
    let w = c1 - c0;
    let mut u = vec![T::ZERO; w];
    for (i, &vi) in v.iter().enumerate() {
        T::axpy(&mut u, vi, &a[(r0 + i) * lda + c0..(r0 + i) * lda + c1]);
    }
    for (i, &vi) in v.iter().enumerate() {
        T::axpy(&mut a[(r0 + i) * lda + c0..(r0 + i) * lda + c1], -(tau * vi), &u);
    }
}

/// Applies `G = I - tau v v^T` from the right to the columns `c0..c0 +
/// v.len()`, rows `r0..r1`, of `a` (row stride `lda`).
fn reflect_cols<T: Real>(a: &mut [T], lda: usize, (r0, r1): (usize, usize), c0: usize, v: &[T], tau: T) {
    if tau == T::ZERO {
        return;
    }
    for i in r0..r1 {
        let row = &mut a[i * lda + c0..i * lda + c0 + v.len()];
        let f = tau * T::dot(row, v);
        T::axpy(row, -f, v);
    }
}

/// `H_0 H_1 ... H_{k-1}` applied to the first `cols` columns of the `m x m`
/// identity (LAPACK's `org2r`, backward accumulation), reflector `j`
/// acting on rows `j + shift..`.
fn accumulate<T: Real>(refl: &[(Vec<T>, T)], m: usize, cols: usize, shift: usize) -> Vec<T> {
    let mut q = vec![T::ZERO; m * cols];
    for i in 0..m.min(cols) {
        q[i * cols + i] = T::ONE;
    }
    for (j, (v, tau)) in refl.iter().enumerate().rev() {
        let r0 = j + shift;
        reflect_rows(&mut q, cols, r0, (r0.min(cols), cols), v, *tau);
    }
    q
}

/// Householder QR of the `m x n` `a` (`geqr2` + `org2r`): returns `Q`
/// (`m x qcols`, `qcols` = min(m, n) or m) and `R` (`m x n`, upper; callers
/// keep its first rows).
pub(crate) fn qr<T: Real>(a: &[T], m: usize, n: usize, qcols: usize) -> (Vec<T>, Vec<T>) {
    let mut r = a.to_vec();
    let k = m.min(n);
    let mut refl: Vec<(Vec<T>, T)> = Vec::with_capacity(k);
    for j in 0..k {
        let x: Vec<T> = (j..m).map(|i| r[i * n + j]).collect();
        let (v, tau, beta) = householder(&x);
        reflect_rows(&mut r, n, j, (j + 1, n), &v, tau);
        r[j * n + j] = beta;
        for i in j + 1..m {
            r[i * n + j] = T::ZERO;
        }
        refl.push((v, tau));
    }
    (accumulate(&refl, m, qcols, 0), r)
}

/// Rotates rows `i` and `j` (`i < j`) of `z` (length `len` each):
/// `(z_i, z_j) <- (c z_i - s z_j, s z_i + c z_j)`.
fn rotate_rows<T: Real>(z: &mut [T], len: usize, i: usize, j: usize, c: T, s: T) {
    let (lo, hi) = z.split_at_mut(j * len);
    T::rot(&mut lo[i * len..i * len + len], &mut hi[..len], c, s);
}

/// Symmetric eigendecomposition of the `n x n` symmetric `a` (both
/// triangles set): eigenvalues ascending, eigenvectors as the columns of the
/// returned `n x n` matrix. Householder tridiagonalisation (`sytd2`), the
/// reflections accumulated, then the implicit QL algorithm with Wilkinson
/// shifts rotating them. Err(i): eigenvalue `i` (1-based) did not converge
/// in 30 iterations.
pub(crate) fn eigh<T: Real>(a: &[T], n: usize) -> Result<(Vec<T>, Vec<T>), usize> {
    let mut s = a.to_vec();
    let mut e = vec![T::ZERO; n];
    let mut refl: Vec<(Vec<T>, T)> = Vec::with_capacity(n.saturating_sub(1));
    for k in 0..n.saturating_sub(1) {
        let m = n - k - 1;
        let x: Vec<T> = (k + 1..n).map(|i| s[i * n + k]).collect();
        let (v, tau, beta) = householder(&x);
        e[k] = beta;
        if tau != T::ZERO {
            // A22 <- H A22 H: p = tau A22 v, w = p - (tau/2)(p.v) v, A22 -= v w^T + w v^T.
            // A22 is symmetric: A22 v = sum_i v_i A22[i, :], a sum of rows.
            let o = k + 1;
            let mut p = vec![T::ZERO; m];
            for (i, &vi) in v.iter().enumerate() {
                T::axpy(&mut p, vi, &s[(o + i) * n + o..(o + i) * n + n]);
            }
            for x in &mut p {
                *x *= tau;
            }
            let half = T::of(0.5) * tau * T::dot(&p, &v);
            let w: Vec<T> = p.iter().zip(&v).map(|(&x, &y)| x - half * y).collect();
            for i in 0..m {
                T::rank2(&mut s[(o + i) * n + o..(o + i) * n + n], v[i], &w, w[i], &v);
            }
        }
        refl.push((v, tau));
    }
    let mut d: Vec<T> = (0..n).map(|i| s[i * n + i]).collect();
    // Q = H_0 ... H_{n-2} (reflector k acts on rows k + 1..); its columns,
    // as the rows of zt, are rotated below.
    let q = accumulate(&refl, n, n, 1);
    let mut zt = vec![T::ZERO; n * n];
    for i in 0..n {
        for j in 0..n {
            zt[j * n + i] = q[i * n + j];
        }
    }
    let two = T::of(2.0);
    for l in 0..n {
        let mut iter = 0;
        loop {
            let mut m = l;
            while m + 1 < n {
                let dd = d[m].abs() + d[m + 1].abs();
                if e[m].abs() + dd == dd {
                    break;
                }
                m += 1;
            }
            if m == l {
                break;
            }
            iter += 1;
            if iter > 30 {
                return Err(l + 1);
            }
            let mut g = (d[l + 1] - d[l]) / (two * e[l]);
            let mut r = g.hypot(T::ONE);
            g = d[m] - d[l] + e[l] / (g + r.copysign(g));
            let (mut s, mut c, mut p) = (T::ONE, T::ONE, T::ZERO);
            let mut underflow = false;
            let mut i = m;
            while i > l {
                i -= 1;
                let f = s * e[i];
                let b = c * e[i];
                r = f.hypot(g);
                e[i + 1] = r;
                if r == T::ZERO {
                    d[i + 1] -= p;
                    e[m] = T::ZERO;
                    underflow = true;
                    break;
                }
                s = f / r;
                c = g / r;
                g = d[i + 1] - p;
                r = (d[i] - g) * s + two * c * b;
                p = s * r;
                d[i + 1] = g + p;
                g = c * r - b;
                // Columns i, i + 1 of Z: (z_i, z_{i+1}) <- (c z_i - s z_{i+1}, s z_i + c z_{i+1}).
                rotate_rows(&mut zt, n, i, i + 1, c, s);
            }
            if underflow {
                continue;
            }
            d[l] -= p;
            e[l] = g;
            e[m] = T::ZERO;
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| d[i].partial_cmp(&d[j]).unwrap_or(std::cmp::Ordering::Equal));
    let w: Vec<T> = order.iter().map(|&i| d[i]).collect();
    let mut vec = vec![T::ZERO; n * n];
    for (c, &o) in order.iter().enumerate() {
        for k in 0..n {
            vec[k * n + c] = zt[o * n + k];
        }
    }
    Ok((w, vec))
}

/// SVD of the `m x n` `a`: `(U (m x ucols), S, Vh (vrows x n))` with
/// singular values descending; `full` gives square U and Vh. Householder
/// bidiagonalisation (`gebd2`), the reflections accumulated, then the
/// Golub-Reinsch implicit-shift QR iteration on the bidiagonal rotating
/// them. Err(i): singular value `i` (1-based) did not converge in 75
/// iterations.
#[allow(clippy::type_complexity)]
pub(crate) fn svd<T: Real>(a: &[T], m: usize, n: usize, full: bool) -> Result<(Vec<T>, Vec<T>, Vec<T>), usize> {
    if m < n {
        // A^T = V S U^T.
        let at: Vec<T> = (0..n * m).map(|idx| a[(idx % m) * n + idx / m]).collect();
        let (u, s, vh) = svd(&at, n, m, full)?;
        // U' = Vh^T, Vh' = U^T.
        let (ur, uc) = (n, if full { n } else { m });
        let (vr, vc) = (m, m);
        let u2: Vec<T> = (0..vc * vr).map(|idx| vh[(idx % vr) * vc + idx / vr]).collect();
        let vh2: Vec<T> = (0..uc * ur).map(|idx| u[(idx % ur) * uc + idx / ur]).collect();
        return Ok((u2, s, vh2));
    }
    let ucols = if full { m } else { n };
    // Bidiagonalise: A = U1 B V1^T, B upper bidiagonal (d, rv1 above it).
    let mut w = a.to_vec();
    let mut d = vec![T::ZERO; n];
    let mut rv1 = vec![T::ZERO; n];
    let mut left: Vec<(Vec<T>, T)> = Vec::with_capacity(n);
    let mut right: Vec<(Vec<T>, T)> = Vec::with_capacity(n);
    for k in 0..n {
        let x: Vec<T> = (k..m).map(|i| w[i * n + k]).collect();
        let (v, tau, beta) = householder(&x);
        reflect_rows(&mut w, n, k, (k + 1, n), &v, tau);
        d[k] = beta;
        left.push((v, tau));
        if k + 1 < n {
            let (g, taup, beta) = householder(&w[k * n + k + 1..k * n + n]);
            reflect_cols(&mut w, n, (k + 1, m), k + 1, &g, taup);
            rv1[k + 1] = beta;
            right.push((g, taup));
        }
    }
    let u1 = accumulate(&left, m, ucols, 0);
    let v1 = accumulate(&right, n, n, 1);
    // Rotations act on the columns of U1 and V1: keep them as rows.
    let mut ut = vec![T::ZERO; ucols * m];
    for i in 0..m {
        for j in 0..ucols {
            ut[j * m + i] = u1[i * ucols + j];
        }
    }
    let mut vt = vec![T::ZERO; n * n];
    for i in 0..n {
        for j in 0..n {
            vt[j * n + i] = v1[i * n + j];
        }
    }
    let mut anorm = T::ZERO;
    for i in 0..n {
        let x = d[i].abs() + rv1[i].abs();
        if x > anorm {
            anorm = x;
        }
    }
    let negligible = |x: T| x.abs() + anorm == anorm;
    let two = T::of(2.0);
    for k in (0..n).rev() {
        let mut its = 0;
        loop {
            // Find the block [l, k]: rv1[l] negligible, or d[l - 1] (then zeroed out).
            let mut l = k;
            let mut cancel = false;
            loop {
                if l == 0 || negligible(rv1[l]) {
                    break;
                }
                if negligible(d[l - 1]) {
                    cancel = true;
                    break;
                }
                l -= 1;
            }
            if cancel {
                // d[l - 1] is negligible: chase rv1[l] off the bidiagonal.
                let nm = l - 1;
                let (mut c, mut s) = (T::ZERO, T::ONE);
                for i in l..=k {
                    let f = s * rv1[i];
                    rv1[i] = c * rv1[i];
                    if negligible(f) {
                        break;
                    }
                    let g = d[i];
                    let h = f.hypot(g);
                    d[i] = h;
                    c = g / h;
                    s = -f / h;
                    // (u_nm, u_i) <- (c u_nm + s u_i, c u_i - s u_nm).
                    rotate_rows(&mut ut, m, nm, i, c, -s);
                }
            }
            let z = d[k];
            if l == k {
                if z < T::ZERO {
                    d[k] = -z;
                    for x in &mut vt[k * n..k * n + n] {
                        *x = -*x;
                    }
                }
                break;
            }
            its += 1;
            if its > 75 {
                return Err(k + 1);
            }
            // Shift from the trailing 2x2 of B^T B.
            let mut x = d[l];
            let nm = k - 1;
            let mut y = d[nm];
            let mut g = rv1[nm];
            let mut h = rv1[k];
            let mut f = ((y - z) * (y + z) + (g - h) * (g + h)) / (two * h * y);
            g = f.hypot(T::ONE);
            f = ((x - z) * (x + z) + h * ((y / (f + g.copysign(f))) - h)) / x;
            let (mut c, mut s) = (T::ONE, T::ONE);
            for j in l..=nm {
                let i = j + 1;
                g = rv1[i];
                y = d[i];
                h = s * g;
                g = c * g;
                let mut zz = f.hypot(h);
                rv1[j] = zz;
                c = f / zz;
                s = h / zz;
                f = x * c + g * s;
                g = g * c - x * s;
                h = y * s;
                y *= c;
                // (v_j, v_i) <- (c v_j + s v_i, c v_i - s v_j).
                rotate_rows(&mut vt, n, j, i, c, -s);
                zz = f.hypot(h);
                d[j] = zz;
                if zz != T::ZERO {
                    c = f / zz;
                    s = h / zz;
                }
                f = c * g + s * y;
                x = c * y - s * g;
                rotate_rows(&mut ut, m, j, i, c, -s);
            }
            rv1[l] = T::ZERO;
            rv1[k] = f;
            d[k] = x;
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| d[j].partial_cmp(&d[i]).unwrap_or(std::cmp::Ordering::Equal));
    let s: Vec<T> = order.iter().map(|&o| d[o]).collect();
    // U: column c is row order[c] of ut (the complement, columns n.., as built).
    let mut u = vec![T::ZERO; m * ucols];
    for c in 0..ucols {
        let src = if c < n { order[c] } else { c };
        for i in 0..m {
            u[i * ucols + c] = ut[src * m + i];
        }
    }
    let mut vh = vec![T::ZERO; n * n];
    for (r, &o) in order.iter().enumerate() {
        vh[r * n..r * n + n].copy_from_slice(&vt[o * n..o * n + n]);
    }
    Ok((u, s, vh))
}
