//! Edge cases where ferrotorch once disagreed with PyTorch 2.15, each with
//! PyTorch's result (computed with the bench venv's torch 2.15.0, CPU):
//! version-counter checks on tensors a gradient does not read, grad_fn
//! names of composite reductions, gradients at singular points, and
//! half-precision reductions that accumulate in f32.

use ferrotorch::{DType, Result, Tensor};

fn leaf(v: &[f32], shape: &[usize]) -> Result<Tensor> {
    Tensor::from_vec(v.to_vec(), shape)?.requires_grad_(true)
}

fn grad_of(t: &Tensor) -> Vec<f32> {
    t.grad().expect("a gradient").to_vec::<f32>().unwrap()
}

/// `y = a * c; a.mul_(0); y.sum().backward()` works in PyTorch when `c`
/// does not require grad: a's gradient reads only `c`, so `a` is not saved.
#[test]
fn in_place_change_of_an_unread_input_does_not_fail_backward() -> Result<()> {
    let x = leaf(&[1.0, 2.0], &[2])?;
    let a = x.mul(1.0)?;
    let c = Tensor::from_slice(&[3.0f32, 4.0]);
    let y = a.mul(&c)?;
    a.mul_(0.0)?;
    y.sum()?.backward()?;
    // PyTorch: tensor([3., 4.]) (y's graph holds a's history before the write).
    assert_eq!(grad_of(&x), [3.0, 4.0]);

    // The other way round: a requires grad, c is modified (c is read).
    let a = leaf(&[1.0, 2.0], &[2])?;
    let c = Tensor::from_slice(&[3.0f32, 4.0]);
    let y = a.mul(&c)?;
    c.mul_(0.0)?;
    let e = y.sum()?.backward().unwrap_err().to_string();
    assert!(e.contains("modified by an inplace operation"), "{e}");

    // a * scalar, a / c with only a requiring grad, matmul with one side.
    let a = leaf(&[1.0, 2.0], &[2])?;
    let y = a.mul(2.0)?;
    a.detach().add_(1.0)?;
    y.sum()?.backward()?;
    assert_eq!(grad_of(&a), [2.0, 2.0]);

    let a = leaf(&[1.0, 2.0], &[2])?;
    let c = Tensor::from_slice(&[4.0f32, 8.0]);
    let y = a.div(&c)?;
    a.detach().mul_(3.0)?;
    y.sum()?.backward()?;
    assert_eq!(grad_of(&a), [0.25, 0.125]);

    let w = leaf(&[1.0, 2.0, 3.0, 4.0], &[2, 2])?;
    let x = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], &[2, 2])?;
    let y = x.matmul(&w)?;
    w.detach().zero_()?;
    y.sum()?.backward()?;
    assert_eq!(grad_of(&w), [1.0, 1.0, 1.0, 1.0]);
    Ok(())
}

#[test]
fn composite_reductions_have_pytorch_node_names() -> Result<()> {
    let x = leaf(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    let name = |t: Tensor| t.grad_fn().unwrap().name().to_string();
    assert_eq!(name(x.mean()?), "MeanBackward0");
    assert_eq!(name(x.mean_dim(1, false)?), "MeanBackward1");
    assert_eq!(name(x.var(1.0)?), "VarBackward0");
    assert_eq!(name(x.var_dim(Some(vec![1]), 1.0, false)?), "VarBackward0");
    assert_eq!(name(x.std(1.0)?), "StdBackward0");
    assert_eq!(name(x.std_dim(Some(vec![1]), 1.0, false)?), "StdBackward0");
    assert_eq!(name(x.norm(2.0)?), "LinalgVectorNormBackward0");
    assert_eq!(
        name(x.norm_dim(3.0, Some(vec![1]), false)?),
        "LinalgVectorNormBackward0"
    );
    assert_eq!(name(x.logsumexp(1, false)?), "LogsumexpBackward0");
    assert_eq!(name(x.to_dtype(DType::F16)?.mean()?), "MeanBackward0");
    Ok(())
}

#[test]
fn gradients_at_singular_points_follow_pytorch() -> Result<()> {
    // torch.zeros(3).norm().backward() -> [0, 0, 0] (not NaN).
    let x = leaf(&[0.0, 0.0, 0.0], &[3])?;
    x.norm(2.0)?.backward()?;
    assert_eq!(grad_of(&x), [0.0, 0.0, 0.0]);
    let x = leaf(&[0.0, 0.0, 0.0, 1.0, 2.0, 2.0], &[2, 3])?;
    x.norm_dim(3.0, Some(vec![1]), false)?.sum()?.backward()?;
    let g = grad_of(&x);
    assert_eq!(&g[..3], &[0.0, 0.0, 0.0]);
    // Row 2: x * |x| / norm^2 with norm = 17^(1/3).
    let n2 = 17f32.powf(2.0 / 3.0);
    for (got, want) in g[3..].iter().zip([1.0 / n2, 4.0 / n2, 4.0 / n2]) {
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }
    // ones(2, 3).std(1).sum().backward() -> zeros; var likewise.
    let x = leaf(&[1.0; 6], &[2, 3])?;
    x.std_dim(Some(vec![1]), 1.0, false)?.sum()?.backward()?;
    assert_eq!(grad_of(&x), [0.0; 6]);
    let x = leaf(&[1.0; 6], &[2, 3])?;
    x.std(1.0)?.backward()?;
    assert_eq!(grad_of(&x), [0.0; 6]);
    // ones(1).var() (no degrees of freedom) -> NaN, as PyTorch's var_backward.
    let x = leaf(&[1.0], &[1])?;
    x.var(1.0)?.backward()?;
    assert!(grad_of(&x)[0].is_nan());
    // inf-norm: the gradient goes to the maximum.
    let x = leaf(&[0.0, 1.0, 2.0, 3.0], &[4])?;
    x.norm(f64::INFINITY)?.backward()?;
    assert_eq!(grad_of(&x), [0.0, 0.0, 0.0, 1.0]);
    Ok(())
}

/// PyTorch 2.15's clamp passes the gradient strictly inside the bounds.
#[test]
fn clamp_gradient_at_the_bounds() -> Result<()> {
    let x = leaf(&[0.0, 1.0, 2.0, 3.0], &[4])?;
    x.clamp(Some(1.0), Some(2.0))?.sum()?.backward()?;
    assert_eq!(grad_of(&x), [0.0, 0.0, 0.0, 0.0]);
    let x = leaf(&[0.0, 1.0, 2.0, 3.0], &[4])?;
    x.clamp_min(1.0)?.sum()?.backward()?;
    assert_eq!(grad_of(&x), [0.0, 0.0, 1.0, 1.0]);
    let x = leaf(&[0.0, 1.0, 2.0, 3.0], &[4])?;
    x.clamp(Some(2.0), Some(1.0))?.sum()?.backward()?;
    assert_eq!(grad_of(&x), [0.0, 0.0, 0.0, 0.0]);
    Ok(())
}

/// Half-precision mean and norm accumulate in f32 (PyTorch: cast to f32,
/// sum, divide, cast back), so a sum that overflows f16 does not matter.
#[test]
fn half_reductions_accumulate_in_f32() -> Result<()> {
    for dt in [DType::F16, DType::BF16] {
        let x = Tensor::full(&[300, 300], 60000.0)?.to_dtype(dt)?;
        assert_eq!(x.mean()?.dtype(), dt);
        let m = x.mean()?.to_dtype(DType::F32)?.item::<f32>()?;
        let want = Tensor::scalar(60000.0f32).to_dtype(dt)?.item::<f32>()?;
        assert_eq!(m, want, "{dt}");
        // 70000 ones: the sum of squares overflows f16, the norm (264.575) does not.
        let ones = Tensor::ones(&[70000])?.to_dtype(dt)?;
        let n = ones.norm(2.0)?.to_dtype(DType::F32)?.item::<f32>()?;
        let want = Tensor::scalar(70000f32.sqrt()).to_dtype(dt)?.item::<f32>()?;
        assert_eq!(n, want, "{dt}");
        let v = x.var(1.0)?.to_dtype(DType::F32)?.item::<f32>()?;
        assert_eq!(v, 0.0, "{dt}");
    }
    Ok(())
}
