//! The fused attention operator (`_scaled_dot_product_flash_attention_for_cpu`)
//! against the math path written in plain operators: results, log-sum-exp,
//! first and second derivatives, strided inputs, shapes over several query
//! blocks, empty keys, reduced precision, errors, and the same bits for 1
//! and 2 threads.

use ferrotorch::autograd::{GradOptions, grad};
use ferrotorch::{DType, Generator, Result, Tensor, TensorOptions};

fn rand(g: &Generator, shape: &[usize], dtype: DType) -> Tensor {
    TensorOptions::new()
        .dtype(dtype)
        .generator(g)
        .uniform(shape, -1.5, 1.5)
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

/// `softmax(q kᵀ · scale + mask) v` and the row log-sum-exp, in operators.
fn math(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool, scale: f64) -> Result<(Tensor, Tensor)> {
    let mut s = q.matmul(&k.transpose(-2, -1)?)?.mul(scale)?;
    if causal {
        let (l, n) = (q.shape()[q.ndim() - 2], k.shape()[k.ndim() - 2]);
        let keep = TensorOptions::new().dtype(DType::Bool).ones([l, n])?.tril(0)?;
        s = s.masked_fill(&keep.logical_not()?, f64::NEG_INFINITY)?;
    }
    Ok((s.softmax(-1)?.matmul(v)?, s.logsumexp([-1], false)?))
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape(), b.shape());
    a.to_dtype(DType::F64)
        .unwrap()
        .sub(&b.to_dtype(DType::F64).unwrap())
        .unwrap()
        .abs()
        .unwrap()
        .max()
        .unwrap()
        .item::<f64>()
        .unwrap()
}

fn grads(y: &Tensor, xs: &[&Tensor], gy: &Tensor, create_graph: bool) -> Vec<Tensor> {
    let go = [gy.clone()];
    grad(
        &[y],
        xs,
        GradOptions {
            grad_outputs: Some(&go),
            create_graph,
            ..Default::default()
        },
    )
    .unwrap()
    .into_iter()
    .map(|t| t.unwrap())
    .collect()
}

/// (batch dims, L, S, E, Ev) cases: one and several query blocks, L < S,
/// L > S, tails, no batch dims, two batch dims.
const SHAPES: &[(&[usize], usize, usize, usize, usize)] = &[
    (&[2, 3], 5, 5, 4, 4),
    (&[3], 64, 64, 8, 8),
    (&[2], 70, 45, 6, 5),
    (&[2], 33, 90, 7, 3),
    (&[], 100, 100, 16, 12),
    (&[1, 2], 1, 7, 3, 2),
    (&[1], 40, 300, 8, 8),
];

#[test]
fn forward_and_gradients_match_the_math_path() {
    let g = Generator::new(7);
    for &(batch, l, s, e, ev) in SHAPES {
        for causal in [false, true] {
            let dims = |a: usize, b: usize| batch.iter().copied().chain([a, b]).collect::<Vec<_>>();
            let (q, k, v) = (
                rand(&g, &dims(l, e), DType::F64),
                rand(&g, &dims(s, e), DType::F64),
                rand(&g, &dims(s, ev), DType::F64),
            );
            let scale = 1.0 / (e as f64).sqrt();
            let (out, lse) = q.scaled_dot_product_flash_attention(&k, &v, causal, None).unwrap();
            let (want, want_lse) = math(&q, &k, &v, causal, scale).unwrap();
            let what = format!("{batch:?} L={l} S={s} E={e} Ev={ev} causal={causal}");
            assert!(max_diff(&out, &want) < 1e-12, "result, {what}");
            assert!(max_diff(&lse, &want_lse) < 1e-12, "logsumexp, {what}");
            let gy = rand(&g, out.shape(), DType::F64).detach();
            let ours = grads(&out, &[&q, &k, &v], &gy, false);
            let theirs = grads(&want, &[&q, &k, &v], &gy, false);
            for (name, (a, b)) in ["q", "k", "v"].iter().zip(ours.iter().zip(&theirs)) {
                assert!(max_diff(a, b) < 1e-12, "d{name}, {what}: {}", max_diff(a, b));
            }
        }
    }
}

#[test]
fn second_derivatives_match_the_math_path() {
    let g = Generator::new(8);
    let (q, k, v) = (
        rand(&g, &[2, 6, 3], DType::F64),
        rand(&g, &[2, 4, 3], DType::F64),
        rand(&g, &[2, 4, 2], DType::F64),
    );
    let gy = rand(&g, &[2, 6, 2], DType::F64).detach();
    let (out, _) = q.scaled_dot_product_flash_attention(&k, &v, true, Some(0.8)).unwrap();
    let (want, _) = math(&q, &k, &v, true, 0.8).unwrap();
    let first = grads(&out, &[&q, &k, &v], &gy, true);
    let first_want = grads(&want, &[&q, &k, &v], &gy, true);
    // A scalar of all three first derivatives, differentiated again.
    let total = |gs: &[Tensor]| -> Tensor {
        gs[0]
            .mul(&gs[0])
            .unwrap()
            .sum()
            .unwrap()
            .add(&gs[1].sin().unwrap().sum().unwrap())
            .unwrap()
            .add(&gs[2].mul(&gs[2]).unwrap().sum().unwrap())
            .unwrap()
    };
    let one = Tensor::scalar(1.0f64);
    let second = grads(&total(&first), &[&q, &k, &v], &one, false);
    let second_want = grads(&total(&first_want), &[&q, &k, &v], &one, false);
    for (a, b) in second.iter().zip(&second_want) {
        assert!(max_diff(a, b) < 1e-11, "{}", max_diff(a, b));
    }
}

#[test]
fn strided_inputs_read_in_place() {
    // q, k, v as gpt's attention makes them: split from one projection and
    // transposed to [B, H, T, D].
    let g = Generator::new(9);
    let (b, t, h, d) = (2, 40, 3, 8);
    let qkv = rand(&g, &[b, t, 3 * h * d], DType::F32);
    let parts = qkv.split((h * d) as i64, 2).unwrap();
    let heads = |x: &Tensor| x.view([b, t, h, d]).unwrap().transpose(1, 2).unwrap();
    let (q, k, v) = (heads(&parts[0]), heads(&parts[1]), heads(&parts[2]));
    assert!(!q.is_contiguous());
    let (out, _) = q.scaled_dot_product_flash_attention(&k, &v, true, None).unwrap();
    let (qc, kc, vc) = (
        q.contiguous().unwrap(),
        k.contiguous().unwrap(),
        v.contiguous().unwrap(),
    );
    let (dense, _) = qc.scaled_dot_product_flash_attention(&kc, &vc, true, None).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), dense.to_vec::<f32>().unwrap());
    let gy = rand(&g, out.shape(), DType::F32).detach();
    let ours = grads(&out, &[&qkv], &gy, false);
    let theirs = grads(&dense, &[&qkv], &gy, false);
    assert_eq!(ours[0].to_vec::<f32>().unwrap(), theirs[0].to_vec::<f32>().unwrap());
}

/// The result is laid out like the query and each gradient like its
/// input (dense, last dim innermost): for heads split off one projection
/// the `[B, T, H, D]` order, so transposing back and viewing as
/// `[B, T, H·D]` copies nothing; a contiguous query gives contiguous
/// results; values are the same bits either way, also for a result
/// gradient whose last dim is not unit-stride.
#[test]
fn results_and_gradients_follow_the_inputs_layout() {
    let g = Generator::new(11);
    let (b, t, h, d) = (2, 40, 3, 8);
    let qkv = rand(&g, &[b, t, 3 * h * d], DType::F32);
    let parts = qkv.split((h * d) as i64, 2).unwrap();
    let heads = |x: &Tensor| x.view([b, t, h, d]).unwrap().transpose(1, 2).unwrap();
    let (q, k, v) = (heads(&parts[0]), heads(&parts[1]), heads(&parts[2]));
    let (out, _) = q.scaled_dot_product_flash_attention(&k, &v, true, None).unwrap();
    let blhd = [t * h * d, d, h * d, 1];
    assert_eq!(out.strides(), blhd);
    assert!(out.transpose(1, 2).unwrap().is_contiguous());
    let (qc, kc, vc) = (
        q.contiguous().unwrap(),
        k.contiguous().unwrap(),
        v.contiguous().unwrap(),
    );
    let (dense, _) = qc.scaled_dot_product_flash_attention(&kc, &vc, true, None).unwrap();
    assert!(dense.is_contiguous());
    assert_eq!(out.to_vec::<f32>().unwrap(), dense.to_vec::<f32>().unwrap());
    let gy = rand(&g, out.shape(), DType::F32).detach();
    // The same gradient with its last dim strided.
    let gy_t = gy
        .transpose(-2, -1)
        .unwrap()
        .contiguous()
        .unwrap()
        .transpose(-2, -1)
        .unwrap();
    assert_ne!(gy_t.strides()[3], 1);
    let ours = grads(&out, &[&q, &k, &v], &gy, false);
    let (out_again, _) = q.scaled_dot_product_flash_attention(&k, &v, true, None).unwrap();
    let ours_t = grads(&out_again, &[&q, &k, &v], &gy_t, false);
    let theirs = grads(&dense, &[&qc, &kc, &vc], &gy, false);
    for i in 0..3 {
        assert_eq!(ours[i].strides(), blhd, "gradient {i}");
        assert!(theirs[i].is_contiguous(), "gradient {i} of contiguous inputs");
        let want = theirs[i].to_vec::<f32>().unwrap();
        assert_eq!(ours[i].to_vec::<f32>().unwrap(), want, "gradient {i}");
        assert_eq!(
            ours_t[i].to_vec::<f32>().unwrap(),
            want,
            "gradient {i}, strided result gradient"
        );
    }
}

#[test]
fn f32_bf16_and_f16_follow_f64() {
    let g = Generator::new(10);
    let (q, k, v) = (
        rand(&g, &[2, 3, 37, 16], DType::F64),
        rand(&g, &[2, 3, 37, 16], DType::F64),
        rand(&g, &[2, 3, 37, 16], DType::F64),
    );
    let (want, _) = q.scaled_dot_product_flash_attention(&k, &v, true, None).unwrap();
    for (dt, tol) in [(DType::F32, 1e-5), (DType::BF16, 3e-2), (DType::F16, 5e-3)] {
        let c = |t: &Tensor| t.detach().to_dtype(dt).unwrap().requires_grad_(true).unwrap();
        let (qd, kd, vd) = (c(&q), c(&k), c(&v));
        let (out, lse) = qd.scaled_dot_product_flash_attention(&kd, &vd, true, None).unwrap();
        assert_eq!(out.dtype(), dt);
        assert_eq!(lse.dtype(), if dt == DType::F64 { DType::F64 } else { DType::F32 });
        assert!(max_diff(&out, &want) < tol, "{dt}: {}", max_diff(&out, &want));
        let gy = TensorOptions::new().dtype(dt).ones(out.shape()).unwrap();
        let gs = grads(&out, &[&qd, &kd, &vd], &gy, false);
        assert!(gs.iter().all(|t| t.dtype() == dt));
    }
}

#[test]
fn no_keys_gives_zeros_and_negative_infinity() {
    let q = Tensor::ones([2, 3, 4]).unwrap().requires_grad_(true).unwrap();
    let k = Tensor::ones([2, 0, 4]).unwrap().requires_grad_(true).unwrap();
    let v = Tensor::ones([2, 0, 5]).unwrap().requires_grad_(true).unwrap();
    let (out, lse) = q.scaled_dot_product_flash_attention(&k, &v, false, None).unwrap();
    assert_eq!(out.shape(), &[2, 3, 5]);
    assert!(out.to_vec::<f32>().unwrap().iter().all(|&x| x == 0.0));
    assert!(lse.to_vec::<f32>().unwrap().iter().all(|&x| x == f32::NEG_INFINITY));
    let gs = grads(&out, &[&q], &Tensor::ones([2, 3, 5]).unwrap(), false);
    assert!(gs[0].to_vec::<f32>().unwrap().iter().all(|&x| x == 0.0));
}

#[test]
fn bad_inputs_are_errors() {
    let t = |s: &[usize]| Tensor::zeros(s).unwrap();
    let err = |r: Result<(Tensor, Tensor)>| r.unwrap_err().to_string();
    let e = err(t(&[2, 3, 4]).scaled_dot_product_flash_attention(&t(&[3, 3, 4]), &t(&[3, 3, 4]), false, None));
    assert!(e.contains("batch dims"), "{e}");
    let e = err(t(&[2, 3, 4]).scaled_dot_product_flash_attention(&t(&[2, 3, 5]), &t(&[2, 3, 4]), false, None));
    assert!(e.contains("do not fit"), "{e}");
    let e = err(t(&[2, 3, 4]).scaled_dot_product_flash_attention(
        &t(&[2, 3, 4]).to_dtype(DType::F64).unwrap(),
        &t(&[2, 3, 4]),
        false,
        None,
    ));
    assert!(e.contains("same dtype"), "{e}");
    let i = Tensor::zeros([2, 3]).unwrap().to_dtype(DType::I64).unwrap();
    let e = err(i.scaled_dot_product_flash_attention(&i, &i, false, None));
    assert!(e.contains("floating"), "{e}");
    // The log-sum-exp is not differentiable.
    let q = t(&[1, 2, 2]).requires_grad_(true).unwrap();
    let (_, lse) = q.scaled_dot_product_flash_attention(&q, &q, false, None).unwrap();
    let e = grad(&[&lse.sum().unwrap()], &[&q], GradOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not differentiable"), "{e}");
}

#[test]
fn same_bits_for_one_and_two_threads() {
    let run = |threads: usize| -> Vec<Vec<f32>> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let g = Generator::new(11);
            let (q, k, v) = (
                rand(&g, &[4, 4, 96, 32], DType::F32),
                rand(&g, &[4, 4, 96, 32], DType::F32),
                rand(&g, &[4, 4, 96, 32], DType::F32),
            );
            let (out, _) = q.scaled_dot_product_flash_attention(&k, &v, true, None).unwrap();
            let gy = rand(&g, out.shape(), DType::F32).detach();
            let mut r = vec![out.to_vec::<f32>().unwrap()];
            r.extend(
                grads(&out, &[&q, &k, &v], &gy, false)
                    .iter()
                    .map(|t| t.to_vec::<f32>().unwrap()),
            );
            r
        })
    };
    assert_eq!(run(1), run(2));
}

/// Inputs whose last dim is not unit-stride (read through the general
/// product, packed) give the bits of their contiguous copies (whose rows
/// the kernel transposes and reads in place), in f32 and f64, forward and
/// gradients, over one and several query blocks and key counts on both
/// sides of the in-place limit.
#[test]
fn inputs_with_strided_last_dims_give_the_contiguous_bits() {
    let g = Generator::new(12);
    for dtype in [DType::F32, DType::F64] {
        for &(batch, l, s, e, ev) in SHAPES {
            for causal in [false, true] {
                let what = format!("{dtype:?} {batch:?} L={l} S={s} E={e} Ev={ev} causal={causal}");
                // [.., d, n] transposed: the last dim n apart.
                let strided = |n: usize, d: usize| {
                    let shape: Vec<usize> = batch.iter().copied().chain([d, n]).collect();
                    rand(&g, &shape, dtype).transpose(-2, -1).unwrap()
                };
                let (q, k, v) = (strided(l, e), strided(s, e), strided(s, ev));
                if e > 1 && l > 1 {
                    assert_ne!(q.strides()[q.ndim() - 1], 1, "{what}");
                }
                let dense: Vec<Tensor> = [&q, &k, &v]
                    .iter()
                    .map(|t| t.detach().contiguous().unwrap().requires_grad_(true).unwrap())
                    .collect();
                let (out, lse) = q.scaled_dot_product_flash_attention(&k, &v, causal, None).unwrap();
                let (want, want_lse) = dense[0]
                    .scaled_dot_product_flash_attention(&dense[1], &dense[2], causal, None)
                    .unwrap();
                let bits = |t: &Tensor| t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
                assert_eq!(bits(&out), bits(&want), "result, {what}");
                assert_eq!(bits(&lse), bits(&want_lse), "logsumexp, {what}");
                let gy = rand(&g, out.shape(), dtype).detach();
                let ours = grads(&out, &[&q, &k, &v], &gy, false);
                let theirs = grads(&want, &[&dense[0], &dense[1], &dense[2]], &gy, false);
                for (name, (a, b)) in ["q", "k", "v"].iter().zip(ours.iter().zip(&theirs)) {
                    assert_eq!(bits(a), bits(b), "d{name}, {what}");
                }
            }
        }
    }
}
