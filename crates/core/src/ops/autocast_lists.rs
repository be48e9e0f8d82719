//! Autocast's operator lists (PyTorch's `autocast_mode.cpp`, CPU flavour):
//! which operators run in the autocast dtype and which in f32. The
//! Autocast layer (`crate::amp`) registers a kernel at the Autocast key of
//! each listed operator; every other operator passes through unchanged
//! (its inputs keep their dtypes, and type promotion does the rest).
//!
//! Composites follow their parts: `linear` and `matmul` run `addmm` / `mm`
//! / `bmm`, `cross_entropy` runs `_log_softmax` and `nll_loss_forward`,
//! `rms_norm` its `mean`.

/// How autocast treats an operator's floating-point inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CastPolicy {
    /// Cast f32 inputs to the autocast dtype (bf16 / f16): the products,
    /// which accumulate in f32 inside their kernels.
    LowerPrecision,
    /// Cast bf16 / f16 inputs to f32: operators whose range or precision
    /// needs it (softmax, norms, losses, exp / log, sums).
    Fp32,
}

/// PyTorch's CPU `lower_precision_fp` list, as this core names the
/// operators (the composites `linear`, `matmul`, `conv2d`, ... reach
/// these).
pub const LOWER_PRECISION: &[&str] = &[
    "mm",
    "bmm",
    "addmm",
    "addbmm",
    "baddbmm",
    "addmv",
    "dot",
    "mv",
    "convolution",
    "_scaled_dot_product_flash_attention_for_cpu",
    "ferrotorch::lstm_layer",
    "_thnn_fused_lstm_cell",
];

/// Operators that run in f32: PyTorch's CPU `fp32` list where this core has
/// the operator, plus, as the CUDA list has them, softmax, log_softmax,
/// the norms, exp / log and the reductions.
pub const FP32: &[&str] = &[
    // softmax family
    "_softmax",
    "_log_softmax",
    "logsumexp",
    // norms
    "native_layer_norm",
    "native_group_norm",
    "native_batch_norm",
    "linalg_vector_norm",
    // losses
    "nll_loss_forward",
    "nll_loss2d_forward",
    "mse_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    // pointwise functions with a wide range
    "exp",
    "log",
    "pow.Tensor_Scalar",
    "softplus",
    // reductions
    "sum.dim_IntList",
    "prod.dim_int",
    "mean.dim",
    "var.correction",
    "std.correction",
    "var_mean.correction",
    "std_mean.correction",
    "cumsum",
    "cumprod",
    "nansum",
    // linear algebra
    "linalg_inv_ex",
    "_linalg_solve_ex",
    "_linalg_det",
    "_linalg_slogdet",
    "linalg_cholesky_ex",
    "linalg_qr",
    "_linalg_eigh",
    "_linalg_svd",
    "trace",
];
