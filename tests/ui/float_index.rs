// An index is an integer, a range, a tensor, NewAxis or Ellipsis, never a
// float (PyTorch raises IndexError at run time; here it does not compile).
use ferrotorch::Tensor;

fn main() -> ferrotorch::Result<()> {
    let x = Tensor::arange(4)?;
    let _ = x.i(1.5)?;
    Ok(())
}
