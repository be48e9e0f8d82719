//! The autograd snippets of the seed articles, in Rust (run by the README's
//! main-job command until the training examples exist).

use ferrotorch::{Tensor, autograd};

fn main() -> ferrotorch::Result<()> {
    // z = x^2 + y^3 at x = 2, y = 3: dz/dx = 2x = 4, dz/dy = 3y^2 = 27.
    let x = Tensor::scalar(2.0f32).requires_grad_(true)?;
    let y = Tensor::scalar(3.0f32).requires_grad_(true)?;
    let z = x.pow(2)?.add(&y.pow(3)?)?;
    println!("z = {z}");
    z.backward()?;
    println!("dz/dx = {}", x.grad().unwrap());
    println!("dz/dy = {}", y.grad().unwrap());

    // Gradients accumulate across backward calls until zeroed.
    let w = Tensor::new([1.0f32, 2.0, 3.0])?.requires_grad_(true)?;
    for step in 1..=3 {
        w.mul(2.0)?.sum()?.backward()?;
        println!("after backward {step}: w.grad = {}", w.grad().unwrap());
    }
    w.grad().unwrap().zero_()?;
    println!("after w.grad.zero_(): w.grad = {}", w.grad().unwrap());
    w.set_grad(None)?;
    println!("after w.grad = None: w.grad is None: {}", w.grad().is_none());

    // Fit y = 2x + 1 by gradient descent, updating the parameters under no_grad.
    let xs = Tensor::linspace(-1.0, 1.0, 20)?.unsqueeze(1)?;
    let ys = xs.mul(2.0)?.add(1.0)?;
    let a = Tensor::zeros(&[1])?.requires_grad_(true)?;
    let b = Tensor::zeros(&[1])?.requires_grad_(true)?;
    let lr = 0.5;
    for epoch in 0..200 {
        let pred = xs.mul(&a)?.add(&b)?;
        let loss = pred.sub(&ys)?.pow(2)?.mean()?;
        loss.backward()?;
        {
            let _g = autograd::no_grad();
            a.sub_(&a.grad().unwrap().mul(lr)?)?;
            b.sub_(&b.grad().unwrap().mul(lr)?)?;
            a.grad().unwrap().zero_()?;
            b.grad().unwrap().zero_()?;
        }
        if epoch % 50 == 0 || epoch == 199 {
            println!("epoch {epoch:3}: loss {:.6}", loss.item::<f32>()?);
        }
    }
    println!(
        "learned a = {:.4}, b = {:.4} (target 2, 1)",
        a.item::<f32>()?,
        b.item::<f32>()?
    );
    Ok(())
}
