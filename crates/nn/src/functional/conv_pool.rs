//! `F.conv*`, `F.*pool*` and `F.one_hot`: the functional forms of the
//! convolution and pooling layers, over the core's operators. Keyword
//! arguments go in the core's option builders (`ConvOptions::new().padding(1)`),
//! a pool's kernel size alone converts to its options (`F::max_pool2d(&x, 2)`).

use ferrotorch_core::{AvgPoolOptions, ConvOptions, ConvTransposeOptions, MaxPoolOptions};
use ferrotorch_core::{Error, IntoShape, Result, Tensor};

/// `F.conv1d(x, weight, bias, ...)`: `x` `[N, C_in, L]` or `[C_in, L]`.
/// Errors as [`Tensor::conv1d`].
pub fn conv1d(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: ConvOptions) -> Result<Tensor> {
    x.conv1d(weight, bias, opts)
}

/// `F.conv2d(x, weight, bias, ...)`: `x` `[N, C_in, H, W]` or `[C_in, H,
/// W]`. Errors as [`Tensor::conv2d`].
pub fn conv2d(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, opts: ConvOptions) -> Result<Tensor> {
    x.conv2d(weight, bias, opts)
}

/// `F.conv_transpose1d(x, weight, bias, ...)`. Errors as
/// [`Tensor::conv_transpose1d`].
pub fn conv_transpose1d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    opts: ConvTransposeOptions,
) -> Result<Tensor> {
    x.conv_transpose1d(weight, bias, opts)
}

/// `F.conv_transpose2d(x, weight, bias, ...)`. Errors as
/// [`Tensor::conv_transpose2d`].
pub fn conv_transpose2d(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    opts: ConvTransposeOptions,
) -> Result<Tensor> {
    x.conv_transpose2d(weight, bias, opts)
}

/// `F.max_pool1d(x, kernel_size, ...)`: a kernel size or
/// `MaxPoolOptions::new(k).stride(s)...`. Errors as [`Tensor::max_pool1d`].
pub fn max_pool1d(x: &Tensor, opts: impl Into<MaxPoolOptions>) -> Result<Tensor> {
    x.max_pool1d(opts)
}

/// `F.max_pool2d(x, kernel_size, ...)` (`F::max_pool2d(&x, 2)`). Errors as
/// [`Tensor::max_pool2d`].
pub fn max_pool2d(x: &Tensor, opts: impl Into<MaxPoolOptions>) -> Result<Tensor> {
    x.max_pool2d(opts)
}

/// `F.max_pool2d(x, ..., return_indices=True)`: the maxima and their flat
/// positions in each input plane.
pub fn max_pool2d_with_indices(x: &Tensor, opts: impl Into<MaxPoolOptions>) -> Result<(Tensor, Tensor)> {
    x.max_pool2d_with_indices(opts)
}

/// `F.avg_pool1d(x, kernel_size, ...)`. Errors as [`Tensor::avg_pool1d`].
pub fn avg_pool1d(x: &Tensor, opts: impl Into<AvgPoolOptions>) -> Result<Tensor> {
    x.avg_pool1d(opts)
}

/// `F.avg_pool2d(x, kernel_size, ...)`. Errors as [`Tensor::avg_pool2d`].
pub fn avg_pool2d(x: &Tensor, opts: impl Into<AvgPoolOptions>) -> Result<Tensor> {
    x.avg_pool2d(opts)
}

/// `F.adaptive_avg_pool1d(x, output_size)`.
pub fn adaptive_avg_pool1d(x: &Tensor, output_size: impl IntoShape) -> Result<Tensor> {
    x.adaptive_avg_pool1d(output_size)
}

/// `F.adaptive_avg_pool2d(x, output_size)` (one size or `(h, w)`). As
/// PyTorch's functional form, a pair of sizes needs an input of at least 3
/// dims ("Input dimension should be at least 3"); one size of 1 takes the
/// mean over the last two dims of any input of 2 dims or more.
pub fn adaptive_avg_pool2d(x: &Tensor, output_size: impl IntoShape) -> Result<Tensor> {
    let size = output_size.into_shape();
    check_sizes_per_dim("adaptive_avg_pool2d", x, &size)?;
    x.adaptive_avg_pool2d(size)
}

/// PyTorch's `_list_with_default`: an output size given per dim (a tuple
/// of `k` sizes) needs an input of at least `k + 1` dims; a single size is
/// left to the operator.
fn check_sizes_per_dim(op: &'static str, x: &Tensor, size: &[i64]) -> Result<()> {
    if size.len() > 1 && x.ndim() <= size.len() {
        return Err(Error::invalid(
            op,
            format!("Input dimension should be at least {}", size.len() + 1),
        ));
    }
    Ok(())
}

/// `F.adaptive_max_pool1d(x, output_size, return_indices=True)`: the
/// maxima and their positions.
pub fn adaptive_max_pool1d(x: &Tensor, output_size: impl IntoShape) -> Result<(Tensor, Tensor)> {
    x.adaptive_max_pool1d(output_size)
}

/// `F.adaptive_max_pool2d(x, output_size, return_indices=True)`: the
/// maxima and their positions. A pair of sizes needs an input of at least
/// 3 dims, as [`adaptive_avg_pool2d`].
pub fn adaptive_max_pool2d(x: &Tensor, output_size: impl IntoShape) -> Result<(Tensor, Tensor)> {
    let size = output_size.into_shape();
    check_sizes_per_dim("adaptive_max_pool2d", x, &size)?;
    x.adaptive_max_pool2d(size)
}

/// `F.one_hot(x)`: classes inferred as `max + 1`. Errors as
/// [`Tensor::one_hot`].
pub fn one_hot(x: &Tensor) -> Result<Tensor> {
    x.one_hot(None)
}

/// `F.one_hot(x, num_classes)` (`-1`: inferred).
pub fn one_hot_with(x: &Tensor, num_classes: i64) -> Result<Tensor> {
    x.one_hot(Some(num_classes))
}
