//! AccumulateGrad takes an incoming gradient as the leaf's `.grad` without
//! a copy only when nothing else can see it: these cases must still give
//! independent, writable gradients laid out as their leaves.

use ferrotorch_core::autograd::{BackwardOptions, no_grad};
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
