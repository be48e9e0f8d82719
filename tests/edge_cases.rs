//! PyTorch's edge cases (`tests/edge_cases.json`, written by
//! `tests/gen_edge_cases.py`; the case names are shared): each case gives
//! PyTorch's result bit for bit (dtype, shape, values, the sign of zeros,
//! and the strides of `*_like` results), PyTorch's error message, or, for
//! printing, PyTorch's text.

use std::panic::{AssertUnwindSafe, catch_unwind};

use ferrotorch::half::{bf16, f16};
use ferrotorch::{
    DType, Generator, PrintOptions, RepeatInterleaveOptions, Result, SearchSortedOptions, Tensor, TensorOptions,
    autograd, manual_seed, set_print_options,
};
use serde_json::Value;

type Out = Result<Vec<Tensor>>;

fn opts(dtype: DType) -> TensorOptions {
    TensorOptions::new().dtype(dtype)
}

fn t2(v: [[f64; 2]; 2], dtype: DType) -> Tensor {
    Tensor::new(v).and_then(|t| t.to_dtype(dtype)).expect("a tensor")
}

const NAN: f64 = f64::NAN;
const INF: f64 = f64::INFINITY;
const A: [[f64; 2]; 2] = [[1.0, 2.0], [3.0, 4.0]];
const B: [[f64; 2]; 2] = [[5.0, 6.0], [7.0, 8.0]];
const A_NAN: [[f64; 2]; 2] = [[NAN, 2.0], [3.0, 4.0]];

/// A leaf of f64 values that requires grad.
fn leaf(v: &[f64]) -> Tensor {
    Tensor::from_slice(v).requires_grad_(true).expect("a leaf")
}

/// The gradients of the sum of `outs` with respect to `ins`.
fn grads(outs: &[Tensor], ins: &[&Tensor]) -> Out {
    let mut total = outs[0].sum()?;
    for o in &outs[1..] {
        total = total.add(&o.sum()?)?;
    }
    let g = autograd::grad(
        &[&total],
        ins,
        autograd::GradOptions {
            allow_unused: true,
            ..Default::default()
        },
    )?;
    Ok((0..ins.len()).map(|i| g[i].clone()).collect())
}

fn addmm_family(name: &str) -> Option<Out> {
    if !(name.starts_with("add") || name.starts_with("badd")) {
        return None;
    }
    let (body, dt) = name.rsplit_once('_')?;
    let d = match dt {
        "f32" => DType::F32,
        "f64" => DType::F64,
        "bf16" => DType::BF16,
        _ => return None,
    };
    let full = |shape: &[usize], v: f64| opts(d).full(shape, v);
    let (a, b, an) = (t2(A, d), t2(B, d), t2(A_NAN, d));
    let v12 = Tensor::new([1.0, 2.0]).and_then(|t| t.to_dtype(d)).ok()?;
    let stack = |x: &Tensor, y: &Tensor| Tensor::stack(&[x, y], 0);
    Some((|| -> Out {
        Ok(vec![match body {
            "addmm_beta0_nan_input" => full(&[2, 2], NAN)?.addmm(&a, &b, 0.0, 1.0)?,
            "addmm_beta0_inf_input" => full(&[2, 2], INF)?.addmm(&a, &b, 0.0, 1.0)?,
            "addmm_alpha0_nan_mat" => full(&[2, 2], 1.0)?.addmm(&an, &b, 1.0, 0.0)?,
            "addmm_alpha0_beta0" => full(&[2, 2], NAN)?.addmm(&an, &b, 0.0, 0.0)?,
            "addmv_beta0_nan_input" => full(&[2], NAN)?.addmv(&a, &v12, 0.0, 1.0)?,
            "addmv_alpha0_nan_mat" => full(&[2], 1.0)?.addmv(&an, &v12, 1.0, 0.0)?,
            "addbmm_beta0_nan_input" => full(&[2, 2], NAN)?.addbmm(&stack(&a, &b)?, &stack(&b, &a)?, 0.0, 1.0)?,
            "addbmm_alpha0_nan_mat" => full(&[2, 2], 1.0)?.addbmm(&stack(&an, &b)?, &stack(&b, &a)?, 1.0, 0.0)?,
            "baddbmm_beta0_nan_input" => {
                full(&[1, 2, 2], NAN)?.baddbmm(&a.unsqueeze(0)?, &b.unsqueeze(0)?, 0.0, 1.0)?
            }
            "baddbmm_alpha0_small" => full(&[1, 2, 2], 1.0)?.baddbmm(&an.unsqueeze(0)?, &b.unsqueeze(0)?, 1.0, 0.0)?,
            "baddbmm_alpha0_large" => {
                full(&[1, 8, 8], 1.0)?.baddbmm(&full(&[1, 8, 8], NAN)?, &full(&[1, 8, 8], 1.0)?, 1.0, 0.0)?
            }
            _ => return Err(ferrotorch::Error::invalid("edge_cases", "no such case")),
        }])
    })())
}

fn conversions(name: &str) -> Option<Out> {
    use DType::*;
    let one = |r: Result<Tensor>| Some(r.map(|t| vec![t]));
    let mask = Tensor::new([true, false, true]).ok()?;
    match name {
        "full_u8_300" => one(opts(U8).full(2, 300)),
        "full_u8_neg1" => one(opts(U8).full(2, -1)),
        "full_u8_neg255" => one(opts(U8).full(2, -255)),
        "full_u8_neg256" => one(opts(U8).full(2, -256)),
        "full_u8_neg1_float" => one(opts(U8).full(2, -1.0)),
        "full_u8_255_9" => one(opts(U8).full(2, 255.9)),
        "full_u8_256_0" => one(opts(U8).full(2, 256.0)),
        "full_i32_2p31" => one(opts(I32).full(2, 1i64 << 31)),
        "full_i32_nan" => one(opts(I32).full(2, NAN)),
        "full_i64_inf" => one(opts(I64).full(2, INF)),
        "full_f32_1e40" => one(Tensor::full(2, 1e40)),
        "full_f32_inf" => one(Tensor::full(2, INF)),
        "full_f32_1e40_one" => one(Tensor::full(1, 1e40)),
        "full_f16_1e5" => one(opts(F16).full(2, 1e5)),
        "full_f16_1e5_one" => one(opts(F16).full(1, 1e5)),
        "full_f16_1e5_0d" => one(opts(F16).full((), 1e5)),
        "full_bf16_1e39" => one(opts(BF16).full(2, 1e39)),
        "full_bf16_1e39_one" => one(opts(BF16).full(1, 1e39)),
        "full_f16_double_rounding" => one(opts(F16).full(2, 1.0 + 2f64.powi(-11) + 1e-12)),
        "fill_f16_1e5" => one(opts(F16).zeros(3).and_then(|t| t.fill_(1e5))),
        "fill_f16_1e5_one" => one(opts(F16).zeros(1).and_then(|t| t.fill_(1e5))),
        "fill_u8_300" => one(opts(U8).zeros(3).and_then(|t| t.fill_(300))),
        "fill_i32_1e10" => one(opts(I32).zeros(3).and_then(|t| t.fill_(1e10))),
        "new_full_u8_300" => one(opts(U8).zeros(1).and_then(|t| t.new_full(2, 300))),
        "masked_fill_u8_300" => one(opts(U8).zeros(3).and_then(|t| t.masked_fill(&mask, 300))),
        "index_fill_i32_2p31" => one(opts(I32)
            .zeros(3)
            .and_then(|t| t.index_fill(0, &Tensor::new([1i64])?, 1i64 << 31))),
        "new_tensor_u8_300" => one(opts(U8).zeros(1).and_then(|t| t.new_tensor(vec![300i64], 1))),
        "new_tensor_u8_neg1" => one(opts(U8).zeros(1).and_then(|t| t.new_tensor(vec![-1i64, 5], 2))),
        "new_tensor_u8_neg256" => one(opts(U8).zeros(1).and_then(|t| t.new_tensor(vec![-256i64], 1))),
        "new_tensor_i32_from_floats" => one(opts(I32).zeros(1).and_then(|t| t.new_tensor(vec![3.7, -3.7, 255.9], 3))),
        "new_tensor_i32_1e10" => one(opts(I32).zeros(1).and_then(|t| t.new_tensor(vec![1e10], 1))),
        "new_tensor_i64_nan" => one(opts(I64).zeros(1).and_then(|t| t.new_tensor(vec![NAN], 1))),
        "new_tensor_f32_1e40" => one(Tensor::zeros(1).and_then(|t| t.new_tensor(vec![1e40, -1e300, 2.5], 3))),
        "new_tensor_f16_70000" => one(opts(F16)
            .zeros(1)
            .and_then(|t| t.new_tensor(vec![70000.0, 65519.0, 65520.0], 3))),
        "new_tensor_f16_double_rounding" => one(opts(F16)
            .zeros(1)
            .and_then(|t| t.new_tensor(vec![1.0 + 2f64.powi(-11) + 1e-12], 1))),
        "new_tensor_bool" => one(opts(Bool).zeros(1).and_then(|t| t.new_tensor(vec![NAN, 0.0, 0.5], 3))),
        "tensor_u8_300" => one(opts(U8).tensor([300i64])),
        "tensor_u8_neg1" => one(opts(U8).tensor([-1i64])),
        "tensor_i32_nan" => one(opts(I32).tensor([NAN])),
        "tensor_f32_1e40" => one(opts(F32).tensor([1e40])),
        "tensor_bf16_1e39" => one(opts(BF16).tensor([1e39])),
        "tensor_f16_from_ints" => one(opts(F16).tensor([70000i64, 3])),
        _ => None,
    }
}

fn strided(shape: &[usize], strides: &[usize]) -> Result<Tensor> {
    Tensor::zeros(1000)?.as_strided(shape, strides, 0)
}

fn like_case(name: &str) -> Option<Out> {
    let table: &[(&str, &[usize], &[usize])] = &[
        ("size1_odd_stride", &[1, 3], &[100, 1]),
        ("size1_middle", &[2, 1, 3], &[1, 7, 2]),
        ("zero_stride_size1", &[2, 1, 3], &[1, 0, 2]),
        ("empty", &[2, 0, 3], &[1, 5, 100]),
        ("one_elem_1d", &[1], &[5]),
        ("gapped_1d", &[3], &[2]),
        ("sliced_last", &[2, 3, 2], &[12, 4, 2]),
        ("expanded_rows", &[3, 4], &[1, 0]),
        ("expanded_cols", &[3, 4], &[0, 1]),
        ("expanded_both", &[3, 4], &[0, 0]),
        ("mixed_zero", &[2, 3, 4], &[1, 0, 2]),
        ("mixed_zero2", &[2, 3, 4], &[24, 0, 2]),
        ("five_dims", &[6, 5, 4, 3, 2], &[6, 0, 120, 0, 1]),
        ("overlap", &[3, 2, 2, 3], &[4, 3, 3, 4]),
        ("overlap_2d", &[2, 2], &[1, 1]),
        ("equal_strides", &[2, 3], &[1, 1]),
        ("equal_strides2", &[3, 2], &[1, 1]),
        ("channels_last_sliced", &[2, 3, 4, 3], &[72, 1, 18, 6]),
        ("column_slice", &[4, 2], &[3, 1]),
        ("transposed", &[3, 4], &[1, 3]),
    ];
    let (kind, rest) = if let Some(r) = name.strip_prefix("empty_like_") {
        ("empty", r)
    } else if let Some(r) = name.strip_prefix("zeros_like_") {
        ("zeros", r)
    } else {
        ("clone", name.strip_prefix("clone_")?)
    };
    let (_, shape, strides) = table.iter().find(|(k, _, _)| *k == rest)?;
    Some(strided(shape, strides).and_then(|x| {
        Ok(vec![match kind {
            "empty" => x.empty_like()?,
            "zeros" => x.zeros_like()?,
            _ => x.clone_tensor()?,
        }])
    }))
}

fn gradient_case(name: &str) -> Option<Out> {
    Some((|| -> Out {
        match name {
            "grad_atan2_origin" => {
                let (y, x) = (leaf(&[0.0, 0.0, 1e-200, 1.0]), leaf(&[0.0, -0.0, 0.0, 2.0]));
                grads(&[y.atan2(&x)?], &[&y, &x])
            }
            "grad_abs_zero" => {
                let x = leaf(&[0.0, -0.0, -2.0]);
                grads(&[x.abs()?], &[&x])
            }
            "grad_sqrt_zero" => {
                let x = leaf(&[0.0, 4.0]);
                grads(&[x.sqrt()?], &[&x])
            }
            "grad_pow_scalar_at_zero" => {
                let x = leaf(&[0.0, 2.0]);
                grads(&[x.pow(0)?, x.pow(2)?, x.pow(0.5)?.mul(0.0)?.add(&x.pow(3)?)?], &[&x])
            }
            "grad_pow_tensor_at_zero" => {
                let (b, e) = (leaf(&[0.0, 0.0, 0.0, 0.0, 2.0]), leaf(&[0.0, 0.5, 1.0, 2.0, -1.0]));
                grads(&[b.pow(&e)?], &[&b, &e])
            }
            "grad_pow_scalar_base_zero" => {
                let e = leaf(&[0.0, 1.0, 2.0, -1.0]);
                grads(&[Tensor::scalar_pow(0.0, &e)?], &[&e])
            }
            "grad_norm_at_zero" => {
                let x = leaf(&[0.0, 0.0, 0.0]);
                grads(&[x.norm(2.0)?, x.norm(1.0)?, x.norm(3.0)?, x.norm(0.5)?], &[&x])
            }
            "grad_norm_inf_ties" => {
                let x = leaf(&[1.0, -3.0, 3.0, 2.0]);
                grads(&[x.linalg_vector_norm(f64::INFINITY, (), false)?], &[&x])
            }
            "grad_hypot_origin" => {
                let (a, b) = (leaf(&[0.0, 3.0]), leaf(&[0.0, 4.0]));
                grads(&[a.hypot(&b)?], &[&a, &b])
            }
            "grad_max_ties" => {
                let x = leaf(&[1.0, 3.0, 3.0, 2.0]);
                grads(&[x.max()?], &[&x])
            }
            "grad_max_dim_ties" => {
                let x = leaf(&[1.0, 3.0, 3.0, 2.0]).reshape([1, 4])?;
                let l = x.detach().requires_grad_(true)?;
                grads(&[l.max_dim(1, false)?.0], &[&l])
            }
            "grad_amax_ties" => {
                let x = leaf(&[1.0, 3.0, 3.0, 2.0, 3.0]);
                grads(&[x.amax((), false)?], &[&x])
            }
            "grad_maximum_tie" => {
                let (a, b) = (leaf(&[1.0, 2.0, 3.0]), leaf(&[1.0, 1.0, 4.0]));
                grads(&[a.maximum(&b)?], &[&a, &b])
            }
            "grad_clamp_boundary" => {
                let x = leaf(&[-1.0, 0.0, 0.5, 1.0, 2.0, NAN]);
                grads(&[x.clamp(Some(0.0), Some(1.0))?], &[&x])
            }
            "grad_clamp_min_boundary" => {
                let x = leaf(&[-1.0, 0.0, 2.0]);
                grads(&[x.clamp_min(0.0)?], &[&x])
            }
            "grad_clamp_tensor_bounds" => {
                let (x, lo, hi) = (leaf(&[0.0, 1.0, 5.0]), leaf(&[0.0, 0.0, 0.0]), leaf(&[2.0, 1.0, 4.0]));
                grads(&[x.clamp(Some(&lo), Some(&hi))?], &[&x, &lo, &hi])
            }
            "grad_relu_zero" => {
                let x = leaf(&[0.0, 1.0, -1.0]);
                grads(&[x.relu()?], &[&x])
            }
            "grad_hardtanh_boundary" => {
                let x = leaf(&[-1.0, 0.0, 1.0]);
                grads(&[x.hardtanh(-1.0, 1.0)?], &[&x])
            }
            "grad_prod_zeros" => {
                let (x, y, z) = (leaf(&[2.0, 0.0, 3.0]), leaf(&[2.0, 0.0, 0.0]), leaf(&[0.0]));
                grads(&[x.prod()?, y.prod()?, z.prod()?], &[&x, &y, &z])
            }
            "grad_prod_inf" => {
                let x = leaf(&[2.0, INF, 3.0]);
                grads(&[x.prod()?], &[&x])
            }
            "grad_cumprod_zeros" => {
                let xs = [
                    leaf(&[2.0, 3.0, 4.0]),
                    leaf(&[2.0, 3.0, 0.0]),
                    leaf(&[0.0, 3.0, 4.0]),
                    leaf(&[2.0, 0.0, 3.0, 4.0]),
                ];
                let outs = xs.iter().map(|x| x.cumprod(0)).collect::<Result<Vec<_>>>()?;
                grads(&outs, &xs.iter().collect::<Vec<_>>())
            }
            "grad_logsumexp_neg_inf" => {
                let (x, y) = (leaf(&[-INF, -INF]), leaf(&[INF, 1.0]));
                grads(&[x.logsumexp(0, false)?, y.logsumexp(0, false)?], &[&x, &y])
            }
            "grad_where_sqrt_zero" => {
                let x = leaf(&[0.0, 4.0]);
                grads(&[x.sqrt()?.where_cond(&x.gt(0.0)?, &x.zeros_like()?)?], &[&x])
            }
            "grad_copysign_zero" => {
                let (a, b) = (leaf(&[0.0, 2.0]), leaf(&[-1.0, -1.0]));
                grads(&[a.copysign(&b)?], &[&a, &b])
            }
            "grad_std_constant" => {
                let x = leaf(&[2.0, 2.0, 2.0]);
                grads(&[x.std(1.0)?], &[&x])
            }
            "grad_var_single" => {
                let x = leaf(&[2.0]);
                grads(&[x.var(1.0)?], &[&x])
            }
            "grad_fmod_by_zero" => {
                let (a, b) = (leaf(&[5.5]), leaf(&[0.0]));
                grads(&[a.fmod(&b)?], &[&a, &b])
            }
            "grad_logaddexp_infs" => {
                let (a, b) = (leaf(&[-INF, INF]), leaf(&[-INF, INF]));
                grads(&[a.logaddexp(&b)?], &[&a, &b])
            }
            "grad_rsqrt_reciprocal_zero" => {
                let (x, y) = (leaf(&[0.0]), leaf(&[0.0]));
                grads(&[x.rsqrt()?, y.reciprocal()?], &[&x, &y])
            }
            _ => Err(ferrotorch::Error::invalid("edge_cases", "no such case")),
        }
    })())
}

const P: [[f32; 4]; 3] = [[0.1, 0.5, 0.9, 0.3], [0.7, 0.2, 0.6, 0.4], [0.95, 0.05, 0.5, 0.8]];

fn bernoulli_case(name: &str) -> Option<Out> {
    let p = Tensor::new(P).ok()?;
    manual_seed(7);
    Some((|| -> Out {
        Ok(vec![match name {
            "bernoulli_p_f32" => p.bernoulli()?,
            "bernoulli_p_f64" => p.to_dtype(DType::F64)?.bernoulli()?,
            "bernoulli_p_noncontiguous" => p.t()?.bernoulli()?,
            "bernoulli_inplace_noncontiguous_self" => Tensor::zeros([3, 4])?.t()?.bernoulli_(&p.t()?)?,
            "bernoulli_inplace_f64_self_f32_p" => opts(DType::F64).zeros([3, 4])?.bernoulli_(&p)?,
            "bernoulli_inplace_broadcast_p" => Tensor::zeros([2, 4])?.bernoulli_(&p.select(0, 0)?)?,
            "bernoulli_inplace_scalar_p" => Tensor::zeros([3, 4])?.t()?.bernoulli_(0.4)?,
            "bernoulli_p_out_of_range" => Tensor::new([0.5f32, 1.5])?.bernoulli()?,
            _ => return Err(ferrotorch::Error::invalid("edge_cases", "no such case")),
        }])
    })())
}

fn range_case(name: &str) -> Option<Out> {
    const LIN: [(f64, f64, i64); 7] = [
        (0.0, 1.0, 7),
        (-3.7, 11.3, 13),
        (1e-3, 1e3, 50),
        (538.0, -419.0, 40),
        (0.1, 0.7, 100),
        (-1.0, 1.0, 2),
        (2.5, 2.5, 3),
    ];
    let one = |r: Result<Tensor>| Some(r.map(|t| vec![t]));
    if let Some(rest) = name.strip_prefix("linspace_")
        && let Some((dt, i)) = rest.rsplit_once('_')
        && let Ok(i) = i.parse::<usize>()
    {
        let d = match dt {
            "f32" => DType::F32,
            "f64" => DType::F64,
            "i64" => DType::I64,
            "bf16" => DType::BF16,
            "f16" => DType::F16,
            _ => return None,
        };
        let (s, e, n) = LIN[i];
        return one(opts(d).linspace(s, e, n));
    }
    match name {
        "linspace_neg_steps" => one(Tensor::linspace(0.0, 1.0, -1)),
        "linspace_f32_overflow" => one(Tensor::linspace(0.0, 1e40, 3)),
        "arange_bool" => one(opts(DType::Bool).arange(0, 5, 1)),
        "arange_float_bool" => one(opts(DType::Bool).arange(0.0, 2.0, 0.5)),
        "linspace_bool" => one(opts(DType::Bool).linspace(0.0, 1.0, 3)),
        "unflatten_empty_sizes" => one(Tensor::zeros(3).and_then(|t| t.unflatten(0, Vec::<i64>::new()))),
        "one_hot_empty_infer" => one(opts(DType::I64).zeros(0).and_then(|t| t.one_hot(None))),
        "one_hot_empty_zero" => one(opts(DType::I64).zeros(0).and_then(|t| t.one_hot(Some(0)))),
        "one_hot_empty_three" => one(opts(DType::I64).zeros(0).and_then(|t| t.one_hot(Some(3)))),
        _ => None,
    }
}

fn form_case(name: &str) -> Option<Out> {
    let one = |r: Result<Tensor>| Some(r.map(|t| vec![t]));
    let ri = RepeatInterleaveOptions::new;
    let m22 = || Tensor::new([[1.0f32, 2.0], [3.0, 4.0]]);
    let seq = || Tensor::new([1.0f32, 3.0, 3.0, 5.0, 7.0]);
    let unsorted = || Tensor::new([5.0f32, 1.0, 3.0]);
    let ss = SearchSortedOptions::new;
    let mask23 = || Tensor::new([[true, false, true], [false, true, false]]);
    let a2 = || Tensor::new([[2.0f64, 1.0], [1.0, 3.0]]);
    match name {
        "repeat_interleave_counts" => one(Tensor::new([1i64, 0, 3]).and_then(|r| r.repeat_interleave_counts(None))),
        "repeat_interleave_counts_i32" => one(Tensor::new([2i32, 1]).and_then(|r| r.repeat_interleave_counts(None))),
        "repeat_interleave_counts_empty" => {
            one(opts(DType::I64).zeros(0).and_then(|r| r.repeat_interleave_counts(None)))
        }
        "repeat_interleave_counts_negative" => {
            one(Tensor::new([1i64, -1]).and_then(|r| r.repeat_interleave_counts(None)))
        }
        "repeat_interleave_counts_2d" => one(Tensor::new([[1i64, 2]]).and_then(|r| r.repeat_interleave_counts(None))),
        "repeat_interleave_counts_output_size" => {
            one(Tensor::new([1i64, 2]).and_then(|r| r.repeat_interleave_counts(Some(3))))
        }
        "repeat_interleave_counts_bad_output_size" => {
            one(Tensor::new([1i64, 2]).and_then(|r| r.repeat_interleave_counts(Some(4))))
        }
        "repeat_interleave_output_size" => {
            one(m22().and_then(|x| x.repeat_interleave_with(2, ri().dim(0).output_size(4))))
        }
        "repeat_interleave_bad_output_size" => {
            one(m22().and_then(|x| x.repeat_interleave_with(2, ri().dim(0).output_size(5))))
        }
        "repeat_interleave_tensor_output_size" => one(Tensor::new([1.0f32, 2.0])
            .and_then(|x| x.repeat_interleave_with(&Tensor::new([1i64, 2])?, ri().dim(0).output_size(3)))),
        "repeat_interleave_tensor_bad_output_size" => one(Tensor::new([1.0f32, 2.0])
            .and_then(|x| x.repeat_interleave_with(&Tensor::new([1i64, 2])?, ri().dim(0).output_size(2)))),
        "repeat_interleave_negative" => one(Tensor::new([1.0f32, 2.0]).and_then(|x| x.repeat_interleave(-1, None))),
        "masked_scatter_inplace" => {
            one(Tensor::zeros([2, 3]).and_then(|x| x.masked_scatter_(&mask23()?, &Tensor::arange_step(1.0, 7.0, 1.0)?)))
        }
        "masked_scatter_inplace_broadcast_mask" => one(Tensor::zeros([2, 3])
            .and_then(|x| x.masked_scatter_(&Tensor::new([true, false, true])?, &Tensor::arange_step(1.0, 7.0, 1.0)?))),
        "masked_scatter_inplace_too_small" => one(Tensor::zeros([2, 3])
            .and_then(|x| x.masked_scatter_(&opts(DType::Bool).ones([2, 3])?, &Tensor::arange_step(1.0, 4.0, 1.0)?))),
        "index_fill_tensor_value" => one(opts(DType::I64)
            .zeros(3)
            .and_then(|x| x.index_fill_tensor(0, &Tensor::new([0i64, 2])?, &Tensor::scalar(5.7f32)))),
        "index_fill_tensor_value_inplace" => one(Tensor::zeros([2, 3])
            .and_then(|x| x.index_fill_tensor_(1, &Tensor::new([1i64])?, &Tensor::scalar(-2.5f32)))),
        "index_fill_tensor_value_1d" => {
            one(Tensor::zeros(3).and_then(|x| x.index_fill_tensor(0, &Tensor::new([0i64])?, &Tensor::new([5.0f32])?)))
        }
        "solve_left_false" => {
            one(a2().and_then(|a| a.linalg_solve_with(&Tensor::new([[1.0f64, 2.0], [3.0, 4.0], [5.0, 6.0]])?, false)))
        }
        "solve_left_false_batched" => one(Tensor::new([[[2.0f64, 1.0], [1.0, 3.0]], [[1.0, 0.5], [0.0, 2.0]]])
            .and_then(|a| a.linalg_solve_with(&Tensor::new([[[1.0f64, 2.0]], [[3.0, 4.0]]])?, false))),
        "solve_left_false_vector" => one(opts(DType::F64)
            .eye(2, 2)
            .and_then(|a| a.linalg_solve_with(&opts(DType::F64).ones(2)?, false))),
        "searchsorted_side_right" => {
            one(seq().and_then(|s| s.searchsorted_with(&Tensor::new([3.0f32, 6.0])?, ss().side("right"))))
        }
        "searchsorted_side_left" => {
            one(seq().and_then(|s| s.searchsorted_with(&Tensor::new([3.0f32, 6.0])?, ss().side("left"))))
        }
        "searchsorted_side_conflict" => {
            one(seq().and_then(|s| s.searchsorted_with(&Tensor::new([3.0f32])?, ss().side("left").right(true))))
        }
        "searchsorted_side_right_right_false" => {
            one(seq().and_then(|s| s.searchsorted_with(&Tensor::new([3.0f32])?, ss().side("right").right(false))))
        }
        "searchsorted_bad_side" => {
            one(seq().and_then(|s| s.searchsorted_with(&Tensor::new([3.0f32])?, ss().side("middle"))))
        }
        "searchsorted_sorter" => one(unsorted().and_then(|s| {
            s.searchsorted_with(
                &Tensor::new([2.0f32, 4.0, 6.0])?,
                ss().sorter(&Tensor::new([1i64, 2, 0])?),
            )
        })),
        "searchsorted_sorter_side_right" => one(unsorted().and_then(|s| {
            s.searchsorted_with(
                &Tensor::new([3.0f32, 5.0])?,
                ss().sorter(&Tensor::new([1i64, 2, 0])?).side("right"),
            )
        })),
        "searchsorted_sorter_bad_size" => one(unsorted()
            .and_then(|s| s.searchsorted_with(&Tensor::new([2.0f32])?, ss().sorter(&Tensor::new([1i64, 2])?)))),
        "searchsorted_sorter_bad_dtype" => one(unsorted()
            .and_then(|s| s.searchsorted_with(&Tensor::new([2.0f32])?, ss().sorter(&Tensor::new([1i32, 2, 0])?)))),
        "searchsorted_sorter_out_of_range" => one(unsorted()
            .and_then(|s| s.searchsorted_with(&Tensor::new([2.0f32])?, ss().sorter(&Tensor::new([1i64, 3, 0])?)))),
        "empty_strided_f64" => one(opts(DType::F64).empty_strided([2, 3], [1, 2])),
        "empty_strided_i32" => one(opts(DType::I32).empty_strided([2, 2], [2, 1])),
        "nansum_dtype_f64" => one(Tensor::new([1.5f32, NAN as f32, 2.25]).and_then(|x| x.nansum_dtype(DType::F64))),
        "nansum_dtype_int_input" => one(Tensor::new([200u8, 100]).and_then(|x| x.nansum())),
        "nansum_dtype_i64_from_float" => one(Tensor::new([1.5f32, 2.5]).and_then(|x| x.nansum_dtype(DType::I64))),
        "nansum_dim_dtype" => {
            one(Tensor::new([[1.5f32, NAN as f32], [2.25, 1.0]]).and_then(|x| x.nansum_dim_dtype(1, false, DType::F64)))
        }
        "nanmean_dtype_f64" => one(Tensor::new([1.5f32, NAN as f32, 2.25]).and_then(|x| x.nanmean_dtype(DType::F64))),
        "nanmean_dim_dtype" => {
            one(Tensor::new([[1.5f32, NAN as f32], [2.25, 1.0]])
                .and_then(|x| x.nanmean_dim_dtype(1, false, DType::F64)))
        }
        "nanmean_int_input" => one(Tensor::new([1i64, 2]).and_then(|x| x.nanmean_dtype(DType::F32))),
        "nanmean_int_dtype" => one(Tensor::new([1.0f32, 2.0]).and_then(|x| x.nanmean_dtype(DType::I64))),
        "logical_and_inplace_f32" => {
            one(Tensor::new([1.0f32, 0.0, NAN as f32, 2.0])
                .and_then(|x| x.logical_and_(&Tensor::new([3i64, 0, 1, 0])?)))
        }
        "logical_or_inplace_i64" => {
            one(Tensor::new([0i64, 0, 5]).and_then(|x| x.logical_or_(&Tensor::new([0.0f32, 0.5, 0.0])?)))
        }
        "logical_xor_inplace_u8" => {
            one(Tensor::new([0u8, 1, 2]).and_then(|x| x.logical_xor_(&Tensor::new([true, true, false])?)))
        }
        "logical_not_inplace_f16" => {
            one(Tensor::new([f16::from_f32(0.0), f16::from_f32(1.5)]).and_then(|x| x.logical_not_()))
        }
        "logical_and_inplace_no_broadcast_self" => {
            one(Tensor::new([1.0f32]).and_then(|x| x.logical_and_(&Tensor::new([1.0f32, 0.0])?)))
        }
        _ => None,
    }
}

fn signed_args_case(name: &str) -> Option<Out> {
    let z = || Tensor::zeros(4);
    let one = |r: Result<Tensor>| Some(r.map(|t| vec![t]));
    let two = |r: Result<(Tensor, Tensor)>| Some(r.map(|(a, b)| vec![a, b]));
    match name {
        "chunk_negative" => Some(z().and_then(|t| t.chunk(-1, 0))),
        "chunk_zero" => Some(z().and_then(|t| t.chunk(0, 0))),
        "split_negative" => Some(z().and_then(|t| t.split(-1, 0))),
        "topk_negative" => two(z().and_then(|t| t.topk(-1, -1, true))),
        "unfold_negative_size" => one(z().and_then(|t| t.unfold(0, -1, 1))),
        "unfold_zero_step" => one(z().and_then(|t| t.unfold(0, 2, 0))),
        "unfold_negative_step" => one(z().and_then(|t| t.unfold(0, 2, -1))),
        "eye_negative" => one(Tensor::eye(-1)),
        "narrow_negative_length" => one(z().and_then(|t| t.narrow(0, 0, -1))),
        "one_hot_negative_classes" => one(Tensor::new([0i64]).and_then(|t| t.one_hot(Some(-2)))),
        "randperm_negative" => one(Tensor::randperm(-1)),
        "multinomial_negative" => one(Tensor::ones(3).and_then(|t| t.multinomial(-1, false))),
        "kthvalue_zero" => two(z().and_then(|t| t.kthvalue(0, -1, false))),
        "histc_negative_bins" => one(z().and_then(|t| t.histc(-1, 0.0, 0.0))),
        _ => None,
    }
}

fn norm_case(name: &str) -> Option<Out> {
    let one = |r: Result<Tensor>| Some(r.map(|t| vec![t]));
    let h = |v: &[f32], d: DType| Tensor::from_slice(v).to_dtype(d);
    if let Some(n) = name.strip_prefix("vector_norm_f32_order_") {
        let n: usize = n.parse().ok()?;
        let g = Generator::new(n as u64);
        return one(TensorOptions::new()
            .generator(&g)
            .rand(n)
            .and_then(|x| x.linalg_vector_norm(2.0, (), false)));
    }
    match name {
        "vector_norm_f32_overflow" => Some(h(&[1e30, 1e30], DType::F32).and_then(|x| {
            Ok(vec![
                x.linalg_vector_norm(2.0, (), false)?,
                x.linalg_vector_norm(f64::INFINITY, (), false)?,
            ])
        })),
        "vector_norm_f32_underflow" => {
            one(h(&[1e-30, 1e-30], DType::F32).and_then(|x| x.linalg_vector_norm(2.0, (), false)))
        }
        "vector_norm_f16_no_overflow" => {
            one(h(&[300.0, 300.0], DType::F16).and_then(|x| x.linalg_vector_norm(2.0, (), false)))
        }
        "vector_norm_bf16_overflow" => {
            one(h(&[1e30, 1e30], DType::BF16).and_then(|x| x.linalg_vector_norm(2.0, (), false)))
        }
        "vector_norm_f32_dtype_f64" => {
            one(h(&[1e30, 1e30], DType::F32)
                .and_then(|x| x.linalg_vector_norm_with(2.0, None, false, Some(DType::F64))))
        }
        "sum_f16_overflow" => Some(
            opts(DType::F16)
                .full(10, 10000.0)
                .and_then(|x| Ok(vec![x.sum()?, x.mean()?])),
        ),
        "mm_f16_partial_overflow" => one(h(&[300.0, 300.0, -300.0], DType::F16).and_then(|a| {
            a.reshape([1, 3])?
                .matmul(&h(&[300.0, 200.0, 300.0], DType::F16)?.reshape([3, 1])?)
        })),
        "mm_f16_overflow" => one(h(&[300.0, 300.0], DType::F16).and_then(|a| {
            a.reshape([1, 2])?
                .matmul(&h(&[300.0, 300.0], DType::F16)?.reshape([2, 1])?)
        })),
        _ => None,
    }
}

fn layer_norm_case(name: &str) -> Option<Out> {
    if name == "layer_norm_backward_true_zero" {
        let g = Generator::new(3);
        return Some((|| -> Out {
            let x = TensorOptions::new()
                .generator(&g)
                .randn([4, 37])?
                .mul(5.0)?
                .requires_grad_(true)?;
            let y = x.layer_norm(37, None, None, 1e-5)?.sum()?;
            Ok(vec![autograd::grad(&[&y], &[&x], Default::default())?[0].clone()])
        })());
    }
    let (affine, n) = match name.strip_prefix("layer_norm_backward_")? {
        r if r.starts_with("affine_") => (true, r["affine_".len()..].parse::<usize>().ok()?),
        r => (false, r.parse::<usize>().ok()?),
    };
    let g = Generator::new(if affine { 100 + n as u64 } else { n as u64 });
    let o = TensorOptions::new().generator(&g);
    Some((|| -> Out {
        let x = o.randn([3, n])?.mul(3.0)?.add(1.0)?.requires_grad_(true)?;
        let dy = o.randn([3, n])?;
        let (w, b) = if affine {
            (
                Some(o.randn(n)?.add(1.0)?.requires_grad_(true)?),
                Some(o.randn(n)?.requires_grad_(true)?),
            )
        } else {
            (None, None)
        };
        let y = x.layer_norm(n, w.as_ref(), b.as_ref(), 1e-5)?;
        let mut ins = vec![&x];
        ins.extend(w.iter().chain(b.iter()));
        let gs = autograd::grad(
            &[&y],
            &ins,
            autograd::GradOptions {
                grad_outputs: Some(std::slice::from_ref(&dy)),
                ..Default::default()
            },
        )?;
        let mut out = vec![y.detach()];
        out.extend((0..ins.len()).map(|i| gs[i].clone()));
        Ok(out)
    })())
}

fn print_case(name: &str) -> Option<String> {
    let v = |x: &[f64]| Tensor::from_slice(x).to_dtype(DType::F32).expect("f32");
    let t = match name.strip_prefix("print_sci_")? {
        "mixed" => v(&[1.5, -2.25, NAN, INF, 0.0]),
        "ints_as_floats" => v(&[1.0, 2.0, 3.0]),
        "neg_zero" => v(&[-0.0, 1.0]),
        "zeros" => v(&[0.0, 0.0]),
        "nan_only" => v(&[NAN]),
        "wide" => v(&[1.0, -1e-5, 12345678.0, 1e100]),
        "rows" => v(&[1.0, -2.0, 3.5, 4e-3]).reshape([2, 2]).ok()?,
        "long_row" => v(&(0..20).map(|i| i as f64 * 1.5 - 7.0).collect::<Vec<_>>()),
        "ints" => Tensor::new([1i64, 2, 300]).ok()?,
        "0d" => Tensor::scalar(3.5f32),
        "f16" => Tensor::new([f16::from_f64(0.1), f16::from_f64(2.5)]).ok()?,
        _ => return None,
    };
    set_print_options(PrintOptions {
        sci_mode: Some(true),
        precision: if name == "print_sci_wide" { 2 } else { 4 },
        ..Default::default()
    });
    let s = format!("{t}");
    set_print_options(PrintOptions::default());
    Some(s)
}

fn run(name: &str) -> Option<Out> {
    addmm_family(name)
        .or_else(|| conversions(name))
        .or_else(|| like_case(name))
        .or_else(|| gradient_case(name).filter(|_| name.starts_with("grad_")))
        .or_else(|| bernoulli_case(name).filter(|_| name.starts_with("bernoulli_")))
        .or_else(|| range_case(name))
        .or_else(|| form_case(name))
        .or_else(|| signed_args_case(name))
        .or_else(|| norm_case(name))
        .or_else(|| layer_norm_case(name))
}

fn as_f64s(t: &Tensor) -> Vec<f64> {
    let t = t.contiguous().expect("contiguous");
    match t.dtype() {
        DType::Bool => t.to_vec::<bool>().expect("bools").into_iter().map(f64::from).collect(),
        DType::F16 => t.to_vec::<f16>().expect("f16").into_iter().map(f64::from).collect(),
        DType::BF16 => t.to_vec::<bf16>().expect("bf16").into_iter().map(f64::from).collect(),
        _ => t.to_dtype(DType::F64).and_then(|t| t.to_vec()).expect("values"),
    }
}

fn number(v: &Value) -> f64 {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .expect("a number")
}

fn compare(name: &str, i: usize, got: &Tensor, want: &Value) -> std::result::Result<(), String> {
    let shape: Vec<usize> = want["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    let dtype = DType::from_name(want["dtype"].as_str().unwrap()).expect("a dtype");
    if got.shape() != shape || got.dtype() != dtype {
        return Err(format!(
            "{name}[{i}]: {:?} {:?}, PyTorch {shape:?} {dtype:?}",
            got.shape(),
            got.dtype()
        ));
    }
    let metadata_only = name.starts_with("empty_like_") || name.starts_with("empty_strided");
    if name.contains("_like_") || name.starts_with("clone_") || name.starts_with("empty_strided") {
        let strides: Vec<usize> = want["strides"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        if got.strides() != strides {
            return Err(format!("{name}[{i}]: strides {:?}, PyTorch {strides:?}", got.strides()));
        }
    }
    if metadata_only {
        return Ok(());
    }
    let want_vals: Vec<f64> = want["bits"].as_array().unwrap().iter().map(number).collect();
    let neg: Vec<bool> = want["neg"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_bool().unwrap())
        .collect();
    let vals = as_f64s(got);
    let same = vals.len() == want_vals.len()
        && vals
            .iter()
            .zip(&want_vals)
            .zip(&neg)
            .all(|((a, b), n)| (a.is_nan() && b.is_nan()) || (a == b && (*a != 0.0 || a.is_sign_negative() == *n)));
    if same {
        return Ok(());
    }
    let bad: Vec<usize> = (0..vals.len().min(want_vals.len()))
        .filter(|&k| {
            let (a, b) = (vals[k], want_vals[k]);
            !((a.is_nan() && b.is_nan()) || (a == b && (a != 0.0 || a.is_sign_negative() == neg[k])))
        })
        .collect();
    let k = bad.first().copied().unwrap_or(0);
    Err(format!(
        "{name}[{i}]: {} of {} elements differ; first at {k}: {:?} vs PyTorch {:?}{}",
        bad.len(),
        want_vals.len(),
        vals.get(k),
        want_vals.get(k),
        if neg.get(k) == Some(&true) { " (-)" } else { "" }
    ))
}

fn check(case: &Value) -> std::result::Result<(), String> {
    let name = case["name"].as_str().expect("a name");
    if let Some(want) = case.get("print").and_then(Value::as_str) {
        let got = print_case(name).ok_or_else(|| format!("{name}: not in the Rust table"))?;
        return if got == want {
            Ok(())
        } else {
            Err(format!("{name}: printed\n{got}\nPyTorch:\n{want}"))
        };
    }
    let got = catch_unwind(AssertUnwindSafe(|| run(name))).map_err(|_| format!("{name}: panicked"))?;
    let got = got.ok_or_else(|| format!("{name}: not in the Rust table"))?;
    match (case.get("error").and_then(Value::as_str), got) {
        (Some(want), Ok(_)) => Err(format!("{name}: succeeded; PyTorch: {want}")),
        (Some(want), Err(e)) => {
            let msg = e.to_string();
            if msg.contains(want) {
                Ok(())
            } else {
                Err(format!("{name}: \"{msg}\" lacks PyTorch's \"{want}\""))
            }
        }
        (None, Err(e)) => Err(format!("{name}: {e}; PyTorch succeeds")),
        (None, Ok(ts)) => {
            let want = case["ok"].as_array().expect("results");
            if want.len() != ts.len() {
                return Err(format!("{name}: {} results, PyTorch {}", ts.len(), want.len()));
            }
            for (i, (t, w)) in ts.iter().zip(want).enumerate() {
                if w.is_null() {
                    continue;
                }
                compare(name, i, t, w)?;
            }
            Ok(())
        }
    }
}

#[test]
fn edge_cases_follow_pytorch() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/edge_cases.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("the oracle file")).expect("JSON");
    let cases = doc["cases"].as_array().expect("cases");
    let wrong: Vec<String> = cases.iter().filter_map(|c| check(c).err()).collect();
    assert!(cases.len() > 280, "{}", cases.len());
    assert!(
        wrong.is_empty(),
        "{} of {} cases differ:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}
