//! Dense factorizations on row-major matrices in `Vec`s, for the `linalg`
//! operators (`ops/decomp.rs`): blocked LU with partial pivoting (LAPACK's
//! `getrf` pivots; trailing updates through the crate's GEMM), blocked
//! triangular solves, Cholesky, Householder QR (LAPACK's `geqrf` signs),
//! cyclic Jacobi for symmetric eigenproblems and one-sided Jacobi SVD.
//! Every loop runs in a fixed order: same bits for any thread count.

use super::gemm::{Mat, dgemm, sgemm};

/// The float types the factorizations run in (f32, f64).
pub(crate) trait Real:
    Copy
    + PartialOrd
    + std::fmt::Debug
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
    /// Machine epsilon.
    const EPS: Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
    /// From f64.
    fn of(x: f64) -> Self;
    /// `C = A * B` (`m x k` times `k x n`), `C` row-major with `ldc`.
    ///
    /// # Safety
    /// As the GEMM's: `a`, `b` readable, `c` writable and not aliased.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(m: usize, n: usize, k: usize, a: Mat<Self>, b: Mat<Self>, c: *mut Self, ldc: usize);
}

macro_rules! real {
    ($t:ty, $g:ident) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const EPS: Self = <$t>::EPSILON;
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn of(x: f64) -> Self {
                x as $t
            }
            unsafe fn gemm(m: usize, n: usize, k: usize, a: Mat<Self>, b: Mat<Self>, c: *mut Self, ldc: usize) {
                let parallel = m * n * k >= 1 << 18;
                // SAFETY: the caller's contract, forwarded.
                unsafe { $g(m, n, k, a, b, c, ldc, parallel) }
            }
        }
    };
}
real!(f32, sgemm);
real!(f64, dgemm);

/// Block size of the blocked LU and triangular solves.
const NB: usize = 48;

/// `c[..] -= a (m x k, lda) * b (k x n, ldb)`, into rows of `c` with `ldc`,
/// through a scratch product.
#[allow(clippy::too_many_arguments)]
fn sub_product<T: Real>(
    a: &[T],
    lda: usize,
    b: &[T],
    ldb: usize,
    c: &mut [T],
    ldc: usize,
    (m, n, k): (usize, usize, usize),
) {
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    let mut tmp = vec![T::ZERO; m * n];
    assert!(a.len() >= (m - 1) * lda + k && b.len() >= (k - 1) * ldb + n && c.len() >= (m - 1) * ldc + n);
    // SAFETY: the assert above keeps every read of `a`, `b` in bounds; `tmp` holds `m x n` and is not aliased.
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
            tmp.as_mut_ptr(),
            n,
        )
    };
    for i in 0..m {
        let row = &mut c[i * ldc..i * ldc + n];
        for (x, &t) in row.iter_mut().zip(&tmp[i * n..i * n + n]) {
            *x -= t;
        }
    }
}

/// LU with partial pivoting in place (`getrf`): `a` becomes `L` (unit,
/// below the diagonal) and `U`; `piv[i]` is the row swapped with `i`.
/// Returns LAPACK's `info`: 0, or the 1-based index of the first zero
/// pivot (the factorization goes on past it, as LAPACK's).
pub(crate) fn lu<T: Real>(a: &mut [T], n: usize, piv: &mut [usize]) -> usize {
    let mut info = 0;
    let mut j0 = 0;
    while j0 < n {
        let j1 = (j0 + NB).min(n);
        // Panel: columns j0..j1, rows j0..n, unblocked.
        for j in j0..j1 {
            let mut p = j;
            let mut best = a[j * n + j].abs();
            for i in j + 1..n {
                let v = a[i * n + j].abs();
                if v > best {
                    best = v;
                    p = i;
                }
            }
            piv[j] = p;
            if p != j {
                for c in 0..n {
                    a.swap(j * n + c, p * n + c);
                }
            }
            let d = a[j * n + j];
            if d != T::ZERO {
                let r = T::ONE / d;
                for i in j + 1..n {
                    a[i * n + j] *= r;
                }
            } else if info == 0 {
                info = j + 1;
            }
            // Rank-1 update of the rest of the panel.
            for i in j + 1..n {
                let l = a[i * n + j];
                if l != T::ZERO {
                    for c in j + 1..j1 {
                        let u = a[j * n + c];
                        a[i * n + c] -= l * u;
                    }
                }
            }
        }
        if j1 < n {
            // U12 = L11^-1 A12.
            for i in j0..j1 {
                for p in j0..i {
                    let l = a[i * n + p];
                    if l != T::ZERO {
                        for c in j1..n {
                            let u = a[p * n + c];
                            a[i * n + c] -= l * u;
                        }
                    }
                }
            }
            // A22 -= L21 U12.
            let (top, bottom) = a.split_at_mut(j1 * n);
            let l21: Vec<T> = (j1..n)
                .flat_map(|i| bottom[(i - j1) * n + j0..(i - j1) * n + j1].to_vec())
                .collect();
            sub_product(
                &l21,
                j1 - j0,
                &top[j0 * n + j1..],
                n,
                &mut bottom[j1..],
                n,
                (n - j1, n - j1, j1 - j0),
            );
        }
        j0 = j1;
    }
    info
}

/// Solves `op(T) X = B` in place for `B` (`n x r`), `T` the triangle of
/// the `n x n` `t`: `lower` (with a `unit` diagonal or not) or upper.
pub(crate) fn trsm<T: Real>(t: &[T], n: usize, b: &mut [T], r: usize, lower: bool, unit: bool) {
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
            sub_product(
                &t[i0 * n..],
                n,
                done,
                r,
                &mut rest[..(i1 - i0) * r],
                r,
                (i1 - i0, r, i0),
            );
        } else if !lower && i1 < n {
            let (head, done) = b.split_at_mut(i1 * r);
            sub_product(
                &t[i0 * n + i1..],
                n,
                done,
                r,
                &mut head[i0 * r..],
                r,
                (i1 - i0, r, n - i1),
            );
        }
        let rows: Vec<usize> = if lower {
            (i0..i1).collect()
        } else {
            (i0..i1).rev().collect()
        };
        for &i in &rows {
            let range: Vec<usize> = if lower {
                (i0..i).collect()
            } else {
                (i + 1..i1).collect()
            };
            for p in range {
                let l = t[i * n + p];
                if l != T::ZERO {
                    let (x, y) = if p < i {
                        let (lo, hi) = b.split_at_mut(i * r);
                        (&mut hi[..r], &lo[p * r..p * r + r])
                    } else {
                        let (lo, hi) = b.split_at_mut(p * r);
                        (&mut lo[i * r..i * r + r], &hi[..r])
                    };
                    for (xv, &yv) in x.iter_mut().zip(y) {
                        *xv -= l * yv;
                    }
                }
            }
            if !unit {
                let d = T::ONE / t[i * n + i];
                for v in &mut b[i * r..i * r + r] {
                    *v *= d;
                }
            }
        }
    }
}

/// Solves `A X = B` from `lu`'s factors (`getrs`).
pub(crate) fn lu_solve<T: Real>(lu: &[T], piv: &[usize], n: usize, b: &mut [T], r: usize) {
    for (i, &p) in piv.iter().enumerate().take(n) {
        if p != i {
            for c in 0..r {
                b.swap(i * r + c, p * r + c);
            }
        }
    }
    trsm(lu, n, b, r, true, true);
    trsm(lu, n, b, r, false, false);
}

/// Lower Cholesky factor in place (`potrf`, reading the lower triangle;
/// the upper is zeroed). Err(k): the leading minor of order `k` is not
/// positive-definite.
pub(crate) fn cholesky<T: Real>(a: &mut [T], n: usize) -> Result<(), usize> {
    for j in 0..n {
        let mut s = a[j * n + j];
        for k in 0..j {
            s -= a[j * n + k] * a[j * n + k];
        }
        if s.partial_cmp(&T::ZERO) != Some(std::cmp::Ordering::Greater) {
            return Err(j + 1);
        }
        let d = s.sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let mut v = a[i * n + j];
            for k in 0..j {
                v -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = v / d;
        }
        for c in j + 1..n {
            a[j * n + c] = T::ZERO;
        }
    }
    Ok(())
}

fn hypot<T: Real>(a: T, b: T) -> T {
    (a * a + b * b).sqrt()
}

/// Householder QR of the `m x n` `a` (`geqr2` + `org2r`): returns `Q`
/// (`m x qcols`, `qcols` = min(m, n) or m) and `R` (`rrows x n`, upper).
pub(crate) fn qr<T: Real>(a: &[T], m: usize, n: usize, qcols: usize) -> (Vec<T>, Vec<T>) {
    let mut r = a.to_vec();
    let k = m.min(n);
    let mut vs: Vec<(Vec<T>, T)> = Vec::with_capacity(k);
    for j in 0..k {
        let alpha = r[j * n + j];
        let mut xn = T::ZERO;
        for i in j + 1..m {
            xn += r[i * n + j] * r[i * n + j];
        }
        let xnorm = xn.sqrt();
        let mut v = vec![T::ZERO; m - j];
        v[0] = T::ONE;
        if xnorm == T::ZERO {
            vs.push((v, T::ZERO));
            continue;
        }
        let h = hypot(alpha, xnorm);
        let beta = if alpha >= T::ZERO { -h } else { h };
        let tau = (beta - alpha) / beta;
        let scale = T::ONE / (alpha - beta);
        for i in j + 1..m {
            v[i - j] = r[i * n + j] * scale;
        }
        r[j * n + j] = beta;
        for i in j + 1..m {
            r[i * n + j] = T::ZERO;
        }
        // Apply H = I - tau v v^T to columns j+1..n.
        for c in j + 1..n {
            let mut s = T::ZERO;
            for i in j..m {
                s += v[i - j] * r[i * n + c];
            }
            s *= tau;
            for i in j..m {
                r[i * n + c] -= s * v[i - j];
            }
        }
        vs.push((v, tau));
    }
    // Q = H_0 ... H_{k-1} applied to the first qcols columns of I.
    let mut q = vec![T::ZERO; m * qcols];
    for i in 0..m.min(qcols) {
        q[i * qcols + i] = T::ONE;
    }
    for (j, (v, tau)) in vs.iter().enumerate().rev() {
        if *tau == T::ZERO {
            continue;
        }
        for c in 0..qcols {
            let mut s = T::ZERO;
            for i in j..m {
                s += v[i - j] * q[i * qcols + c];
            }
            s *= *tau;
            for i in j..m {
                q[i * qcols + c] -= s * v[i - j];
            }
        }
    }
    (q, r)
}

/// Symmetric eigendecomposition by cyclic Jacobi: eigenvalues ascending,
/// eigenvectors as the columns of the returned `n x n` matrix.
pub(crate) fn eigh<T: Real>(a: &[T], n: usize) -> (Vec<T>, Vec<T>) {
    let mut s = a.to_vec();
    let mut v = vec![T::ZERO; n * n];
    for i in 0..n {
        v[i * n + i] = T::ONE;
    }
    for _sweep in 0..100 {
        let mut off = T::ZERO;
        let mut total = T::ZERO;
        for i in 0..n {
            for j in 0..n {
                let x = s[i * n + j] * s[i * n + j];
                total += x;
                if i != j {
                    off += x;
                }
            }
        }
        if off <= T::EPS * T::EPS * total || off == T::ZERO {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = s[p * n + q];
                if apq == T::ZERO {
                    continue;
                }
                let (app, aqq) = (s[p * n + p], s[q * n + q]);
                let theta = (aqq - app) / (T::of(2.0) * apq);
                let sign = if theta >= T::ZERO { T::ONE } else { -T::ONE };
                let t = sign / (theta.abs() + (theta * theta + T::ONE).sqrt());
                let c = T::ONE / (t * t + T::ONE).sqrt();
                let sn = t * c;
                // S = J^T S J on rows/cols p, q.
                for k in 0..n {
                    let (skp, skq) = (s[k * n + p], s[k * n + q]);
                    s[k * n + p] = c * skp - sn * skq;
                    s[k * n + q] = sn * skp + c * skq;
                }
                for k in 0..n {
                    let (spk, sqk) = (s[p * n + k], s[q * n + k]);
                    s[p * n + k] = c * spk - sn * sqk;
                    s[q * n + k] = sn * spk + c * sqk;
                }
                for k in 0..n {
                    let (vkp, vkq) = (v[k * n + p], v[k * n + q]);
                    v[k * n + p] = c * vkp - sn * vkq;
                    v[k * n + q] = sn * vkp + c * vkq;
                }
            }
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| {
        s[i * n + i]
            .partial_cmp(&s[j * n + j])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let w: Vec<T> = order.iter().map(|&i| s[i * n + i]).collect();
    let mut vec = vec![T::ZERO; n * n];
    for (c, &o) in order.iter().enumerate() {
        for k in 0..n {
            vec[k * n + c] = v[k * n + o];
        }
    }
    (w, vec)
}

/// Fills `rows` (unit vectors of length `m`, `valid` of them set) up to
/// `want` orthonormal rows by Gram-Schmidt against the standard basis.
fn complete_rows<T: Real>(rows: &mut Vec<Vec<T>>, valid: &[bool], m: usize, want: usize) {
    let mut basis: Vec<Vec<T>> = rows
        .iter()
        .zip(valid)
        .filter(|(_, v)| **v)
        .map(|(r, _)| r.clone())
        .collect();
    let mut extra = Vec::new();
    let mut e = 0;
    let need = want - basis.len();
    while extra.len() < need && e < m {
        let mut x = vec![T::ZERO; m];
        x[e] = T::ONE;
        e += 1;
        for _ in 0..2 {
            for b in &basis {
                let d = b.iter().zip(&x).fold(T::ZERO, |s, (&p, &q)| s + p * q);
                for (xv, &bv) in x.iter_mut().zip(b) {
                    *xv -= d * bv;
                }
            }
        }
        let nrm = x.iter().fold(T::ZERO, |s, &v| s + v * v).sqrt();
        if nrm > T::of(0.5) {
            for v in &mut x {
                *v = *v / nrm;
            }
            basis.push(x.clone());
            extra.push(x);
        }
    }
    let mut it = extra.into_iter();
    for (r, v) in rows.iter_mut().zip(valid) {
        if !*v {
            *r = it.next().unwrap_or_else(|| vec![T::ZERO; m]);
        }
    }
    rows.extend(it);
}

/// SVD of the `m x n` `a` by one-sided Jacobi: `(U (m x ucols), S, Vh
/// (vrows x n))` with singular values descending; `full` gives square U
/// and Vh.
pub(crate) fn svd<T: Real>(a: &[T], m: usize, n: usize, full: bool) -> (Vec<T>, Vec<T>, Vec<T>) {
    if m < n {
        // A^T = V S U^T.
        let at: Vec<T> = (0..n * m).map(|idx| a[(idx % m) * n + idx / m]).collect();
        let (u, s, vh) = svd(&at, n, m, full);
        // U' = Vh^T, Vh' = U^T.
        let (ur, uc) = (n, if full { n } else { m });
        let (vr, vc) = (m, m);
        let u2: Vec<T> = (0..vc * vr).map(|idx| vh[(idx % vr) * vc + idx / vr]).collect();
        let vh2: Vec<T> = (0..uc * ur).map(|idx| u[(idx % ur) * uc + idx / ur]).collect();
        return (u2, s, vh2);
    }
    // Columns of A as rows of `w` (n rows of length m).
    let mut w: Vec<Vec<T>> = (0..n).map(|j| (0..m).map(|i| a[i * n + j]).collect()).collect();
    let mut v: Vec<Vec<T>> = (0..n)
        .map(|j| {
            let mut r = vec![T::ZERO; n];
            r[j] = T::ONE;
            r
        })
        .collect();
    let dot = |x: &[T], y: &[T]| x.iter().zip(y).fold(T::ZERO, |s, (&p, &q)| s + p * q);
    for _sweep in 0..100 {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                let alpha = dot(&w[p], &w[p]);
                let beta = dot(&w[q], &w[q]);
                let gamma = dot(&w[p], &w[q]);
                if gamma == T::ZERO || gamma.abs() <= T::EPS * (alpha * beta).sqrt() {
                    continue;
                }
                rotated = true;
                let zeta = (beta - alpha) / (T::of(2.0) * gamma);
                let sign = if zeta >= T::ZERO { T::ONE } else { -T::ONE };
                let t = sign / (zeta.abs() + (zeta * zeta + T::ONE).sqrt());
                let c = T::ONE / (t * t + T::ONE).sqrt();
                let s = c * t;
                for mat in [&mut w, &mut v] {
                    let (lo, hi) = mat.split_at_mut(q);
                    for (x, y) in lo[p].iter_mut().zip(hi[0].iter_mut()) {
                        let (xp, yq) = (*x, *y);
                        *x = c * xp - s * yq;
                        *y = s * xp + c * yq;
                    }
                }
            }
        }
        if !rotated {
            break;
        }
    }
    let sig: Vec<T> = w.iter().map(|r| dot(r, r).sqrt()).collect();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| sig[j].partial_cmp(&sig[i]).unwrap_or(std::cmp::Ordering::Equal));
    let smax = order.first().map(|&i| sig[i]).unwrap_or(T::ZERO);
    let mut urows = Vec::with_capacity(n);
    let mut valid = Vec::with_capacity(n);
    for &o in &order {
        let ok = sig[o] > smax * T::EPS * T::of(m as f64) && sig[o] > T::ZERO;
        urows.push(if ok {
            w[o].iter().map(|&x| x / sig[o]).collect()
        } else {
            vec![T::ZERO; m]
        });
        valid.push(ok);
    }
    complete_rows(&mut urows, &valid, m, if full { m } else { n });
    let uc = urows.len();
    let mut u = vec![T::ZERO; m * uc];
    for (c, r) in urows.iter().enumerate() {
        for i in 0..m {
            u[i * uc + c] = r[i];
        }
    }
    let s: Vec<T> = order.iter().map(|&o| sig[o]).collect();
    let mut vh = vec![T::ZERO; n * n];
    for (r, &o) in order.iter().enumerate() {
        vh[r * n..r * n + n].copy_from_slice(&v[o]);
    }
    (u, s, vh)
}
