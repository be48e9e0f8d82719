//! The autograd snippets of the seed articles (001 and 003), in Rust, printing
//! what the Python originals print (run by the README's main-job command until
//! the training examples exist). PyTorch 2.15 prints the values in the
//! comments; `tests/autograd.rs` checks the same numbers.

use ferrotorch::{Tensor, autograd};

fn main() -> ferrotorch::Result<()> {
    // Seed 001: z = x^2 + y^3 at x = 2, y = 3: dz/dx = 2x = 4, dz/dy = 3y^2 = 27.
    let x = Tensor::scalar(2.0f32).requires_grad_(true)?;
    let y = Tensor::scalar(3.0f32).requires_grad_(true)?;
    let z = x.pow(2)?.add(&y.pow(3)?)?;
    println!("z = {z}");
    z.backward()?;
    println!("dz/dx = {}", x.grad().unwrap()); // tensor(4.)
    println!("dz/dy = {}", y.grad().unwrap()); // tensor(27.)

    // Seed 003, requires_grad and backward(): x = [2, 3], z = sum(3x).
    let x = Tensor::new([2.0f32, 3.0])?.requires_grad_(true)?;
    let y = x.mul(3.0)?;
    let z = y.sum()?;
    z.backward()?;
    println!("{}", x.grad().unwrap()); // tensor([3., 3.])

    // Seed 003, gradients accumulate until zeroed.
    let x = Tensor::new([1.0f32])?.requires_grad_(true)?;
    x.mul(2.0)?.sum()?.backward()?;
    println!("{}", x.grad().unwrap()); // tensor([2.])
    x.mul(3.0)?.sum()?.backward()?;
    println!("{}", x.grad().unwrap()); // tensor([5.])
    x.grad().unwrap().zero_()?;
    x.mul(4.0)?.sum()?.backward()?;
    println!("{}", x.grad().unwrap()); // tensor([4.])
    // Setting the gradient to None (PyTorch's `x.grad = None`) works too.
    x.set_grad(None)?;
    println!("after x.grad = None: x.grad is None: {}", x.grad_opt().is_none());

    // Seed 003, manual gradient descent on y = 2x + 1, parameters updated under no_grad.
    let w = Tensor::new([0.0f32])?.requires_grad_(true)?;
    let b = Tensor::new([0.0f32])?.requires_grad_(true)?;
    let x_train = Tensor::new([1.0f32, 2.0, 3.0, 4.0])?;
    let y_train = Tensor::new([3.0f32, 5.0, 7.0, 9.0])?;
    for epoch in 0..100 {
        let loss = w.mul(&x_train)?.add(&b)?.sub(&y_train)?.pow(2)?.mean()?;
        loss.backward()?;
        {
            let _no_grad = autograd::no_grad_guard();
            w.sub_(&w.grad().unwrap().mul(0.01)?)?;
            b.sub_(&b.grad().unwrap().mul(0.01)?)?;
        }
        w.grad().unwrap().zero_()?;
        b.grad().unwrap().zero_()?;
        if epoch % 20 == 0 || epoch == 99 {
            println!("epoch {epoch:3}: loss {:.6}", loss.item::<f32>()?);
        }
    }
    // PyTorch: learned model: y = 2.07 x + 0.79
    println!("learned model: y = {:.2} x + {:.2}", w.item::<f32>()?, b.item::<f32>()?);
    Ok(())
}
