// `x.grad()` may have no gradient to give (PyTorch's None): it is a Result,
// so using it as a tensor without `?` does not compile.
use ferrotorch::Tensor;

fn main() -> ferrotorch::Result<()> {
    let x = Tensor::ones(2)?.requires_grad_(true)?;
    x.sum()?.backward()?;
    let g: Tensor = x.grad();
    println!("{g}");
    Ok(())
}
