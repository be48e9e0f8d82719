//! The profiler's dispatcher layer: the fallback of the Profiler key.

use crate::backend::dispatch::{Call, DispatchKeySet, Tensors, redispatch};

use super::EventKind;
use super::session::{self, EventName};

/// Records the call as an event around the kernels below the Profiler key
/// (operators those kernels dispatch are recorded inside it).
#[cfg_attr(ferrotorch_no_profiler, allow(dead_code))]
pub(crate) fn profiler_layer(call: &Call, keys: DispatchKeySet) -> crate::Result<Tensors> {
    let token = session::begin(EventName::Op(call.op.entry()), EventKind::Op, call.inputs);
    let result = redispatch(call, keys);
    if let Some(t) = token {
        session::end(t);
    }
    result
}
