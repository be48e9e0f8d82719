//! PyTorch's first autograd examples (from the articles this project
//! follows), in Rust, written line by line as the Python reads and printing
//! what the Python prints (run by the README's main-job command until the
//! training examples exist). PyTorch 2.15's output is in the comments;
//! `tests/idioms.rs` checks the same lines.

#[path = "common/report.rs"]
mod report;

use ferrotorch::{Tensor, no_grad};

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => report::fail(&e),
    }
}

fn run() -> ferrotorch::Result<()> {
    // x = torch.tensor(2.0, requires_grad=True); y = torch.tensor(3.0, requires_grad=True)
    let x = Tensor::new(2.0f32)?.requires_grad_(true)?;
    let y = Tensor::new(3.0f32)?.requires_grad_(true)?;
    // z = x ** 2 + y ** 3; z.backward()
    let z = x.pow(2)? + y.pow(3)?;
    println!("z = {z}"); // tensor(31., grad_fn=<AddBackward0>)
    z.backward()?;
    println!("dz/dx = {}", x.grad()?); // tensor(4.)
    println!("dz/dy = {}", y.grad()?); // tensor(27.)

    // x = torch.tensor([2.0, 3.0], requires_grad=True); y = x * 3; y.sum().backward()
    let x = Tensor::new([2.0f32, 3.0])?.requires_grad_(true)?;
    let y = &x * 3;
    y.sum()?.backward()?;
    println!("{}", x.grad()?); // tensor([3., 3.])

    // Gradients accumulate until zeroed.
    let x = Tensor::new([1.0f32])?.requires_grad_(true)?;
    (&x * 2).sum()?.backward()?;
    println!("{}", x.grad()?); // tensor([2.])
    (&x * 3).sum()?.backward()?;
    println!("{}", x.grad()?); // tensor([5.])
    x.grad()?.zero_()?;
    (&x * 4).sum()?.backward()?;
    println!("{}", x.grad()?); // tensor([4.])
    // x.grad = None
    x.set_grad(None)?;
    println!("after x.grad = None: x.grad is None: {}", x.grad_opt().is_none());

    // Manual gradient descent on y = 2x + 1, parameters updated under no_grad.
    let mut w = Tensor::new([0.0f32])?.requires_grad_(true)?;
    let mut b = Tensor::new([0.0f32])?.requires_grad_(true)?;
    let x_train = Tensor::new([1.0f32, 2.0, 3.0, 4.0])?;
    let y_train = Tensor::new([3.0f32, 5.0, 7.0, 9.0])?;
    for epoch in 0..100 {
        // loss = ((w * x_train + b - y_train) ** 2).mean(); loss.backward()
        let loss = (&w * &x_train + &b - &y_train).pow(2)?.mean()?;
        loss.backward()?;
        // with torch.no_grad(): w -= 0.01 * w.grad; b -= 0.01 * b.grad
        no_grad! {
            w -= 0.01 * w.grad()?;
            b -= 0.01 * b.grad()?;
        }
        w.grad()?.zero_()?;
        b.grad()?.zero_()?;
        if epoch % 20 == 0 || epoch == 99 {
            println!("epoch {epoch:3}: loss {:.6}", loss.item::<f32>()?);
        }
    }
    // PyTorch: learned model: y = 2.07 x + 0.79
    println!("learned model: y = {:.2} x + {:.2}", w.item::<f32>()?, b.item::<f32>()?);
    Ok(())
}
