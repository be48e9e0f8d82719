//! A tour of the tensor core: creation, views, broadcasting, reductions,
//! matmul, indexing, devices. Run with `cargo run --release --example basics`.

#[path = "common/report.rs"]
mod report;

use ferrotorch::{DType, Device, Tensor, TensorOptions, manual_seed};

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => report::fail(&e),
    }
}

fn run() -> ferrotorch::Result<()> {
    manual_seed(0);
    let x = Tensor::new([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]])?;
    println!("x =\n{x}");
    println!("x.t() (a view, no copy) =\n{}", x.t()?);
    println!(
        "x + [10, 20, 30] (broadcast) =\n{}",
        &x + Tensor::new([10.0f32, 20.0, 30.0])?
    );
    println!("x.sum(dim=1) = {}", x.sum_dim(1, false)?);
    println!("x.mean() = {}", x.mean()?);
    println!("x.softmax(-1) =\n{}", x.softmax(-1)?);
    println!("x @ x.T =\n{}", x.matmul(&x.t()?)?);
    let (vals, idx) = x.max_dim(1, false)?;
    println!("max over dim 1: values {vals}, indices {idx}");
    println!("x[:, 1:] =\n{}", x.i((.., 1..))?);
    println!("x[x > 2] = {}", x.i(&x.gt(2)?)?);
    println!(
        "arange(6).view(2, 3).to(float64) =\n{}",
        Tensor::arange(6)?.view((2, 3))?.to_dtype(DType::F64)?
    );
    println!("torch.manual_seed(0); torch.rand(3) = {}", Tensor::rand(3)?);
    let meta = TensorOptions::new().device(Device::Meta).randn((4096, 4096))?;
    println!("a meta tensor (shape only): {}", meta.matmul(&meta)?);
    // The operators panic on bad input; their methods return the error.
    match x.add(&Tensor::ones(4)?) {
        Ok(_) => println!("unexpected success"),
        Err(e) => println!("shape errors name the op and both shapes: {e}"),
    }
    Ok(())
}
