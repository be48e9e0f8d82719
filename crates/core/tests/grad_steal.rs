//! AccumulateGrad takes an incoming gradient as the leaf's `.grad` without
//! a copy only when nothing else can see it: these cases must still give
//! independent, writable gradients laid out as their leaves.

use ferrotorch_core::autograd::{BackwardOptions, no_grad};
use ferrotorch_core::profiler;
use ferrotorch_core::{Result, Tensor};

#[test]
fn a_gradient_reaching_two_leaves_or_the_caller_is_copied() -> Result<()> {
    let x = Tensor::zeros([3])?.requires_grad_(true)?;
    let w = Tensor::zeros([3])?.requires_grad_(true)?;
    let t = Tensor::new(vec![1.0f32, 2.0, 3.0])?;
    // AddBackward passes `t` itself on to both leaves.
    x.add(&w)?.backward_opts(BackwardOptions {
        gradient: Some(&t),
        ..Default::default()
    })?;
    no_grad(|| x.grad()?.add_(10.0))?;
    assert_eq!(x.grad()?.to_vec::<f32>()?, [11.0, 12.0, 13.0]);
    assert_eq!(w.grad()?.to_vec::<f32>()?, [1.0, 2.0, 3.0], "w's gradient shared x's");
    assert_eq!(t.to_vec::<f32>()?, [1.0, 2.0, 3.0], "the caller's gradient was written");
    Ok(())
}

#[test]
fn an_expanded_gradient_becomes_a_dense_copy() -> Result<()> {
    let x = Tensor::zeros([4])?.requires_grad_(true)?;
    // SumBackward's gradient is a stride-0 expansion; AddBackward passes it on.
    x.add(1.0)?.sum()?.backward()?;
    let g = x.grad()?;
    assert_eq!(g.strides(), x.strides());
    no_grad(|| g.add_(1.0))?;
    assert_eq!(x.grad()?.to_vec::<f32>()?, [2.0; 4]);
    Ok(())
}

#[test]
fn a_fresh_gradient_is_taken_and_later_ones_accumulate_in_place() -> Result<()> {
    let x = Tensor::new(vec![1.0f32, 2.0])?.requires_grad_(true)?;
    x.mul(&x)?.sum()?.backward()?;
    assert_eq!(x.grad()?.to_vec::<f32>()?, [2.0, 4.0]);
    let first = x.grad()?;
    x.mul(3.0)?.sum()?.backward()?;
    // Accumulated into the same tensor, as PyTorch does without create_graph.
    assert_eq!(first.to_vec::<f32>()?, [5.0, 7.0]);
    assert_eq!(x.grad()?.to_vec::<f32>()?, [5.0, 7.0]);
    Ok(())
}

/// A Linear's weight gradient arrives as the transpose of a transposed
/// product (a view whose base nothing else holds), its bias gradient as a
/// fresh sum: both are taken without a copy, and stay correct and writable.
#[test]
fn a_linear_layers_gradients_are_taken_without_a_copy() -> Result<()> {
    let w = Tensor::randn([5, 3])?.requires_grad_(true)?;
    let b = Tensor::randn([5])?.requires_grad_(true)?;
    let x = Tensor::randn([4, 3])?;
    let ((), prof) = profiler::profile(Default::default(), || b.addmm(&x, &w.t()?, 1.0, 1.0)?.sum()?.backward())?;
    let copies: Vec<&str> = prof
        .events()
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| n.contains("copy") || n.contains("clone"))
        .collect();
    assert!(copies.is_empty(), "the gradients were copied: {copies:?}");
    let (gw, gb) = (w.grad()?, b.grad()?);
    assert_eq!(gw.strides(), w.strides());
    let want = x.sum_dim([0], true)?.expand([5, 3])?.to_vec::<f32>()?;
    assert_eq!(gw.to_vec::<f32>()?, want);
    assert_eq!(gb.to_vec::<f32>()?, [4.0; 5]);
    no_grad(|| gw.add_(1.0))?;
    assert_eq!(
        w.grad()?.to_vec::<f32>()?,
        want.iter().map(|v| v + 1.0).collect::<Vec<_>>()
    );
    Ok(())
}

/// A gradient that is a view of a tensor someone else still holds (here a
/// hook keeps the base) is copied: writing the leaf's `.grad` leaves the
/// held tensor as it was.
#[test]
fn a_view_of_a_held_gradient_is_copied() -> Result<()> {
    let x = Tensor::zeros([2, 3])?.requires_grad_(true)?;
    let kept = std::sync::Arc::new(std::sync::Mutex::new(None::<Tensor>));
    let k = kept.clone();
    let _h = x.register_hook(move |g| {
        // The transpose of a transposed copy: a view of `base`, laid out as x.
        let base = g.t().ok()?.contiguous().ok()?;
        let view = base.t().ok()?;
        *k.lock().unwrap() = Some(base);
        Some(view)
    })?;
    x.mul(2.0)?.sum()?.backward()?;
    no_grad(|| x.grad()?.add_(1.0))?;
    assert_eq!(x.grad()?.to_vec::<f32>()?, [3.0; 6]);
    let base = kept.lock().unwrap().take().unwrap();
    assert_eq!(base.to_vec::<f32>()?, [2.0; 6], "the hook's tensor was written");
    Ok(())
}
