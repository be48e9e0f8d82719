//! The profiler's dispatcher layer: the fallback of the Profiler key.

use crate::backend::dispatch::registration::{Registration, Stage};
use crate::backend::dispatch::{Call, DispatchKey, DispatchKeySet, Tensors, redispatch};

use super::EventKind;
use super::session::{self, EventName};

#[cfg(not(ferrotorch_no_profiler))]
inventory::submit! {
    Registration {
        stage: Stage::Layers,
        what: "profiler fallback",
        run: || crate::backend::dispatch::register_fallback_builtin(DispatchKey::Profiler, profiler_layer),
    }
}

/// Records the call as an event around the kernels below the Profiler key
/// (operators those kernels dispatch are recorded inside it).
#[cfg_attr(ferrotorch_no_profiler, allow(dead_code))]
fn profiler_layer(call: &Call, keys: DispatchKeySet) -> crate::Result<Tensors> {
    let token = session::begin(EventName::Op(call.op.entry()), EventKind::Op, call.inputs);
    let result = redispatch(call, keys);
    if let Some(t) = token {
        session::end(t);
    }
    result
}
