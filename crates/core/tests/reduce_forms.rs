//! Reductions against values computed here by plain loops: every form the
//! dims argument takes, and the CPU fold's chunked path over strided
//! multi-dimensional regions (one output reducing more than one chunk,
//! 16,384 elements, whose rows do not divide the chunk).

use ferrotorch_core::{IntoShape, Result, Tensor, TensorIndex as I};

/// `x[i, j, k] = 12 i + 4 j + k` for shape `[2, 3, 4]`.
fn arange_234() -> Result<Tensor> {
    Tensor::arange_step(0.0, 24.0, 1.0)?.reshape([2, 3, 4])
}

/// Sum of `12 i + 4 j + k` over `i` and `k`, for each `j`.
fn sum_over_0_2() -> Vec<f32> {
    (0..3)
        .map(|j| {
            let mut s = 0.0;
            for i in 0..2 {
                for k in 0..4 {
                    s += (12 * i + 4 * j + k) as f32;
                }
            }
            s
        })
        .collect()
}

fn check_dims_form(dims: impl IntoShape + Copy) -> Result<()> {
    let x = arange_234()?;
    let want = sum_over_0_2();
    let s = x.sum_dim(dims, false)?;
    assert_eq!(s.shape(), [3]);
    assert_eq!(s.to_vec::<f32>()?, want);
    let k = x.sum_dim(dims, true)?;
    assert_eq!(k.shape(), [1, 3, 1]);
    assert_eq!(k.to_vec::<f32>()?, want);
    let m = x.mean_dim(dims, false)?;
    assert_eq!(m.to_vec::<f32>()?, want.iter().map(|v| v / 8.0).collect::<Vec<_>>());
    // amax over i and k is at i = 1, k = 3; amin at i = 0, k = 0.
    assert_eq!(x.amax(dims, false)?.to_vec::<f32>()?, [15.0, 19.0, 23.0]);
    assert_eq!(x.amin(dims, false)?.to_vec::<f32>()?, [0.0, 4.0, 8.0]);
    Ok(())
}

#[test]
fn every_dims_form_reduces_the_named_dims() -> Result<()> {
    check_dims_form([0i64, 2])?;
    check_dims_form([0i64, -1])?;
    // The `&[i64; N]` form itself, which clippy would turn into `[i64; N]`.
    #[allow(clippy::needless_borrows_for_generic_args)]
    check_dims_form(&[0i64, 2])?;
    check_dims_form(&[2i64, 0][..])?;
    let v: Vec<i64> = vec![-3, 2];
    assert_eq!(v.clone().into_shape().to_vec(), [-3, 2]);
    let x = arange_234()?;
    assert_eq!(x.sum_dim(v, false)?.to_vec::<f32>()?, sum_over_0_2());
    // One dim, as i64, i32 and usize: sum over j.
    let want: Vec<f32> = (0..2)
        .flat_map(|i| (0..4).map(move |k| (0..3).map(|j| (12 * i + 4 * j + k) as f32).sum::<f32>()))
        .collect();
    assert_eq!(x.sum_dim(1i64, false)?.to_vec::<f32>()?, want);
    assert_eq!(x.sum_dim(1i32, false)?.to_vec::<f32>()?, want);
    assert_eq!(x.sum_dim(1usize, false)?.to_vec::<f32>()?, want);
    assert_eq!(x.sum_dim(-2i64, false)?.to_vec::<f32>()?, want);
    assert_eq!(1usize.into_shape().to_vec(), [1]);
    assert_eq!((-2i32).into_shape().to_vec(), [-2]);
    assert_eq!([3i64, 1, 2].into_shape().to_vec(), [3, 1, 2]);
    assert_eq!((&[3i64, 1]).into_shape().to_vec(), [3, 1]);
    // An empty list reduces everything (sum) and nothing for amax's
    // explicit empty list is an error-free full reduction too.
    assert_eq!(x.sum_dim([0i64; 0], false)?.item::<f32>()?, 276.0);
    Ok(())
}

/// Reference sum of `x` (given by its values as f64) over dims 1 and 2.
fn reference_sum_12(v: &[f64], shape: [usize; 3]) -> Vec<f64> {
    (0..shape[0])
        .map(|a| {
            let mut s = 0.0;
            for b in 0..shape[1] {
                for c in 0..shape[2] {
                    s += v[(a * shape[1] + b) * shape[2] + c];
                }
            }
            s
        })
        .collect()
}

/// Checks sums, amax and amin over dims 1 and 2 of `x` (`[2, R, C]`)
/// against plain loops over its values.
fn check_sums_12(x: &Tensor) -> Result<()> {
    let shape = [x.shape()[0], x.shape()[1], x.shape()[2]];
    let values = x.contiguous()?.to_vec::<f64>()?;
    let want = reference_sum_12(&values, shape);
    assert_eq!(x.sum_dim([1i64, 2], false)?.to_vec::<f64>()?, want);
    // The same region through a permutation (reduced dims not innermost)
    // and transposed inside the reduced region.
    assert_eq!(x.permute([1, 2, 0])?.sum_dim([0i64, 1], false)?.to_vec::<f64>()?, want);
    assert_eq!(x.transpose(1, 2)?.sum_dim([1i64, 2], false)?.to_vec::<f64>()?, want);
    // Integer sums take the same path.
    let wi: Vec<i64> = want.iter().map(|&s| s as i64).collect();
    assert_eq!(
        x.to_dtype(ferrotorch_core::DType::I64)?
            .sum_dim([1i64, 2], false)?
            .to_vec::<i64>()?,
        wi
    );
    let per = shape[1] * shape[2];
    let max: Vec<f64> = values
        .chunks(per)
        .map(|c| c.iter().copied().fold(f64::MIN, f64::max))
        .collect();
    let min: Vec<f64> = values
        .chunks(per)
        .map(|c| c.iter().copied().fold(f64::MAX, f64::min))
        .collect();
    assert_eq!(x.amax([1i64, 2], false)?.to_vec::<f64>()?, max);
    assert_eq!(x.amin([-1i64, -2], false)?.to_vec::<f64>()?, min);
    Ok(())
}

#[test]
fn chunked_folds_over_strided_regions() -> Result<()> {
    // Each output reduces 130 x 150 = 19,500 elements (more than a chunk of
    // 16,384, which is not a multiple of the row length 150, so the second
    // chunk starts mid-row) over a region that does not coalesce into one
    // run. Values differ from row to row (the skipped rows too) and are
    // small integers, so every sum is exact in f64.
    let value = |i: usize| ((i * 5 + i / 300 + i / 7919) % 11) as f64;
    // Every second row: rows are contiguous runs, 600 apart.
    let base: Vec<f64> = (0..2 * 260 * 150).map(value).collect();
    let base = Tensor::from_slice(&base).reshape([2, 260, 150])?;
    let rows = base.get(&[I::full(), I::slice(Some(0), None, 2), I::full()])?;
    assert_eq!(rows.shape(), [2, 130, 150]);
    check_sums_12(&rows)?;
    // Every second row and column: strided runs (gathered), rows 1,200 apart.
    let base: Vec<f64> = (0..2 * 260 * 300).map(value).collect();
    let base = Tensor::from_slice(&base).reshape([2, 260, 300])?;
    let both = base.get(&[I::full(), I::slice(Some(0), None, 2), I::slice(Some(1), None, 2)])?;
    assert_eq!(both.shape(), [2, 130, 150]);
    check_sums_12(&both)?;
    // A reduced region inside a bigger strided tensor, one dim kept between.
    let base: Vec<f64> = (0..3 * 140 * 4 * 160).map(value).collect();
    let base = Tensor::from_slice(&base).reshape([3, 140, 4, 160])?;
    let mid = base.get(&[
        I::full(),
        I::slice(Some(3), None, 1),
        I::Int(2),
        I::slice(None, Some(150), 1),
    ])?;
    assert_eq!(mid.shape(), [3, 137, 150]);
    check_sums_12(&mid)?;
    Ok(())
}
