// The backend-author methods (storage, layout, from_parts, ...) are not on
// a model author's `Tensor`: they need `use ferrotorch::backend::TensorExt`.
use ferrotorch::Tensor;

fn main() -> ferrotorch::Result<()> {
    let x = Tensor::zeros(3)?;
    let _ = x.storage();
    Ok(())
}
