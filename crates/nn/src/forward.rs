//! [`Forward`]: modules that map one tensor to one tensor, which
//! [`Sequential`](crate::Sequential) chains.

use ferrotorch_core::{Result, Tensor};

use crate::Module;
use crate::state::call_with_hooks;

/// A module whose forward takes one tensor and returns one (`Linear`,
/// activations, `Sequential`, most user models).
pub trait Forward: Module {
    /// The computation (PyTorch's `forward`).
    fn forward(&self, x: &Tensor) -> Result<Tensor>;

    /// Runs `forward` between the module's hooks (PyTorch's `module(x)`).
    /// Without hooks it is `forward`.
    fn call(&self, x: &Tensor) -> Result<Tensor> {
        call_with_hooks(self.as_dyn(), std::slice::from_ref(x), |a| self.forward(&a[0]))
    }
}

impl<F: Forward + ?Sized> Forward for Box<F> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        (**self).forward(x)
    }

    fn call(&self, x: &Tensor) -> Result<Tensor> {
        (**self).call(x)
    }
}
