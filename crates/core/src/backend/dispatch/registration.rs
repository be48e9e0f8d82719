//! Start-up registration. What the dispatcher runs is registered into it
//! by the code that defines it: each module submits a [`Registration`]
//! (the CPU kernels in `backend/cpu`, the composite ops in `ops`, the
//! autograd, autocast and profiler layers, the copy behind `out=` writes),
//! and the dispatcher runs them all once, on its first use, in stage order
//! and by name within a stage. It names none of them: PyTorch's static
//! registrars (`TORCH_LIBRARY_IMPL`), here through the `inventory` crate's
//! link-time collection.
//!
//! Every public registration function (`OpEntry::register`,
//! `register_fallback`) waits for this first, so an out-of-tree
//! registration always lands after the built-ins.

use crate::Result;

/// When a registration runs, earlier stages first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    /// Backend kernels (the CPU's).
    Kernels,
    /// Backend-independent kernels: views, `cat`, device copies, composite ops.
    Composites,
    /// The layers' kernels and fallbacks: autograd, autocast, the profiler.
    Layers,
    /// The copy that writes results into `out=` and in-place outputs.
    OutCopy,
}

/// One start-up registration, submitted with `inventory::submit!` by the
/// module that defines what it registers.
pub(crate) struct Registration {
    /// Its stage.
    pub(crate) stage: Stage,
    /// What it registers (orders registrations within a stage, and names
    /// a failing one).
    pub(crate) what: &'static str,
    /// The registration itself.
    pub(crate) run: fn() -> Result<()>,
}

inventory::collect!(Registration);

/// Runs every submitted registration once, in stage order and by name
/// within a stage (the same order in every build and run).
pub(crate) fn run_all() -> Result<()> {
    let mut all: Vec<&Registration> = inventory::iter::<Registration>.into_iter().collect();
    all.sort_by_key(|r| (r.stage, r.what));
    for r in all {
        (r.run)()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Stage;
    use crate::dispatch::{Kernel, OpEntry, Slot, StructuredFn, find_op, registered_ops};
    use crate::{Error, Result, Tensor};

    /// Every built-in operator, by its PyTorch schema name (`name.overload`
    /// without `aten::`), and the core's own operators in `ferrotorch::`.
    const BUILT_IN: &[&str] = &[
        // Pointwise.
        "neg",
        "abs",
        "exp",
        "log",
        "log1p",
        "expm1",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "sin",
        "cos",
        "tanh",
        "sigmoid",
        "erf",
        "relu",
        "gelu",
        "ferrotorch::gelu_tanh",
        "silu",
        "floor",
        "ceil",
        "round",
        "trunc",
        "sign",
        "pow.Tensor_Scalar",
        "clamp",
        "softplus",
        "threshold_backward",
        "add.Tensor",
        "sub.Tensor",
        "mul.Tensor",
        "div.Tensor_mode",
        "pow.Tensor_Tensor",
        "maximum",
        "minimum",
        "eq.Tensor",
        "ne.Tensor",
        "lt.Tensor",
        "le.Tensor",
        "gt.Tensor",
        "ge.Tensor",
        "logical_and",
        "logical_or",
        "logical_xor",
        "where.self",
        "atan2",
        "hypot",
        "logaddexp",
        "logaddexp2",
        "copysign.Tensor",
        "remainder.Tensor",
        "fmod.Tensor",
        "bitwise_and.Tensor",
        "bitwise_or.Tensor",
        "bitwise_xor.Tensor",
        "bitwise_left_shift.Tensor",
        "bitwise_right_shift.Tensor",
        "bitwise_not",
        "clamp.Tensor",
        "lerp.Scalar",
        "lerp.Tensor",
        "nan_to_num",
        "tanh_backward",
        "sigmoid_backward",
        "ferrotorch::sin_backward",
        "ferrotorch::cos_backward",
        "ferrotorch::square_backward",
        // Reductions and scans.
        "sum.dim_IntList",
        "prod.dim_int",
        "amax",
        "amin",
        "all.dims",
        "any.dims",
        "max.dim",
        "min.dim",
        "argmax",
        "argmin",
        "cumsum",
        "cumprod",
        "cummax",
        "cummin",
        "logcumsumexp",
        "nansum",
        "aminmax",
        "roll",
        "diag_embed",
        "trace",
        "block_diag",
        "masked_select",
        "masked_scatter",
        "take",
        "repeat",
        "flip",
        "diagonal_copy",
        "index_add",
        "index_copy",
        "index_fill.int_Scalar",
        "diagonal",
        "unfold",
        "mean.dim",
        "kthvalue",
        "median.dim",
        "nanmedian.dim",
        "mode",
        "median",
        "nanmedian",
        "_unique2",
        "unique_dim",
        "unique_consecutive",
        "searchsorted.Tensor",
        "bincount",
        "histc",
        "var.correction",
        "std.correction",
        "linalg_vector_norm",
        "logsumexp",
        "_softmax",
        "_log_softmax",
        // Linear algebra, joins, composites.
        "mm",
        "bmm",
        "bmm.dtype",
        "addmm",
        "addmv",
        "addbmm",
        "baddbmm",
        "linalg_cross",
        "linalg_inv_ex",
        "_linalg_solve_ex",
        "_linalg_det",
        "_linalg_slogdet",
        "linalg_cholesky_ex",
        "linalg_qr",
        "_linalg_eigh",
        "_linalg_svd",
        "dot",
        "mv",
        "cat",
        "stack",
        "masked_fill.Scalar",
        "tril",
        "triu",
        // Indexing and sorting.
        "gather",
        "scatter.src",
        "scatter_add",
        "index_select",
        "index.Tensor",
        "index_put",
        "nonzero",
        "sort.stable",
        "topk",
        // Views.
        "view",
        "permute",
        "transpose.int",
        "t",
        "expand",
        "slice.Tensor",
        "narrow",
        "select.int",
        "squeeze.dims",
        "unsqueeze",
        "as_strided",
        "alias",
        "_unsafe_view",
        "_reshape_alias",
        "squeeze_.dim",
        "split.Tensor",
        "split_with_sizes",
        "unbind.int",
        "ferrotorch::view_scatter",
        // Copies and factories.
        "_to_copy",
        "full",
        "fill_.Scalar",
        "copy_",
        "ferrotorch::to_device",
        "arange.start_step",
        "linspace",
        "uniform_",
        "normal_",
        "random_.from",
        "bernoulli_.float",
        // Random sampling.
        "random_",
        "exponential_",
        "geometric_",
        "cauchy_",
        "log_normal_",
        "bernoulli_.Tensor",
        "randperm",
        "multinomial",
        "poisson",
        "ferrotorch::random_sample",
        // Reductions with two outputs, erfinv.
        "std_mean.correction",
        "var_mean.correction",
        "erfinv",
        // Convolution and pooling.
        "convolution",
        "convolution_backward",
        "max_pool2d_with_indices",
        "max_pool2d_with_indices_backward",
        "avg_pool2d",
        "avg_pool2d_backward",
        "_adaptive_avg_pool2d",
        "_adaptive_avg_pool2d_backward",
        "adaptive_max_pool2d",
        "adaptive_max_pool2d_backward",
        // Normalisation, embedding, activations and losses.
        "native_layer_norm",
        "native_layer_norm_backward",
        "native_group_norm",
        "native_group_norm_backward",
        "native_batch_norm",
        "native_batch_norm_backward",
        // Recurrent layers.
        "_thnn_fused_lstm_cell",
        "_thnn_fused_lstm_cell_backward",
        "ferrotorch::lstm_layer",
        "ferrotorch::lstm_layer_backward",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
        "embedding",
        "embedding_renorm_",
        "_softmax_backward_data",
        "_log_softmax_backward_data",
        "gelu_backward",
        "leaky_relu",
        "leaky_relu_backward",
        "elu",
        "elu_backward",
        "celu",
        "celu_backward",
        "hardtanh",
        "hardtanh_backward",
        "mish",
        "mish_backward",
        "hardswish",
        "hardswish_backward",
        "hardsigmoid",
        "hardsigmoid_backward",
        "log_sigmoid",
        "log_sigmoid_backward",
        "softshrink",
        "softshrink_backward",
        "hardshrink",
        "hardshrink_backward",
        "nll_loss_forward",
        "nll_loss_backward",
        "nll_loss2d_forward",
        "nll_loss2d_backward",
        "mse_loss",
        "smooth_l1_loss",
        "huber_loss",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
    ];

    #[test]
    fn each_stage_registers_its_part() {
        let mut stages: Vec<(Stage, &str)> = inventory::iter::<super::Registration>
            .into_iter()
            .map(|r| (r.stage, r.what))
            .collect();
        stages.sort_unstable();
        let expected = [
            (Stage::Kernels, "cpu kernels"),
            (Stage::Composites, "composite ops"),
            (Stage::Layers, "autocast kernels"),
            (Stage::Layers, "autograd fallback"),
            #[cfg(not(ferrotorch_no_profiler))]
            (Stage::Layers, "profiler fallback"),
            (Stage::OutCopy, "out= copy"),
        ];
        assert_eq!(stages, expected);
    }

    #[test]
    fn every_built_in_operator_has_its_pytorch_schema_name() {
        let mut registered: Vec<&str> = registered_ops().iter().map(|e| e.name()).collect();
        // Entries registered by other tests of this binary are not built in.
        registered.retain(|n| !n.starts_with("test::"));
        registered.sort_unstable();
        let mut expected = BUILT_IN.to_vec();
        expected.sort_unstable();
        assert_eq!(registered, expected);
    }

    #[test]
    fn operator_names_have_the_schema_form_and_are_unique() {
        let ops = registered_ops();
        let ident = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        for e in &ops {
            let name = e.name();
            let unqualified = match name.split_once("::") {
                Some((ns, rest)) => {
                    assert!(ns == "ferrotorch" || ns == "test", "{name}: unexpected namespace");
                    rest
                }
                None => name,
            };
            assert!(!unqualified.contains("::"), "{name}");
            match unqualified.split_once('.') {
                Some((base, overload)) => {
                    assert!(ident(base) && ident(overload), "{name}");
                    assert_eq!(e.overload_name(), overload, "{name}");
                    assert!(e.base_name().ends_with(base), "{name}");
                    assert_eq!(format!("{}.{}", e.base_name(), e.overload_name()), name);
                }
                None => {
                    assert!(ident(unqualified), "{name}");
                    assert_eq!((e.base_name(), e.overload_name()), (name, ""), "{name}");
                }
            }
        }
        let mut names: Vec<&str> = ops.iter().map(|e| e.name()).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "operator names must be unique");
    }

    #[test]
    fn find_op_by_full_or_unambiguous_bare_name() {
        use crate::ops::{binary, factory, reduce, unary};
        let same = |name: &str, e: &'static OpEntry| {
            let found = find_op(name).unwrap_or_else(|| panic!("{name} not found"));
            assert!(std::ptr::eq(found, e), "{name} found {}", found.name());
        };
        same("max.dim", &reduce::MAX_DIM);
        same("aten::max.dim", &reduce::MAX_DIM);
        same("max", &reduce::MAX_DIM);
        same("sum.dim_IntList", &reduce::SUM);
        same("sum", &reduce::SUM);
        same("pow.Tensor_Scalar", &unary::POW_SCALAR);
        same("pow.Tensor_Tensor", &binary::POW);
        same("add.Tensor", &binary::ADD);
        same("add", &binary::ADD);
        same("relu", &unary::RELU);
        same("gelu", &unary::GELU);
        same("ferrotorch::gelu_tanh", &unary::GELU_TANH);
        same("where", &binary::WHERE);
        same("uniform_", &factory::UNIFORM);
        // Two overloads of `pow` are registered: a bare name is ambiguous.
        assert!(find_op("pow").is_none());
        for missing in ["add.Scalar", "gelu_tanh", "no_such_op", "", ".", "sum.", "aten::"] {
            assert!(find_op(missing).is_none(), "{missing}");
        }
        let max = find_op("max.dim").map(|e| (e.base_name(), e.overload_name()));
        assert_eq!(max, Some(("max", "dim")));
        let relu = find_op("relu").map(|e| (e.base_name(), e.overload_name()));
        assert_eq!(relu, Some(("relu", "")));
    }

    fn nothing(_: &dyn crate::dispatch::Op, _: &[&Tensor], _: &[&Tensor]) -> Result<()> {
        Ok(())
    }

    static MALFORMED: OpEntry = OpEntry::new("test::two words");
    static TAKEN: OpEntry = OpEntry::new("add.Tensor");
    static NO_OVERLOAD: OpEntry = OpEntry::new("test::foo.");

    #[test]
    fn registration_refuses_malformed_and_duplicate_names() {
        let kernel = Kernel::Structured(nothing as StructuredFn);
        let slot = Slot::Key(crate::dispatch::DispatchKey::PrivateUse1);
        for e in [&MALFORMED, &TAKEN, &NO_OVERLOAD] {
            let r = e.register(slot, kernel);
            assert!(matches!(r, Err(Error::Registration { .. })), "{}: {r:?}", e.name());
            assert!(!e.has_kernel(slot));
        }
        assert!(registered_ops().iter().all(|e| !std::ptr::eq(*e, &TAKEN)));
    }

    #[test]
    fn error_messages_name_the_operator_by_its_base_name() {
        let a = Tensor::from_vec(vec![1.0f32, 2.0], [2]).expect("a tensor");
        let b = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3]).expect("a tensor");
        let e = a.add(&b).expect_err("shapes do not broadcast").to_string();
        assert!(e.starts_with("add: "), "{e}");
        let e = a.max_dim(3, false).expect_err("no dim 3").to_string();
        assert!(e.starts_with("max: "), "{e}");
    }
}
