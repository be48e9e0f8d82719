//! The linear-algebra ops as a PyTorch user writes them: the `addmm`
//! family, `einsum`, `tensordot`, `linalg_cross`, `kron`, and the
//! `linalg` decompositions (values by invariants, since eigenvector and
//! singular-vector signs are not unique), errors and the meta device.
//! PyTorch's values: `oracle_extra/linalg.json`.

#[path = "support/oracle_json.rs"]
mod oracle_json;
#[path = "support/oracle_linalg.rs"]
mod oracle_linalg;

use ferrotorch::{DType, Device, Result, Tensor, TensorOptions};
use serde_json::Value;

fn randn(shape: &[usize], seed: u64) -> Tensor {
    let g = ferrotorch::Generator::new(seed);
    TensorOptions::new()
        .dtype(DType::F64)
        .generator(&g)
        .randn(shape)
        .unwrap()
}

fn max_abs(a: &Tensor, b: &Tensor) -> f64 {
    let d: Vec<f64> = a
        .sub(b)
        .unwrap()
        .abs()
        .unwrap()
        .reshape([-1])
        .unwrap()
        .to_vec()
        .unwrap();
    d.into_iter().fold(0.0, f64::max)
}

fn err<T: std::fmt::Debug>(r: Result<T>) -> String {
    match r {
        Ok(t) => panic!("expected an error, got {t:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn addmm_family() -> Result<()> {
    let (a, b) = (randn(&[3, 4], 1), randn(&[4, 5], 2));
    let c = randn(&[5], 3);
    let r = c.addmm(&a, &b, 0.5, 2.0)?;
    let want = c.mul(0.5)?.add(&a.mm(&b)?.mul(2.0)?)?;
    assert!(max_abs(&r, &want) < 1e-12);
    // beta = 0 ignores NaN in input.
    let nan = TensorOptions::new().dtype(DType::F64).full([3, 5], f64::NAN)?;
    assert!(max_abs(&nan.addmm(&a, &b, 0.0, 1.0)?, &a.mm(&b)?) < 1e-12);
    let v = randn(&[4], 4);
    assert!(max_abs(&randn(&[3], 5).addmv(&a, &v, 0.0, 1.0)?, &a.mv(&v)?) < 1e-12);
    let (b1, b2) = (randn(&[6, 3, 4], 6), randn(&[6, 4, 5], 7));
    let s = Tensor::zeros_dtype([3, 5], DType::F64)?.addbmm(&b1, &b2, 1.0, 1.0)?;
    assert!(max_abs(&s, &b1.bmm(&b2)?.sum_dim([0], false)?) < 1e-12);
    let s = Tensor::zeros_dtype([6, 3, 5], DType::F64)?.baddbmm(&b1, &b2, 1.0, 3.0)?;
    assert!(max_abs(&s, &b1.bmm(&b2)?.mul(3.0)?) < 1e-12);
    assert!(err(c.addmm(&a, &a, 1.0, 1.0)).contains("mat1 and mat2 shapes cannot be multiplied (3x4 and 3x4)"));
    Ok(())
}

#[test]
fn einsum_forms() -> Result<()> {
    let q = randn(&[2, 3, 5, 4], 1);
    let k = randn(&[2, 3, 6, 4], 2);
    let r = Tensor::einsum("bhqd,bhkd->bhqk", &[&q, &k])?;
    assert!(max_abs(&r, &q.matmul(&k.mt()?)?) < 1e-12);
    let m = randn(&[4, 4], 3);
    let tr = Tensor::einsum("ii", &[&m])?;
    let diag: Vec<f64> = m.to_vec()?;
    assert!((tr.item::<f64>()? - (0..4).map(|i| diag[i * 5]).sum::<f64>()).abs() < 1e-12);
    assert_eq!(Tensor::einsum("ii->i", &[&m])?.shape(), [4]);
    assert!(max_abs(&Tensor::einsum("ij->ji", &[&m])?, &m.t()?) < 1e-15);
    // Ellipsis with broadcasting, implicit output, three operands.
    let a = randn(&[2, 1, 3, 4], 4);
    let b = randn(&[5, 4, 6], 5);
    let r = Tensor::einsum("...ij,...jk->...ik", &[&a, &b])?;
    assert!(max_abs(&r, &a.matmul(&b)?) < 1e-12);
    let (x, y, z) = (randn(&[3, 4], 6), randn(&[4, 5], 7), randn(&[5, 2], 8));
    let r = Tensor::einsum("ij,jk,kl", &[&x, &y, &z])?;
    assert!(max_abs(&r, &x.mm(&y)?.mm(&z)?) < 1e-12);
    // Sums over labels in one operand only; outer product.
    let r = Tensor::einsum("ij,k->k", &[&x, &z.select(1, 0)?])?;
    assert!(max_abs(&r, &z.select(1, 0)?.mul(&x.sum()?)?) < 1e-12);
    assert_eq!(
        Tensor::einsum("i,j->ij", &[&x.select(1, 0)?, &y.select(1, 0)?])?.shape(),
        [3, 4]
    );
    // Errors with PyTorch's messages.
    assert!(err(Tensor::einsum("ij,jk", &[&x])).contains("fewer operands were provided than specified"));
    assert!(err(Tensor::einsum("ij", &[&x, &x])).contains("more operands were provided than specified"));
    assert!(err(Tensor::einsum("i1", &[&x])).contains("invalid subscript given at index 1"));
    assert!(err(Tensor::einsum("ijk", &[&x])).contains(
        "the number of subscripts in the equation (3) does not match the number of dimensions (2) for operand 0"
    ));
    assert!(err(Tensor::einsum("ij->ii", &[&x])).contains("output subscript i appears more than once"));
    assert!(err(Tensor::einsum("ij->k", &[&x])).contains("output subscript k does not appear"));
    Ok(())
}

#[test]
fn tensordot_cross_kron() -> Result<()> {
    let (a, b) = (randn(&[3, 4, 5], 1), randn(&[4, 5, 2], 2));
    let r = a.tensordot_n(&b, 2)?;
    assert!(max_abs(&r, &a.reshape([3, 20])?.mm(&b.reshape([20, 2])?)?) < 1e-12);
    let x = Tensor::new([[1.0f64, 0.0, 0.0]])?;
    let y = Tensor::new([[0.0f64, 1.0, 0.0], [0.0, 0.0, 1.0]])?;
    assert_eq!(
        x.linalg_cross(&y, -1)?.to_vec::<f64>()?,
        [0.0, 0.0, 1.0, 0.0, -1.0, 0.0]
    );
    assert!(
        err(x.narrow(1, 0, 2)?.linalg_cross(&x.narrow(1, 0, 2)?, -1))
            .contains("linalg.cross: inputs dimension -1 must have length 3. Got 2 and 2")
    );
    let k = Tensor::new([[1.0f64, 2.0], [3.0, 4.0]])?.kron(&Tensor::new([[0.0f64, 1.0], [1.0, 0.0]])?)?;
    assert_eq!(k.to_vec::<f64>()?[..8], [0.0, 1.0, 0.0, 2.0, 1.0, 0.0, 2.0, 0.0]);
    assert_eq!(randn(&[7, 3], 3).batch_outer(&randn(&[7, 4], 4))?.shape(), [7, 3, 4]);
    Ok(())
}

#[test]
fn decompositions_by_invariants() -> Result<()> {
    for dt in [DType::F64, DType::F32] {
        let tol = if dt == DType::F64 { 1e-10 } else { 1e-3 };
        let a = randn(&[2, 5, 5], 1).to_dtype(dt)?;
        let eye = Tensor::eye(5)?.to_dtype(dt)?;
        let ai = a.linalg_inv()?;
        assert!(
            max_abs(
                &a.matmul(&ai)?.to_dtype(DType::F64)?,
                &eye.expand([2, 5, 5])?.to_dtype(DType::F64)?
            ) < tol
        );
        let b = randn(&[5, 3], 2).to_dtype(dt)?;
        let x = a.linalg_solve(&b)?;
        assert_eq!(x.shape(), [2, 5, 3]);
        assert!(
            max_abs(
                &a.matmul(&x)?.to_dtype(DType::F64)?,
                &b.expand([2, 5, 3])?.to_dtype(DType::F64)?
            ) < tol
        );
        let bv = randn(&[2, 5], 3).to_dtype(dt)?;
        assert_eq!(a.linalg_solve(&bv)?.shape(), [2, 5]);
        let (sign, logabs) = a.linalg_slogdet()?;
        let det = a.linalg_det()?;
        let d2 = sign.mul(&logabs.exp()?)?;
        assert!(max_abs(&det.to_dtype(DType::F64)?, &d2.to_dtype(DType::F64)?) < tol * 10.0);
        let spd = a.matmul(&a.mt()?)?.add(&eye)?;
        let l = spd.linalg_cholesky(false)?;
        assert!(max_abs(&l.matmul(&l.mt()?)?.to_dtype(DType::F64)?, &spd.to_dtype(DType::F64)?) < tol * 10.0);
        let u = spd.linalg_cholesky(true)?;
        assert!(max_abs(&u, &l.mt()?) == 0.0);
        let r6 = randn(&[6, 4], 4).to_dtype(dt)?;
        for mode in ["reduced", "complete"] {
            let (q, r) = r6.linalg_qr(mode)?;
            assert!(max_abs(&q.matmul(&r)?.to_dtype(DType::F64)?, &r6.to_dtype(DType::F64)?) < tol);
            let k = q.shape()[1];
            assert!(max_abs(&q.mt()?.matmul(&q)?, &Tensor::eye(k as i64)?.to_dtype(dt)?) < tol);
        }
        let (w, v) = spd.linalg_eigh("L")?;
        let wv: Vec<f64> = w.to_dtype(DType::F64)?.to_vec()?;
        assert!(wv[..5].windows(2).all(|p| p[0] <= p[1]));
        let rec = v.mul(&w.unsqueeze(-2)?)?.matmul(&v.mt()?)?;
        assert!(max_abs(&rec.to_dtype(DType::F64)?, &spd.to_dtype(DType::F64)?) < tol * 10.0);
        for m in [randn(&[6, 4], 5).to_dtype(dt)?, randn(&[3, 4, 6], 6).to_dtype(dt)?] {
            for full in [false, true] {
                let (u, s, vh) = m.linalg_svd(full)?;
                let k = s.shape()[s.ndim() - 1] as i64;
                let rec = u
                    .narrow(-1, 0, k)?
                    .mul(&s.unsqueeze(-2)?)?
                    .matmul(&vh.narrow(-2, 0, k)?)?;
                assert!(max_abs(&rec.to_dtype(DType::F64)?, &m.to_dtype(DType::F64)?) < tol);
                let uc = u.shape()[u.ndim() - 1];
                assert!(max_abs(&u.mt()?.matmul(&u)?, &Tensor::eye(uc as i64)?.to_dtype(dt)?) < tol);
                let sv: Vec<f64> = s.to_dtype(DType::F64)?.reshape([-1])?.to_vec()?;
                assert!(sv[..k as usize].windows(2).all(|p| p[0] >= p[1]));
            }
        }
    }
    Ok(())
}

#[test]
fn matrix_norms() -> Result<()> {
    use ferrotorch::ops::decomp::MatrixOrd;
    let a = Tensor::new([[1.0f64, -2.0], [3.0, 4.0]])?;
    assert_eq!(
        a.linalg_matrix_norm(MatrixOrd::P(f64::INFINITY), false)?
            .item::<f64>()?,
        7.0
    );
    assert_eq!(a.linalg_matrix_norm(MatrixOrd::P(1.0), false)?.item::<f64>()?, 6.0);
    assert_eq!(a.linalg_matrix_norm(MatrixOrd::P(-1.0), false)?.item::<f64>()?, 4.0);
    assert!((a.linalg_matrix_norm(MatrixOrd::Fro, false)?.item::<f64>()? - 30f64.sqrt()).abs() < 1e-12);
    let s: Vec<f64> = a.linalg_svdvals()?.to_vec()?;
    assert!((a.linalg_matrix_norm(MatrixOrd::Nuc, false)?.item::<f64>()? - s[0] - s[1]).abs() < 1e-12);
    assert!((a.linalg_matrix_norm(MatrixOrd::P(2.0), false)?.item::<f64>()? - s[0]).abs() < 1e-12);
    assert!((a.linalg_vector_norm(2.0, (), false)?.item::<f64>()? - 30f64.sqrt()).abs() < 1e-12);
    Ok(())
}

#[test]
fn errors_and_meta() -> Result<()> {
    let sing = Tensor::new([[1.0f64, 2.0], [2.0, 4.0]])?;
    assert_eq!(
        err(sing.linalg_inv()),
        "linalg.inv: The diagonal element 2 is zero, the inversion could not be completed because the input matrix is singular."
    );
    assert!(err(sing.linalg_solve(&Tensor::new([1.0f64, 2.0])?)).contains("singular"));
    assert_eq!(
        err(sing.linalg_cholesky(false)),
        "linalg.cholesky: The factorization could not be completed because the input is not positive-definite (the leading minor of order 2 is not positive-definite)."
    );
    assert!(
        err(Tensor::new([[1i64, 2], [3, 4]])?.linalg_inv())
            .contains("Expected a floating point or complex tensor as input. Got Long")
    );
    assert!(
        err(Tensor::zeros((2, 3))?.linalg_det())
            .contains("A must be batches of square matrices, but they are 2 by 3 matrices")
    );
    assert_eq!(sing.linalg_det()?.item::<f64>()?, 0.0);
    let m = TensorOptions::new().device(Device::Meta).zeros([4, 3, 3])?;
    assert_eq!(m.linalg_inv()?.shape(), [4, 3, 3]);
    assert_eq!(m.linalg_det()?.shape(), [4]);
    let (u, s, vh) = TensorOptions::new()
        .device(Device::Meta)
        .zeros([2, 5, 3])?
        .linalg_svd(false)?;
    assert_eq!(
        (u.shape(), s.shape(), vh.shape()),
        ([2, 5, 3].as_slice(), [2, 3].as_slice(), [2, 3, 3].as_slice())
    );
    Ok(())
}

#[test]
fn node_names() -> Result<()> {
    let a = randn(&[3, 3], 1)
        .add(&Tensor::eye(3)?.to_dtype(DType::F64)?.mul(3.0)?)?
        .requires_grad_(true)?;
    let name = |t: &Tensor| t.grad_fn().map(|n| n.name().to_string()).unwrap_or_default();
    assert_eq!(name(&a.linalg_inv()?), "LinalgInvExBackward0");
    assert_eq!(name(&a.linalg_det()?), "LinalgDetBackward0");
    Ok(())
}

/// Lower case, whitespace collapsed: PyTorch's messages up to spacing and capitals.
fn normalised(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Whether ferrotorch's error `got` carries PyTorch's message `want`: the
/// whole message, or, when PyTorch's starts with the op's name (`linalg.inv:
/// ...`), that name and the rest of the message (ferrotorch's dtype errors
/// put the text after "not implemented for dtype ...").
fn carries(got: &str, want: &str) -> bool {
    let (got, want) = (normalised(got), normalised(want));
    if got.contains(&want) {
        return true;
    }
    match want.split_once(": ") {
        Some((op, rest)) if !op.contains(' ') => got.starts_with(&format!("{op}: ")) && got.contains(rest),
        _ => false,
    }
}

/// Every error case of `linalg.json` fails, with PyTorch's message.
#[test]
fn errors_carry_pytorchs_messages() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle_extra/linalg.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for case in doc["cases"].as_array().unwrap() {
        if case.get("kind").and_then(Value::as_str) != Some("error") {
            continue;
        }
        let name = case["name"].as_str().unwrap();
        let inputs: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(oracle_linalg::decode)
            .collect();
        let op = case["op"].as_str().unwrap();
        let short = op.strip_prefix("torch.").unwrap();
        let want = case["error"].as_str().unwrap();
        match oracle_linalg::run_op(short, case, &inputs) {
            None => wrong.push(format!("{name}: op {op} not run")),
            Some(Ok(_)) => wrong.push(format!("{name}: succeeded; PyTorch raises \"{want}\"")),
            Some(Err(e)) => {
                let got = e.to_string();
                if !carries(&got, want) {
                    wrong.push(format!("{name}: \"{got}\" lacks PyTorch's \"{want}\""));
                }
            }
        }
        checked += 1;
    }
    assert!(checked > 80, "only {checked} error cases");
    assert!(wrong.is_empty(), "{} of {checked}:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn det_gradient_at_singular_matrices_as_pytorch() -> Result<()> {
    use ferrotorch::autograd::{GradOptions, grad};
    let a = Tensor::new([
        [[2.0f64, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]],
        [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]],
    ])?
    .requires_grad_(true)?;
    let cof_first = [11.0, -4.0, 1.0, -4.0, 8.0, -2.0, 1.0, -2.0, 5.0];
    // The second matrix has rank 2: its cofactors (the gradient of det).
    let cof_second = [4.0, 4.0, -4.0, -2.0, -2.0, 2.0, 0.0, 0.0, 0.0];
    // Without create_graph PyTorch solves with the LU factors: an exactly
    // singular matrix gets a zero gradient.
    let g = grad(&[&a.linalg_det()?.sum()?], &[&a], GradOptions::default())?;
    let g: Vec<f64> = g[0].to_vec()?;
    for (x, y) in g.iter().zip(cof_first.iter().chain(&[0.0; 9])) {
        assert!((x - y).abs() < 1e-12, "{g:?}");
    }
    // With create_graph the singular one goes through the SVD: the cofactors.
    let g = grad(&[&a.linalg_det()?.sum()?], &[&a], GradOptions::create_graph())?;
    let g0 = g[0].clone();
    assert!(g0.requires_grad());
    let g: Vec<f64> = g0.to_vec()?;
    for (x, y) in g.iter().zip(cof_first.iter().chain(&cof_second)) {
        assert!((x - y).abs() < 1e-12, "{g:?}");
    }
    // A 2-d batch `[2, 2, 3, 3]` mixing both kinds: each matrix takes its
    // own path whatever its place in the batch.
    let a = a.detach();
    let b = Tensor::stack(&[&a, &a.flip([0i64])?], 0)?.requires_grad_(true)?;
    let g = grad(&[&b.linalg_det()?.sum()?], &[&b], GradOptions::create_graph())?;
    assert_eq!(g[0].shape(), [2, 2, 3, 3]);
    let g: Vec<f64> = g[0].to_vec()?;
    let want = [cof_first, cof_second, cof_second, cof_first].concat();
    for (x, y) in g.iter().zip(&want) {
        assert!((x - y).abs() < 1e-12, "{g:?}");
    }
    Ok(())
}

#[test]
fn qr_backward_errors_as_pytorch() -> Result<()> {
    let a = randn(&[4, 3], 1).requires_grad_(true)?;
    let (_, r) = a.linalg_qr("r")?;
    assert!(err(r.sum()?.backward()).contains(
        "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr."
    ));
    let (q, _) = a.linalg_qr("complete")?;
    assert!(
        err(q.sum()?.backward())
            .contains("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    );
    // Wide complete (Q square) is differentiable, as PyTorch's.
    let w = randn(&[3, 4], 2).requires_grad_(true)?;
    let (q, r) = w.linalg_qr("complete")?;
    q.sum()?.add(&r.sum()?)?.backward()?;
    assert_eq!(w.grad()?.shape(), [3, 4]);
    Ok(())
}

#[test]
fn new_ops_on_the_meta_device() -> Result<()> {
    use ferrotorch::MatrixOrd;
    let meta = |s: &[usize]| TensorOptions::new().device(Device::Meta).zeros(s);
    let (x, m1, m2) = (meta(&[5])?, meta(&[3, 4])?, meta(&[4, 5])?);
    assert_eq!(x.addmm(&m1, &m2, 0.5, 2.0)?.shape(), [3, 5]);
    assert_eq!(meta(&[3])?.addmv(&m1, &meta(&[4])?, 1.0, 1.0)?.shape(), [3]);
    let (b1, b2) = (meta(&[2, 3, 4])?, meta(&[2, 4, 5])?);
    assert_eq!(x.addbmm(&b1, &b2, 1.0, 1.0)?.shape(), [3, 5]);
    assert_eq!(x.baddbmm(&b1, &b2, 1.0, 1.0)?.shape(), [2, 3, 5]);
    assert!(x.addmm(&m1, &m1, 1.0, 1.0).is_err());
    assert_eq!(
        meta(&[2, 1, 3])?.linalg_cross(&meta(&[1, 4, 3])?, -1)?.shape(),
        [2, 4, 3]
    );
    let a = meta(&[2, 3, 3])?;
    assert_eq!(a.linalg_solve(&meta(&[3])?)?.shape(), [2, 3]);
    assert_eq!(a.linalg_solve(&meta(&[4, 1, 3, 2])?)?.shape(), [4, 2, 3, 2]);
    assert_eq!(a.linalg_norm(None, None, false, None)?.shape(), [] as [usize; 0]);
    assert_eq!(
        a.linalg_matrix_norm_with(MatrixOrd::P(1.0), &[0, 2], true, None)?
            .shape(),
        [1, 3, 1]
    );
    assert_eq!(a.linalg_vector_norm_with(3.0, Some(&[1]), false, None)?.shape(), [2, 3]);
    assert_eq!(a.linalg_qr("reduced")?.1.shape(), [2, 3, 3]);
    assert_eq!(a.linalg_eigh("U")?.0.shape(), [2, 3]);
    Ok(())
}

/// Reconstruction and orthogonality of eigh and svd on edge cases:
/// repeated eigenvalues, zero and rank-deficient matrices, single rows and
/// columns, a large full U; non-finite input is PyTorch's convergence error.
#[test]
fn decompositions_on_edge_cases() -> Result<()> {
    let f64s = |t: &Tensor| t.to_dtype(DType::F64);
    let orthonormal_cols = |u: &Tensor| -> Result<f64> {
        let k = u.shape()[u.ndim() - 1];
        Ok(max_abs(
            &u.mt()?.matmul(u)?,
            &Tensor::eye(k as i64)?.to_dtype(u.dtype())?,
        ))
    };
    let sym_cases = [
        Tensor::eye(5)?.to_dtype(DType::F64)?,
        Tensor::zeros_dtype([4, 4], DType::F64)?,
        Tensor::new([[2.0f64, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, -1.0]])?,
        Tensor::new([[7.0f64]])?,
        {
            let a = randn(&[60, 60], 9);
            a.add(&a.t()?)?
        },
    ];
    for a in &sym_cases {
        let (w, v) = a.linalg_eigh("L")?;
        let rec = v.mul(&w.unsqueeze(-2)?)?.matmul(&v.mt()?)?;
        assert!(max_abs(&rec, a) < 1e-12, "{a}");
        assert!(orthonormal_cols(&v)? < 1e-12);
        let wv: Vec<f64> = w.to_vec()?;
        assert!(wv.windows(2).all(|p| p[0] <= p[1]));
    }
    let rect_cases = [
        Tensor::zeros_dtype([3, 5], DType::F64)?,
        Tensor::new([[1.0f64, 2.0], [2.0, 4.0], [3.0, 6.0]])?,
        Tensor::new([[3.0f64, 4.0, 0.0, 0.0]])?,
        Tensor::new([[3.0f64], [4.0]])?,
        randn(&[9, 4], 10),
        randn(&[50, 70], 11),
    ];
    for a in &rect_cases {
        for full in [false, true] {
            let (u, s, vh) = a.linalg_svd(full)?;
            let k = s.shape()[0] as i64;
            let rec = u
                .narrow(-1, 0, k)?
                .mul(&s.unsqueeze(-2)?)?
                .matmul(&vh.narrow(-2, 0, k)?)?;
            assert!(max_abs(&rec, a) < 1e-12, "{a}");
            assert!(orthonormal_cols(&u)? < 1e-12, "{a} full {full}");
            assert!(orthonormal_cols(&vh.mt()?)? < 1e-12, "{a} full {full}");
            let sv: Vec<f64> = s.to_vec()?;
            assert!(sv.windows(2).all(|p| p[0] >= p[1]) && sv.iter().all(|&x| x >= 0.0));
        }
    }
    // f32 on a larger matrix.
    let a = randn(&[80, 64], 12).to_dtype(DType::F32)?;
    let (u, s, vh) = a.linalg_svd(false)?;
    let rec = u.mul(&s.unsqueeze(-2)?)?.matmul(&vh)?;
    assert!(max_abs(&f64s(&rec)?, &f64s(&a)?) < 1e-4);
    let (w, v) = a.mt()?.matmul(&a)?.linalg_eigh("U")?;
    assert!(max_abs(&f64s(&w.sqrt()?.flip([0])?)?, &f64s(&s)?) < 1e-3);
    assert!(orthonormal_cols(&f64s(&v)?)? < 1e-4);
    // Non-finite input: NaN eigenpairs and an SVD error, as PyTorch's
    // (linalg.json has both).
    let nan = Tensor::new([[1.0f64, f64::NAN], [f64::NAN, 1.0]])?;
    assert!(nan.linalg_eigh("L")?.1.to_vec::<f64>()?.iter().all(|x| x.is_nan()));
    assert!(err(nan.linalg_svd(false)).contains("the input matrix contained non-finite values"));
    let inf = Tensor::new([[1.0f64, f64::INFINITY], [0.0, 1.0]])?;
    assert!(inf.linalg_svdvals()?.to_vec::<f64>()?.iter().all(|x| x.is_nan()));
    Ok(())
}
