//! `linalg` decompositions: inv, solve, det, slogdet, cholesky, qr, eigh,
//! svd. One operator each (PyTorch's names and nodes), batched over the
//! leading dims, f32/f64, computed by `cpu::lapack` in the `AnyBackend`
//! slot; backward formulas are PyTorch's (`FunctionsManual.cpp`) written
//! with differentiable ops, so double backward works.

use crate::autograd::{BackwardCtx, Saves};
use crate::cpu::lapack::Real;
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call, call1, downcast_op};
use crate::layout::Dims;
use crate::ops::grad_util::grad0;
use crate::{DType, Error, Result, Tensor, TensorOptions};

/// Dispatch table of `linalg_inv_ex`.
pub static LINALG_INV: OpEntry = OpEntry::differentiable("linalg_inv_ex");
/// Dispatch table of `_linalg_solve_ex`.
pub static LINALG_SOLVE: OpEntry = OpEntry::differentiable("_linalg_solve_ex");
/// Dispatch table of `_linalg_det`.
pub static LINALG_DET: OpEntry = OpEntry::differentiable("_linalg_det");
/// Dispatch table of `_linalg_slogdet`.
pub static LINALG_SLOGDET: OpEntry = OpEntry::differentiable("_linalg_slogdet");
/// Dispatch table of `linalg_cholesky_ex`.
pub static LINALG_CHOLESKY: OpEntry = OpEntry::differentiable("linalg_cholesky_ex");
/// Dispatch table of `linalg_qr`.
pub static LINALG_QR: OpEntry = OpEntry::differentiable("linalg_qr");
/// Dispatch table of `_linalg_eigh`.
pub static LINALG_EIGH: OpEntry = OpEntry::differentiable("_linalg_eigh");
/// Dispatch table of `_linalg_svd`.
pub static LINALG_SVD: OpEntry = OpEntry::differentiable("_linalg_svd");

/// Which decomposition, with its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecompKind {
    /// `A^-1`.
    Inv,
    /// `X` with `A X = B` (`B` batched as `A`, `[..., n, k]`).
    Solve,
    /// `det(A)`.
    Det,
    /// `(sign, log|det|)`.
    Slogdet,
    /// Cholesky factor: `L`, or `U = L^H` when `upper`.
    Cholesky {
        /// Return the upper factor.
        upper: bool,
    },
    /// `(Q, R)`: `complete` Q is `m x m`; `r_only` leaves Q empty.
    Qr {
        /// `mode='complete'`.
        complete: bool,
        /// `mode='r'`.
        r_only: bool,
    },
    /// `(eigenvalues ascending, eigenvectors)` from the `upper` or lower triangle.
    Eigh {
        /// `UPLO='U'`.
        upper: bool,
    },
    /// `(U, S, Vh)`, singular values descending.
    Svd {
        /// `full_matrices`.
        full: bool,
    },
}

/// A `linalg` decomposition operator.
#[derive(Debug, Clone, Copy)]
pub struct Decomp(pub DecompKind);

impl DecompKind {
    fn name(self) -> &'static str {
        match self {
            DecompKind::Inv => "linalg.inv",
            DecompKind::Solve => "linalg.solve",
            DecompKind::Det => "linalg.det",
            DecompKind::Slogdet => "linalg.slogdet",
            DecompKind::Cholesky { .. } => "linalg.cholesky",
            DecompKind::Qr { .. } => "linalg.qr",
            DecompKind::Eigh { .. } => "linalg.eigh",
            DecompKind::Svd { .. } => "linalg.svd",
        }
    }
}

/// Checks a float tensor of at least 2 dims (square unless `rect`).
fn check_matrix(op: &'static str, a: &Tensor, rect: bool) -> Result<()> {
    if a.ndim() < 2 {
        return Err(Error::invalid(
            op,
            "The input tensor A must have at least 2 dimensions.".to_string(),
        ));
    }
    if !matches!(a.dtype(), DType::F32 | DType::F64) {
        return Err(Error::dtype(
            op,
            a.dtype(),
            format!(
                "Expected a floating point or complex tensor as input. Got {}",
                a.dtype().scalar_type_name()
            ),
        ));
    }
    let n = a.ndim();
    if !rect && a.shape()[n - 1] != a.shape()[n - 2] {
        return Err(Error::invalid(
            op,
            format!(
                "A must be batches of square matrices, but they are {} by {} matrices",
                a.shape()[n - 2],
                a.shape()[n - 1]
            ),
        ));
    }
    Ok(())
}

impl Op for Decomp {
    fn entry(&self) -> &'static OpEntry {
        match self.0 {
            DecompKind::Inv => &LINALG_INV,
            DecompKind::Solve => &LINALG_SOLVE,
            DecompKind::Det => &LINALG_DET,
            DecompKind::Slogdet => &LINALG_SLOGDET,
            DecompKind::Cholesky { .. } => &LINALG_CHOLESKY,
            DecompKind::Qr { .. } => &LINALG_QR,
            DecompKind::Eigh { .. } => &LINALG_EIGH,
            DecompKind::Svd { .. } => &LINALG_SVD,
        }
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let op = self.0.name();
        let a = inputs[0];
        let rect = matches!(self.0, DecompKind::Qr { .. } | DecompKind::Svd { .. });
        check_matrix(op, a, rect)?;
        let nd = a.ndim();
        let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
        let batch = &a.shape()[..nd - 2];
        let dt = a.dtype();
        let shape = |tail: &[usize]| -> Dims {
            let mut s: Dims = batch.into();
            s.extend_from_slice(tail);
            s
        };
        let k = m.min(n);
        Ok(match self.0 {
            DecompKind::Inv | DecompKind::Cholesky { .. } => {
                smallvec::smallvec![OutSpec::new(Dims::from_slice(a.shape()), dt)]
            }
            DecompKind::Solve => smallvec::smallvec![OutSpec::new(Dims::from_slice(inputs[1].shape()), dt)],
            DecompKind::Det => smallvec::smallvec![OutSpec::new(shape(&[]), dt)],
            DecompKind::Slogdet => smallvec::smallvec![OutSpec::new(shape(&[]), dt), OutSpec::new(shape(&[]), dt)],
            DecompKind::Qr { complete, r_only } => {
                let (qs, rs) = match (r_only, complete) {
                    (true, _) => (vec![0], vec![k, n]),
                    (false, true) => (vec![m, m], vec![m, n]),
                    (false, false) => (vec![m, k], vec![k, n]),
                };
                let q = if r_only { Dims::from_slice(&[0]) } else { shape(&qs) };
                smallvec::smallvec![OutSpec::new(q, dt), OutSpec::new(shape(&rs), dt)]
            }
            DecompKind::Eigh { .. } => smallvec::smallvec![
                OutSpec::new(shape(&[n]), dt),
                OutSpec::new(Dims::from_slice(a.shape()), dt)
            ],
            DecompKind::Svd { full } => {
                let (uc, vr) = if full { (m, n) } else { (k, k) };
                smallvec::smallvec![
                    OutSpec::new(shape(&[m, uc]), dt),
                    OutSpec::new(shape(&[k]), dt),
                    OutSpec::new(shape(&[vr, n]), dt)
                ]
            }
        })
    }

    fn saves(&self) -> Saves {
        match self.0 {
            DecompKind::Inv | DecompKind::Cholesky { .. } => Saves { inputs: 0, outputs: 1 },
            DecompKind::Solve => Saves { inputs: 1, outputs: 1 },
            DecompKind::Det => Saves { inputs: 1, outputs: 1 },
            DecompKind::Slogdet => Saves { inputs: 1, outputs: 0 },
            DecompKind::Qr { .. } | DecompKind::Eigh { .. } => Saves {
                inputs: 0,
                outputs: 0b11,
            },
            DecompKind::Svd { .. } => Saves {
                inputs: 0,
                outputs: 0b111,
            },
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        match self.0 {
            DecompKind::Inv => {
                let g = grad0(grads)?;
                let ai = ctx.output(0)?.mt()?;
                Ok(vec![Some(ai.matmul(&g)?.matmul(&ai)?.neg()?)])
            }
            DecompKind::Solve => {
                let g = grad0(grads)?;
                let a = ctx.input(0)?;
                let x = ctx.output(0)?;
                let gb = call1(&Decomp(DecompKind::Solve), &[&a.mt()?, &g])?;
                let ga = if ctx.needs_grad(0) {
                    Some(gb.matmul(&x.mt()?)?.neg()?)
                } else {
                    None
                };
                Ok(vec![ga, Some(gb)])
            }
            DecompKind::Det => {
                let g = grad0(grads)?;
                let (a, d) = (ctx.input(0)?, ctx.output(0)?);
                let s = g.mul(&d)?.unsqueeze(-1)?.unsqueeze(-1)?;
                Ok(vec![Some(s.mul(&a.linalg_inv()?.mt()?)?)])
            }
            DecompKind::Slogdet => {
                let Some(g) = grads.get(1).cloned().flatten() else {
                    return Ok(vec![None]);
                };
                let a = ctx.input(0)?;
                let s = g.unsqueeze(-1)?.unsqueeze(-1)?;
                Ok(vec![Some(s.mul(&a.linalg_inv()?.mt()?)?)])
            }
            DecompKind::Cholesky { upper } => {
                let g = grad0(grads)?;
                let out = ctx.output(0)?;
                let (l, gl) = if upper { (out.mt()?, g.mt()?) } else { (out, g) };
                let ga = l.mt()?.matmul(&gl)?.tril(0)?;
                let ga = ga.add(&ga.tril(-1)?.mt()?)?.mul(0.5)?;
                // L^-H gA L^-1.
                let y = l.mt()?.linalg_solve(&ga)?;
                Ok(vec![Some(l.mt()?.linalg_solve(&y.mt()?)?.mt()?)])
            }
            DecompKind::Qr { complete, r_only } => qr_backward(ctx, grads, complete, r_only),
            DecompKind::Eigh { .. } => eigh_backward(ctx, grads),
            DecompKind::Svd { full } => svd_backward(ctx, grads, full),
        }
    }
}

fn eye_like(t: &Tensor, n: usize) -> Result<Tensor> {
    TensorOptions::like(t).eye(n, n)
}

/// `diag_embed(v)`.
fn diag_embed(v: &Tensor) -> Result<Tensor> {
    let n = v.shape()[v.ndim() - 1];
    v.unsqueeze(-1)?.mul(&eye_like(v, n)?)
}

/// `X` with its diagonal kept (others zero).
fn diag_part(x: &Tensor) -> Result<Tensor> {
    let n = x.shape()[x.ndim() - 1];
    x.mul(&eye_like(x, n)?)
}

/// `X R^-H` for upper-triangular `R` (a right solve).
fn right_solve_rh(x: &Tensor, r: &Tensor) -> Result<Tensor> {
    // X R^T = G  <=>  R X^T = G^T.
    r.linalg_solve(&x.mt()?)?.mt()
}

fn qr_backward(
    ctx: &BackwardCtx,
    grads: &[Option<Tensor>],
    complete: bool,
    r_only: bool,
) -> Result<Vec<Option<Tensor>>> {
    let (q, r) = (ctx.output(0)?, ctx.output(1)?);
    let (m, n) = (
        r.shape()[r.ndim() - 2].max(q.shape().get(q.ndim().wrapping_sub(2)).copied().unwrap_or(0)),
        r.shape()[r.ndim() - 1],
    );
    if r_only || (complete && m > n) || q.shape()[q.ndim() - 2] < n {
        return Err(Error::invalid(
            "linalg.qr",
            "The derivative of linalg.qr depends on Q, which is not computed when mode='r', and is only implemented here for mode='reduced' with m >= n (or square complete).",
        ));
    }
    let (gq, gr) = (grads.first().cloned().flatten(), grads.get(1).cloned().flatten());
    // M = R gR^H - gQ^H Q;  gA = (gQ + Q copyltu(M)) R^-H.
    let mut mm: Option<Tensor> = None;
    if let Some(gr) = &gr {
        mm = Some(r.matmul(&gr.mt()?)?);
    }
    if let Some(gq) = &gq {
        let t = gq.mt()?.matmul(&q)?;
        mm = Some(match mm {
            Some(x) => x.sub(&t)?,
            None => t.neg()?,
        });
    }
    let Some(mm) = mm else { return Ok(vec![None]) };
    let low = mm.tril(-1)?;
    let copyltu = low.add(&low.mt()?)?.add(&diag_part(&mm)?)?;
    let mut ga = q.matmul(&copyltu)?;
    if let Some(gq) = &gq {
        ga = ga.add(gq)?;
    }
    Ok(vec![Some(right_solve_rh(&ga, &r)?)])
}

fn eigh_backward(ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
    let (l, v) = (ctx.output(0)?, ctx.output(1)?);
    let (gl, gv) = (grads.first().cloned().flatten(), grads.get(1).cloned().flatten());
    let n = l.shape()[l.ndim() - 1];
    let inner = match &gv {
        Some(gv) => {
            let vhgv = v.mt()?.matmul(gv)?;
            let skew = vhgv.sub(&vhgv.mt()?)?.mul(0.5)?;
            let eye = eye_like(&l, n)?;
            // E_ij = L_j - L_i, 1 on the diagonal.
            let e = l.unsqueeze(-2)?.sub(&l.unsqueeze(-1)?)?.add(&eye)?;
            let mut r = skew.div(&e)?;
            if let Some(gl) = &gl {
                r = r.add(&diag_embed(gl)?)?;
            }
            r
        }
        None => match &gl {
            Some(gl) => diag_embed(gl)?,
            None => return Ok(vec![None]),
        },
    };
    Ok(vec![Some(v.matmul(&inner)?.matmul(&v.mt()?)?)])
}

fn svd_backward(ctx: &BackwardCtx, grads: &[Option<Tensor>], full: bool) -> Result<Vec<Option<Tensor>>> {
    let (mut u, s, mut vh) = (ctx.output(0)?, ctx.output(1)?, ctx.output(2)?);
    let k = s.shape()[s.ndim() - 1] as i64;
    let (mut gu, gs, mut gvh) = (
        grads.first().cloned().flatten(),
        grads.get(1).cloned().flatten(),
        grads.get(2).cloned().flatten(),
    );
    if full {
        u = u.narrow(-1, 0, k)?;
        vh = vh.narrow(-2, 0, k)?;
        gu = gu.map(|g| g.narrow(-1, 0, k)).transpose()?;
        gvh = gvh.map(|g| g.narrow(-2, 0, k)).transpose()?;
    }
    let m = u.shape()[u.ndim() - 2];
    let n = vh.shape()[vh.ndim() - 1];
    if gu.is_none() && gvh.is_none() {
        let Some(gs) = gs else { return Ok(vec![None]) };
        return Ok(vec![Some(u.matmul(&gs.unsqueeze(-1)?.mul(&vh)?)?)]);
    }
    let v = vh.mt()?;
    let gv = gvh.as_ref().map(|g| g.mt()).transpose()?;
    let skew = |x: Tensor| -> Result<Tensor> { x.sub(&x.mt()?) };
    let uhgu = gu.as_ref().map(|g| skew(u.mt()?.matmul(g)?)).transpose()?;
    let vhgv = gv.as_ref().map(|g| skew(vh.matmul(g)?)).transpose()?;
    let s2 = s.mul(&s)?;
    let eye = eye_like(&s, k as usize)?;
    let e = s2.unsqueeze(-2)?.sub(&s2.unsqueeze(-1)?)?.add(&eye)?;
    let mut ga = match (&uhgu, &vhgv) {
        (Some(a), Some(b)) => a.mul(&s.unsqueeze(-2)?)?.add(&s.unsqueeze(-1)?.mul(b)?)?.div(&e)?,
        (Some(a), None) => a.mul(&s.unsqueeze(-2)?)?.div(&e)?,
        (None, Some(b)) => s.unsqueeze(-1)?.mul(b)?.div(&e)?,
        (None, None) => unreachable!("handled above"),
    };
    if let Some(gs) = &gs {
        ga = ga.add(&diag_embed(gs)?)?;
    }
    let ga = if m > n && gu.is_some() {
        let gu = gu.as_ref().unwrap_or_else(|| unreachable!());
        let mut t = u.matmul(&ga)?;
        let gusinv = gu.div(&s.unsqueeze(-2)?)?;
        t = t.add(&gusinv)?.sub(&u.matmul(&u.mt()?.matmul(&gusinv)?)?)?;
        t.matmul(&vh)?
    } else if m < n && gv.is_some() {
        let gv = gv.as_ref().unwrap_or_else(|| unreachable!());
        let mut t = ga.matmul(&vh)?;
        let gvsinv = gv.div(&s.unsqueeze(-2)?)?;
        t = t.add(&gvsinv.mt()?)?.sub(&gvsinv.mt()?.matmul(&v)?.matmul(&vh)?)?;
        u.matmul(&t)?
    } else {
        u.matmul(&ga)?.matmul(&vh)?
    };
    Ok(vec![Some(ga)])
}

/// The batch error prefix, as PyTorch's.
fn batch_prefix(batched: bool, b: usize) -> String {
    if batched {
        format!("(Batch element {b}): ")
    } else {
        String::new()
    }
}

fn run<T: Real>(kind: DecompKind, inputs: &[&Tensor]) -> Result<Tensors> {
    let op = kind.name();
    let a = inputs[0];
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
        DecompKind::Inv | DecompKind::Solve => {
            let (rhs, r): (Vec<T>, usize) = if kind == DecompKind::Solve {
                let b = inputs[1];
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
                let info = crate::cpu::lapack::lu(&mut lu, n, &mut piv);
                if info != 0 {
                    let msg = if kind == DecompKind::Inv {
                        format!(
                            "{}The diagonal element {info} is zero, the inversion could not be completed because the input matrix is singular.",
                            batch_prefix(batched, bi)
                        )
                    } else {
                        format!(
                            "{}The solver failed because the input matrix is singular.",
                            batch_prefix(batched, bi)
                        )
                    };
                    return Err(Error::invalid(op, msg));
                }
                crate::cpu::lapack::lu_solve(&lu, &piv, n, &mut out[bi * n * r..(bi + 1) * n * r], r);
            }
            let shape = if kind == DecompKind::Solve {
                inputs[1].shape().to_vec()
            } else {
                a.shape().to_vec()
            };
            Ok(smallvec::smallvec![Tensor::from_vec(out, shape)?])
        }
        DecompKind::Det | DecompKind::Slogdet => {
            let mut det = Vec::with_capacity(nb);
            let mut sign = Vec::with_capacity(nb);
            let mut logabs = Vec::with_capacity(nb);
            for bi in 0..nb {
                let mut lu = data[bi * mn..(bi + 1) * mn].to_vec();
                crate::cpu::lapack::lu(&mut lu, n, &mut piv);
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
            let mut out = data;
            for bi in 0..nb {
                let blk = &mut out[bi * mn..(bi + 1) * mn];
                if let Err(k) = crate::cpu::lapack::cholesky(blk, n) {
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
                let (q, r) = crate::cpu::lapack::qr(&data[bi * mn..(bi + 1) * mn], m, n, qcols);
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
                let (w, v) = crate::cpu::lapack::eigh(&sym, n);
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
                let (u, s, vh) = crate::cpu::lapack::svd(&data[bi * mn..(bi + 1) * mn], m, n, full);
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
    let specs = op.infer(c.inputs)?;
    let dev = c.inputs[0].device();
    if dev != crate::Device::Cpu {
        // Shapes only (the meta device), or another device's tensors: no data to factor here.
        if dev != crate::Device::Meta {
            return Err(Error::invalid(
                op.0.name(),
                format!("not implemented for device {dev:?}"),
            ));
        }
        return specs
            .iter()
            .map(|s| TensorOptions::new().device(dev).dtype(s.dtype).zeros(&s.shape[..]))
            .collect();
    }
    let outs = match c.inputs[0].dtype() {
        DType::F32 => run::<f32>(op.0, c.inputs)?,
        _ => run::<f64>(op.0, c.inputs)?,
    };
    Ok(outs)
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
        e.register_builtin(Slot::AnyBackend, Kernel::Functional(decomp_kernel))?;
    }
    Ok(())
}

/// The order of a matrix norm (`torch.linalg.matrix_norm`'s `ord`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MatrixOrd {
    /// `'fro'`.
    Fro,
    /// `'nuc'`: the sum of singular values.
    Nuc,
    /// A number: inf, -inf, 1, -1, 2, -2.
    P(f64),
}

/// # Linear algebra (`torch.linalg`)
///
/// ```
/// use ferrotorch_core::Tensor;
/// let a = Tensor::new([[4.0f64, 1.0], [1.0, 3.0]])?;
/// let b = Tensor::new([[1.0f64], [2.0]])?;
/// let x = a.linalg_solve(&b)?;
/// assert!((a.matmul(&x)?.sub(&b)?.abs()?.amax((0, 1), false)?.item::<f64>()?) < 1e-12);
/// assert!((a.linalg_det()?.item::<f64>()? - 11.0).abs() < 1e-12);
/// let l = a.linalg_cholesky(false)?;
/// assert!((l.matmul(&l.mt()?)?.sub(&a)?.abs()?.amax((0, 1), false)?.item::<f64>()?) < 1e-12);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// The last two dims swapped (`x.mT`).
    pub fn mt(&self) -> Result<Tensor> {
        self.transpose(-2, -1)
    }

    /// `torch.linalg.inv`.
    pub fn linalg_inv(&self) -> Result<Tensor> {
        call1(&Decomp(DecompKind::Inv), &[self])
    }

    /// `torch.linalg.solve(self, b)` (`left=True`): `X` with `A X = B`;
    /// `B` is a batch of vectors when it is 1-D or has `A`'s shape minus
    /// the last dim; batch dims broadcast.
    pub fn linalg_solve(&self, b: &Tensor) -> Result<Tensor> {
        let op = "linalg.solve";
        check_matrix(op, self, false)?;
        if b.dtype() != self.dtype() {
            return Err(Error::DTypeMismatch {
                op,
                detail: format!(
                    "Expected A and B to have the same dtype, but found A of type {} and B of type {} instead",
                    self.dtype().scalar_type_name(),
                    b.dtype().scalar_type_name()
                ),
            });
        }
        let na = self.ndim();
        let n = self.shape()[na - 1];
        let vector = b.ndim() == 1 || (b.ndim() == na - 1 && b.shape() == &self.shape()[..na - 1]);
        let b2 = if vector { b.unsqueeze(-1)? } else { b.clone() };
        if b2.ndim() < 2 || b2.shape()[b2.ndim() - 2] != n {
            return Err(Error::shape(
                op,
                self.shape(),
                b.shape(),
                "Incompatible shapes of A and B for the equation AX = B",
            ));
        }
        let batch = crate::layout::broadcast_shapes(op, &self.shape()[..na - 2], &b2.shape()[..b2.ndim() - 2])?;
        let mut sa: Vec<i64> = batch.iter().map(|&s| s as i64).collect();
        let mut sb = sa.clone();
        sa.extend([n as i64, n as i64]);
        sb.extend([n as i64, b2.shape()[b2.ndim() - 1] as i64]);
        let x = call1(&Decomp(DecompKind::Solve), &[&self.expand(sa)?, &b2.expand(sb)?])?;
        if vector { x.squeeze_dim(-1) } else { Ok(x) }
    }

    /// `torch.linalg.det`.
    pub fn linalg_det(&self) -> Result<Tensor> {
        call1(&Decomp(DecompKind::Det), &[self])
    }

    /// `torch.linalg.slogdet`: `(sign, log|det|)`.
    pub fn linalg_slogdet(&self) -> Result<(Tensor, Tensor)> {
        let mut o = call(&Decomp(DecompKind::Slogdet), &[self])?.into_iter();
        let s = o
            .next()
            .ok_or_else(|| Error::invalid("linalg.slogdet", "missing output"))?;
        let l = o
            .next()
            .ok_or_else(|| Error::invalid("linalg.slogdet", "missing output"))?;
        Ok((s, l))
    }

    /// `torch.linalg.cholesky(self, upper=upper)` (reads the lower triangle).
    pub fn linalg_cholesky(&self, upper: bool) -> Result<Tensor> {
        call1(&Decomp(DecompKind::Cholesky { upper }), &[self])
    }

    /// `torch.linalg.qr(self, mode)`: mode `"reduced"`, `"complete"` or `"r"`
    /// (Q then empty). R's diagonal has LAPACK `geqrf`'s signs.
    pub fn linalg_qr(&self, mode: &str) -> Result<(Tensor, Tensor)> {
        let (complete, r_only) = match mode {
            "reduced" => (false, false),
            "complete" => (true, false),
            "r" => (false, true),
            _ => {
                return Err(Error::invalid(
                    "linalg.qr",
                    format!(
                        "qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'"
                    ),
                ));
            }
        };
        let mut o = call(&Decomp(DecompKind::Qr { complete, r_only }), &[self])?.into_iter();
        let q = o.next().ok_or_else(|| Error::invalid("linalg.qr", "missing output"))?;
        let r = o.next().ok_or_else(|| Error::invalid("linalg.qr", "missing output"))?;
        Ok((q, r))
    }

    /// `torch.linalg.eigh(self, UPLO)`: eigenvalues ascending and
    /// eigenvectors as columns (signs not unique).
    pub fn linalg_eigh(&self, uplo: &str) -> Result<(Tensor, Tensor)> {
        let upper = match uplo {
            "L" | "l" => false,
            "U" | "u" => true,
            _ => {
                return Err(Error::invalid(
                    "linalg.eigh",
                    "Expected UPLO argument to be 'L' or 'U', but got ".to_string() + uplo,
                ));
            }
        };
        let mut o = call(&Decomp(DecompKind::Eigh { upper }), &[self])?.into_iter();
        let w = o
            .next()
            .ok_or_else(|| Error::invalid("linalg.eigh", "missing output"))?;
        let v = o
            .next()
            .ok_or_else(|| Error::invalid("linalg.eigh", "missing output"))?;
        Ok((w, v))
    }

    /// `torch.linalg.eigvalsh`.
    pub fn linalg_eigvalsh(&self, uplo: &str) -> Result<Tensor> {
        Ok(self.linalg_eigh(uplo)?.0)
    }

    /// `torch.linalg.svd(self, full_matrices)`: `(U, S, Vh)`, singular
    /// values descending (vector signs not unique).
    pub fn linalg_svd(&self, full_matrices: bool) -> Result<(Tensor, Tensor, Tensor)> {
        let mut o = call(&Decomp(DecompKind::Svd { full: full_matrices }), &[self])?.into_iter();
        let miss = || Error::invalid("linalg.svd", "missing output");
        let u = o.next().ok_or_else(miss)?;
        let s = o.next().ok_or_else(miss)?;
        let vh = o.next().ok_or_else(miss)?;
        Ok((u, s, vh))
    }

    /// `torch.linalg.svdvals`.
    pub fn linalg_svdvals(&self) -> Result<Tensor> {
        Ok(self.linalg_svd(false)?.1)
    }

    /// `torch.linalg.vector_norm(self, ord, dim, keepdim)` (`()`: all dims).
    pub fn linalg_vector_norm(&self, ord: f64, dims: impl crate::IntoShape, keepdim: bool) -> Result<Tensor> {
        self.norm_dim(ord, dims, keepdim)
    }

    /// `torch.linalg.matrix_norm(self, ord, dim=(-2, -1), keepdim)`.
    pub fn linalg_matrix_norm(&self, ord: MatrixOrd, keepdim: bool) -> Result<Tensor> {
        let op = "linalg.matrix_norm";
        if self.ndim() < 2 {
            return Err(Error::invalid(
                op,
                "The input tensor A must have at least 2 dimensions.".to_string(),
            ));
        }
        check_matrix(op, self, true)?;
        let r = match ord {
            MatrixOrd::Fro => return self.norm_dim(2.0, [-2i64, -1], keepdim),
            MatrixOrd::Nuc => self.linalg_svdvals()?.sum_dim([-1i64], false)?,
            MatrixOrd::P(p) if p == f64::INFINITY => self.abs()?.sum_dim([-1i64], false)?.amax([-1i64], false)?,
            MatrixOrd::P(p) if p == f64::NEG_INFINITY => self.abs()?.sum_dim([-1i64], false)?.amin([-1i64], false)?,
            MatrixOrd::P(1.0) => self.abs()?.sum_dim([-2i64], false)?.amax([-1i64], false)?,
            MatrixOrd::P(-1.0) => self.abs()?.sum_dim([-2i64], false)?.amin([-1i64], false)?,
            MatrixOrd::P(2.0) => self.linalg_svdvals()?.amax([-1i64], false)?,
            MatrixOrd::P(-2.0) => self.linalg_svdvals()?.amin([-1i64], false)?,
            MatrixOrd::P(p) => {
                return Err(Error::invalid(op, format!("Order {p} not supported.")));
            }
        };
        if keepdim { r.unsqueeze(-1)?.unsqueeze(-1) } else { Ok(r) }
    }
}
