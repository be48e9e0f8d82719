//! Property tests of the normalisation, embedding, activation and loss
//! operators: random shapes, layouts (strided, permuted, expanded inputs),
//! dtypes and hyperparameters against naive f64 references written here
//! (forward values and, for the norms and cross entropy, first
//! derivatives), and random bad arguments, which must return an error and
//! never panic.

mod common;

use common::*;
use ferrotorch_core::autograd::{GradOptions, grad};
use ferrotorch_core::{DType, Reduction, Tensor};
use proptest::prelude::*;

fn float_dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(vec![DType::F32, DType::F64])
}

/// Tolerance of a float32 / float64 result against an f64 reference.
fn tol(dt: DType) -> f64 {
    if dt == DType::F64 { 1e-9 } else { 2e-4 }
}

fn fvals(nd: &Nd<V>) -> Vec<f64> {
    nd.data.iter().map(|v| v.f()).collect()
}

fn nd(shape: &[usize], data: Vec<f64>) -> Nd<V> {
    Nd::new(shape, data.into_iter().map(V::F).collect())
}

/// A random float tensor (`Dense` values) laid out by `recipe`, its values,
/// requiring grad.
fn input(dt: DType, shape: &[usize], recipe: &Recipe, rng: &mut Prng) -> (Tensor, Vec<f64>) {
    let (t, v) = strided(dt, shape, recipe, rng, Vals::Dense);
    (t.requires_grad_(true).unwrap(), fvals(&v))
}

fn grads(y: &Tensor, xs: &[&Tensor], gy: &Tensor) -> Vec<Option<Tensor>> {
    grad(
        &[y],
        xs,
        GradOptions {
            grad_outputs: Some(std::slice::from_ref(gy)),
            allow_unused: true,
            ..Default::default()
        },
    )
    .unwrap()
    .into_vec()
}

/// Standardised rows (`xhat`) and rstd of `rows` rows of `n` values.
fn standardize(x: &[f64], n: usize, eps: f64) -> (Vec<f64>, Vec<f64>) {
    let mut xhat = vec![0.0; x.len()];
    let mut rstd = Vec::new();
    for (r, row) in x.chunks(n).enumerate() {
        let mean = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        let s = 1.0 / (var + eps).sqrt();
        rstd.push(s);
        for (k, v) in row.iter().enumerate() {
            xhat[r * n + k] = (v - mean) * s;
        }
    }
    (xhat, rstd)
}

/// The derivative of standardised rows for an upstream `gx`.
fn standardize_backward(gx: &[f64], xhat: &[f64], rstd: &[f64], n: usize) -> Vec<f64> {
    let mut out = vec![0.0; gx.len()];
    for r in 0..rstd.len() {
        let (g, h) = (&gx[r * n..(r + 1) * n], &xhat[r * n..(r + 1) * n]);
        let a = g.iter().sum::<f64>() / n as f64;
        let b = g.iter().zip(h).map(|(p, q)| p * q).sum::<f64>() / n as f64;
        for k in 0..n {
            out[r * n + k] = rstd[r] * (g[k] - a - h[k] * b);
        }
    }
    out
}

/// An absolute tolerance for element `i` of standardised rows of `n`:
/// `t` times the row's largest magnitude (at least 1). `dx` is a difference
/// of terms as large as the row's largest entries (large when the variance
/// is tiny, as for an expanded input), so its rounding error scales with
/// them, not with the entry itself.
fn row_scaled(want: &[f64], n: usize, t: f64) -> impl Fn(usize) -> f64 + use<> {
    let scale: Vec<f64> = want
        .chunks(n.max(1))
        .map(|r| r.iter().fold(1.0f64, |m, v| m.max(v.abs())))
        .collect();
    move |i| t * scale[i / n.max(1)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Layer norm and its three gradients against the naive formulas.
    #[test]
    fn layer_norm_matches_reference(
        dt in float_dtype(),
        shape in prop::collection::vec(1usize..6, 1..4),
        k in 1usize..4,
        affine in 0u8..4,
        recipe in recipe(),
        eps in prop::sample::select(vec![1e-5, 1e-3, 0.5]),
        seed in any::<u64>(),
    ) {
        let k = k.min(shape.len());
        let mut rng = Prng(seed);
        let normalized = shape[shape.len() - k..].to_vec();
        let n: usize = normalized.iter().product();
        let (x, xv) = input(dt, &shape, &recipe, &mut rng);
        let (w, wv) = input(dt, &normalized, &Recipe::Contiguous, &mut rng);
        let (b, bv) = input(dt, &normalized, &Recipe::Contiguous, &mut rng);
        let (use_w, use_b) = (affine & 1 == 1, affine & 2 == 2);
        let y = no_panic("layer_norm", || {
            x.layer_norm(&normalized[..], use_w.then_some(&w), use_b.then_some(&b), eps)
        })?.unwrap();
        let (xhat, rstd) = standardize(&xv, n, eps);
        let want: Vec<f64> = xhat.iter().enumerate().map(|(i, h)| {
            let j = i % n;
            h * if use_w { wv[j] } else { 1.0 } + if use_b { bv[j] } else { 0.0 }
        }).collect();
        check_close("layer_norm", &read(&y), &nd(&shape, want), &|_| tol(dt), tol(dt))?;
        let (gy, gyv) = input(dt, &shape, &Recipe::Contiguous, &mut rng);
        let g = grads(&y, &[&x, &w, &b], &gy.detach());
        let gx: Vec<f64> = gyv.iter().enumerate().map(|(i, g)| g * if use_w { wv[i % n] } else { 1.0 }).collect();
        let want_dx = standardize_backward(&gx, &xhat, &rstd, n);
        // Gradients sum over rows of O(1) terms: scale the tolerance.
        let t = tol(dt) * 10.0;
        let dx_atol = row_scaled(&want_dx, n, t);
        check_close("layer_norm dx", &read(g[0].as_ref().unwrap()), &nd(&shape, want_dx), &dx_atol, t)?;
        let mut dw = vec![0.0; n];
        let mut db = vec![0.0; n];
        for (i, g) in gyv.iter().enumerate() {
            dw[i % n] += g * xhat[i];
            db[i % n] += g;
        }
        if use_w {
            check_close("layer_norm dw", &read(g[1].as_ref().unwrap()), &nd(&normalized, dw), &|_| t, t)?;
        }
        if use_b {
            check_close("layer_norm db", &read(g[2].as_ref().unwrap()), &nd(&normalized, db), &|_| t, t)?;
        }
    }

    /// Group norm against the naive formula, and its input gradient.
    #[test]
    fn group_norm_matches_reference(
        dt in float_dtype(),
        nb in 1usize..4,
        groups in 1usize..4,
        per_group in 1usize..4,
        spatial in prop::collection::vec(1usize..4, 0..3),
        recipe in recipe(),
        seed in any::<u64>(),
    ) {
        let mut rng = Prng(seed);
        let c = groups * per_group;
        let mut shape = vec![nb, c];
        shape.extend(&spatial);
        let s: usize = spatial.iter().product();
        let (x, xv) = input(dt, &shape, &recipe, &mut rng);
        let (w, wv) = input(dt, &[c], &Recipe::Contiguous, &mut rng);
        let (b, bv) = input(dt, &[c], &Recipe::Contiguous, &mut rng);
        let y = no_panic("group_norm", || x.group_norm(groups, Some(&w), Some(&b), 1e-5))?.unwrap();
        let len = per_group * s;
        let (xhat, rstd) = standardize(&xv, len, 1e-5);
        let ch = |i: usize| (i / s) % c;
        let want: Vec<f64> = xhat.iter().enumerate().map(|(i, h)| h * wv[ch(i)] + bv[ch(i)]).collect();
        check_close("group_norm", &read(&y), &nd(&shape, want), &|_| tol(dt), tol(dt))?;
        let (gy, gyv) = input(dt, &shape, &Recipe::Contiguous, &mut rng);
        let g = grads(&y, &[&x, &w], &gy.detach());
        let gx: Vec<f64> = gyv.iter().enumerate().map(|(i, g)| g * wv[ch(i)]).collect();
        let want_dx = standardize_backward(&gx, &xhat, &rstd, len);
        let t = tol(dt) * 10.0;
        let dx_atol = row_scaled(&want_dx, len, t);
        check_close("group_norm dx", &read(g[0].as_ref().unwrap()), &nd(&shape, want_dx), &dx_atol, t)?;
        let mut dw = vec![0.0; c];
        for (i, g) in gyv.iter().enumerate() {
            dw[ch(i)] += g * xhat[i];
        }
        check_close("group_norm dw", &read(g[1].as_ref().unwrap()), &nd(&[c], dw), &|_| t, t)?;
    }

    /// Batch norm in training (running statistics updated with the
    /// unbiased variance) and in evaluation.
    #[test]
    fn batch_norm_matches_reference(
        dt in float_dtype(),
        nb in 1usize..5,
        c in 1usize..4,
        spatial in prop::collection::vec(1usize..4, 0..2),
        training in any::<bool>(),
        momentum in prop::sample::select(vec![0.0, 0.1, 0.5, 1.0]),
        recipe in recipe(),
        seed in any::<u64>(),
    ) {
        let mut rng = Prng(seed);
        let mut shape = vec![nb, c];
        shape.extend(&spatial);
        let s: usize = spatial.iter().product();
        let m = nb * s;
        prop_assume!(!training || m > 1);
        let (x, xv) = input(dt, &shape, &recipe, &mut rng);
        let rmv: Vec<f64> = (0..c).map(|k| k as f64 * 0.25 - 0.5).collect();
        let rvv: Vec<f64> = (0..c).map(|k| 0.5 + k as f64).collect();
        let rm = make(dt, &nd(&[c], rmv.clone()));
        let rv = make(dt, &nd(&[c], rvv.clone()));
        let y = no_panic("batch_norm", || x.batch_norm(Some(&rm), Some(&rv), None, None, training, momentum, 1e-5))?.unwrap();
        let at = |n: usize, ch: usize, k: usize| (n * c + ch) * s + k;
        let mut want = vec![0.0; xv.len()];
        for ch in 0..c {
            let vals: Vec<f64> = (0..nb).flat_map(|n| (0..s).map(move |k| (n, k))).map(|(n, k)| xv[at(n, ch, k)]).collect();
            let mean = vals.iter().sum::<f64>() / m as f64;
            let var_sum: f64 = vals.iter().map(|v| (v - mean) * (v - mean)).sum();
            let (mu, inv) = if training {
                (mean, 1.0 / (var_sum / m as f64 + 1e-5).sqrt())
            } else {
                (rmv[ch], 1.0 / (rvv[ch] + 1e-5).sqrt())
            };
            for n in 0..nb {
                for k in 0..s {
                    want[at(n, ch, k)] = (xv[at(n, ch, k)] - mu) * inv;
                }
            }
            let (new_m, new_v) = if training {
                (momentum * mean + (1.0 - momentum) * rmv[ch], momentum * var_sum / (m as f64 - 1.0) + (1.0 - momentum) * rvv[ch])
            } else {
                (rmv[ch], rvv[ch])
            };
            prop_assert!(close(read(&rm).data[ch], V::F(new_m), tol(dt), tol(dt)), "running_mean {ch}");
            prop_assert!(close(read(&rv).data[ch], V::F(new_v), tol(dt), tol(dt)), "running_var {ch}");
        }
        check_close("batch_norm", &read(&y), &nd(&shape, want), &|_| tol(dt) * 10.0, tol(dt) * 10.0)?;
    }

    /// Embedding rows, and its weight gradient with padding_idx and
    /// scale_grad_by_freq.
    #[test]
    fn embedding_matches_reference(
        dt in float_dtype(),
        v in 1usize..7,
        d in 0usize..4,
        idx_shape in prop::collection::vec(0usize..4, 0..3),
        padding in prop::option::of(0usize..7),
        scale in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut rng = Prng(seed);
        let padding = padding.filter(|&p| p < v);
        let (w, wv) = input(dt, &[v, d], &Recipe::Contiguous, &mut rng);
        let n = numel(&idx_shape);
        let iv: Vec<i64> = (0..n).map(|_| rng.range(0, v as i64 - 1)).collect();
        let idx = Tensor::from_vec(iv.clone(), &idx_shape[..]).unwrap();
        let y = no_panic("embedding", || w.embedding(&idx, padding.map(|p| p as i64), scale))?.unwrap();
        let mut out_shape = idx_shape.clone();
        out_shape.push(d);
        let want: Vec<f64> = iv.iter().flat_map(|&i| wv[i as usize * d..(i as usize + 1) * d].to_vec()).collect();
        check_close("embedding", &read(&y), &nd(&out_shape, want), &|_| 0.0, 0.0)?;
        let (gy, gyv) = input(dt, &out_shape, &Recipe::Contiguous, &mut rng);
        let g = grads(&y, &[&w], &gy.detach());
        let mut dw = vec![0.0; v * d];
        for (k, &i) in iv.iter().enumerate() {
            if Some(i as usize) == padding {
                continue;
            }
            let count = iv.iter().filter(|&&j| j == i).count() as f64;
            for e in 0..d {
                dw[i as usize * d + e] += gyv[k * d + e] / if scale { count } else { 1.0 };
            }
        }
        check_close("embedding dw", &read(g[0].as_ref().unwrap()), &nd(&[v, d], dw), &|_| tol(dt), tol(dt))?;
    }

    /// The activations on random values, special ones included.
    #[test]
    fn activations_match_reference(
        dt in float_dtype(),
        shape in shape(3, 5),
        recipe in recipe(),
        which in 0usize..12,
        p in prop::sample::select(vec![0.0, 0.25, 1.0, 2.5]),
        seed in any::<u64>(),
    ) {
        let mut rng = Prng(seed);
        let (x, v) = strided(dt, &shape, &recipe, &mut rng, Vals::Wild);
        let xv = fvals(&v);
        let sp = |z: f64| if z > 20.0 { z } else { z.exp().ln_1p() };
        let (y, f): (_, Box<dyn Fn(f64) -> f64>) = match which {
            0 => (x.leaky_relu(p), Box::new(move |z| if z > 0.0 { z } else { z * p })),
            1 => (x.elu(p, 1.0, 1.0), Box::new(move |z| if z > 0.0 { z } else { p * z.exp_m1() })),
            2 => (x.celu(p.max(0.25)), Box::new(move |z| { let a = p.max(0.25); if z.is_nan() { z } else { z.max(0.0) + (a * (z / a).exp_m1()).min(0.0) } })),
            3 => (x.selu(), Box::new(|z| 1.050_700_987_355_480_5 * if z > 0.0 { z } else { 1.673_263_242_354_377_2 * z.exp_m1() })),
            4 => (x.hardtanh(-p, p), Box::new(move |z| if z.is_nan() { z } else { z.clamp(-p, p) })),
            5 => (x.relu6(), Box::new(|z| if z.is_nan() { z } else { z.clamp(0.0, 6.0) })),
            6 => (x.mish(), Box::new(move |z| z * sp(z).tanh())),
            7 => (x.hardswish(), Box::new(|z| z * (z + 3.0).clamp(0.0, 6.0) / 6.0)),
            8 => (x.hardsigmoid(), Box::new(|z| (z + 3.0).clamp(0.0, 6.0) / 6.0)),
            9 => (x.log_sigmoid(), Box::new(move |z| if z.is_nan() { z } else { z.min(0.0) - (-z.abs()).exp().ln_1p() })),
            10 => (x.softshrink(p), Box::new(move |z| if z > p { z - p } else if z < -p { z + p } else { z * 0.0 })),
            _ => (x.hardshrink(p), Box::new(move |z| if z >= -p && z <= p { 0.0 } else { z })),
        };
        let y = no_panic("activation", || y)?.unwrap();
        let want: Vec<f64> = xv.iter().map(|&z| f(z)).collect();
        check_close("activation", &read(&y), &nd(&shape, want), &|_| tol(dt), tol(dt))?;
    }

    /// Cross entropy with class indices (ignore_index, weights, smoothing,
    /// every reduction, K-dim inputs) and its input gradient.
    #[test]
    fn cross_entropy_matches_reference(
        dt in float_dtype(),
        nb in 0usize..5,
        c in 1usize..6,
        extra in prop::collection::vec(1usize..3, 0..2),
        weighted in any::<bool>(),
        smoothing in prop::sample::select(vec![0.0, 0.1, 0.5]),
        reduction in prop::sample::select(vec![Reduction::None, Reduction::Mean, Reduction::Sum]),
        ignore in prop::sample::select(vec![-100i64, 0, 1]),
        seed in any::<u64>(),
    ) {
        let mut rng = Prng(seed);
        let mut shape = vec![nb, c];
        shape.extend(&extra);
        let s: usize = extra.iter().product();
        let (x, xv) = input(dt, &shape, &Recipe::Contiguous, &mut rng);
        let mut tshape = vec![nb];
        tshape.extend(&extra);
        let tv: Vec<i64> = (0..nb * s).map(|_| if rng.below(5) == 0 { ignore } else { rng.range(0, c as i64 - 1) }).collect();
        prop_assume!(tv.iter().all(|&t| t == ignore || (0..c as i64).contains(&t)));
        let target = Tensor::from_vec(tv.clone(), &tshape[..]).unwrap();
        let wv: Vec<f64> = (0..c).map(|k| if weighted { 0.5 + k as f64 * 0.3 } else { 1.0 }).collect();
        let w = make(dt, &nd(&[c], wv.clone()));
        let r = no_panic("cross_entropy", || x.cross_entropy(&target, weighted.then_some(&w), reduction, ignore, smoothing))?;
        let loss = r.unwrap();
        // Naive: per sample, log-softmax over classes.
        let at = |n: usize, k: usize, j: usize| (n * c + k) * s + j;
        let mut per = vec![0.0; nb * s];
        let (mut wsum, mut kept) = (0.0, 0.0);
        for n in 0..nb {
            for j in 0..s {
                let row: Vec<f64> = (0..c).map(|k| xv[at(n, k, j)]).collect();
                let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let lse = mx + row.iter().map(|v| (v - mx).exp()).sum::<f64>().ln();
                let t = tv[n * s + j];
                if t == ignore {
                    continue;
                }
                let nll = -(row[t as usize] - lse) * wv[t as usize];
                let smooth: f64 = (0..c).map(|k| -(row[k] - lse) * wv[k]).sum();
                per[n * s + j] = (1.0 - smoothing) * nll + smoothing / c as f64 * smooth;
                wsum += wv[t as usize];
                kept += 1.0;
            }
        }
        let want = match reduction {
            Reduction::None => per.clone(),
            Reduction::Sum => vec![per.iter().sum()],
            // nll and the smoothing term are each normalised by the weight
            // of the kept samples (PyTorch's formula).
            Reduction::Mean => vec![per.iter().sum::<f64>() / if weighted { wsum } else { kept }],
        };
        let got = read(&loss);
        let t = tol(dt) * 10.0;
        check_close("cross_entropy", &got, &Nd::new(&got.shape, want.into_iter().map(V::F).collect()), &|_| t, t)?;
    }

    /// The regression losses against their formulas.
    #[test]
    fn regression_losses_match_reference(
        dt in float_dtype(),
        shape in shape(3, 4),
        which in 0usize..5,
        p in prop::sample::select(vec![0.5, 1.0, 2.0]),
        reduction in prop::sample::select(vec![Reduction::None, Reduction::Mean, Reduction::Sum]),
        seed in any::<u64>(),
    ) {
        let mut rng = Prng(seed);
        let (x, xv) = input(dt, &shape, &Recipe::Contiguous, &mut rng);
        let (t, tv) = input(dt, &shape, &Recipe::Contiguous, &mut rng);
        let prob = |v: f64| 1.0 / (1.0 + (-v).exp());
        let (r, f): (_, Box<dyn Fn(f64, f64) -> f64>) = match which {
            0 => (x.mse_loss(&t, reduction), Box::new(|a, b| (a - b) * (a - b))),
            1 => (x.l1_loss(&t, reduction), Box::new(|a, b| (a - b).abs())),
            2 => (x.smooth_l1_loss(&t, reduction, p), Box::new(move |a, b| {
                let d = (a - b).abs();
                if d < p { 0.5 * d * d / p } else { d - 0.5 * p }
            })),
            3 => (x.huber_loss(&t, reduction, p), Box::new(move |a, b| {
                let d = (a - b).abs();
                if d < p { 0.5 * d * d } else { p * (d - 0.5 * p) }
            })),
            _ => (x.binary_cross_entropy_with_logits(&t.sigmoid().unwrap().detach(), None, None, reduction), Box::new(move |a, b| {
                let y = prob(b);
                -(y * prob(a).ln() + (1.0 - y) * (1.0 - prob(a)).ln())
            })),
        };
        let per: Vec<f64> = xv.iter().zip(&tv).map(|(&a, &b)| f(a, b)).collect();
        let want = match reduction {
            Reduction::None => per,
            Reduction::Sum => vec![per.iter().sum()],
            Reduction::Mean => vec![per.iter().sum::<f64>() / per.len() as f64],
        };
        let got = read(&no_panic("loss", || r)?.unwrap());
        let t = tol(dt) * 10.0;
        check_close("loss", &got, &Nd::new(&got.shape, want.into_iter().map(V::F).collect()), &|_| t, t)?;
    }

    /// Bad arguments are errors, never panics.
    #[test]
    fn bad_arguments_are_errors(
        shape in prop::collection::vec(0usize..4, 0..4),
        which in 0usize..12,
        k in -3i64..8,
        big in prop::sample::select(vec![i64::MIN, -101, -1, 7, 1 << 40, i64::MAX]),
        f in prop::sample::select(vec![f64::NAN, -1.0, 0.0, 1.5, f64::INFINITY]),
        seed in any::<u64>(),
    ) {
        let mut rng = Prng(seed);
        let x = make(DType::F32, &random_nd(DType::F32, &shape, &mut rng, Vals::Wild));
        let ku = k.unsigned_abs() as usize;
        let nd0 = shape.first().copied().unwrap_or(1);
        let r: ferrotorch_core::Result<Tensor> = no_panic("bad argument", || match which {
            0 => x.layer_norm([ku + 5], None, None, f),
            1 => x.group_norm(ku, None, None, f),
            2 => x.batch_norm(Some(&Tensor::zeros([ku]).unwrap()), Some(&Tensor::ones([ku + 1]).unwrap()), None, None, true, f, f),
            3 => Tensor::zeros([3, 2]).unwrap().embedding(&Tensor::new([big]).unwrap(), None, false),
            4 => Tensor::zeros([3, 2]).unwrap().embedding(&Tensor::new([0i64]).unwrap(), Some(big), false),
            5 => x.cross_entropy(&Tensor::new([big]).unwrap(), None, Reduction::Mean, -100, 0.0),
            6 => x.cross_entropy(&Tensor::zeros_dtype([nd0 + 1], DType::I64).unwrap(), None, Reduction::Mean, -100, 0.0),
            7 => x.cross_entropy(&x, None, Reduction::Mean, -100, f + 1.0),
            8 => x.nll_loss(&Tensor::zeros_dtype([nd0], DType::I32).unwrap(), None, Reduction::Sum, k),
            9 => x.smooth_l1_loss(&x, Reduction::Mean, -f.abs() - 1.0),
            10 => x.mse_loss(&Tensor::zeros([ku + 5]).unwrap(), Reduction::Sum),
            _ => x.hardtanh(1.0, -f.abs() - 1.0),
        })?;
        // Every call above is invalid for these arguments except where noted.
        let must_fail = match which {
            0 => true,
            1 => shape.len() < 2 || ku == 0 || !shape[1].is_multiple_of(ku),
            2 => true,
            3 => big != 0 && !(0..3).contains(&big),
            4 => !(-3..3).contains(&big),
            5 => shape.len() != 2 || shape[0] != 1 || !(0..shape[1] as i64).contains(&big),
            6 => shape.len() >= 2,
            7 => !(0.0..=1.0).contains(&(f + 1.0)) && !f.is_nan(),
            8 => true,
            9 => true,
            10 => !shape.is_empty() && shape.last() != Some(&(ku + 5)) && shape.last() != Some(&1),
            _ => !f.is_nan(),
        };
        if must_fail {
            prop_assert!(r.is_err(), "case {} with shape {:?}: expected an error, got {:?}", which, shape, r.map(|t| t.shape().to_vec()));
        }
    }
}
