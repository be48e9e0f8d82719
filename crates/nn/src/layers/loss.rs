//! Loss modules: PyTorch's `nn.CrossEntropyLoss`, `NLLLoss`, `MSELoss`,
//! `L1Loss`, `SmoothL1Loss`, `HuberLoss`, `BCELoss`, `BCEWithLogitsLoss`
//! and `KLDivLoss`. Each keeps its keyword arguments; class and element
//! weights are buffers named as PyTorch registers them (`weight`,
//! `pos_weight`), so they are in the state dict and follow `to_dtype`.
//! `forward(input, target)` runs between the module's hooks.

use ferrotorch_core::{Error, Result, Tensor};

use crate::functional::{self as F, KlDivReduction, Reduction};
use crate::state::call_with_hooks;
use crate::{Buffer, Module, ModuleState};

/// Runs a loss (between the module's hooks with `hooks`), naming the
/// module in errors.
fn run_loss(
    m: &dyn Module,
    hooks: bool,
    input: &Tensor,
    target: &Tensor,
    f: impl FnOnce(&Tensor, &Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let r = if hooks {
        let args = [input.clone(), target.clone()];
        call_with_hooks(m, &args, |a| f(&a[0], &a[1]))
    } else {
        f(input, target)
    };
    r.map_err(|e| match e {
        Error::Module { .. } => e,
        other => Error::module(m.repr(), other.to_string()),
    })
}

macro_rules! elementwise_loss {
    ($(#[$doc:meta])* $name:ident, $f:path $(, $extra:ident : $default:expr, $extra_doc:literal)?) => {
        $(#[$doc])*
        #[derive(Module)]
        pub struct $name {
            /// How the per-element losses are reduced (`Mean`).
            pub reduction: Reduction,
            $(
                #[doc = $extra_doc]
                pub $extra: f64,
            )?
            state: ModuleState,
        }

        impl Default for $name {
            fn default() -> Self {
                $name {
                    reduction: Reduction::Mean,
                    $($extra: $default,)?
                    state: ModuleState::default(),
                }
            }
        }

        impl $name {
            /// The loss with PyTorch's defaults.
            pub fn new() -> Self {
                Self::default()
            }

            /// The loss with `reduction`.
            pub fn with_reduction(reduction: Reduction) -> Self {
                $name {
                    reduction,
                    ..Self::default()
                }
            }

            $(
                #[doc = concat!("Sets `", stringify!($extra), "`.")]
                pub fn $extra(mut self, $extra: f64) -> Self {
                    self.$extra = $extra;
                    self
                }
            )?

            /// The loss of `input` against `target` (same shape or
            /// broadcastable). Errors name the module.
            pub fn call(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
                self.run(input, target, true)
            }

            /// [`Self::call`] without the module's hooks.
            pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
                self.run(input, target, false)
            }

            fn run(&self, input: &Tensor, target: &Tensor, hooks: bool) -> Result<Tensor> {
                run_loss(self, hooks, input, target, |x, t| $f(x, t, self.reduction $(, self.$extra)?))
            }
        }
    };
}

elementwise_loss!(
    /// Mean squared error (PyTorch's `nn.MSELoss`).
    MSELoss, F::mse_loss
);
elementwise_loss!(
    /// Mean absolute error (PyTorch's `nn.L1Loss`).
    L1Loss, F::l1_loss
);
elementwise_loss!(
    /// Smooth L1 (PyTorch's `nn.SmoothL1Loss`): quadratic below `beta`.
    SmoothL1Loss, F::smooth_l1_loss, beta: 1.0, "The switch point (`1.0`)."
);
elementwise_loss!(
    /// Huber loss (PyTorch's `nn.HuberLoss`): quadratic below `delta`.
    HuberLoss, F::huber_loss, delta: 1.0, "The switch point (`1.0`)."
);

/// Rust-style aliases.
pub type MseLoss = MSELoss;

/// The options of [`CrossEntropyLoss`] and [`NLLLoss`] (PyTorch's
/// keywords and defaults).
#[derive(Debug, Clone, Default, crate::Options)]
pub struct ClassLossOptions {
    /// Per-class weight `[C]` (`None`), kept as the buffer `weight`.
    pub(crate) weight: Option<Tensor>,
    /// Class index whose samples count for nothing (`-100`).
    pub(crate) ignore_index: Option<i64>,
    /// Reduction (`Mean`).
    pub(crate) reduction: Reduction,
    /// Mix of the target with the uniform distribution (`0.0`;
    /// cross-entropy only).
    pub(crate) label_smoothing: f64,
}

/// Cross-entropy of unnormalised scores against class indices or class
/// probabilities (PyTorch's `nn.CrossEntropyLoss`).
#[derive(Module)]
pub struct CrossEntropyLoss {
    /// Per-class weight `[C]`.
    pub weight: Option<Buffer>,
    /// Class index whose samples count for nothing.
    pub ignore_index: i64,
    /// Reduction.
    pub reduction: Reduction,
    /// Mix of the target with the uniform distribution.
    pub label_smoothing: f64,
    state: ModuleState,
}

impl Default for CrossEntropyLoss {
    fn default() -> Self {
        Self::with_options(ClassLossOptions::default())
    }
}

impl CrossEntropyLoss {
    /// The loss with PyTorch's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The loss with the given options.
    pub fn with_options(o: ClassLossOptions) -> Self {
        CrossEntropyLoss {
            weight: o.weight.map(Buffer::new),
            ignore_index: o.ignore_index.unwrap_or(-100),
            reduction: o.reduction,
            label_smoothing: o.label_smoothing,
            state: ModuleState::default(),
        }
    }

    /// The loss of scores `input` (`[C]`, `[N, C]` or `[N, C, d...]`)
    /// against class indices (`[]`, `[N]`, `[N, d...]`, int64) or
    /// probabilities (the input's shape). Errors name the module; a class
    /// index out of range names the index and the number of classes.
    pub fn call(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        self.run(input, target, true)
    }

    /// [`Self::call`] without the module's hooks.
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        self.run(input, target, false)
    }

    fn run(&self, input: &Tensor, target: &Tensor, hooks: bool) -> Result<Tensor> {
        let w = self.weight.as_ref().map(Buffer::tensor);
        run_loss(self, hooks, input, target, |x, t| {
            F::cross_entropy(
                x,
                t,
                &F::CrossEntropyOptions {
                    weight: w.as_ref(),
                    ignore_index: self.ignore_index,
                    reduction: self.reduction,
                    label_smoothing: self.label_smoothing,
                },
            )
        })
    }
}

/// Negative log-likelihood of log-probabilities against class indices
/// (PyTorch's `nn.NLLLoss`).
#[derive(Module)]
pub struct NLLLoss {
    /// Per-class weight `[C]`.
    pub weight: Option<Buffer>,
    /// Class index whose samples count for nothing.
    pub ignore_index: i64,
    /// Reduction.
    pub reduction: Reduction,
    state: ModuleState,
}

/// Rust-style alias.
pub type NllLoss = NLLLoss;

impl Default for NLLLoss {
    fn default() -> Self {
        Self::with_options(ClassLossOptions::default())
    }
}

impl NLLLoss {
    /// The loss with PyTorch's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The loss with the given options (`label_smoothing` is not used).
    pub fn with_options(o: ClassLossOptions) -> Self {
        NLLLoss {
            weight: o.weight.map(Buffer::new),
            ignore_index: o.ignore_index.unwrap_or(-100),
            reduction: o.reduction,
            state: ModuleState::default(),
        }
    }

    /// The loss of log-probabilities `input` against class indices.
    /// Errors as [`CrossEntropyLoss::forward`].
    pub fn call(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        self.run(input, target, true)
    }

    /// [`Self::call`] without the module's hooks.
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        self.run(input, target, false)
    }

    fn run(&self, input: &Tensor, target: &Tensor, hooks: bool) -> Result<Tensor> {
        let w = self.weight.as_ref().map(Buffer::tensor);
        run_loss(self, hooks, input, target, |x, t| {
            F::nll_loss(
                x,
                t,
                &F::NllLossOptions {
                    weight: w.as_ref(),
                    ignore_index: self.ignore_index,
                    reduction: self.reduction,
                },
            )
        })
    }
}

/// Binary cross-entropy of probabilities (PyTorch's `nn.BCELoss`).
#[derive(Module)]
pub struct BCELoss {
    /// Per-element weight, broadcast to the input.
    pub weight: Option<Buffer>,
    /// Reduction.
    pub reduction: Reduction,
    state: ModuleState,
}

impl Default for BCELoss {
    fn default() -> Self {
        Self::with_options(None, Reduction::Mean)
    }
}

impl BCELoss {
    /// The loss with PyTorch's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The loss with a weight and a reduction.
    pub fn with_options(weight: Option<Tensor>, reduction: Reduction) -> Self {
        BCELoss {
            weight: weight.map(Buffer::new),
            reduction,
            state: ModuleState::default(),
        }
    }

    /// The loss of probabilities `input` against `target` (same shape, in
    /// [0, 1]). Errors name the module.
    pub fn call(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        self.run(input, target, true)
    }

    /// [`Self::call`] without the module's hooks.
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        self.run(input, target, false)
    }

    fn run(&self, input: &Tensor, target: &Tensor, hooks: bool) -> Result<Tensor> {
        let w = self.weight.as_ref().map(Buffer::tensor);
        run_loss(self, hooks, input, target, |x, t| {
            F::binary_cross_entropy(x, t, w.as_ref(), self.reduction)
        })
    }
}

/// Binary cross-entropy of logits, computed stably (PyTorch's
/// `nn.BCEWithLogitsLoss`).
#[derive(Module)]
pub struct BCEWithLogitsLoss {
    /// Per-element weight, broadcast to the input.
    pub weight: Option<Buffer>,
    /// Weight of the positive class per class (the last dim).
    pub pos_weight: Option<Buffer>,
    /// Reduction.
    pub reduction: Reduction,
    state: ModuleState,
}

impl Default for BCEWithLogitsLoss {
    fn default() -> Self {
        Self::with_options(None, Reduction::Mean, None)
    }
}

impl BCEWithLogitsLoss {
    /// The loss with PyTorch's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The loss with PyTorch's arguments in its order (`weight`,
    /// `reduction`, `pos_weight`).
    pub fn with_options(weight: Option<Tensor>, reduction: Reduction, pos_weight: Option<Tensor>) -> Self {
        BCEWithLogitsLoss {
            weight: weight.map(Buffer::new),
            pos_weight: pos_weight.map(Buffer::new),
            reduction,
            state: ModuleState::default(),
        }
    }

    /// The loss of logits `input` against `target` (same shape). Errors
    /// name the module.
    pub fn call(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        self.run(input, target, true)
    }

    /// [`Self::call`] without the module's hooks.
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        self.run(input, target, false)
    }

    fn run(&self, input: &Tensor, target: &Tensor, hooks: bool) -> Result<Tensor> {
        let w = self.weight.as_ref().map(Buffer::tensor);
        let pw = self.pos_weight.as_ref().map(Buffer::tensor);
        run_loss(self, hooks, input, target, |x, t| {
            F::binary_cross_entropy_with_logits(
                x,
                t,
                &F::BceWithLogitsOptions {
                    weight: w.as_ref(),
                    pos_weight: pw.as_ref(),
                    reduction: self.reduction,
                },
            )
        })
    }
}

/// Kullback-Leibler divergence of log-probabilities `input` from `target`
/// (PyTorch's `nn.KLDivLoss`; `BatchMean` is the mathematical
/// definition).
#[derive(Module, Default)]
pub struct KLDivLoss {
    /// Reduction, `batchmean` included (`Mean`).
    pub reduction: KlDivReduction,
    /// `target` holds log-probabilities (`false`).
    pub log_target: bool,
    state: ModuleState,
}

impl KLDivLoss {
    /// The loss with PyTorch's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// The loss with a reduction and `log_target`.
    pub fn with_options(reduction: KlDivReduction, log_target: bool) -> Self {
        KLDivLoss {
            reduction,
            log_target,
            state: ModuleState::default(),
        }
    }

    /// The divergence. Errors name the module.
    pub fn call(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        self.run(input, target, true)
    }

    /// [`Self::call`] without the module's hooks.
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        self.run(input, target, false)
    }

    fn run(&self, input: &Tensor, target: &Tensor, hooks: bool) -> Result<Tensor> {
        run_loss(self, hooks, input, target, |x, t| {
            F::kl_div(x, t, self.reduction, self.log_target)
        })
    }
}
