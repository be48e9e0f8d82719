//! The CPU kernels of the `linalg` decompositions (`ops/decomp.rs`
//! declares them): batches of f32 / f64 matrices factored by
//! [`super::lapack`], with PyTorch's messages for singular and
//! non-convergent inputs.

use super::lapack::{self, Real};
use crate::dispatch::{Call, DispatchKey, Kernel, Op, Slot, Tensors, downcast_op};
use crate::ops::decomp::{
    Decomp, DecompKind, LINALG_CHOLESKY, LINALG_DET, LINALG_EIGH, LINALG_INV, LINALG_QR, LINALG_SLOGDET, LINALG_SOLVE,
    LINALG_SVD, batch_prefix, solve_batch,
};
use crate::{DType, Error, Result, Tensor};

fn run<T: Real>(kind: DecompKind, inputs: &[&Tensor]) -> Result<Tensors> {
    let op = kind.name();
    // linalg.solve: both operands expanded to the broadcast batch, B as matrices.
    let solve_operands = match kind {
        DecompKind::Solve { vector } => {
            let (a, b) = (inputs[0], inputs[1]);
            let b = if vector { b.unsqueeze(-1)? } else { b.clone() };
            let batch: Vec<i64> = solve_batch(inputs[0], inputs[1], vector)?
                .iter()
                .map(|&d| d as i64)
                .collect();
            let with =
                |t: &Tensor| -> Vec<i64> { batch.iter().chain(&t.shape_i64()[t.ndim() - 2..]).copied().collect() };
            Some((a.expand(with(a))?, b.expand(with(&b))?))
        }
        _ => None,
    };
    let a = solve_operands.as_ref().map_or(inputs[0], |(a, _)| a);
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let batch: Vec<usize> = a.shape()[..nd - 2].to_vec();
    let nb: usize = batch.iter().product();
    let batched = nd > 2;
    let data: Vec<T> = a.contiguous()?.to_vec::<T>()?;
    let mn = m * n;
    let with = |tail: &[usize]| -> Vec<usize> { batch.iter().chain(tail).copied().collect() };
    let mut piv = vec![0usize; n];
    match kind {
        DecompKind::Inv | DecompKind::Solve { .. } => {
            let (rhs, r): (Vec<T>, usize) = if let Some((_, b)) = &solve_operands {
                (b.contiguous()?.to_vec::<T>()?, b.shape()[b.ndim() - 1])
            } else {
                let mut id = vec![T::ZERO; nb * n * n];
                for bi in 0..nb {
                    for i in 0..n {
                        id[bi * n * n + i * n + i] = T::ONE;
                    }
                }
                (id, n)
            };
            let mut out = rhs;
            for bi in 0..nb {
                let mut lu = data[bi * mn..(bi + 1) * mn].to_vec();
                let info = lapack::lu(&mut lu, n, &mut piv);
                if info != 0 {
                    let msg = if kind == DecompKind::Inv {
                        format!(
                            "{}The diagonal element {info} is zero, the inversion could not be completed because the input matrix is singular.",
                            batch_prefix(batched, bi)
                        )
                    } else {
                        // PyTorch names the Python function here.
                        return Err(Error::invalid(
                            "torch.linalg.solve",
                            format!(
                                "{}The solver failed because the input matrix is singular.",
                                batch_prefix(batched, bi)
                            ),
                        ));
                    };
                    return Err(Error::invalid(op, msg));
                }
                lapack::lu_solve(&lu, &piv, n, &mut out[bi * n * r..(bi + 1) * n * r], r);
            }
            let shape = match kind {
                DecompKind::Solve { vector } => {
                    let b = solve_operands.as_ref().map_or(inputs[1], |(_, b)| b).shape();
                    b[..b.len() - usize::from(vector)].to_vec()
                }
                _ => a.shape().to_vec(),
            };
            Ok(smallvec::smallvec![Tensor::from_vec(out, shape)?])
        }
        DecompKind::Det | DecompKind::Slogdet => {
            let mut det = Vec::with_capacity(nb);
            let mut sign = Vec::with_capacity(nb);
            let mut logabs = Vec::with_capacity(nb);
            for bi in 0..nb {
                let mut lu = data[bi * mn..(bi + 1) * mn].to_vec();
                lapack::lu(&mut lu, n, &mut piv);
                let mut d = T::ONE;
                let mut sg = T::ONE;
                let mut la = T::ZERO;
                for i in 0..n {
                    let u = lu[i * n + i];
                    d *= u;
                    if piv[i] != i {
                        d = -d;
                        sg = -sg;
                    }
                    if u < T::ZERO {
                        sg = -sg;
                    }
                    la += T::of(u.abs().to_f64().ln());
                }
                if la == T::of(f64::NEG_INFINITY) {
                    sg = T::ZERO;
                }
                det.push(d);
                sign.push(sg);
                logabs.push(la);
            }
            if kind == DecompKind::Det {
                Ok(smallvec::smallvec![Tensor::from_vec(det, with(&[]))?])
            } else {
                Ok(smallvec::smallvec![
                    Tensor::from_vec(sign, with(&[]))?,
                    Tensor::from_vec(logabs, with(&[]))?
                ])
            }
        }
        DecompKind::Cholesky { upper } => {
            // LAPACK's potrf with uplo 'U' reads the upper triangle: factor its transpose.
            let mut out = if upper {
                a.mt()?.contiguous()?.to_vec::<T>()?
            } else {
                data
            };
            for bi in 0..nb {
                let blk = &mut out[bi * mn..(bi + 1) * mn];
                if let Err(k) = lapack::cholesky(blk, n) {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "{}The factorization could not be completed because the input is not positive-definite (the leading minor of order {k} is not positive-definite).",
                            batch_prefix(batched, bi)
                        ),
                    ));
                }
            }
            let t = Tensor::from_vec(out, a.shape())?;
            Ok(smallvec::smallvec![if upper { t.mt()?.contiguous()? } else { t }])
        }
        DecompKind::Qr { complete, r_only } => {
            let k = m.min(n);
            let qcols = if complete { m } else { k };
            let rrows = if complete { m } else { k };
            let (mut qs, mut rs) = (Vec::new(), Vec::new());
            for bi in 0..nb {
                let (q, r) = lapack::qr(&data[bi * mn..(bi + 1) * mn], m, n, qcols);
                qs.extend(q);
                rs.extend_from_slice(&r[..rrows * n]);
            }
            let q = if r_only {
                Tensor::from_vec(Vec::<T>::new(), [0])?
            } else {
                Tensor::from_vec(qs, with(&[m, qcols]))?
            };
            Ok(smallvec::smallvec![q, Tensor::from_vec(rs, with(&[rrows, n]))?])
        }
        DecompKind::Eigh { upper } => {
            let (mut ws, mut vs) = (Vec::new(), Vec::new());
            for bi in 0..nb {
                let blk = &data[bi * mn..(bi + 1) * mn];
                let sym: Vec<T> = (0..n * n)
                    .map(|idx| {
                        let (i, j) = (idx / n, idx % n);
                        let (lo, hi) = if i >= j { (i, j) } else { (j, i) };
                        if upper { blk[hi * n + lo] } else { blk[lo * n + hi] }
                    })
                    .collect();
                if sym.iter().any(|x| !x.to_f64().is_finite()) {
                    // PyTorch (LAPACK's syevd) returns NaN for a non-finite input.
                    let nan = T::of(f64::NAN);
                    ws.extend(std::iter::repeat_n(nan, n));
                    vs.extend(std::iter::repeat_n(nan, n * n));
                    continue;
                }
                let (w, v) = lapack::eigh(&sym, n).map_err(|info| {
                    Error::invalid(
                        op,
                        format!(
                            "{}The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated eigenvalues (error code: {info}).",
                            batch_prefix(batched, bi)
                        ),
                    )
                })?;
                ws.extend(w);
                vs.extend(v);
            }
            Ok(smallvec::smallvec![
                Tensor::from_vec(ws, with(&[n]))?,
                Tensor::from_vec(vs, a.shape())?
            ])
        }
        DecompKind::Svd { full } => {
            let k = m.min(n);
            let (mut us, mut ss, mut vhs) = (Vec::new(), Vec::new(), Vec::new());
            for bi in 0..nb {
                let blk = &data[bi * mn..(bi + 1) * mn];
                // As PyTorch (LAPACK's gesdd): NaN is an error, inf gives NaN.
                if blk.iter().any(|x| x.to_f64().is_nan()) {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "{}The algorithm failed to converge because the input matrix contained non-finite values.",
                            batch_prefix(batched, bi)
                        ),
                    ));
                }
                if blk.iter().any(|x| x.to_f64().is_infinite()) {
                    let nan = T::of(f64::NAN);
                    let (uc, vr) = if full { (m, n) } else { (k, k) };
                    us.extend(std::iter::repeat_n(nan, m * uc));
                    ss.extend(std::iter::repeat_n(nan, k));
                    vhs.extend(std::iter::repeat_n(nan, vr * n));
                    continue;
                }
                let (u, s, vh) = lapack::svd(blk, m, n, full).map_err(|info| {
                    Error::invalid(
                        op,
                        format!(
                            "{}The algorithm failed to converge because the input matrix is ill-conditioned or has too many repeated singular values (error code: {info}).",
                            batch_prefix(batched, bi)
                        ),
                    )
                })?;
                us.extend(u);
                ss.extend(s);
                vhs.extend(vh);
            }
            let (uc, vr) = if full { (m, n) } else { (k, k) };
            Ok(smallvec::smallvec![
                Tensor::from_vec(us, with(&[m, uc]))?,
                Tensor::from_vec(ss, with(&[k]))?,
                Tensor::from_vec(vhs, with(&[vr, n]))?
            ])
        }
    }
}

fn decomp_kernel(c: &Call) -> Result<Tensors> {
    let op: &Decomp = downcast_op(c.op)?;
    // The shape and dtype rule checks the operands (square matrices, a
    // floating dtype, matching batches) with PyTorch's messages.
    op.infer(c.inputs)?;
    match c.inputs[0].dtype() {
        DType::F32 => run::<f32>(op.0, c.inputs),
        _ => run::<f64>(op.0, c.inputs),
    }
}

/// Registers the decompositions' kernels.
pub(crate) fn register() -> Result<()> {
    for e in [
        &LINALG_INV,
        &LINALG_SOLVE,
        &LINALG_DET,
        &LINALG_SLOGDET,
        &LINALG_CHOLESKY,
        &LINALG_QR,
        &LINALG_EIGH,
        &LINALG_SVD,
    ] {
        e.register_builtin(Slot::Key(DispatchKey::Cpu), Kernel::Functional(decomp_kernel))?;
    }
    Ok(())
}
