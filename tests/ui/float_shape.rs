// Sizes are integers: `torch.zeros(2.5)` is a TypeError in PyTorch, and a
// compile error here.
use ferrotorch::Tensor;

fn main() {
    let _ = Tensor::zeros(2.5);
}
