//! The options of `fully_shard`: resharding and mixed precision.

use ferrotorch_core::DType;

/// Mixed precision for [`fully_shard`](super::fully_shard) (`MixedPrecisionPolicy`): the dtype
/// parameters are gathered and computed in, and the dtype gradients are
/// reduced in. The shards and the optimizer keep the parameters' own dtype.
///
/// ```
/// use ferrotorch_core::DType;
/// use ferrotorch_distributed::fsdp::MixedPrecisionPolicy;
/// let bf16 = MixedPrecisionPolicy { param_dtype: Some(DType::BF16), reduce_dtype: Some(DType::F32), ..Default::default() };
/// assert!(bf16.cast_forward_inputs);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixedPrecisionPolicy {
    /// The dtype of the gathered parameters (their own when `None`).
    pub param_dtype: Option<DType>,
    /// The dtype gradients are reduce-scattered in (`param_dtype` when
    /// `None`).
    pub reduce_dtype: Option<DType>,
    /// The dtype the module's floating-point outputs are cast to (left as
    /// computed when `None`).
    pub output_dtype: Option<DType>,
    /// Whether floating-point inputs of the module's forward are cast to
    /// `param_dtype` (true, as PyTorch).
    pub cast_forward_inputs: bool,
}

impl Default for MixedPrecisionPolicy {
    fn default() -> Self {
        MixedPrecisionPolicy {
            param_dtype: None,
            reduce_dtype: None,
            output_dtype: None,
            cast_forward_inputs: true,
        }
    }
}

/// Options of [`fully_shard`](super::fully_shard).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FsdpOptions {
    /// Free the gathered parameters after the forward and gather them again
    /// for the backward (true: less memory, one more all-gather). The
    /// outermost module keeps them either way, as its backward comes next.
    pub reshard_after_forward: bool,
    /// Mixed precision.
    pub mp_policy: MixedPrecisionPolicy,
}

impl Default for FsdpOptions {
    fn default() -> Self {
        FsdpOptions {
            reshard_after_forward: true,
            mp_policy: MixedPrecisionPolicy::default(),
        }
    }
}
