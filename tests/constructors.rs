//! Constructors of the op-coverage work: `*_like` preserving a permuted
//! input's layout (PyTorch's `preserve_format`), `new_tensor`,
//! `empty_strided`, and `full`'s range check.

use ferrotorch::{DType, Result, Tensor};

#[test]
fn like_constructors_preserve_a_dense_layout() -> Result<()> {
    let x = Tensor::zeros([2, 3])?.t()?;
    for t in [
        x.zeros_like()?,
        x.ones_like()?,
        x.full_like(2.0)?,
        x.empty_like()?,
        x.rand_like()?,
    ] {
        assert_eq!((t.shape(), t.strides()), (&[3, 2][..], &[1, 3][..]));
    }
    // Strided but not dense (a slice with a step): contiguous, as PyTorch.
    let s = Tensor::zeros([4, 6])?.slice(1, None, None, 2)?;
    assert_eq!(s.zeros_like()?.strides(), &[3, 1]);
    // Expanded: contiguous too.
    let e = Tensor::zeros([2, 1, 3])?.expand([2, 4, 3])?;
    assert_eq!(e.ones_like()?.strides(), &[12, 3, 1]);
    assert_eq!(x.ones_like()?.to_vec::<f32>()?, [1.0; 6]);
    // rand_like of a transposed tensor draws in memory order: the same
    // numbers as rand_like of its contiguous twin, transposed.
    ferrotorch::manual_seed(5);
    let a = x.rand_like()?;
    ferrotorch::manual_seed(5);
    let b = Tensor::zeros([2, 3])?.rand_like()?.t()?;
    assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
    Ok(())
}

#[test]
fn new_tensor_empty_strided_and_full_checks() -> Result<()> {
    let x = Tensor::zeros([2])?.to_dtype(DType::F64)?;
    let n = x.new_tensor(vec![1i64, 2, 3], [3])?;
    assert_eq!((n.dtype(), n.to_vec::<f64>()?), (DType::F64, vec![1.0, 2.0, 3.0]));
    let e = Tensor::empty_strided([2, 3], [1, 2])?;
    assert_eq!((e.shape(), e.strides()), (&[2, 3][..], &[1, 2][..]));
    assert!(Tensor::empty_strided([2, 3], [1]).is_err());
    assert!(Tensor::empty_strided([2, 3], [-1, 1]).is_err());
    let opts = ferrotorch::TensorOptions::new();
    assert!(opts.clone().dtype(DType::U8).full([2], 300).is_err());
    assert!(opts.clone().dtype(DType::F16).full([2], 1e6).is_err());
    assert!(x.full_like(1e300).is_ok());
    assert!(Tensor::zeros([2])?.to_dtype(DType::I32)?.full_like(1i64 << 40).is_err());
    Ok(())
}
