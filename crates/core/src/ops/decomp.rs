//! `linalg` decompositions: inv, solve, det, slogdet, cholesky, qr, eigh,
//! svd. One operator each (PyTorch's names and nodes), batched over the
//! leading dims, f32/f64, computed by the backends' kernels (the CPU's:
//! `backend/cpu/decomp.rs`, by `cpu::lapack`); backward formulas are PyTorch's (`FunctionsManual.cpp`) written
//! with differentiable ops, so double backward works.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call, call1};
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
    /// `X` with `A X = B`: inputs `[A, B]`, batch dims broadcast; `B`
    /// holds vectors `[..., n]` when `vector`, else matrices `[..., n, k]`.
    Solve {
        /// `B` (and `X`) are batches of vectors.
        vector: bool,
    },
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
    pub(crate) fn name(self) -> &'static str {
        match self {
            DecompKind::Inv => "linalg.inv",
            DecompKind::Solve { .. } => "linalg.solve",
            DecompKind::Det => "linalg.det",
            DecompKind::Slogdet => "linalg.slogdet",
            DecompKind::Cholesky { .. } => "linalg.cholesky",
            DecompKind::Qr { .. } => "linalg.qr",
            DecompKind::Eigh { .. } => "linalg.eigh",
            DecompKind::Svd { .. } => "linalg.svd",
        }
    }
}

/// Checks an f32/f64 tensor of at least 2 dims (square unless `rect`),
/// with PyTorch's messages.
fn check_matrix(op: &'static str, a: &Tensor, rect: bool) -> Result<()> {
    if a.ndim() < 2 {
        return Err(Error::invalid(
            op,
            "The input tensor A must have at least 2 dimensions.".to_string(),
        ));
    }
    if op == "linalg.eigh" && !matches!(a.dtype(), DType::F32 | DType::F64) {
        // PyTorch's eigh has no dtype check of its own: its kernel's message.
        return Err(Error::dtype(
            op,
            a.dtype(),
            format!(
                "\"linalg_eigh_cpu\" not implemented for '{}'",
                a.dtype().scalar_type_name()
            ),
        ));
    }
    crate::ops::linalg_norm::check_float(op, a, false)?;
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
            DecompKind::Solve { .. } => &LINALG_SOLVE,
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
            DecompKind::Solve { vector } => {
                let b = inputs[1];
                let tail = if vector { 1 } else { 2 };
                let mut s = solve_batch(a, b, vector)?;
                s.extend_from_slice(&b.shape()[b.ndim() - tail..]);
                smallvec::smallvec![OutSpec::new(s, dt)]
            }
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
            DecompKind::Solve { .. } | DecompKind::Det => Saves { inputs: 1, outputs: 1 },
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
            DecompKind::Solve { vector } => {
                // PyTorch's linalg_solve_backward: gB = A^-H gX, gA = -gB X^H
                // (batch dims as broadcast; the engine sums them back).
                let g = grad0(grads)?;
                let a = ctx.input(0)?;
                let x = ctx.output(0)?;
                let gb = call1(&Decomp(DecompKind::Solve { vector }), &[&a.mt()?, &g])?;
                let ga = if ctx.needs_grad(0) {
                    let col = |t: &Tensor| if vector { t.unsqueeze(-1) } else { Ok(t.clone()) };
                    Some(col(&gb)?.matmul(&col(&x)?.mt()?)?.neg()?)
                } else {
                    None
                };
                Ok(vec![ga, ctx.needs_grad(1).then_some(gb)])
            }
            DecompKind::Det => det_backward(ctx, grads),
            DecompKind::Slogdet => {
                // PyTorch's slogdet_backward (real): A^-H diag(g).
                let Some(g) = grads.get(1).cloned().flatten() else {
                    return Ok(vec![None]);
                };
                let a = ctx.input(0)?;
                Ok(vec![Some(a.mt()?.linalg_solve(&diag_embed(
                    &g.unsqueeze(-1)?.expand(a.shape_i64()[..a.ndim() - 1].to_vec())?,
                )?)?)])
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
    TensorOptions::like(t).eye(n as i64, n as i64)
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

/// PyTorch's `linalg_qr_backward`: with `M = gR R^H - Q^H gQ`, for
/// `m >= n` `gA = (gQ + Q syminvadj(triu(M))) R^-H`; for `m < n` (`A = Q
/// [R1 | R2]`) `gA = [Q tril(X - X^H) R1^-H | 0] + Q gR` with `X = -M`.
/// Errors as PyTorch's for `mode='r'` and for `mode='complete'` with `m > n`.
fn qr_backward(
    ctx: &BackwardCtx,
    grads: &[Option<Tensor>],
    complete: bool,
    r_only: bool,
) -> Result<Vec<Option<Tensor>>> {
    if r_only {
        return Err(Error::invalid(
            "linalg.qr",
            "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.",
        ));
    }
    let (q, r) = (ctx.output(0)?, ctx.output(1)?);
    let (m, n) = (q.shape()[q.ndim() - 2], r.shape()[r.ndim() - 1]);
    if complete && m > n {
        return Err(Error::invalid(
            "linalg.qr",
            "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.",
        ));
    }
    let (gq, gr) = (grads.first().cloned().flatten(), grads.get(1).cloned().flatten());
    let mm = match (&gq, &gr) {
        (Some(gq), Some(gr)) => gr.matmul(&r.mt()?)?.sub(&q.mt()?.matmul(gq)?)?,
        (None, Some(gr)) => gr.matmul(&r.mt()?)?,
        (Some(gq), None) => q.mt()?.matmul(gq)?.neg()?,
        (None, None) => return Ok(vec![None]),
    };
    if m >= n {
        // syminvadj(triu(M)) = triu(M) + triu(M)^H with the diagonal halved.
        let up = mm.triu(0)?;
        let sym = up.add(&up.mt()?)?.sub(&diag_part(&up)?)?;
        let mut ga = q.matmul(&sym)?;
        if let Some(gq) = &gq {
            ga = ga.add(gq)?;
        }
        return Ok(vec![Some(right_solve_rh(&ga, &r)?)]);
    }
    let x = mm.neg()?;
    let skew = x.sub(&x.mt()?)?.tril(0)?;
    let r1 = r.narrow(-1, 0, m as i64)?;
    let ga = right_solve_rh(&q.matmul(&skew)?, &r1)?;
    let mut pad = ga.shape_i64();
    let last = pad.len() - 1;
    pad[last] = (n - m) as i64;
    let zeros = crate::TensorOptions::like(&ga).zeros(pad.iter().map(|&d| d as usize).collect::<Vec<_>>())?;
    let mut ga = Tensor::cat(&[&ga, &zeros], -1)?;
    if let Some(gr) = &gr {
        ga = ga.add(&q.matmul(gr)?)?;
    }
    Ok(vec![Some(ga)])
}

/// PyTorch's `prod_safe_zeros_backward(g, s, -1)`: `g` times the product of
/// the other entries of `s`'s last dim, without dividing (zeros allowed).
fn prod_others(g: &Tensor, s: &Tensor) -> Result<Tensor> {
    let n = s.shape()[s.ndim() - 1] as i64;
    if n == 0 {
        return g.expand(s.shape_i64());
    }
    let mut ones_shape = s.shape().to_vec();
    let last = ones_shape.len() - 1;
    ones_shape[last] = 1;
    let ones = crate::TensorOptions::like(s).ones(ones_shape)?;
    let before = Tensor::cat(&[&ones, &s.narrow(-1, 0, n - 1)?], -1)?.cumprod(-1)?;
    let after = Tensor::cat(&[&ones, &s.narrow(-1, 1, n - 1)?.flip([-1i64])?], -1)?
        .cumprod(-1)?
        .flip([-1i64])?;
    g.mul(&before.mul(&after)?)
}

/// PyTorch's `linalg_det_backward`: `g det(A) A^-H`. Without `create_graph`
/// PyTorch solves with the LU factors, their zero pivots replaced by eps,
/// so a matrix whose determinant is exactly 0 gets a zero gradient; with
/// it, matrices with `|det| < 100 eps` take the SVD form
/// `U diag(alpha prod_{j != i} s_j) Vh` (`alpha = g det(U) det(Vh)`: the
/// adjugate, differentiable), the others `solve(A^H, diag(g det))`.
fn det_backward(ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
    let g = grad0(grads)?;
    let (a, det) = (ctx.input(0)?, ctx.output(0)?);
    if a.numel() == 0 {
        return Ok(vec![None]);
    }
    let n = a.shape()[a.ndim() - 1];
    let mut dshape = det.shape_i64();
    dshape.push(n as i64);
    let d = diag_embed(&g.mul(&det)?.unsqueeze(-1)?.expand(dshape)?)?;
    let eye = eye_like(&a, n)?;
    let nonsingular = |m: &Tensor| m.mt()?.linalg_solve(&d);
    if !crate::autograd::is_grad_enabled() {
        // Exactly singular (det 0): the gradient is 0 (d is 0); solve against I there.
        let zero = det.eq(0.0)?.unsqueeze(-1)?.unsqueeze(-1)?;
        return Ok(vec![Some(nonsingular(&eye.where_cond(&zero, &a)?)?)]);
    }
    let eps = if a.dtype() == DType::F32 {
        f32::EPSILON as f64
    } else {
        f64::EPSILON
    };
    let singular = |m: &Tensor| -> Result<Tensor> {
        let (u, s, vh) = m.linalg_svd(true)?;
        let alpha = u.linalg_det()?.mul(&vh.linalg_det()?)?.mul(&g)?;
        let dd = prod_others(&alpha.unsqueeze(-1)?, &s)?;
        u.mul(&dd.unsqueeze(-2)?)?.matmul(&vh)
    };
    let mask = det.abs()?.lt(100.0 * eps)?;
    let all: bool = mask.all()?.item()?;
    let any: bool = mask.any()?.item()?;
    let ga = if all {
        singular(&a)?
    } else if !any {
        nonsingular(&a)?
    } else {
        // Each path sees a harmless stand-in where the other applies.
        let m3 = mask.unsqueeze(-1)?.unsqueeze(-1)?;
        let steps = crate::TensorOptions::like(&a).arange(1.0, n as f64 + 1.0, 1.0)?;
        let distinct = diag_embed(&steps)?;
        let s = singular(&a.where_cond(&m3, &distinct)?)?;
        let ns = nonsingular(&eye.where_cond(&m3, &a)?)?;
        s.where_cond(&m3, &ns)?
    };
    Ok(vec![Some(ga)])
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
pub(crate) fn batch_prefix(batched: bool, b: usize) -> String {
    if batched {
        format!("(Batch element {b}): ")
    } else {
        String::new()
    }
}

/// The broadcast batch shape of `linalg.solve`'s `A` and `B` (PyTorch
/// broadcasts `B`'s batch dims against `A`'s, and names them in that order).
pub(crate) fn solve_batch(a: &Tensor, b: &Tensor, vector: bool) -> Result<Dims> {
    let tail = if vector { 1 } else { 2 };
    if b.ndim() < tail || (!vector && b.shape()[b.ndim() - 2] != a.shape()[a.ndim() - 1]) {
        return Err(Error::shape(
            "linalg.solve",
            a.shape(),
            b.shape(),
            "Incompatible shapes of A and B for the equation AX = B",
        ));
    }
    if vector && b.shape()[b.ndim() - 1] != a.shape()[a.ndim() - 1] {
        return Err(Error::shape(
            "linalg.solve",
            a.shape(),
            b.shape(),
            "Incompatible shapes of A and B for the equation AX = B",
        ));
    }
    crate::layout::broadcast_shapes(
        "linalg.solve",
        &b.shape()[..b.ndim() - tail],
        &a.shape()[..a.ndim() - 2],
    )
}

pub use super::linalg_norm::MatrixOrd;

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
    /// The last two dims swapped (`x.mT`); an error for fewer than 2 dims.
    pub fn mt(&self) -> Result<Tensor> {
        self.transpose(-2, -1)
    }

    /// `torch.linalg.inv`: the inverse of each matrix of the batch (node
    /// `LinalgInvExBackward0`).
    ///
    /// Errors (PyTorch's messages): fewer than 2 dims, non-square
    /// matrices, a dtype other than f32/f64, a singular matrix ("The
    /// diagonal element k is zero, ...", with the batch element).
    pub fn linalg_inv(&self) -> Result<Tensor> {
        call1(&Decomp(DecompKind::Inv), &[self])
    }

    /// `torch.linalg.solve(self, b)` (`left=True`): `X` with `A X = B`;
    /// `B` is a batch of vectors when it is 1-D or has `A`'s shape minus
    /// the last dim; batch dims broadcast. One node, `LinalgSolveExBackward0`.
    ///
    /// Errors (PyTorch's messages): `A` not a batch of square f32/f64
    /// matrices, `B` of another dtype or fewer than 2 dims (as a matrix),
    /// rows of `B` other than `A`'s size, batch dims that do not
    /// broadcast, a singular `A`.
    pub fn linalg_solve(&self, b: &Tensor) -> Result<Tensor> {
        self.linalg_solve_impl(b)
    }

    /// `torch.linalg.solve(A, B, left=left)`: with `left = false` the
    /// solution of `X A = B` (the transpose of `Aᵀ Xᵀ = Bᵀ`); a vector `B`
    /// is a column, which the right-hand form refuses (PyTorch's message).
    pub fn linalg_solve_with(&self, b: &Tensor, left: bool) -> Result<Tensor> {
        if left {
            return self.linalg_solve_impl(b);
        }
        let op = "linalg.solve";
        check_matrix(op, self, false)?;
        let na = self.ndim();
        let vector = b.ndim() == 1 || (b.ndim() == na - 1 && b.shape() == &self.shape()[..na - 1]);
        let b2 = if vector { b.unsqueeze(-1)? } else { b.clone() };
        if b2.ndim() >= 2 {
            let (bn, bk) = (b2.shape()[b2.ndim() - 2], b2.shape()[b2.ndim() - 1]);
            let (an, am) = (self.shape()[na - 2], self.shape()[na - 1]);
            if vector || bk != am {
                return Err(Error::invalid(
                    op,
                    format!("Incompatible shapes of A and B for the equation XA = B ({an}x{am} and {bn}x{bk})"),
                ));
            }
        }
        self.mt()?.linalg_solve_impl(&b.mt()?)?.mt()
    }

    fn linalg_solve_impl(&self, b: &Tensor) -> Result<Tensor> {
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
        // PyTorch's linalg_solve_is_vector_rhs.
        let vector = b.ndim() == 1 || (b.ndim() == na - 1 && b.shape() == &self.shape()[..na - 1]);
        let b2 = if vector { b.unsqueeze(-1)? } else { b.clone() };
        if b2.ndim() < 2 {
            return Err(Error::invalid(
                op,
                "The input tensor B must have at least 2 dimensions.",
            ));
        }
        let (bn, bk) = (b2.shape()[b2.ndim() - 2], b2.shape()[b2.ndim() - 1]);
        if bn != n {
            return Err(Error::shape(
                op,
                self.shape(),
                b.shape(),
                format!("Incompatible shapes of A and B for the equation AX = B ({n}x{n} and {bn}x{bk})"),
            ));
        }
        solve_batch(self, b, vector)?;
        call1(&Decomp(DecompKind::Solve { vector }), &[self, b])
    }

    /// `torch.linalg.det`: the determinant of each matrix (0 for a
    /// singular one; node `LinalgDetBackward0`, PyTorch's gradient at
    /// singular matrices included).
    ///
    /// Errors (PyTorch's messages): fewer than 2 dims, non-square
    /// matrices, a dtype other than f32/f64.
    pub fn linalg_det(&self) -> Result<Tensor> {
        call1(&Decomp(DecompKind::Det), &[self])
    }

    /// `torch.linalg.slogdet`: `(sign, log|det|)` (sign 0 and -inf for a
    /// singular matrix).
    ///
    /// Errors as [`Tensor::linalg_det`].
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

    /// `torch.linalg.cholesky(self, upper=upper)`: the lower factor `L`
    /// (`A = L L^T`, from `A`'s lower triangle), or with `upper` the upper
    /// factor `U` (`A = U^T U`, from the upper triangle), as LAPACK's
    /// `potrf` reads them.
    ///
    /// Errors (PyTorch's messages): fewer than 2 dims, non-square
    /// matrices, a dtype other than f32/f64, a matrix that is not positive
    /// definite (with the order of the failing leading minor).
    pub fn linalg_cholesky(&self, upper: bool) -> Result<Tensor> {
        call1(&Decomp(DecompKind::Cholesky { upper }), &[self])
    }

    /// `torch.linalg.qr(self, mode)`: mode `"reduced"`, `"complete"` or `"r"`
    /// (Q then empty). R's diagonal has LAPACK `geqrf`'s signs. Backward
    /// needs Q (not `"r"`) and, with `"complete"`, no more rows than
    /// columns, as PyTorch's.
    ///
    /// Errors (PyTorch's messages): an unknown mode, fewer than 2 dims, a
    /// dtype other than f32/f64.
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
    /// eigenvectors as columns (signs not unique), from the lower (`"L"`)
    /// or upper (`"U"`) triangle.
    ///
    /// Errors (PyTorch's messages): `UPLO` other than L/U, fewer than 2
    /// dims, non-square matrices, a dtype other than f32/f64, no
    /// convergence (NaN in the input).
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

    /// `torch.linalg.eigvalsh`: the eigenvalues of [`Tensor::linalg_eigh`]
    /// (same node and errors).
    pub fn linalg_eigvalsh(&self, uplo: &str) -> Result<Tensor> {
        Ok(self.linalg_eigh(uplo)?.0)
    }

    /// `torch.linalg.svd(self, full_matrices)`: `(U, S, Vh)`, singular
    /// values descending (vector signs not unique); `full_matrices` gives
    /// square `U` and `Vh`.
    ///
    /// Errors (PyTorch's messages): fewer than 2 dims, a dtype other than
    /// f32/f64, no convergence (NaN in the input).
    pub fn linalg_svd(&self, full_matrices: bool) -> Result<(Tensor, Tensor, Tensor)> {
        let mut o = call(&Decomp(DecompKind::Svd { full: full_matrices }), &[self])?.into_iter();
        let miss = || Error::invalid("linalg.svd", "missing output");
        let u = o.next().ok_or_else(miss)?;
        let s = o.next().ok_or_else(miss)?;
        let vh = o.next().ok_or_else(miss)?;
        Ok((u, s, vh))
    }

    /// `torch.linalg.svdvals`: the singular values of
    /// [`Tensor::linalg_svd`] (same node and errors).
    pub fn linalg_svdvals(&self) -> Result<Tensor> {
        Ok(self.linalg_svd(false)?.1)
    }
}
