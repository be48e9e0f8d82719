// A scalar on the left of a tensor is an f64 or an i64 (what a literal is:
// `2.0 * &x`, `1 - &x`); other types go on the right (`&g * lr`). More
// left-hand impls would leave `2.0 * &x` without a type to infer.
use ferrotorch::Tensor;

fn main() -> ferrotorch::Result<()> {
    let g = Tensor::ones(2)?;
    let lr = 0.1f32;
    let _ = lr * &g;
    Ok(())
}
