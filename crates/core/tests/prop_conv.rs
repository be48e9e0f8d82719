//! Property tests of the convolution and pooling operators: random shapes,
//! layouts (strided, permuted, expanded inputs), dtypes and hyperparameters
//! (stride, padding, dilation, groups, output padding, ceil mode,
//! count_include_pad) against naive f64 loops written here, forward values
//! and every first derivative; and random bad arguments, which must return
//! an error and never panic.

mod common;

use common::*;
use ferrotorch_core::autograd::{GradOptions, grad};
use ferrotorch_core::{AvgPoolOptions, ConvOptions, ConvTransposeOptions, DType, MaxPoolOptions, Tensor};
use proptest::prelude::*;

fn float_dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(vec![DType::F32, DType::F64])
}

/// Tolerance against an f64 reference of a sum of `terms` O(1) products.
fn tol(dt: DType, terms: usize) -> f64 {
    let per = if dt == DType::F64 { 1e-12 } else { 2e-6 };
    per * (terms.max(1) as f64) * 16.0
}

fn nd(shape: &[usize], data: Vec<f64>) -> Nd<V> {
    Nd::new(shape, data.into_iter().map(V::F).collect())
}

/// A random float tensor laid out by `recipe` and its values, requiring grad.
fn input(dt: DType, shape: &[usize], recipe: &Recipe, rng: &mut Prng) -> (Tensor, Vec<f64>) {
    let (t, v) = strided(dt, shape, recipe, rng, Vals::Dense);
    (t.requires_grad_(true).unwrap(), v.data.iter().map(|v| v.f()).collect())
}

/// Gradients of `y` for the upstream `gy` (None where unused).
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

/// The hyperparameters of one 2-d convolution case.
#[derive(Debug, Clone, Copy)]
struct Conv2d {
    n: usize,
    groups: usize,
    cin_g: usize,
    cout_g: usize,
    h: usize,
    w: usize,
    k: (usize, usize),
    stride: (usize, usize),
    pad: (usize, usize),
    dil: (usize, usize),
}

/// Channels per group: mostly 1 or 2, sometimes 16 or 32 (where the
/// AVX2 / AVX-512 indirect GEMM takes one group's convolutions).
fn channels() -> impl Strategy<Value = usize> {
    prop_oneof![3 => 1usize..3, 1 => Just(16usize), 1 => Just(32usize)]
}

fn conv2d_case() -> impl Strategy<Value = Conv2d> {
    (
        (1usize..3, 1usize..3, channels(), channels()),
        (1usize..7, 1usize..7),
        (1usize..4, 1usize..4),
        (1usize..3, 1usize..3),
        (0usize..3, 0usize..3),
        (1usize..3, 1usize..3),
    )
        .prop_map(|((n, groups, cin_g, cout_g), (h, w), k, stride, pad, dil)| Conv2d {
            n,
            groups,
            cin_g,
            cout_g,
            h,
            w,
            k,
            stride,
            pad,
            dil,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// conv2d (and through it conv1d's [N, C, 1, W] form) and its input,
    /// weight and bias gradients against the defining sums.
    #[test]
    fn conv2d_matches_reference(
        dt in float_dtype(),
        c in conv2d_case(),
        bias in any::<bool>(),
        one_d in any::<bool>(),
        recipe in recipe(),
        seed in any::<u64>(),
    ) {
        let c = if one_d { Conv2d { h: 1, k: (1, c.k.1), stride: (1, c.stride.1), pad: (0, c.pad.1), dil: (1, c.dil.1), ..c } } else { c };
        let (cin, cout) = (c.groups * c.cin_g, c.groups * c.cout_g);
        let oh = (c.h + 2 * c.pad.0).checked_sub(c.dil.0 * (c.k.0 - 1) + 1).map(|v| v / c.stride.0 + 1);
        let ow = (c.w + 2 * c.pad.1).checked_sub(c.dil.1 * (c.k.1 - 1) + 1).map(|v| v / c.stride.1 + 1);
        let mut rng = Prng(seed);
        let (x, xv) = input(dt, &[c.n, cin, c.h, c.w], &recipe, &mut rng);
        let (w, wv) = input(dt, &[cout, c.cin_g, c.k.0, c.k.1], &Recipe::Contiguous, &mut rng);
        let (b, bv) = input(dt, &[cout], &Recipe::Contiguous, &mut rng);
        let r = no_panic("conv", || {
            if one_d {
                let opts = ConvOptions::new().stride(c.stride.1).padding(c.pad.1 as i64).dilation(c.dil.1).groups(c.groups as i64);
                x.squeeze_dims([2]).unwrap().conv1d(&w.squeeze_dims([2]).unwrap(), bias.then_some(&b), opts)
            } else {
                let opts = ConvOptions::new()
                    .stride([c.stride.0, c.stride.1])
                    .padding([c.pad.0, c.pad.1])
                    .dilation([c.dil.0, c.dil.1])
                    .groups(c.groups as i64);
                x.conv2d(&w, bias.then_some(&b), opts)
            }
        })?;
        let (oh, ow) = match (oh, ow) {
            (Some(oh), Some(ow)) => (oh, ow),
            _ => {
                prop_assert!(r.is_err(), "kernel larger than the padded input must be an error");
                return Ok(());
            }
        };
        let y = r.unwrap();
        let y4 = if one_d { y.unsqueeze(2).unwrap() } else { y.clone() };
        let out_shape = [c.n, cout, oh, ow];
        let (gy, gyv) = input(dt, &out_shape, &Recipe::Contiguous, &mut rng);
        let xi = |n: usize, ch: usize, i: usize, j: usize| ((n * cin + ch) * c.h + i) * c.w + j;
        let wi = |o: usize, ch: usize, i: usize, j: usize| ((o * c.cin_g + ch) * c.k.0 + i) * c.k.1 + j;
        let mut want = vec![0.0; c.n * cout * oh * ow];
        let (mut gx, mut gw, mut gb) = (vec![0.0; xv.len()], vec![0.0; wv.len()], vec![0.0; cout]);
        for n in 0..c.n {
            for o in 0..cout {
                let g = o / c.cout_g;
                for oy in 0..oh {
                    for ox in 0..ow {
                        let at = ((n * cout + o) * oh + oy) * ow + ox;
                        let mut s = if bias { bv[o] } else { 0.0 };
                        gb[o] += gyv[at];
                        for ch in 0..c.cin_g {
                            for ky in 0..c.k.0 {
                                for kx in 0..c.k.1 {
                                    let iy = (oy * c.stride.0 + ky * c.dil.0) as i64 - c.pad.0 as i64;
                                    let ix = (ox * c.stride.1 + kx * c.dil.1) as i64 - c.pad.1 as i64;
                                    if iy < 0 || ix < 0 || iy >= c.h as i64 || ix >= c.w as i64 {
                                        continue;
                                    }
                                    let p = xi(n, g * c.cin_g + ch, iy as usize, ix as usize);
                                    let q = wi(o, ch, ky, kx);
                                    s += xv[p] * wv[q];
                                    gx[p] += gyv[at] * wv[q];
                                    gw[q] += gyv[at] * xv[p];
                                }
                            }
                        }
                        want[at] = s;
                    }
                }
            }
        }
        let terms = c.cin_g * c.k.0 * c.k.1 + 1;
        let t = tol(dt, terms);
        check_close("conv forward", &read(&y4), &nd(&out_shape, want), &|_| t, t)?;
        let gy_in = if one_d { gy.squeeze_dims([2]).unwrap() } else { gy.clone() };
        let g = grads(&y, &[&x, &w, &b], &gy_in.detach());
        let t = tol(dt, c.n * oh * ow * cout);
        check_close("conv dx", &read(g[0].as_ref().unwrap()), &nd(&[c.n, cin, c.h, c.w], gx), &|_| t, t)?;
        check_close("conv dw", &read(g[1].as_ref().unwrap()), &nd(&[cout, c.cin_g, c.k.0, c.k.1], gw), &|_| t, t)?;
        if bias {
            check_close("conv db", &read(g[2].as_ref().unwrap()), &nd(&[cout], gb), &|_| t, t)?;
        }
    }

    /// conv_transpose2d (the adjoint of conv2d, with output padding) and its
    /// gradients against the defining scatter.
    #[test]
    fn conv_transpose2d_matches_reference(
        dt in float_dtype(),
        c in conv2d_case(),
        opad in (0usize..2, 0usize..2),
        bias in any::<bool>(),
        recipe in recipe(),
        seed in any::<u64>(),
    ) {
        // Input channels cin_g per group, weight [Cin, cout_g, kh, kw].
        let (cin, cout) = (c.groups * c.cin_g, c.groups * c.cout_g);
        let opad = (opad.0.min(c.stride.0.max(c.dil.0) - 1), opad.1.min(c.stride.1.max(c.dil.1) - 1));
        let size = |i: usize, s: usize, p: usize, d: usize, k: usize, op: usize| {
            ((i - 1) * s + d * (k - 1) + op + 1).checked_sub(2 * p)
        };
        let mut rng = Prng(seed);
        let (x, xv) = input(dt, &[c.n, cin, c.h, c.w], &recipe, &mut rng);
        let (w, wv) = input(dt, &[cin, c.cout_g, c.k.0, c.k.1], &Recipe::Contiguous, &mut rng);
        let (b, bv) = input(dt, &[cout], &Recipe::Contiguous, &mut rng);
        let opts = ConvTransposeOptions::new()
            .stride([c.stride.0, c.stride.1])
            .padding([c.pad.0, c.pad.1])
            .output_padding([opad.0, opad.1])
            .dilation([c.dil.0, c.dil.1])
            .groups(c.groups as i64);
        let r = no_panic("conv_transpose2d", || x.conv_transpose2d(&w, bias.then_some(&b), opts))?;
        let (oh, ow) = match (
            size(c.h, c.stride.0, c.pad.0, c.dil.0, c.k.0, opad.0),
            size(c.w, c.stride.1, c.pad.1, c.dil.1, c.k.1, opad.1),
        ) {
            (Some(oh), Some(ow)) if oh > 0 && ow > 0 => (oh, ow),
            _ => {
                prop_assert!(r.is_err(), "an empty output must be an error");
                return Ok(());
            }
        };
        let y = r.unwrap();
        let out_shape = [c.n, cout, oh, ow];
        let (gy, gyv) = input(dt, &out_shape, &Recipe::Contiguous, &mut rng);
        let mut want = vec![0.0; c.n * cout * oh * ow];
        let (mut gx, mut gw, mut gb) = (vec![0.0; xv.len()], vec![0.0; wv.len()], vec![0.0; cout]);
        for n in 0..c.n {
            for ci in 0..cin {
                let g = ci / c.cin_g;
                for iy in 0..c.h {
                    for ix in 0..c.w {
                        let p = ((n * cin + ci) * c.h + iy) * c.w + ix;
                        for o in 0..c.cout_g {
                            for ky in 0..c.k.0 {
                                for kx in 0..c.k.1 {
                                    let oy = (iy * c.stride.0 + ky * c.dil.0) as i64 - c.pad.0 as i64;
                                    let ox = (ix * c.stride.1 + kx * c.dil.1) as i64 - c.pad.1 as i64;
                                    if oy < 0 || ox < 0 || oy >= oh as i64 || ox >= ow as i64 {
                                        continue;
                                    }
                                    let co = g * c.cout_g + o;
                                    let at = ((n * cout + co) * oh + oy as usize) * ow + ox as usize;
                                    let q = ((ci * c.cout_g + o) * c.k.0 + ky) * c.k.1 + kx;
                                    want[at] += xv[p] * wv[q];
                                    gx[p] += gyv[at] * wv[q];
                                    gw[q] += gyv[at] * xv[p];
                                }
                            }
                        }
                    }
                }
            }
        }
        for n in 0..c.n {
            for co in 0..cout {
                for i in 0..oh * ow {
                    let at = (n * cout + co) * oh * ow + i;
                    if bias {
                        want[at] += bv[co];
                    }
                    gb[co] += gyv[at];
                }
            }
        }
        let t = tol(dt, c.cin_g * c.k.0 * c.k.1 + 1);
        check_close("conv_transpose2d forward", &read(&y), &nd(&out_shape, want), &|_| t, t)?;
        let g = grads(&y, &[&x, &w, &b], &gy.detach());
        let t = tol(dt, c.n * oh * ow * cout);
        check_close("conv_transpose2d dx", &read(g[0].as_ref().unwrap()), &nd(&[c.n, cin, c.h, c.w], gx), &|_| t, t)?;
        check_close("conv_transpose2d dw", &read(g[1].as_ref().unwrap()), &nd(&[cin, c.cout_g, c.k.0, c.k.1], gw), &|_| t, t)?;
        if bias {
            check_close("conv_transpose2d db", &read(g[2].as_ref().unwrap()), &nd(&[cout], gb), &|_| t, t)?;
        }
    }

    /// max_pool2d (values, flat indices, gradient routed to the argmax) and
    /// avg_pool2d (padding counted or not, divisor override) against naive
    /// windows, with ceil_mode's PyTorch output-size rule.
    #[test]
    fn pooling_matches_reference(
        dt in float_dtype(),
        (n, ch, h, w) in (1usize..3, 1usize..3, 1usize..8, 1usize..8),
        k in (1usize..4, 1usize..4),
        stride in (1usize..4, 1usize..4),
        pad_frac in (0usize..2, 0usize..2),
        dil in (1usize..3, 1usize..3),
        ceil in any::<bool>(),
        include_pad in any::<bool>(),
        divisor in prop::option::weighted(0.2, 1i64..5),
        recipe in recipe(),
        seed in any::<u64>(),
    ) {
        // PyTorch requires padding <= kernel / 2.
        let pad = (pad_frac.0.min(k.0 / 2), pad_frac.1.min(k.1 / 2));
        // PyTorch's pooling_output_shape (a floor division, negative
        // numerators included), then the ceil-mode rule.
        let out = |i: usize, k: usize, s: usize, p: usize, d: usize| -> Option<usize> {
            let s_i = s as i64;
            let num = (i + 2 * p) as i64 - (d * (k - 1)) as i64 - 1 + if ceil { s_i - 1 } else { 0 };
            let mut o = num.div_euclid(s_i) + 1;
            if ceil && (o - 1) * s_i >= (i + p) as i64 {
                o -= 1;
            }
            (o > 0).then_some(o as usize)
        };
        let mut rng = Prng(seed);
        let (x, xv) = input(dt, &[n, ch, h, w], &recipe, &mut rng);
        let at_x = |b: usize, i: usize, j: usize| xv[b * h * w + i * w + j];
        for avg in [false, true] {
            let dil = if avg { (1, 1) } else { dil };
            let (oh, ow) = (out(h, k.0, stride.0, pad.0, dil.0), out(w, k.1, stride.1, pad.1, dil.1));
            let r = no_panic("pool", || {
                if avg {
                    let mut o = AvgPoolOptions::new([k.0, k.1])
                        .stride([stride.0, stride.1])
                        .padding([pad.0, pad.1])
                        .ceil_mode(ceil)
                        .count_include_pad(include_pad);
                    if let Some(d) = divisor {
                        o = o.divisor_override(d);
                    }
                    x.avg_pool2d(o).map(|y| (y, None))
                } else {
                    let o = MaxPoolOptions::new([k.0, k.1])
                        .stride([stride.0, stride.1])
                        .padding([pad.0, pad.1])
                        .dilation([dil.0, dil.1])
                        .ceil_mode(ceil);
                    x.max_pool2d_with_indices(o).map(|(y, i)| (y, Some(i)))
                }
            })?;
            let (oh, ow) = match (oh, ow) {
                (Some(a), Some(b)) if a > 0 && b > 0 => (a, b),
                _ => {
                    prop_assert!(r.is_err(), "an empty pooling output must be an error");
                    continue;
                }
            };
            let (y, idx) = r.unwrap();
            let shape = [n, ch, oh, ow];
            let (gy, gyv) = input(dt, &shape, &Recipe::Contiguous, &mut rng);
            let mut want = vec![0.0; n * ch * oh * ow];
            let mut want_idx = vec![0.0; want.len()];
            let mut gx = vec![0.0; xv.len()];
            for b in 0..n * ch {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let at = (b * oh + oy) * ow + ox;
                        let (y0, x0) = ((oy * stride.0) as i64 - pad.0 as i64, (ox * stride.1) as i64 - pad.1 as i64);
                        if avg {
                            let (y1, x1) = ((y0 + k.0 as i64).min((h + pad.0) as i64), (x0 + k.1 as i64).min((w + pad.1) as i64));
                            let padded = ((y1 - y0) * (x1 - x0)) as f64;
                            let (ys, xs, ye, xe) = (y0.max(0), x0.max(0), y1.min(h as i64), x1.min(w as i64));
                            let inside = ((ye - ys) * (xe - xs)) as f64;
                            let div = match divisor {
                                Some(d) => d as f64,
                                None if include_pad => padded,
                                None => inside,
                            };
                            let mut s = 0.0;
                            for i in ys..ye {
                                for j in xs..xe {
                                    s += at_x(b, i as usize, j as usize);
                                    gx[b * h * w + i as usize * w + j as usize] += gyv[at] / div;
                                }
                            }
                            want[at] = s / div;
                        } else {
                            let mut best: Option<(f64, usize)> = None;
                            for ky in 0..k.0 {
                                for kx in 0..k.1 {
                                    let (i, j) = (y0 + (ky * dil.0) as i64, x0 + (kx * dil.1) as i64);
                                    if i < 0 || j < 0 || i >= h as i64 || j >= w as i64 {
                                        continue;
                                    }
                                    let v = at_x(b, i as usize, j as usize);
                                    if best.is_none_or(|(m, _)| v > m) {
                                        best = Some((v, i as usize * w + j as usize));
                                    }
                                }
                            }
                            match best {
                                Some((m, p)) => {
                                    want[at] = m;
                                    want_idx[at] = p as f64;
                                    gx[b * h * w + p] += gyv[at];
                                }
                                None => {
                                    // A window wholly in the padding (dilation
                                    // skips every input element): PyTorch gives
                                    // -inf and the flat position of the first
                                    // taps at or past 0; its gradient goes there
                                    // when that lies in the plane, else nowhere.
                                    let (mut i, mut j) = (y0, x0);
                                    while i < 0 {
                                        i += dil.0 as i64;
                                    }
                                    while j < 0 {
                                        j += dil.1 as i64;
                                    }
                                    want[at] = f64::NEG_INFINITY;
                                    let p = (i * w as i64 + j) as usize;
                                    want_idx[at] = p as f64;
                                    if p < h * w {
                                        gx[b * h * w + p] += gyv[at];
                                    }
                                }
                            }
                        }
                    }
                }
            }
            let t = tol(dt, k.0 * k.1);
            let what = if avg { "avg_pool2d" } else { "max_pool2d" };
            check_close(what, &read(&y), &nd(&shape, want), &|_| t, t)?;
            if let Some(idx) = idx {
                check_exact("max_pool2d indices", &read(&idx.to_dtype(DType::F64).unwrap()), &nd(&shape, want_idx))?;
            }
            let g = grads(&y, &[&x], &gy.detach());
            let t = tol(dt, k.0 * k.1 * 4);
            check_close(&format!("{what} dx"), &read(g[0].as_ref().unwrap()), &nd(&[n, ch, h, w], gx), &|_| t, t)?;
        }
    }

    /// Bad hyperparameters and operands are errors (never panics); the
    /// always-invalid ones must fail.
    #[test]
    fn bad_arguments_are_errors(
        shape in prop::collection::vec(0usize..4, 0..6),
        wshape in prop::collection::vec(0usize..4, 0..6),
        which in 0usize..10,
        v in prop::sample::select(vec![i64::MIN, -3, -1, 0, 1, 2, 5, 1 << 40, i64::MAX]),
        seed in any::<u64>(),
    ) {
        let mut rng = Prng(seed);
        let x = make(DType::F32, &random_nd(DType::F32, &shape, &mut rng, Vals::Wild));
        let wt = make(DType::F32, &random_nd(DType::F32, &wshape, &mut rng, Vals::Small));
        let u = v.unsigned_abs() as usize;
        let r: ferrotorch_core::Result<Tensor> = no_panic("bad argument", || match which {
            0 => x.conv2d(&wt, None, ConvOptions::new().stride([v, 1])),
            1 => x.conv2d(&wt, None, ConvOptions::new().padding([v, 0])),
            2 => x.conv2d(&wt, None, ConvOptions::new().dilation([1, v])),
            3 => x.conv2d(&wt, None, ConvOptions::new().groups(v)),
            4 => x.conv1d(&wt, Some(&Tensor::zeros([u % 7]).unwrap()), ConvOptions::new()),
            5 => x.conv_transpose2d(&wt, None, ConvTransposeOptions::new().output_padding([v, 0])),
            6 => x.max_pool2d(MaxPoolOptions::new([v, 2])),
            7 => x.max_pool2d(MaxPoolOptions::new(2).padding([v, 0])),
            8 => x.avg_pool2d(AvgPoolOptions::new(2).divisor_override(v)),
            _ => x.adaptive_avg_pool2d([u, 1]),
        })?;
        let must_fail = match which {
            0 | 2 => v <= 0,
            1 => v < 0,
            3 => v <= 0,
            5 => v < 0,
            6 => v <= 0,
            7 => !(0..=1).contains(&v),
            8 => v == 0,
            _ => false,
        };
        if must_fail {
            prop_assert!(r.is_err(), "case {} with v {}: expected an error, got {:?}", which, v, r.map(|t| t.shape().to_vec()));
        }
    }
}
