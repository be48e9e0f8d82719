// Data comes out only as an element type a tensor can hold.
use ferrotorch::Tensor;

fn main() -> ferrotorch::Result<()> {
    let x = Tensor::ones(2)?;
    let _ = x.to_vec::<String>()?;
    Ok(())
}
