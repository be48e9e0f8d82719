//! Reductions, scans and order statistics of the op-coverage work as a
//! PyTorch user calls them: node names, errors, the meta device and
//! determinism. Values are checked against PyTorch in
//! `oracle_extra/ops.json`.

use ferrotorch::{DType, Device, Result, Tensor, TensorOptions, UniqueOptions};

fn node(t: &Tensor) -> String {
    t.grad_fn().map(|n| n.name().to_string()).unwrap_or_default()
}

fn err<T: std::fmt::Debug>(r: Result<T>) -> String {
    match r {
        Ok(t) => panic!("expected an error, got {t:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn gradients_are_recorded_under_pytorch_node_names() -> Result<()> {
    let x = Tensor::new([[1.0f32, 4.0, 2.0], [3.0, 0.5, 2.5]])?.requires_grad_(true)?;
    let cases = [
        (x.kthvalue(2, 1, false)?.0, "KthvalueBackward0"),
        (x.median()?, "MedianBackward0"),
        (x.median_dim(1, false)?.0, "MedianBackward1"),
        (x.nanmedian()?, "NanmedianBackward0"),
        (x.nanmedian_dim(0, true)?.0, "NanmedianBackward1"),
        (x.mode(1, false)?.0, "ModeBackward0"),
        (x.cummax(1)?.0, "CummaxBackward0"),
        (x.cummin(0)?.0, "CumminBackward0"),
        (x.logcumsumexp(1)?, "LogcumsumexpBackward0"),
        (x.nansum()?, "NansumBackward0"),
        (x.nanmean()?, "DivBackward0"),
        (x.diff(1, -1, None, None)?, "SubBackward0"),
        (x.diff(0, -1, None, None)?, "CopyBackwards"),
        (x.aminmax(Some(1), false)?.0, "AminmaxBackward0"),
        (x.var_mean(1.0)?.0, "VarMeanBackward0"),
        (x.var_mean_dim([1], 0.0, false)?.1, "VarMeanBackward0"),
        (x.std_mean(1.0)?.1, "StdMeanBackward0"),
        (x.std_mean_dim([0], 1.0, true)?.0, "StdMeanBackward0"),
    ];
    for (t, want) in cases {
        assert_eq!(node(&t), want);
    }
    // var_mean / std_mean: one node, the gradients of both outputs summed
    // (PyTorch: var_backward + mean_backward), either output alone too.
    let v = Tensor::new([[1.0f64, 4.0, 2.0], [3.0, 0.5, 2.5]])?.requires_grad_(true)?;
    let (var, mean) = v.var_mean_dim([1], 1.0, false)?;
    var.sum()?.add(&mean.sum()?.mul(3.0)?)?.backward()?;
    // PyTorch 2.15's gradient: 2 (x - mean) / (n - 1) + 3 / n.
    let want = [
        -0.3333333333333335,
        2.6666666666666665,
        0.6666666666666665,
        2.0,
        -0.5,
        1.5,
    ];
    for (g, w) in v.grad()?.to_vec::<f64>()?.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{g} vs {w}");
    }
    let s = Tensor::new([2.0f64, 2.0, 2.0])?.requires_grad_(true)?;
    s.std_mean(1.0)?.0.backward()?;
    assert_eq!(s.grad()?.to_vec::<f64>()?, [0.0, 0.0, 0.0]); // std 0: masked
    let m = Tensor::new([1.0f64, 5.0])?.requires_grad_(true)?;
    m.std_mean(1.0)?.1.backward()?;
    assert_eq!(m.grad()?.to_vec::<f64>()?, [0.5, 0.5]);
    // Indices and counts carry no history.
    assert!(!x.kthvalue(1, 1, false)?.1.requires_grad());
    assert!(!x.count_nonzero()?.requires_grad());
    // The median of everything shares its gradient among equal elements.
    let y = Tensor::new([2.0f64, 1.0, 2.0, 3.0])?.requires_grad_(true)?;
    y.median()?.backward()?;
    assert_eq!(y.grad()?.to_vec::<f64>()?, [0.5, 0.0, 0.5, 0.0]);
    Ok(())
}

#[test]
fn bad_arguments_are_errors_naming_the_op() -> Result<()> {
    let x = Tensor::new([1.0f32, 2.0, 3.0])?;
    assert!(err(x.kthvalue(0, 0, false)).contains("selected number k out of range"));
    assert!(err(x.kthvalue(4, 0, false)).contains("kthvalue"));
    assert!(err(x.kthvalue(1, 1, false)).contains("kthvalue"));
    assert!(err(Tensor::new([true])?.median()).contains("not implemented for 'Bool'"));
    assert!(err(Tensor::ones([2, 0])?.median_dim(1, false)).contains("Expected reduction dim 1 to have non-zero size"));
    assert!(err(Tensor::ones([0])?.mode(0, false)).contains("mode"));
    assert!(err(Tensor::new([1i64, 2])?.logcumsumexp(0)).contains("logcumsumexp"));
    assert!(err(Tensor::new([1i64, 2])?.nanmean()).contains("nanmean"));
    assert!(err(Tensor::new([1i64, 2])?.std_mean(1.0)).contains("std_mean"));
    assert!(err(Tensor::ones([0])?.aminmax(None, false)).contains("aminmax"));
    assert!(err(Tensor::scalar(1.0f32).diff(1, 0, None, None)).contains("at least one-dimensional"));
    assert!(err(x.diff(-1, 0, None, None)).contains("order must be non-negative"));
    let opts = UniqueOptions {
        dim: Some(0),
        ..Default::default()
    };
    assert!(err(Tensor::ones([2, 0])?.unique_with(opts)).contains("0 sized dimensions"));
    let opts = UniqueOptions {
        dim: Some(2),
        ..Default::default()
    };
    assert!(err(x.unique_with(opts)).contains("unique"));
    Ok(())
}

#[test]
fn unique_translates_python_line_by_line() -> Result<()> {
    // output, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
    let x = Tensor::new([[2i64, 1], [1, 2]])?;
    let u = x.unique_with(UniqueOptions {
        return_inverse: true,
        return_counts: true,
        dim: None,
    })?;
    assert_eq!(u.values.to_vec::<i64>()?, [1, 2]);
    let inverse = u.inverse.unwrap();
    assert_eq!(
        (inverse.shape(), inverse.to_vec::<i64>()?),
        (&[2, 2][..], vec![1, 0, 0, 1])
    );
    assert_eq!(u.counts.unwrap().to_vec::<i64>()?, [2, 2]);
    // Rows: torch.unique(x, dim=0).
    let rows = Tensor::new([[1i64, 2], [0, 5], [1, 2]])?;
    let r = rows.unique_with(UniqueOptions {
        dim: Some(0),
        ..Default::default()
    })?;
    assert_eq!(r.values.to_vec::<i64>()?, [0, 5, 1, 2]);
    assert!(r.inverse.is_none() && r.counts.is_none());
    Ok(())
}

#[test]
fn shape_rules_run_on_the_meta_device() -> Result<()> {
    let x = TensorOptions::new().device(Device::Meta).zeros([4, 5, 6])?;
    let (v, i) = x.kthvalue(2, 1, false)?;
    assert_eq!(
        (v.shape(), i.shape(), i.dtype()),
        (&[4, 6][..], &[4, 6][..], DType::I64)
    );
    assert_eq!(x.mode(-1, true)?.0.shape(), &[4, 5, 1]);
    assert_eq!(x.median()?.shape(), &[] as &[usize]);
    assert_eq!(x.cummax(2)?.1.shape(), &[4, 5, 6]);
    assert_eq!(x.logcumsumexp(0)?.shape(), &[4, 5, 6]);
    assert_eq!(x.nansum_dim([0, 2], false)?.shape(), &[5]);
    Ok(())
}

#[test]
fn large_inputs_give_the_same_bits_as_small_ones() -> Result<()> {
    // Order statistics and scans run line by line in parallel for big
    // inputs: each line's result must not depend on the split.
    let g = ferrotorch::Generator::new(3);
    let x = TensorOptions::new().generator(&g).randn([300, 257])?;
    let row = x.narrow(0, 123, 1)?;
    assert_eq!(
        x.logcumsumexp(1)?.narrow(0, 123, 1)?.to_vec::<f32>()?,
        row.logcumsumexp(1)?.to_vec::<f32>()?
    );
    assert_eq!(
        x.cummax(1)?.1.narrow(0, 123, 1)?.to_vec::<i64>()?,
        row.cummax(1)?.1.to_vec::<i64>()?
    );
    assert_eq!(
        x.kthvalue(50, 1, true)?.1.narrow(0, 123, 1)?.to_vec::<i64>()?,
        row.kthvalue(50, 1, true)?.1.to_vec::<i64>()?
    );
    Ok(())
}

/// Differences the differential fuzzer found (group `reduce`), with PyTorch
/// 2.15's values.
#[test]
fn var_mean_is_one_welford_node() -> Result<()> {
    // PyTorch's var_mean runs Welford's algorithm: an infinite element
    // makes the mean NaN (a separate mean gives inf).
    let (v, m) = Tensor::new([f32::INFINITY, 1.0])?.var_mean(0.0)?;
    assert!(v.item::<f32>()?.is_nan() && m.item::<f32>()?.is_nan());
    let x = Tensor::new([[1.0f64, 2.0, 4.0], [0.5, -1.0, 3.0]])?.requires_grad_(true)?;
    let (v, m) = x.var_mean_dim(1, 1.0, false)?;
    assert_eq!(
        (node(&v), node(&m)),
        ("VarMeanBackward0".into(), "VarMeanBackward0".into())
    );
    v.mul(2.0)?.add(&m)?.sum()?.backward()?;
    let want = [-7.0 / 3.0, -1.0 / 3.0, 11.0 / 3.0, -1.0 / 3.0, -10.0 / 3.0, 14.0 / 3.0];
    for (g, w) in x.grad()?.to_vec::<f64>()?.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{g} vs {w}");
    }
    assert_eq!(node(&x.std_mean_dim(0, 0.0, false)?.0), "StdMeanBackward0");
    Ok(())
}

#[test]
fn scans_follow_pytorch_with_nan_inf_and_dtype() -> Result<()> {
    // Every NaN takes its own index in cummax / cummin.
    let nan = f32::NAN;
    assert_eq!(
        Tensor::new([nan, nan, 1.0, nan])?.cummax(0)?.1.to_vec::<i64>()?,
        [0, 1, 1, 3]
    );
    assert_eq!(Tensor::new([2.0, nan, nan])?.cummin(0)?.1.to_vec::<i64>()?, [0, 1, 2]);
    // The reversed cumsum of the backward keeps infinities (no subtraction).
    let x = Tensor::new([2.0f32, f32::INFINITY, 0.5])?.requires_grad_(true)?;
    x.cumprod(0)?.sum()?.backward()?;
    let g = x.grad()?.to_vec::<f32>()?;
    assert!(g[0] == f32::INFINITY && g[1].is_nan() && g[2] == f32::INFINITY, "{g:?}");
    // dtype=: one node whose gradient is computed in the input's dtype.
    let x = Tensor::new([0.3f32, -1.7, 2.2, 0.9])?.requires_grad_(true)?;
    let y = x.cumprod_dtype(0, DType::BF16)?;
    assert_eq!(node(&y), "CumprodBackward0");
    y.sum()?.backward()?;
    let want = [-7.838_541_5f32, 1.560_202_1, -0.973_011_3, -1.128_472_2];
    for (g, w) in x.grad()?.to_vec::<f32>()?.iter().zip(want) {
        assert!((g - w).abs() < 1e-5, "{g} vs {w}");
    }
    // With zeros, PyTorch's first-order formula (the output before the first zero).
    let x = Tensor::new([0.3f32, 0.0, 2.2, 0.9, 0.0, 3.0])?.requires_grad_(true)?;
    x.cumprod_dtype(0, DType::BF16)?.sum()?.backward()?;
    let want = [1.002_604_1f32, 1.558_046_9, 0.0, 0.0, 0.0, 0.0];
    for (g, w) in x.grad()?.to_vec::<f32>()?.iter().zip(want) {
        assert!((g - w).abs() < 1e-5, "{g} vs {w}");
    }
    let rg = Tensor::new([1.0f32, 2.0])?.requires_grad_(true)?;
    assert!(err(rg.cumsum_dtype(0, DType::I64)).contains("Autograd not support dtype: Long"));
    assert!(err(Tensor::new([1.0f32])?.cumsum_dtype(0, DType::Bool)).contains("'Bool'"));
    assert!(Tensor::scalar(1.0f32).cumsum_dtype(0, DType::Bool)?.item::<bool>()?);
    Ok(())
}

#[test]
fn more_reduction_edge_cases() -> Result<()> {
    // mean(dtype=f16) sums in f32 first (casting the input first overflows).
    let m = Tensor::new([70000.0f32, -4.0])?.mean_dtype(DType::F16)?;
    assert_eq!(m.to_dtype(DType::F32)?.item::<f32>()?, 35008.0);
    // diff with n = 0 checks prepend's shape, then ignores it.
    let x = Tensor::ones([2, 3])?;
    assert!(err(x.diff(0, 1, Some(&Tensor::ones([3, 3])?), None)).contains("prepend or append"));
    assert_eq!(x.diff(0, 1, Some(&Tensor::ones([2, 5])?), None)?.shape(), [2, 3]);
    // max() / min() share the gradient among the NaNs when the result is NaN.
    let x = Tensor::new([1.0f32, f32::NAN, 3.0, f32::NAN])?.requires_grad_(true)?;
    x.max()?.backward()?;
    assert_eq!(x.grad()?.to_vec::<f32>()?, [0.0, 0.5, 0.0, 0.5]);
    // kthvalue of a 0-d bool answers before the dtype check.
    assert!(Tensor::scalar(true).kthvalue(1, 0, false)?.0.item::<bool>()?);
    Ok(())
}
