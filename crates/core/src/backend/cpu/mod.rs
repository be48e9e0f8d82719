//! The CPU backend: one kernel per operator, registered into the operators'
//! dispatch tables at start-up.
//!
//! Kernels receive inputs already type-promoted and outputs already
//! allocated (structured kernels), lock the storages they touch through
//! `access`, and do the arithmetic with the pointwise engine, the
//! reduction engine or the GEMM.

mod access;
mod activation;
mod attention;
mod binary;
mod binary_math;
mod bucket;
mod conv;
mod copy;
pub mod cpu_info;
mod decomp;
mod embedding;
mod factory;
pub mod gemm;
mod index;
mod index_rows;
pub(crate) mod lapack;
mod layer_norm_rows;
mod loss;
mod math;
pub(crate) mod norm;
mod pointwise;
mod pool;
mod reduce;
mod rnn_cell;
mod rnn_layer;
mod sampling;
mod scans;
mod select;
pub mod simd;
mod softmax;
mod sort;
pub(crate) mod stl_algo;
mod ternary;
mod transpose;
mod unary;
mod unique;
mod warm;

use crate::Result;
use crate::dispatch::registration::{Registration, Stage};
use crate::dispatch::{DispatchKey, Kernel, OpEntry, Slot, StructuredFn};
use crate::ops::{
    binary as bin, copy as cp, factory as fac, index as idx, linalg, reduce as red, sort as srt, unary as un,
};

fn structured(entry: &'static OpEntry, f: StructuredFn) -> Result<()> {
    entry.register_builtin(Slot::Key(DispatchKey::Cpu), Kernel::Structured(f))
}

inventory::submit! {
    Registration {
        stage: Stage::Kernels,
        what: "cpu kernels",
        run: register_kernels,
    }
}

/// Registers every CPU kernel (at start-up, through [`Registration`]).
fn register_kernels() -> Result<()> {
    structured(&cp::TO_COPY, copy::cast_kernel)?;
    structured(&cp::FILL, copy::fill_kernel)?;
    structured(&cp::FILL_INPLACE, copy::fill_inplace_kernel)?;
    structured(&cp::COPY_INPLACE, copy::copy_inplace_kernel)?;
    for k in crate::ops::ALL_UNARY {
        structured(k.entry(), unary::unary_kernel)?;
    }
    structured(&un::POW_SCALAR, unary::pow_scalar_kernel)?;
    structured(&un::CLAMP, unary::clamp_kernel)?;
    structured(&un::SOFTPLUS, unary::softplus_kernel)?;
    for k in crate::ops::ALL_BINARY {
        structured(k.entry(), binary::binary_kernel)?;
    }
    for k in crate::ops::ALL_MATH {
        structured(k.entry(), binary_math::binary_math_kernel)?;
    }
    structured(&crate::ops::binary_math::BITWISE_NOT, binary_math::bitwise_not_kernel)?;
    structured(&bin::WHERE, binary::where_kernel)?;
    structured(&crate::ops::clamp_lerp::CLAMP_TENSOR, ternary::clamp_tensor_kernel)?;
    structured(&crate::ops::clamp_lerp::LERP_SCALAR, ternary::lerp_kernel)?;
    structured(&crate::ops::clamp_lerp::LERP_TENSOR, ternary::lerp_kernel)?;
    structured(&crate::ops::float_class::NAN_TO_NUM, ternary::nan_to_num_kernel)?;
    structured(&un::THRESHOLD_BACKWARD, binary::threshold_backward_kernel)?;
    for e in [
        &crate::ops::activation_backward::TANH_BACKWARD,
        &crate::ops::activation_backward::SIGMOID_BACKWARD,
        &crate::ops::activation_backward::SIN_BACKWARD,
        &crate::ops::activation_backward::COS_BACKWARD,
        &crate::ops::activation_backward::SQUARE_BACKWARD,
    ] {
        structured(e, binary::activation_backward_kernel)?;
    }
    for e in [&red::SUM, &red::PROD, &red::AMAX, &red::AMIN, &red::ALL, &red::ANY] {
        structured(e, reduce::reduce_kernel)?;
    }
    for e in [&red::MAX_DIM, &red::MIN_DIM, &red::ARGMAX, &red::ARGMIN] {
        structured(e, reduce::index_reduce_kernel)?;
    }
    structured(&red::CUMSUM, reduce::scan_kernel)?;
    structured(&red::CUMPROD, reduce::scan_kernel)?;
    structured(&crate::ops::scans::CUMMAX, scans::cum_extreme_kernel)?;
    structured(&crate::ops::scans::CUMMIN, scans::cum_extreme_kernel)?;
    structured(&crate::ops::scans::LOGCUMSUMEXP, scans::logcumsumexp_kernel)?;
    structured(&crate::ops::softmax::SOFTMAX, softmax::softmax_kernel)?;
    structured(&crate::ops::softmax::LOG_SOFTMAX, softmax::softmax_kernel)?;
    structured(
        &crate::ops::softmax::SOFTMAX_BACKWARD_DATA,
        softmax::softmax_backward_kernel,
    )?;
    structured(
        &crate::ops::softmax::LOG_SOFTMAX_BACKWARD_DATA,
        softmax::softmax_backward_kernel,
    )?;
    structured(&linalg::MM, gemm::matmul_kernel)?;
    structured(&linalg::BMM, gemm::matmul_kernel)?;
    structured(&linalg::BMM_DTYPE, gemm::matmul_f32_kernel)?;
    // A Linear's addmm adds its bias inside the GEMM (other cases run the composite).
    crate::ops::addmm::ADDMM.register_builtin(Slot::Key(DispatchKey::Cpu), Kernel::Functional(gemm::addmm_kernel))?;
    // The meta device mirrors the f16 / bf16 products' and convolutions'
    // temporaries (for memory plans).
    for entry in [&linalg::MM, &linalg::BMM] {
        entry.register_builtin(
            Slot::Key(DispatchKey::Meta),
            Kernel::Structured(gemm::matmul_meta_kernel),
        )?;
    }
    for entry in [&crate::ops::conv::CONVOLUTION, &crate::ops::conv::CONVOLUTION_BACKWARD] {
        entry.register_builtin(
            Slot::Key(DispatchKey::Meta),
            Kernel::Structured(conv::widened_meta_kernel),
        )?;
    }
    structured(&idx::GATHER, index::gather_kernel)?;
    structured(&idx::SCATTER, index::scatter_kernel)?;
    structured(&idx::SCATTER_ADD, index::scatter_kernel)?;
    structured(&idx::INDEX_SELECT, index::index_select_kernel)?;
    structured(&idx::INDEX, index::index_tensors_kernel)?;
    structured(&idx::INDEX_PUT, index::index_put_kernel)?;
    for e in [
        &crate::ops::index_more::INDEX_ADD,
        &crate::ops::index_more::INDEX_COPY,
        &crate::ops::index_more::INDEX_FILL,
    ] {
        structured(e, index_rows::index_rows_kernel)?;
    }
    idx::NONZERO.register_builtin(Slot::Key(DispatchKey::Cpu), Kernel::Functional(index::nonzero_kernel))?;
    for e in [
        &crate::ops::bucket::SEARCHSORTED,
        &crate::ops::bucket::BINCOUNT,
        &crate::ops::bucket::HISTC,
    ] {
        e.register_builtin(Slot::Key(DispatchKey::Cpu), Kernel::Functional(bucket::bucket_kernel))?;
    }
    for e in [
        &crate::ops::unique::UNIQUE,
        &crate::ops::unique::UNIQUE_DIM,
        &crate::ops::unique::UNIQUE_CONSECUTIVE,
    ] {
        e.register_builtin(Slot::Key(DispatchKey::Cpu), Kernel::Functional(unique::unique_kernel))?;
    }
    structured(&srt::SORT, sort::sort_kernel)?;
    structured(&srt::TOPK, select::topk_kernel)?;
    for e in [
        &crate::ops::select::KTHVALUE,
        &crate::ops::select::MEDIAN_DIM,
        &crate::ops::select::NANMEDIAN_DIM,
        &crate::ops::select::MODE,
    ] {
        structured(e, select::select_dim_kernel)?;
    }
    structured(&crate::ops::select::MEDIAN, select::median_all_kernel)?;
    structured(&crate::ops::select::NANMEDIAN, select::median_all_kernel)?;
    structured(&crate::ops::conv::CONVOLUTION, conv::convolution_kernel)?;
    structured(
        &crate::ops::conv::CONVOLUTION_BACKWARD,
        conv::convolution_backward_kernel,
    )?;
    {
        use crate::ops::pool as pl;
        structured(&pl::MAX_POOL2D, pool::max_pool2d_kernel)?;
        structured(&pl::ADAPTIVE_MAX_POOL2D, pool::adaptive_max_pool2d_kernel)?;
        structured(&pl::MAX_POOL2D_BACKWARD, pool::max_pool_backward_kernel)?;
        structured(&pl::ADAPTIVE_MAX_POOL2D_BACKWARD, pool::max_pool_backward_kernel)?;
        structured(&pl::AVG_POOL2D, pool::avg_pool2d_kernel)?;
        structured(&pl::AVG_POOL2D_BACKWARD, pool::avg_pool2d_backward_kernel)?;
        structured(&pl::ADAPTIVE_AVG_POOL2D, pool::adaptive_avg_pool2d_kernel)?;
        structured(
            &pl::ADAPTIVE_AVG_POOL2D_BACKWARD,
            pool::adaptive_avg_pool2d_backward_kernel,
        )?;
    }
    structured(&fac::ARANGE, factory::arange_kernel)?;
    structured(&fac::LINSPACE, factory::linspace_kernel)?;
    for e in [
        &crate::ops::norm::NATIVE_LAYER_NORM,
        &crate::ops::norm::NATIVE_GROUP_NORM,
        &crate::ops::norm::NATIVE_BATCH_NORM,
    ] {
        structured(e, norm::norm_kernel)?;
    }
    for e in [
        &crate::ops::norm::NATIVE_LAYER_NORM_BACKWARD,
        &crate::ops::norm::NATIVE_GROUP_NORM_BACKWARD,
        &crate::ops::norm::NATIVE_BATCH_NORM_BACKWARD,
    ] {
        structured(e, norm::norm_backward_kernel)?;
    }
    // The meta device mirrors the fused norms' and attention's temporaries
    // (for memory plans) instead of running their composites.
    for e in [
        &crate::ops::norm::NATIVE_LAYER_NORM,
        &crate::ops::norm::NATIVE_GROUP_NORM,
        &crate::ops::norm::NATIVE_BATCH_NORM,
        &crate::ops::norm::NATIVE_LAYER_NORM_BACKWARD,
        &crate::ops::norm::NATIVE_GROUP_NORM_BACKWARD,
        &crate::ops::norm::NATIVE_BATCH_NORM_BACKWARD,
    ] {
        e.register_builtin(Slot::Key(DispatchKey::Meta), Kernel::Structured(norm::norm_meta_kernel))?;
    }
    for e in [
        &crate::ops::attention::SDPA_FLASH,
        &crate::ops::attention::SDPA_FLASH_BACKWARD,
    ] {
        e.register_builtin(
            Slot::Key(DispatchKey::Meta),
            Kernel::Structured(attention::sdpa_flash_meta_kernel),
        )?;
    }
    for act in crate::ops::activation::ALL_ENTRIES {
        structured(act.0, activation::activation_kernel)?;
        structured(act.1, activation::activation_grad_kernel)?;
    }
    structured(
        &crate::ops::activation::GELU_BACKWARD,
        activation::activation_grad_kernel,
    )?;
    for e in [&crate::ops::loss::NLL_LOSS, &crate::ops::loss::NLL_LOSS2D] {
        structured(e, loss::nll_loss_kernel)?;
    }
    for e in [
        &crate::ops::loss::NLL_LOSS_BACKWARD,
        &crate::ops::loss::NLL_LOSS2D_BACKWARD,
    ] {
        structured(e, loss::nll_loss_backward_kernel)?;
    }
    structured(&crate::ops::embedding::EMBEDDING, embedding::embedding_kernel)?;
    structured(
        &crate::ops::embedding::EMBEDDING_RENORM,
        embedding::embedding_renorm_kernel,
    )?;
    structured(&crate::ops::rnn_cell::FUSED_LSTM_CELL, rnn_cell::fused_lstm_cell_kernel)?;
    structured(
        &crate::ops::rnn_cell::FUSED_LSTM_CELL_BACKWARD,
        rnn_cell::fused_lstm_cell_backward_kernel,
    )?;
    structured(&crate::ops::rnn_layer::LSTM_LAYER, rnn_layer::lstm_layer_kernel)?;
    structured(
        &crate::ops::rnn_layer::LSTM_LAYER_BACKWARD,
        rnn_layer::lstm_layer_backward_kernel,
    )?;
    structured(&crate::ops::attention::SDPA_FLASH, attention::sdpa_flash_kernel)?;
    structured(
        &crate::ops::attention::SDPA_FLASH_BACKWARD,
        attention::sdpa_flash_backward_kernel,
    )?;
    sampling::register()?;
    decomp::register()?;
    Ok(())
}
