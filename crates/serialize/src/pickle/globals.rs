//! The globals a checkpoint may name: the part of
//! `torch/_weights_only_unpickler.py`'s `_get_allowed_globals()` that
//! ferrotorch can represent. Nothing is ever imported or called: a global
//! is only a tag that `REDUCE` / `NEWOBJ` / `BUILD` interpret.

use ferrotorch_core::DType;

use crate::error::{Error, Result};
use crate::tensor_io::storage_dtype;

/// A global that the reader knows how to interpret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Global {
    /// `collections.OrderedDict`.
    OrderedDict,
    /// `collections.Counter` (loads as a dict of kind Counter).
    Counter,
    /// `torch._utils._rebuild_tensor_v2`.
    RebuildTensorV2,
    /// `torch._utils._rebuild_parameter`.
    RebuildParameter,
    /// `torch._utils._rebuild_parameter_with_state`.
    RebuildParameterWithState,
    /// `torch.nn.parameter.Parameter` (the class itself, called with a tensor).
    Parameter,
    /// `torch.Size` (loads as a tuple).
    TorchSize,
    /// `_codecs.encode` (how protocol 2 pickles `bytes`).
    CodecsEncode,
    /// `builtins.bytearray`.
    Bytearray,
    /// A legacy typed storage class such as `torch.FloatStorage`, by its dtype.
    StorageType(DType),
}

impl Global {
    /// The global's Python name, for messages.
    pub(crate) fn name(self) -> String {
        match self {
            Global::OrderedDict => "collections.OrderedDict".into(),
            Global::Counter => "collections.Counter".into(),
            Global::RebuildTensorV2 => "torch._utils._rebuild_tensor_v2".into(),
            Global::RebuildParameter => "torch._utils._rebuild_parameter".into(),
            Global::RebuildParameterWithState => "torch._utils._rebuild_parameter_with_state".into(),
            Global::Parameter => "torch.nn.parameter.Parameter".into(),
            Global::TorchSize => "torch.Size".into(),
            Global::CodecsEncode => "_codecs.encode".into(),
            Global::Bytearray => "builtins.bytearray".into(),
            Global::StorageType(d) => format!("torch.{}", crate::tensor_io::storage_type_name(d)),
        }
    }
}

/// Python 2 module names that protocol 2 pickles written by Python 3 use
/// (`fix_imports`), mapped back as Python 3's unpickler does.
fn python3_module(module: &str) -> &str {
    match module {
        "__builtin__" => "builtins",
        "copy_reg" => "copyreg",
        other => other,
    }
}

/// The globals `torch.load(weights_only=True)` accepts but ferrotorch
/// cannot represent as a [`Value`](crate::Value).
fn allowed_by_torch_only(module: &str, name: &str) -> bool {
    match module {
        "builtins" => matches!(name, "set" | "complex"),
        "torch" => {
            (name.ends_with("Storage") && name != "UntypedStorage" && name != "TypedStorage")
                || name.ends_with("Tensor")
                || name == "device"
                || name.starts_with("per_tensor_")
                || name.starts_with("per_channel_")
                // By their canonical names only (PyTorch refuses `torch.int`).
                || DType::from_name(name).is_some_and(|d| d.name() == name)
                || matches!(
                    name,
                    "complex32" | "complex64" | "complex128" | "qint8" | "quint8" | "qint32" | "quint4x2" | "quint2x4"
                )
                || name.starts_with("float8_")
                || name.starts_with("float4_")
                || ["int", "uint"].iter().any(|p| {
                    name.strip_prefix(p)
                        .is_some_and(|bits| !bits.is_empty() && bits.bytes().all(|b| b.is_ascii_digit()))
                })
        }
        "torch.serialization" => name == "_get_layout",
        // torch._weights_only_unpickler._tensor_rebuild_functions().
        "torch._utils" => matches!(
            name,
            "_rebuild_tensor"
                | "_rebuild_tensor_v3"
                | "_rebuild_qtensor"
                | "_rebuild_sparse_tensor"
                | "_rebuild_meta_tensor_no_storage"
                | "_rebuild_device_tensor_from_cpu_tensor"
                | "_rebuild_device_tensor_from_numpy"
                | "_rebuild_wrapper_subclass"
        ),
        "torch._tensor" => name == "_rebuild_from_type_v2",
        "torch.cuda" => name.ends_with("Storage"),
        _ => false,
    }
}

/// Resolves `module.name` (as a `GLOBAL` or `STACK_GLOBAL` opcode names it).
///
/// Globals outside PyTorch's weights-only allow-list are
/// [`Error::DisallowedGlobal`]; allowed ones that ferrotorch cannot
/// represent (dtype objects, `torch.device`, sets, storages of dtypes the
/// core lacks, tensor subclasses) are [`Error::Unsupported`].
pub(crate) fn resolve(module: &str, name: &str) -> Result<Global> {
    let module = python3_module(module);
    let g = match (module, name) {
        ("collections", "OrderedDict") => Global::OrderedDict,
        ("collections", "Counter") => Global::Counter,
        ("torch._utils", "_rebuild_tensor_v2") => Global::RebuildTensorV2,
        ("torch._utils", "_rebuild_parameter") => Global::RebuildParameter,
        ("torch._utils", "_rebuild_parameter_with_state") => Global::RebuildParameterWithState,
        ("torch.nn.parameter", "Parameter") => Global::Parameter,
        ("torch", "Size") => Global::TorchSize,
        ("_codecs", "encode") => Global::CodecsEncode,
        ("builtins", "bytearray") => Global::Bytearray,
        ("torch", n) if n.ends_with("Storage") && n != "UntypedStorage" && n != "TypedStorage" => {
            Global::StorageType(storage_dtype(n)?)
        }
        _ if allowed_by_torch_only(module, name) => {
            return Err(Error::Unsupported(format!(
                "the checkpoint uses `{module}.{name}` (allowed by torch.load(weights_only=True), \
                 but ferrotorch has no value for it)"
            )));
        }
        _ => return Err(Error::DisallowedGlobal(format!("{module}.{name}"))),
    };
    Ok(g)
}
