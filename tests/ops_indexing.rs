//! Shape, indexing and counting ops of the op-coverage work where the
//! differential fuzzer (groups `shape` and `count` of `fuzz/driver.py`)
//! found ferrotorch and PyTorch 2.15 apart; each expected value, node name
//! and error is PyTorch's.

use ferrotorch::{DType, Result, SearchSortedOptions, Tensor};

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
fn repeat_and_tile_copy_and_record_one_node() -> Result<()> {
    let x = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]])?.requires_grad_(true)?;
    // Repeating once still copies (it once returned a view of the input).
    let r = x.detach().repeat([1, 1])?;
    r.add_(10.0)?;
    assert_eq!(x.to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(x.detach().tile([1])?.add_(1.0)?.to_vec::<f32>()?, [2.0, 3.0, 4.0, 5.0]);
    assert_eq!(x.to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0]);
    let r = x.repeat([2, 1, 3])?;
    assert_eq!(node(&r), "RepeatBackward0");
    assert_eq!(node(&x.tile([2])?), "RepeatBackward0");
    r.sum()?.backward()?;
    assert_eq!(x.grad()?.to_vec::<f32>()?, [6.0; 4]);
    // A negative repeat of an empty dim gives 0 elements; elsewhere it is an error.
    assert_eq!(Tensor::zeros([0])?.repeat([-1])?.shape(), [0]);
    assert!(err(Tensor::zeros([2])?.repeat([-1])).contains("negative dimension -2"));
    Ok(())
}

#[test]
fn flip_movedim_and_diag_nodes() -> Result<()> {
    let s = Tensor::scalar(2.0f32).requires_grad_(true)?;
    let f = s.flip([0])?;
    assert_eq!((f.item::<f32>()?, node(&f)), (2.0, "FlipBackward0".to_string()));
    assert_eq!(
        node(&Tensor::ones([0, 1])?.requires_grad_(true)?.flip([1, 0])?),
        "FlipBackward0"
    );
    assert_eq!(node(&s.movedim(0, -1)?), "AliasBackward0");
    let m = Tensor::new([[1.0f64, 2.0], [3.0, 4.0]])?.requires_grad_(true)?;
    let d = m.diag(0)?;
    assert_eq!(node(&d), "DiagonalBackward0_copy");
    d.sum()?.backward()?;
    assert_eq!(m.grad()?.to_vec::<f64>()?, [1.0, 0.0, 0.0, 1.0]);
    Ok(())
}

#[test]
fn kernel_results_are_not_views() -> Result<()> {
    // take and tile used to return a reshape of a temporary: an in-place op
    // on the result then recorded a view write (AsStridedBackward0).
    let x = Tensor::new([[1.5f32]])?.requires_grad_(true)?;
    let t = x.take(&Tensor::new([0i64, 0, 0])?)?;
    t.mul_(2.0)?;
    assert_eq!(node(&t), "MulBackward0");
    t.sum()?.backward()?;
    assert_eq!(x.grad()?.to_vec::<f32>()?, [6.0]);
    let y = Tensor::scalar(1.0f32).requires_grad_(true)?;
    let r = y.tile([2, 2])?;
    r.index_fill_(0, &Tensor::new([0i64])?, 0.0)?;
    assert_eq!(node(&r), "IndexFillBackward0");
    Ok(())
}

#[test]
fn take_and_take_along_dim_follow_pytorch() -> Result<()> {
    let x = Tensor::arange(10)?.to_dtype(DType::F32)?.reshape([2, 5])?;
    assert!(err(x.take(&Tensor::new([1i32])?)).contains("Expected a long tensor for index"));
    // PyTorch 2.15 wraps the indices of take_along_dim with a dim into range.
    let r = x.take_along_dim(&Tensor::new([[7i64], [-13]])?, Some(1))?;
    assert_eq!(r.to_vec::<f32>()?, [2.0, 7.0]);
    assert!(err(x.take_along_dim(&Tensor::new([[1i32]])?, Some(1))).contains("should be Long"));
    assert!(err(Tensor::scalar(3.0f32).take_along_dim(&Tensor::scalar(0i64), Some(0))).contains("no dimensions"));
    // Without a dim both are viewed flat: an error for a transposed input.
    assert!(x.t()?.take_along_dim(&Tensor::new([1i64])?, None).is_err());
    Ok(())
}

#[test]
fn index_add_copy_fill_check_as_pytorch() -> Result<()> {
    // Source shape must match self's outside dim: a 0-d self takes a 0-d source only.
    let s = Tensor::scalar(1.0f64);
    assert!(err(s.index_add(0, &Tensor::new([0i32])?, &Tensor::new([2.0f64])?, 1)).contains("source tensor shape"));
    // An empty self (two or more dims) is left alone: no index or alpha check.
    let e = Tensor::zeros([0, 1])?.to_dtype(DType::I32)?;
    let src = Tensor::zeros([3, 1])?.to_dtype(DType::I32)?;
    e.index_add_(0, &Tensor::new([0i64, 0, 0])?, &src, f64::INFINITY)?;
    // A 1-d self converts alpha first (and fails).
    let one = Tensor::zeros([2])?.to_dtype(DType::I32)?;
    let src1 = Tensor::zeros([1])?.to_dtype(DType::I32)?;
    assert!(err(one.index_add(0, &Tensor::new([0i64])?, &src1, f64::INFINITY)).contains("without overflow"));
    // Two or more dims: PyTorch's add, alpha * source fused with the sum.
    let x = Tensor::new([[-3.5f32, 1.0]])?;
    let src = Tensor::new([[3.5f32, 1.0], [-2.5, 1.0]])?;
    let r = x.index_add(0, &Tensor::new([0i32, 0])?, &src, 3e38)?;
    assert_eq!(r.to_vec::<f32>()?, [f32::INFINITY, f32::INFINITY]);
    // One dim: PyTorch's loop, the product rounded first.
    let r = Tensor::new([-3.5f32])?.index_add(0, &Tensor::new([0i64, 0])?, &Tensor::new([3.5f32, -2.5])?, 3e38)?;
    assert!(r.item::<f32>()?.is_nan());
    // bf16 runs shorter than a vector step round alpha * source to bf16.
    let xb = Tensor::full([2, 4], -2.890625)?.to_dtype(DType::BF16)?;
    let sb = Tensor::full([1, 4], 0.37109375)?.to_dtype(DType::BF16)?;
    let r = xb.index_add(0, &Tensor::new([1i64])?, &sb, -1.5)?.select(0, 1)?;
    assert_eq!(r.to_dtype(DType::F32)?.to_vec::<f32>()?, [-3.4375; 4]);
    // index_copy and index_fill take int64 indices only.
    let v = Tensor::new([1.0f32, 2.0])?;
    assert!(err(v.index_copy(0, &Tensor::new([0i32])?, &Tensor::new([5.0f32])?)).contains("long tensor"));
    assert!(err(v.index_fill(0, &Tensor::new([0i32])?, 5.0)).contains("int64"));
    // A 1-d self takes a 0-d source for one index.
    assert_eq!(
        v.index_copy(0, &Tensor::new([1i64])?, &Tensor::scalar(9.0f32))?
            .to_vec::<f32>()?,
        [1.0, 9.0]
    );
    // index_fill_ of an expanded tensor writes through the aliases (PyTorch warns).
    let b = Tensor::new([[1.0f32], [2.0]])?;
    b.expand([2, 3])?.index_fill_(1, &Tensor::new([0i64])?, 7.0)?;
    assert_eq!(b.to_vec::<f32>()?, [7.0, 7.0]);
    Ok(())
}

#[test]
fn masked_scatter_broadcasts_self() -> Result<()> {
    let x = Tensor::scalar(2.0f32).requires_grad_(true)?;
    let mask = Tensor::new([false, true])?;
    let r = x.masked_scatter(&mask, &Tensor::new([[[-1.5f32]]])?)?;
    assert_eq!(r.to_vec::<f32>()?, [2.0, -1.5]);
    r.sum()?.backward()?;
    assert_eq!(x.grad()?.item::<f32>()?, 1.0);
    Ok(())
}

#[test]
fn repeat_interleave_and_nonzero_as_pytorch() -> Result<()> {
    let v = Tensor::new([1i64, 2, 3])?;
    let r = v.repeat_interleave_tensor(&Tensor::new([2u8, 0, 1])?, None)?;
    assert_eq!(r.to_vec::<i64>()?, [1, 1, 3]);
    let s = Tensor::scalar(1.0f32);
    assert!(err(s.repeat_interleave(2, Some(0))).contains("out of range"));
    assert!(err(s.repeat_interleave_tensor(&Tensor::new([2i64])?, Some(0))).contains("no dimensions"));
    let g = Tensor::ones([2])?.requires_grad_(true)?.repeat_interleave(2, None)?;
    assert_eq!(node(&g), "ViewBackward0");
    // nonzero is column-major, as PyTorch's.
    let nz = Tensor::new([[1i64, 0], [1, 1]])?.nonzero()?;
    assert_eq!(
        (nz.shape(), nz.strides()),
        ([3usize, 2].as_slice(), [1usize, 3].as_slice())
    );
    assert_eq!(nz.to_vec::<i64>()?, [0, 0, 1, 0, 1, 1]);
    Ok(())
}

#[test]
fn counting_ops_as_pytorch() -> Result<()> {
    let b = Tensor::new([false, true])?;
    assert!(err(b.searchsorted(&Tensor::new([true])?, false)).contains("not implemented for 'Bool'"));
    // An empty input returns before the dtype dispatch.
    assert_eq!(
        b.searchsorted(&Tensor::zeros([0])?.to_dtype(DType::Bool)?, false)?
            .shape(),
        [0]
    );
    let seq = Tensor::new([3.0f32, 1.0, 2.0])?;
    let sorter = Tensor::new([1i32, 2, 0])?;
    let opts = SearchSortedOptions {
        sorter: Some(&sorter),
        ..Default::default()
    };
    assert!(err(seq.searchsorted_with(&Tensor::new([2.5f32])?, opts)).contains("long dtype"));
    assert_eq!(
        Tensor::new([1.0f32, 5.0])?
            .bucketize_with(&seq.sort(0, false)?.0, false, true)?
            .dtype(),
        DType::I32
    );
    // bincount of an empty input: int64 zeros whatever the weights.
    let e = Tensor::zeros([0])?.to_dtype(DType::I64)?;
    let z = e.bincount(Some(&Tensor::ones([5])?), 3)?;
    assert_eq!((z.dtype(), z.to_vec::<i64>()?), (DType::I64, vec![0, 0, 0]));
    assert!(err(Tensor::new([i64::MAX])?.bincount(None, 0)).contains("overflowed"));
    // histc: equal data widened to the neighbouring floats; 16-bit inputs.
    assert_eq!(
        Tensor::new([3e38f32, 3e38])?.histc(2, 0.0, 0.0)?.to_vec::<f32>()?,
        [0.0, 2.0]
    );
    let h = Tensor::new([1.0f32, 2.0, 3.0])?
        .to_dtype(DType::F16)?
        .histc(4, 0.0, 4.0)?;
    assert_eq!((h.dtype(), h.to_vec::<f32>()?), (DType::F16, vec![0.0, 1.0, 1.0, 1.0]));
    // Elements whose bin index overflows land in bin 0, as in PyTorch.
    let h = Tensor::new([-1.6f32, 4.5, 70000.0, -3e38])?.histc(4, 1.0, 1.0)?;
    assert_eq!(h.to_vec::<f32>()?, [4.0, 0.0, 0.0, 0.0]);
    assert!(err(Tensor::new([1.0f32, f32::NAN])?.histc(2, 0.0, 0.0)).contains("not finite"));
    assert!(err(Tensor::new([1.0f32])?.to_dtype(DType::F16)?.histc(2, 0.0, 7e4)).contains("without overflow"));
    Ok(())
}

#[test]
fn unfold_of_a_scalar() -> Result<()> {
    let s = Tensor::scalar(1.0f32).requires_grad_(true)?;
    assert!(err(s.unfold(2, 0, 1)).contains("out of range"));
    let w = s.unfold(-1, 0, 1)?;
    assert_eq!(w.shape(), [0]);
    w.sum()?.backward()?;
    assert_eq!(s.grad()?.item::<f32>()?, 0.0);
    Ok(())
}
