//! The op table: each fuzzer op name and its positional arguments mapped to
//! a ferrotorch call (`fuzz/driver.py` has the PyTorch side of each).

use ferrotorch_core::{DType, Tensor};
use serde_json::Value;

use crate::json::{Env, Res, dtype_of, int, ints, num, scalar};

fn e1(r: ferrotorch_core::Result<Tensor>) -> Res<Vec<Tensor>> {
    r.map(|t| vec![t]).map_err(|e| e.to_string())
}

fn e2(r: ferrotorch_core::Result<(Tensor, Tensor)>) -> Res<Vec<Tensor>> {
    r.map(|(a, b)| vec![a, b]).map_err(|e| e.to_string())
}

fn ev(r: ferrotorch_core::Result<Vec<Tensor>>) -> Res<Vec<Tensor>> {
    r.map_err(|e| e.to_string())
}

fn opt_int(v: &Value) -> Res<Option<i64>> {
    if v.is_null() { Ok(None) } else { int(v).map(Some) }
}

fn opt_ints(v: &Value) -> Res<Option<Vec<i64>>> {
    if v.is_null() { Ok(None) } else { ints(v).map(Some) }
}

fn flag(v: &Value) -> Res<bool> {
    v.as_bool().ok_or_else(|| format!("not a bool: {v}"))
}

fn usize_of(v: &Value) -> Res<usize> {
    v.as_u64().map(|x| x as usize).ok_or_else(|| format!("not a size: {v}"))
}

macro_rules! unary_table {
    ($name:expr, $x:expr, $($n:ident),*) => {
        match $name {
            $(stringify!($n) => Some($x.$n()),)*
            _ => None,
        }
    };
}

/// Unary ops without arguments (`[x]`), out of place and in place.
pub(crate) fn unary(name: &str, env: &Env, a: &[Value]) -> Res<Option<Tensor>> {
    let r = {
        if a.len() != 1 || !a[0].is_string() {
            return Ok(None);
        }
        let x = env.get(&a[0])?;
        unary_table!(
            name,
            x,
            neg,
            abs,
            exp,
            log,
            log1p,
            expm1,
            sqrt,
            rsqrt,
            reciprocal,
            sin,
            cos,
            tanh,
            sigmoid,
            erf,
            relu,
            gelu,
            gelu_tanh,
            silu,
            floor,
            ceil,
            round,
            trunc,
            sign,
            square,
            logical_not,
            neg_,
            abs_,
            exp_,
            log_,
            log1p_,
            expm1_,
            sqrt_,
            rsqrt_,
            reciprocal_,
            sin_,
            cos_,
            tanh_,
            sigmoid_,
            erf_,
            relu_,
            floor_,
            ceil_,
            round_,
            trunc_,
            sign_,
            sum,
            prod,
            max,
            min,
            all,
            any,
            mean,
            t,
            squeeze,
            contiguous,
            nonzero,
            zeros_like,
            ones_like,
            zero_,
            bitwise_not,
            isnan,
            isinf,
            isfinite,
            isposinf,
            isneginf
        )
    };
    match r {
        None => Ok(None),
        Some(r) => r.map(Some).map_err(|e| e.to_string()),
    }
}

/// Every other op.
pub(crate) fn other(name: &str, env: &Env, a: &[Value]) -> Res<Vec<Tensor>> {
    let x = || env.get(&a[0]);
    let t = |i: usize| env.get(&a[i]);
    let i = |k: usize| int(&a[k]);
    let b = |k: usize| flag(&a[k]);
    let s = |k: usize| scalar(&a[k]);
    let opt_s = |k: usize| {
        if a[k].is_null() {
            Ok(None)
        } else {
            scalar(&a[k]).map(Some)
        }
    };
    let list = |k: usize| -> Res<Vec<Tensor>> {
        a[k].as_array()
            .ok_or("expected a list of values")?
            .iter()
            .map(|v| env.get(v))
            .collect()
    };
    match name {
        "clone" => e1(x()?.clone_tensor()),
        "softplus" => e1(x()?.softplus(num(&a[1])?, num(&a[2])?)),
        "where" => {
            let c = t(0)?;
            let (mut h1, mut h2) = (None, None);
            let p = crate::json::operand(env, &a[1], &mut h1)?;
            let q = crate::json::operand(env, &a[2], &mut h2)?;
            e1(ferrotorch_core::ops::binary::where_(&c, p, q))
        }
        "masked_fill" => e1(x()?.masked_fill(&t(1)?, s(2)?)),
        "masked_fill_" => e1(x()?.masked_fill_(&t(1)?, s(2)?)),
        "clamp" => e1(x()?.clamp(opt_s(1)?, opt_s(2)?)),
        "clamp_" => e1(x()?.clamp_(opt_s(1)?, opt_s(2)?)),
        "clamp_min" => e1(x()?.clamp_min(s(1)?)),
        "clamp_t" => {
            let bound = |k: usize| if a[k].is_null() { Ok(None) } else { t(k).map(Some) };
            let (lo, hi) = (bound(1)?, bound(2)?);
            e1(x()?.clamp(lo.as_ref(), hi.as_ref()))
        }
        "lerp" => {
            let mut hold = None;
            let w = crate::json::operand(env, &a[2], &mut hold)?;
            e1(x()?.lerp(&t(1)?, w))
        }
        "nan_to_num" => {
            let opt = |k: usize| if a[k].is_null() { Ok(None) } else { num(&a[k]).map(Some) };
            e1(x()?.nan_to_num(num(&a[1])?, opt(2)?, opt(3)?))
        }
        "clamp_max" => e1(x()?.clamp_max(s(1)?)),
        "scalar_pow" => e1(Tensor::scalar_pow(s(0)?, &t(1)?)),
        "sum_dim" => e1(x()?.sum_dim(ints(&a[1])?, b(2)?)),
        "sum_dtype" => e1(match opt_ints(&a[1])? {
            None => x()?.sum_dtype(dtype_of(&a[3])?),
            Some(d) => x()?.sum_dim_dtype(d, b(2)?, dtype_of(&a[3])?),
        }),
        "prod_dim" => e1(x()?.prod_dim(i(1)?, b(2)?)),
        "amax" => e1(x()?.amax(ints(&a[1])?, b(2)?)),
        "amin" => e1(x()?.amin(ints(&a[1])?, b(2)?)),
        "all_dim" => e1(x()?.all_dim(ints(&a[1])?, b(2)?)),
        "any_dim" => e1(x()?.any_dim(ints(&a[1])?, b(2)?)),
        "mean_dim" => e1(x()?.mean_dim(ints(&a[1])?, b(2)?)),
        "max_dim" => e2(x()?.max_dim(i(1)?, b(2)?)),
        "min_dim" => e2(x()?.min_dim(i(1)?, b(2)?)),
        "argmax" => e1(x()?.argmax(opt_int(&a[1])?, b(2)?)),
        "argmin" => e1(x()?.argmin(opt_int(&a[1])?, b(2)?)),
        "cumsum" => e1(x()?.cumsum(i(1)?)),
        "cumprod" => e1(x()?.cumprod(i(1)?)),
        "var" => e1(x()?.var(num(&a[1])?)),
        "std" => e1(x()?.std(num(&a[1])?)),
        "var_dim" => e1(x()?.var_dim(opt_ints(&a[1])?.unwrap_or_default(), num(&a[2])?, b(3)?)),
        "std_dim" => e1(x()?.std_dim(opt_ints(&a[1])?.unwrap_or_default(), num(&a[2])?, b(3)?)),
        "logsumexp" => e1(x()?.logsumexp(ints(&a[1])?, b(2)?)),
        "norm" => e1(x()?.norm(num(&a[1])?)),
        "norm_dim" => e1(x()?.norm_dim(num(&a[1])?, opt_ints(&a[2])?.unwrap_or_default(), b(3)?)),
        "softmax" => e1(x()?.softmax(i(1)?)),
        "log_softmax" => e1(x()?.log_softmax(i(1)?)),
        "mm" => e1(x()?.mm(&t(1)?)),
        "bmm" => e1(x()?.bmm(&t(1)?)),
        "mv" => e1(x()?.mv(&t(1)?)),
        "dot" => e1(x()?.dot(&t(1)?)),
        "outer" => e1(x()?.outer(&t(1)?)),
        "matmul" => e1(x()?.matmul(&t(1)?)),
        "view" => e1(x()?.view(&ints(&a[1])?)),
        "reshape" => e1(x()?.reshape(&ints(&a[1])?)),
        "permute" => e1(x()?.permute(&ints(&a[1])?)),
        "transpose" => e1(x()?.transpose(i(1)?, i(2)?)),
        "expand" => e1(x()?.expand(&ints(&a[1])?)),
        "narrow" => e1(x()?.narrow(i(1)?, i(2)?, usize_of(&a[3])? as i64)),
        "slice" => e1(x()?.slice(i(1)?, opt_int(&a[2])?, opt_int(&a[3])?, i(4)?)),
        "select" => e1(x()?.select(i(1)?, i(2)?)),
        "squeeze_dim" => e1(x()?.squeeze_dim(i(1)?)),
        "squeeze_dims" => e1(x()?.squeeze_dims(&ints(&a[1])?)),
        "unsqueeze" => e1(x()?.unsqueeze(i(1)?)),
        "flatten" => e1(x()?.flatten((i(1)?, i(2)?))),
        "unflatten" => e1(x()?.unflatten(i(1)?, &ints(&a[2])?)),
        "split" => ev(x()?.split(i(1)?, i(2)?)),
        "chunk" => ev(x()?.chunk(i(1)?, i(2)?)),
        "unbind" => ev(x()?.unbind(i(1)?)),
        "gather" => e1(x()?.gather(i(1)?, &t(2)?)),
        "scatter" => e1(x()?.scatter(i(1)?, &t(2)?, &t(3)?)),
        "scatter_" => e1(x()?.scatter_(i(1)?, &t(2)?, &t(3)?)),
        "scatter_value" => e1(x()?.scatter_value(i(1)?, &t(2)?, s(3)?)),
        "scatter_add" => e1(x()?.scatter_add(i(1)?, &t(2)?, &t(3)?)),
        "scatter_add_" => e1(x()?.scatter_add_(i(1)?, &t(2)?, &t(3)?)),
        "index_select" => e1(x()?.index_select(i(1)?, &t(2)?)),
        "index" | "index_put" | "index_put_" => {
            let idx: Vec<Option<Tensor>> = a[1]
                .as_array()
                .ok_or("index: expected a list")?
                .iter()
                .map(|v| if v.is_null() { Ok(None) } else { env.get(v).map(Some) })
                .collect::<Res<_>>()?;
            match name {
                "index" => e1(x()?.index(&idx)),
                "index_put" => e1(x()?.index_put(&idx, &t(2)?, b(3)?)),
                _ => e1(x()?.index_put_(&idx, &t(2)?, b(3)?)),
            }
        }
        "tril" => e1(x()?.tril(i(1)?)),
        "triu" => e1(x()?.triu(i(1)?)),
        "one_hot" => e1(x()?.one_hot(opt_int(&a[1])?)),
        "sort" => e2(x()?.sort_stable(i(1)?, b(2)?)),
        "argsort" => e1(x()?.argsort(i(1)?, b(2)?)),
        "topk" => e2(x()?.topk(i(1)?, i(2)?, b(3)?)),
        "kthvalue" => e2(x()?.kthvalue(i(1)?, i(2)?, b(3)?)),
        "median_dim" => e2(x()?.median_dim(i(1)?, b(2)?)),
        "nanmedian_dim" => e2(x()?.nanmedian_dim(i(1)?, b(2)?)),
        "mode" => e2(x()?.mode(i(1)?, b(2)?)),
        "median" => e1(x()?.median()),
        "nanmedian" => e1(x()?.nanmedian()),
        "nansum" => e1(x()?.nansum()),
        "count_nonzero" => e1(x()?.count_nonzero()),
        "cummax" => e2(x()?.cummax(i(1)?)),
        "cummin" => e2(x()?.cummin(i(1)?)),
        "logcumsumexp" => e1(x()?.logcumsumexp(i(1)?)),
        "nansum_dim" => e1(x()?.nansum_dim(ints(&a[1])?, b(2)?)),
        "aminmax" => e2(x()?.aminmax(opt_int(&a[1])?, b(2)?)),
        "diff" => e1(x()?.diff(i(1)?, i(2)?, None, None)),
        "unique" | "unique_consecutive" => {
            let opts = ferrotorch_core::UniqueOptions {
                return_inverse: true,
                return_counts: true,
                dim: opt_int(&a[1])?,
            };
            let u = if name == "unique" {
                x()?.unique_with(opts)
            } else {
                x()?.unique_consecutive_with(opts)
            };
            let u = u.map_err(|e| e.to_string())?;
            Ok(vec![
                u.values,
                u.inverse.ok_or("unique: no inverse")?,
                u.counts.ok_or("unique: no counts")?,
            ])
        }
        "cat" | "stack" => {
            let ts = list(0)?;
            let refs: Vec<&Tensor> = ts.iter().collect();
            if name == "cat" {
                e1(Tensor::cat(&refs, i(1)?))
            } else {
                e1(Tensor::stack(&refs, i(1)?))
            }
        }
        "to" => e1(x()?.to_dtype(dtype_of(&a[1])?)),
        "fill_" => e1(x()?.fill_(s(1)?)),
        "copy_" => e1(x()?.copy_(&t(1)?)),
        "full_like" => e1(x()?.full_like(s(1)?)),
        "float" => e1(x()?.to_dtype(DType::F32)),
        o => crate::ops_cov::coverage(o, env, a)
            .or_else(|| crate::ops_nn::nn(o, env, a))
            .unwrap_or_else(|| Err(format!("unknown op {o}"))),
    }
}
