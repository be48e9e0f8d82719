//! `F.layer_norm`, `F.group_norm`, `F.batch_norm`, `F.rms_norm`,
//! `F.embedding`, the activations with hyperparameters and the losses,
//! with PyTorch's keyword defaults (option structs where there are
//! several). Each calls the core operator of the same name.

use ferrotorch_core::{Error, Result, Tensor, autograd};

pub use ferrotorch_core::Reduction;
pub use ferrotorch_core::ops::activation::{SELU_ALPHA, SELU_SCALE};

// ---------------------------------------------------------------- normalisation

/// `F.layer_norm(input, normalized_shape, weight, bias, eps)`: see
/// [`Tensor::layer_norm`] (PyTorch's default `eps` is `1e-5`). Errors: an
/// input that does not end in `normalized_shape`, parameters of another
/// shape, an integer input.
pub fn layer_norm(
    input: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    input.layer_norm(normalized_shape, weight, bias, eps)
}

/// `F.rms_norm(input, normalized_shape, weight, eps)`; `eps` `None` is the
/// dtype's machine epsilon. See [`Tensor::rms_norm`]; errors as
/// [`layer_norm`].
pub fn rms_norm(
    input: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    eps: Option<f64>,
) -> Result<Tensor> {
    input.rms_norm(normalized_shape, weight, eps)
}

/// `F.group_norm(input, num_groups, weight, bias, eps)` (PyTorch's default
/// `eps` is `1e-5`): see [`Tensor::group_norm`]. Errors: fewer than 2
/// dims, groups of one value each (PyTorch's "Expected more than 1 value
/// per channel when training", naming the size `[N*C/G, G, *]` it
/// checked), channels not divisible by `num_groups`, parameters not of
/// size C.
pub fn group_norm(
    input: &Tensor,
    num_groups: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    let s = input.shape();
    if s.len() >= 2 && num_groups > 0 {
        let mut size = vec![s[0] * s[1] / num_groups, num_groups];
        size.extend_from_slice(&s[2..]);
        if size[0] * s[2..].iter().product::<usize>() == 1 {
            return Err(Error::invalid(
                "group_norm",
                format!("Expected more than 1 value per channel when training, got input size {size:?}"),
            ));
        }
    }
    input.group_norm(num_groups, weight, bias, eps)
}

/// `F.batch_norm`'s keyword arguments, with PyTorch's defaults.
#[derive(Debug, Clone, Copy, crate::Options)]
pub struct BatchNormOptions {
    /// Normalise with the batch's statistics and update the running ones
    /// (`false`).
    pub(crate) training: bool,
    /// Weight of the batch statistics in the running ones' update (`0.1`).
    /// `BatchNorm` with `momentum=None` (a cumulative average) passes
    /// `1 / num_batches_tracked` here, as PyTorch's module does.
    pub(crate) momentum: f64,
    /// Added to the variance (`1e-5`).
    pub(crate) eps: f64,
}

impl Default for BatchNormOptions {
    fn default() -> Self {
        BatchNormOptions {
            training: false,
            momentum: 0.1,
            eps: 1e-5,
        }
    }
}

/// `F.batch_norm(input, running_mean, running_var, weight, bias, ...)`:
/// see [`Tensor::batch_norm`]; the running statistics are updated in place in
/// training. Errors: one value per channel in training, running statistics
/// missing in evaluation, parameters or statistics not of size C (PyTorch's
/// messages).
pub fn batch_norm(
    input: &Tensor,
    running_mean: Option<&Tensor>,
    running_var: Option<&Tensor>,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    opts: &BatchNormOptions,
) -> Result<Tensor> {
    input.batch_norm(
        running_mean,
        running_var,
        weight,
        bias,
        opts.training,
        opts.momentum,
        opts.eps,
    )
}

// -------------------------------------------------------------------- embedding

/// `F.embedding`'s keyword arguments, with PyTorch's defaults.
#[derive(Debug, Clone, Copy, crate::Options)]
pub struct EmbeddingOptions {
    /// The row that gets no gradient; negative counts from the end (`None`).
    pub(crate) padding_idx: Option<i64>,
    /// Rows named by the input whose norm exceeds this are rescaled in place
    /// to it first (`None`).
    pub(crate) max_norm: Option<f64>,
    /// The `p` of `max_norm`'s norm (`2.0`).
    pub(crate) norm_type: f64,
    /// Divide each row's gradient by its index's count in the batch
    /// (`false`).
    pub(crate) scale_grad_by_freq: bool,
}

impl Default for EmbeddingOptions {
    fn default() -> Self {
        EmbeddingOptions {
            padding_idx: None,
            max_norm: None,
            norm_type: 2.0,
            scale_grad_by_freq: false,
        }
    }
}

/// `F.embedding(input, weight, ...)`: the rows of `weight` `[V, D]` that
/// the indices `input` name (see [`Tensor::embedding`]); with `max_norm`,
/// `weight` is first renormalised in place without recording a gradient
/// ([`Tensor::embedding_renorm_`]), as PyTorch. Errors: an index outside
/// `[0, V)` ("index out of range in self"), indices not int64/int32, a
/// weight not 2-D, `padding_idx` outside `[-V, V)`.
pub fn embedding(input: &Tensor, weight: &Tensor, opts: &EmbeddingOptions) -> Result<Tensor> {
    if let Some(max_norm) = opts.max_norm {
        autograd::no_grad(|| weight.detach().embedding_renorm_(input, max_norm, opts.norm_type))?;
    }
    weight.embedding(input, opts.padding_idx, opts.scale_grad_by_freq)
}

// ------------------------------------------------------------------ activations

/// `F.elu(input, alpha)` (default `alpha` 1.0). Errors for a non-float input.
pub fn elu(input: &Tensor, alpha: f64) -> Result<Tensor> {
    input.elu(alpha, 1.0, 1.0)
}

/// `F.celu(input, alpha)` (default `alpha` 1.0). Errors for `alpha` 0 and a
/// non-float input.
pub fn celu(input: &Tensor, alpha: f64) -> Result<Tensor> {
    input.celu(alpha)
}

/// `F.selu(input)`. Errors for a non-float input.
pub fn selu(input: &Tensor) -> Result<Tensor> {
    input.selu()
}

/// `F.hardtanh(input, min_val, max_val)` (defaults -1 and 1). Errors for
/// `min_val > max_val`.
pub fn hardtanh(input: &Tensor, min_val: f64, max_val: f64) -> Result<Tensor> {
    input.hardtanh(min_val, max_val)
}

/// `F.relu6(input)`: `hardtanh(input, 0, 6)`.
pub fn relu6(input: &Tensor) -> Result<Tensor> {
    input.relu6()
}

/// `F.mish(input)`. Errors for a non-float input.
pub fn mish(input: &Tensor) -> Result<Tensor> {
    input.mish()
}

/// `F.hardswish(input)`. Errors for a non-float input.
pub fn hardswish(input: &Tensor) -> Result<Tensor> {
    input.hardswish()
}

/// `F.hardsigmoid(input)`. Errors for a non-float input.
pub fn hardsigmoid(input: &Tensor) -> Result<Tensor> {
    input.hardsigmoid()
}

/// `F.logsigmoid(input)`. Errors for a non-float input.
pub fn logsigmoid(input: &Tensor) -> Result<Tensor> {
    input.log_sigmoid()
}

/// `F.softplus(input, beta, threshold)` (defaults 1 and 20). Errors for a
/// non-float input.
pub fn softplus(input: &Tensor, beta: f64, threshold: f64) -> Result<Tensor> {
    input.softplus(beta, threshold)
}

/// `F.softshrink(input, lambd)` (default 0.5). Errors for a negative
/// `lambd`.
pub fn softshrink(input: &Tensor, lambd: f64) -> Result<Tensor> {
    input.softshrink(lambd)
}

/// `F.hardshrink(input, lambd)` (default 0.5).
pub fn hardshrink(input: &Tensor, lambd: f64) -> Result<Tensor> {
    input.hardshrink(lambd)
}

// ------------------------------------------------------------------------ losses

/// `F.cross_entropy`'s keyword arguments, with PyTorch's defaults.
#[derive(Debug, Clone, Copy, crate::Options)]
pub struct CrossEntropyOptions<'a> {
    /// Per-class weight `[C]` (`None`).
    pub(crate) weight: Option<&'a Tensor>,
    /// Class index whose samples count for nothing (`-100`).
    pub(crate) ignore_index: i64,
    /// Reduction (`Mean`).
    pub(crate) reduction: Reduction,
    /// Mix of the target with the uniform distribution (`0.0`).
    pub(crate) label_smoothing: f64,
}

impl Default for CrossEntropyOptions<'_> {
    fn default() -> Self {
        CrossEntropyOptions {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Mean,
            label_smoothing: 0.0,
        }
    }
}

/// `F.cross_entropy(input, target, ...)`: class indices or class
/// probabilities (see [`Tensor::cross_entropy`]). Errors: mismatched batch
/// sizes ("Expected input batch_size (3) to match target batch_size
/// (4)."), a class index out of range ("Target 7 is out of bounds.", with
/// the class count), a wrong target dtype, `label_smoothing` outside [0,
/// 1].
pub fn cross_entropy(input: &Tensor, target: &Tensor, opts: &CrossEntropyOptions) -> Result<Tensor> {
    input.cross_entropy(
        target,
        opts.weight,
        opts.reduction,
        opts.ignore_index,
        opts.label_smoothing,
    )
}

/// `F.nll_loss`'s keyword arguments, with PyTorch's defaults.
#[derive(Debug, Clone, Copy, crate::Options)]
pub struct NllLossOptions<'a> {
    /// Per-class weight `[C]` (`None`).
    pub(crate) weight: Option<&'a Tensor>,
    /// Class index whose samples count for nothing (`-100`).
    pub(crate) ignore_index: i64,
    /// Reduction (`Mean`).
    pub(crate) reduction: Reduction,
}

impl Default for NllLossOptions<'_> {
    fn default() -> Self {
        NllLossOptions {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Mean,
        }
    }
}

/// `F.nll_loss(input, target, ...)` of log-probabilities (see
/// [`Tensor::nll_loss`]). Errors as [`cross_entropy`].
pub fn nll_loss(input: &Tensor, target: &Tensor, opts: &NllLossOptions) -> Result<Tensor> {
    input.nll_loss(target, opts.weight, opts.reduction, opts.ignore_index)
}

/// `F.mse_loss(input, target, reduction)`. Errors: shapes that do not
/// broadcast, integer inputs.
pub fn mse_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    input.mse_loss(target, reduction)
}

/// `F.l1_loss(input, target, reduction)`. Errors as [`mse_loss`].
pub fn l1_loss(input: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    input.l1_loss(target, reduction)
}

/// `F.smooth_l1_loss(input, target, reduction, beta)` (default `beta`
/// 1.0). Errors: a negative `beta`, as [`mse_loss`].
pub fn smooth_l1_loss(input: &Tensor, target: &Tensor, reduction: Reduction, beta: f64) -> Result<Tensor> {
    input.smooth_l1_loss(target, reduction, beta)
}

/// `F.huber_loss(input, target, reduction, delta)` (default `delta` 1.0).
/// Errors: a non-positive `delta`, as [`mse_loss`].
pub fn huber_loss(input: &Tensor, target: &Tensor, reduction: Reduction, delta: f64) -> Result<Tensor> {
    input.huber_loss(target, reduction, delta)
}

/// `F.binary_cross_entropy(input, target, weight, reduction)` of
/// probabilities. Errors: a target of another shape, values outside [0, 1].
pub fn binary_cross_entropy(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    reduction: Reduction,
) -> Result<Tensor> {
    input.binary_cross_entropy(target, weight, reduction)
}

/// `F.binary_cross_entropy_with_logits`'s keyword arguments, with
/// PyTorch's defaults.
#[derive(Debug, Clone, Copy, Default, crate::Options)]
pub struct BceWithLogitsOptions<'a> {
    /// Per-element weight, broadcast (`None`).
    pub(crate) weight: Option<&'a Tensor>,
    /// Weight of the positive class, per class (the last dim) (`None`).
    pub(crate) pos_weight: Option<&'a Tensor>,
    /// Reduction (`Mean`).
    pub(crate) reduction: Reduction,
}

/// `F.binary_cross_entropy_with_logits(input, target, ...)`, numerically
/// stable. Errors: a target of another shape, weights that do not
/// broadcast.
pub fn binary_cross_entropy_with_logits(
    input: &Tensor,
    target: &Tensor,
    opts: &BceWithLogitsOptions,
) -> Result<Tensor> {
    input.binary_cross_entropy_with_logits(target, opts.weight, opts.pos_weight, opts.reduction)
}

/// `F.kl_div`'s `reduction`, which has `'batchmean'` besides the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KlDivReduction {
    /// Per-element values (`'none'`).
    None,
    /// The sum divided by the batch size (`'batchmean'`, the mathematical
    /// KL divergence).
    BatchMean,
    /// The sum (`'sum'`).
    Sum,
    /// The mean over elements (`'mean'`, PyTorch's default).
    #[default]
    Mean,
}

impl KlDivReduction {
    /// Parses PyTorch's spelling; any other string is PyTorch's error.
    pub fn parse(s: &str) -> Result<KlDivReduction> {
        match s {
            "batchmean" => Ok(KlDivReduction::BatchMean),
            other => Ok(match Reduction::parse(other)? {
                Reduction::None => KlDivReduction::None,
                Reduction::Sum => KlDivReduction::Sum,
                Reduction::Mean => KlDivReduction::Mean,
            }),
        }
    }
}

/// `F.kl_div(input, target, reduction, log_target)` of log-probabilities
/// `input` (see [`Tensor::kl_div`]). Errors: integer inputs, shapes that do
/// not broadcast.
pub fn kl_div(input: &Tensor, target: &Tensor, reduction: KlDivReduction, log_target: bool) -> Result<Tensor> {
    match reduction {
        KlDivReduction::None => input.kl_div(target, Reduction::None, log_target),
        KlDivReduction::Sum => input.kl_div(target, Reduction::Sum, log_target),
        KlDivReduction::Mean => input.kl_div(target, Reduction::Mean, log_target),
        KlDivReduction::BatchMean => {
            let s = input.kl_div(target, Reduction::Sum, log_target)?;
            if input.ndim() == 0 {
                Ok(s)
            } else {
                s.div(input.shape()[0] as f64)
            }
        }
    }
}
