//! Memory planning on the meta device: [`predict_peak_memory`] runs a
//! closure (a training step: building the model, forward, backward,
//! optimizer step) with the meta device as the default device, so every
//! tensor it creates has a shape and no memory and every operator runs its
//! shape rule only. Each meta storage charges its bytes, rounded as the CPU
//! allocator rounds its blocks, to a ledger while it lives; the ledger's
//! peak is the prediction, and its timeline shows the live bytes after
//! every allocation and free.

use crate::backend::storage::meta_ledger;
pub use crate::backend::storage::meta_ledger::{MemoryPrediction, TimelineEntry};
use crate::defaults::default_device_scope;
use crate::device::Device;
use crate::error::{Error, Result};

/// Runs `f` on the meta device and predicts the peak of the CPU
/// allocator's `memory_allocated` that running it on the CPU would add.
///
/// Inside `f`, creation functions without an explicit device
/// (`Tensor::zeros`, `randn`, the layers' parameters) make meta tensors;
/// operators run their shape rules, autograd records and runs its graph,
/// and the optimizers allocate their state without computing. `f` must
/// not read values (`item`, `to_vec` are errors on the meta device).
/// Returns `f`'s result and the prediction; an error if a prediction
/// already runs on this thread.
///
/// ```
/// use ferrotorch_core::{Tensor, memory::predict_peak_memory};
/// let (_, p) = predict_peak_memory(|| {
///     let x = Tensor::randn([1024, 256])?; // 1 MiB
///     let y = x.matmul(&x.t()?)?; // 4 MiB more
///     drop(y);
///     x.exp() // 1 MiB, kept: returned
/// })?;
/// assert_eq!(p.peak_bytes, 5 << 20);
/// assert_eq!(p.final_bytes, 1 << 20); // the returned tensor
/// assert_eq!(p.peak_op, "mm");
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub fn predict_peak_memory<T>(f: impl FnOnce() -> Result<T>) -> Result<(T, MemoryPrediction)> {
    if !meta_ledger::start() {
        return Err(Error::invalid(
            "predict_peak_memory",
            "a prediction is already running on this thread",
        ));
    }
    /// Ends the prediction however `f` returns (an error, a panic).
    struct End;
    impl Drop for End {
        fn drop(&mut self) {
            let _ = meta_ledger::finish();
        }
    }
    let end = End;
    let out = {
        let _meta = default_device_scope(Device::Meta);
        f()?
    };
    let prediction = meta_ledger::finish().expect("the ledger of this prediction");
    drop(end);
    Ok((out, prediction))
}
