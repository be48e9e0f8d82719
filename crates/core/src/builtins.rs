//! Start-up registration: everything built in that the dispatcher runs.
//!
//! The dispatcher (`dispatch/`) sits below the operators, kernels and
//! autograd: it knows keys, tables and backends, and names none of them.
//! What it runs is registered into it here, once, on first use (the
//! dispatcher's `ensure_init` calls [`register`], its one reference to
//! anything above it):
//!
//! 1. the built-in backends (CPU memory, the shape-only meta device);
//! 2. the CPU kernels (`cpu::register_kernels`);
//! 3. the backend-independent kernels: views, `cat`, device copies, the
//!    composite ops and the composite forms of the fused backward formulas
//!    (`ops::register_composites`);
//! 4. the autograd layer, as the `Autograd` key's fallback;
//! 5. the copy that writes results into the outputs of `out=` and in-place
//!    calls ([`crate::dispatch::set_out_copy`]).
//!
//! Every public registration function (`OpEntry::register`,
//! `register_backend`, `register_fallback`) waits for this first, so an
//! out-of-tree registration always lands after the built-ins.

use crate::Result;
use crate::dispatch::{self, CpuBackend, DispatchKey, MetaBackend};

/// Registers every built-in backend, kernel and fallback, and the copy for
/// `out=` writes. Runs once, from the dispatcher's first use; nothing else
/// can register before it.
pub(crate) fn register() -> Result<()> {
    dispatch::register_backend_builtin(DispatchKey::Cpu, &CpuBackend)?;
    dispatch::register_backend_builtin(DispatchKey::Meta, &MetaBackend)?;
    crate::cpu::register_kernels()?;
    crate::ops::register_composites()?;
    dispatch::register_fallback_builtin(DispatchKey::Autograd, crate::autograd::layer::autograd_layer)?;
    dispatch::set_out_copy(crate::ops::copy_into)?;
    Ok(())
}
