//! The op-coverage ops of issue 14 (shape and indexing, counting,
//! reductions, linear algebra): each fuzzer op name and its positional
//! arguments mapped to a ferrotorch call. `exec_cov` in `fuzz/driver.py` is
//! the PyTorch side.

use ferrotorch_core::ops::decomp::MatrixOrd;
use ferrotorch_core::{Indexing, Operand, SearchSortedOptions, Tensor};
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

fn flag(v: &Value) -> Res<bool> {
    v.as_bool().ok_or_else(|| format!("not a bool: {v}"))
}

fn size(v: &Value) -> Res<usize> {
    v.as_u64().map(|x| x as usize).ok_or_else(|| format!("not a size: {v}"))
}

/// An int or a list of ints (PyTorch's `int[]` arguments take either).
fn int_or_ints(v: &Value) -> Res<Vec<i64>> {
    if v.is_array() { ints(v) } else { int(v).map(|i| vec![i]) }
}

/// Runs op `name` if it is one of this table's; `None` otherwise.
pub(crate) fn coverage(name: &str, env: &Env, a: &[Value]) -> Option<Res<Vec<Tensor>>> {
    run(name, env, a).transpose()
}

fn run(name: &str, env: &Env, a: &[Value]) -> Res<Option<Vec<Tensor>>> {
    let x = || env.get(&a[0]);
    let t = |k: usize| env.get(&a[k]);
    let opt_t = |k: usize| {
        if a[k].is_null() {
            Ok(None)
        } else {
            env.get(&a[k]).map(Some)
        }
    };
    let i = |k: usize| int(&a[k]);
    let opt_i = |k: usize| if a[k].is_null() { Ok(None) } else { int(&a[k]).map(Some) };
    let b = |k: usize| flag(&a[k]);
    let list = |k: usize| -> Res<Vec<Tensor>> {
        a[k].as_array()
            .ok_or("expected a list of values")?
            .iter()
            .map(|v| env.get(v))
            .collect()
    };
    let r = match name {
        // ---- shape and indexing
        "flip" => e1(x()?.flip(ints(&a[1])?)),
        "roll" => {
            let dims = if a[2].is_null() { vec![] } else { ints(&a[2])? };
            e1(x()?.roll(ints(&a[1])?, dims))
        }
        "repeat" => e1(x()?.repeat(ints(&a[1])?)),
        "tile" => e1(x()?.tile(ints(&a[1])?)),
        "repeat_interleave" => e1(x()?.repeat_interleave(i(1)?, opt_i(2)?)),
        "repeat_interleave_t" => e1(x()?.repeat_interleave_tensor(&t(1)?, opt_i(2)?)),
        "movedim" => e1(x()?.movedim(int_or_ints(&a[1])?, int_or_ints(&a[2])?)),
        "moveaxis" => e1(x()?.moveaxis(int_or_ints(&a[1])?, int_or_ints(&a[2])?)),
        "swapaxes" => e1(x()?.swapaxes(i(1)?, i(2)?)),
        "diagonal" => e1(x()?.diagonal(i(1)?, i(2)?, i(3)?)),
        "diag_embed" => e1(x()?.diag_embed(i(1)?, i(2)?, i(3)?)),
        "unfold" => e1(x()?.unfold(i(1)?, int(&a[2])?, int(&a[3])?)),
        "diag" => e1(x()?.diag(i(1)?)),
        "trace" => e1(x()?.trace()),
        "argwhere" => e1(x()?.argwhere()),
        "atleast_1d" => e1(x()?.atleast_1d()),
        "atleast_2d" => e1(x()?.atleast_2d()),
        "atleast_3d" => e1(x()?.atleast_3d()),
        "masked_select" => e1(x()?.masked_select(&t(1)?)),
        "masked_scatter" => e1(x()?.masked_scatter(&t(1)?, &t(2)?)),
        "take" => e1(x()?.take(&t(1)?)),
        "take_along_dim" => e1(x()?.take_along_dim(&t(1)?, opt_i(2)?)),
        "index_add" => e1(x()?.index_add(i(1)?, &t(2)?, &t(3)?, scalar(&a[4])?)),
        "index_add_" => e1(x()?.index_add_(i(1)?, &t(2)?, &t(3)?, scalar(&a[4])?)),
        "index_copy" => e1(x()?.index_copy(i(1)?, &t(2)?, &t(3)?)),
        "index_copy_" => e1(x()?.index_copy_(i(1)?, &t(2)?, &t(3)?)),
        "index_fill" => e1(x()?.index_fill(i(1)?, &t(2)?, scalar(&a[3])?)),
        "index_fill_" => e1(x()?.index_fill_(i(1)?, &t(2)?, scalar(&a[3])?)),
        "nonzero_tuple" => ev(x()?.nonzero_tuple()),
        "meshgrid" => {
            let ts = list(0)?;
            let refs: Vec<&Tensor> = ts.iter().collect();
            let indexing = match a[1].as_str() {
                Some("xy") => Indexing::Xy,
                _ => Indexing::Ij,
            };
            ev(Tensor::meshgrid(&refs, indexing))
        }
        "cartesian_prod" | "block_diag" | "broadcast_tensors" => {
            let ts = list(0)?;
            let refs: Vec<&Tensor> = ts.iter().collect();
            match name {
                "cartesian_prod" => e1(Tensor::cartesian_prod(&refs)),
                "block_diag" => e1(Tensor::block_diag(&refs)),
                _ => ev(Tensor::broadcast_tensors(&refs)),
            }
        }
        "broadcast_to" => e1(x()?.broadcast_to(ints(&a[1])?)),
        "tril_indices" => e1(Tensor::tril_indices(i(0)?, i(1)?, i(2)?)),
        "triu_indices" => e1(Tensor::triu_indices(i(0)?, i(1)?, i(2)?)),
        // ---- counting
        "searchsorted" => {
            let seq = x()?;
            let hold = if a[1].is_string() { Some(t(1)?) } else { None };
            let vals = match &hold {
                Some(v) => Operand::Tensor(v),
                None => Operand::Scalar(scalar(&a[1])?),
            };
            let sorter = opt_t(4)?;
            let mut opts = SearchSortedOptions::new().right(b(2)?).out_int32(b(5)?);
            if let Some(side) = a[3].as_str() {
                opts = opts.side(side);
            }
            if let Some(s) = sorter.as_ref() {
                opts = opts.sorter(s);
            }
            e1(seq.searchsorted_with(vals, opts))
        }
        "bucketize" => e1(x()?.bucketize_with(&t(1)?, b(2)?, b(3)?)),
        "bincount" => e1(x()?.bincount(opt_t(1)?.as_ref(), size(&a[2])?)),
        "histc" => e1(x()?.histc(int(&a[1])?, num(&a[2])?, num(&a[3])?)),
        // ---- reductions
        "nanmean" => e1(x()?.nanmean()),
        "nanmean_dim" => e1(x()?.nanmean_dim(ints(&a[1])?, b(2)?)),
        "count_nonzero_dim" => e1(x()?.count_nonzero_dim(ints(&a[1])?)),
        "var_mean" | "std_mean" => {
            let dims = if a[1].is_null() { vec![] } else { ints(&a[1])? };
            if name == "var_mean" {
                e2(x()?.var_mean_dim(dims, num(&a[2])?, b(3)?))
            } else {
                e2(x()?.std_mean_dim(dims, num(&a[2])?, b(3)?))
            }
        }
        "diff_pa" => {
            let (pre, app) = (opt_t(3)?, opt_t(4)?);
            e1(x()?.diff(i(1)?, i(2)?, pre.as_ref(), app.as_ref()))
        }
        "cumsum_dtype" => e1(x()?.cumsum_dtype(i(1)?, dtype_of(&a[2])?)),
        "cumprod_dtype" => e1(x()?.cumprod_dtype(i(1)?, dtype_of(&a[2])?)),
        "mean_dtype" => e1(if a[1].is_null() {
            x()?.mean_dtype(dtype_of(&a[3])?)
        } else {
            x()?.mean_dim_dtype(ints(&a[1])?, b(2)?, dtype_of(&a[3])?)
        }),
        // ---- linear algebra
        "addmm" => e1(x()?.addmm(&t(1)?, &t(2)?, num(&a[3])?, num(&a[4])?)),
        "addmv" => e1(x()?.addmv(&t(1)?, &t(2)?, num(&a[3])?, num(&a[4])?)),
        "addbmm" => e1(x()?.addbmm(&t(1)?, &t(2)?, num(&a[3])?, num(&a[4])?)),
        "baddbmm" => e1(x()?.baddbmm(&t(1)?, &t(2)?, num(&a[3])?, num(&a[4])?)),
        "einsum" => {
            let ts = list(1)?;
            let refs: Vec<&Tensor> = ts.iter().collect();
            e1(Tensor::einsum(a[0].as_str().ok_or("einsum: no equation")?, &refs))
        }
        "tensordot" => {
            if a.len() == 3 {
                e1(x()?.tensordot_n(&t(1)?, size(&a[2])?))
            } else {
                e1(x()?.tensordot(&t(1)?, &ints(&a[2])?, &ints(&a[3])?))
            }
        }
        "kron" => e1(x()?.kron(&t(1)?)),
        "cross" => e1(x()?.linalg_cross(&t(1)?, i(2)?)),
        "matrix_norm" => {
            let ord = match a[1].as_str() {
                Some("fro") => MatrixOrd::Fro,
                Some("nuc") => MatrixOrd::Nuc,
                _ => MatrixOrd::P(num(&a[1])?),
            };
            e1(x()?.linalg_matrix_norm(ord, b(2)?))
        }
        "inv" => e1(x()?.linalg_inv()),
        "det" => e1(x()?.linalg_det()),
        "svdvals" => e1(x()?.linalg_svdvals()),
        "slogdet" => e2(x()?.linalg_slogdet()),
        "solve" => e1(x()?.linalg_solve(&t(1)?)),
        "cholesky" => e1(x()?.linalg_cholesky(b(1)?)),
        "eigvalsh" => e1(x()?.linalg_eigvalsh(a[1].as_str().unwrap_or("L"))),
        "qr_abs" => {
            let (q, r) = x()?
                .linalg_qr(a[1].as_str().unwrap_or("reduced"))
                .map_err(|e| e.to_string())?;
            e2(q.abs().and_then(|q| Ok((q, r.abs()?))))
        }
        _ => return Ok(None),
    };
    r.map(Some)
}
