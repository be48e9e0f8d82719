//! Memory planning on the meta device: [`predict_peak_memory`] runs a
//! closure (a training step: building the model, forward, backward,
//! optimizer step) with the meta device as the default device, so every
//! tensor it creates has a shape and no memory and every operator runs its
//! shape rule only. Each meta storage charges its bytes, rounded as the CPU
//! allocator rounds its blocks, to a ledger while it lives; the ledger's
//! peak is the prediction, and its timeline shows the live bytes after
//! every allocation and free.

use std::cell::RefCell;

use crate::backend::storage::class_of;
use crate::{Device, Error, Result};

/// One point of a prediction's timeline: the live bytes after an
/// allocation by `op` (or after a free, with `op` `"free"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineEntry {
    /// The operator that allocated, or `"free"`.
    pub op: &'static str,
    /// Live bytes afterwards.
    pub live_bytes: usize,
}

/// What [`predict_peak_memory`] found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryPrediction {
    /// The most bytes live at once (as `max_memory_allocated` counts them:
    /// whole allocator blocks).
    pub peak_bytes: usize,
    /// The operator whose allocation reached the peak.
    pub peak_op: &'static str,
    /// Bytes still live when the closure returned (what it kept).
    pub final_bytes: usize,
    /// Live bytes after every allocation and free, in order.
    pub timeline: Vec<TimelineEntry>,
}

struct Ledger {
    live: usize,
    op: &'static str,
    prediction: MemoryPrediction,
}

thread_local! {
    static LEDGER: RefCell<Option<Ledger>> = const { RefCell::new(None) };
}

/// Names the operator whose outputs are allocated next (for the timeline).
pub(crate) fn note_op(op: &'static str) {
    let _ = LEDGER.try_with(|l| {
        if let Some(l) = l.borrow_mut().as_mut() {
            l.op = op;
        }
    });
}

/// Charges a new meta storage of `nbytes` to this thread's prediction;
/// returns the bytes charged (0 when no prediction runs).
pub(crate) fn charge(nbytes: usize) -> usize {
    LEDGER
        .try_with(|l| {
            let mut l = l.borrow_mut();
            let Some(l) = l.as_mut() else { return 0 };
            let bytes = if nbytes == 0 {
                0
            } else {
                class_of(nbytes).unwrap_or(nbytes)
            };
            l.live += bytes;
            let op = std::mem::replace(&mut l.op, "unknown");
            l.prediction.timeline.push(TimelineEntry { op, live_bytes: l.live });
            if l.live > l.prediction.peak_bytes {
                l.prediction.peak_bytes = l.live;
                l.prediction.peak_op = op;
            }
            bytes
        })
        .unwrap_or(0)
}

/// Returns the bytes of a meta storage that was dropped.
pub(crate) fn release(bytes: usize) {
    let _ = LEDGER.try_with(|l| {
        if let Some(l) = l.borrow_mut().as_mut() {
            l.live = l.live.saturating_sub(bytes);
            l.prediction.timeline.push(TimelineEntry {
                op: "free",
                live_bytes: l.live,
            });
        }
    });
}

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
    let started = LEDGER.with(|l| {
        let mut l = l.borrow_mut();
        if l.is_some() {
            return false;
        }
        *l = Some(Ledger {
            live: 0,
            op: "unknown",
            prediction: MemoryPrediction::default(),
        });
        true
    });
    if !started {
        return Err(Error::invalid(
            "predict_peak_memory",
            "a prediction is already running on this thread",
        ));
    }
    /// Ends the prediction however `f` returns (an error, a panic).
    struct End;
    impl Drop for End {
        fn drop(&mut self) {
            let _ = LEDGER.try_with(|l| l.borrow_mut().take());
        }
    }
    let end = End;
    let out = {
        let _meta = crate::default_device_scope(Device::Meta);
        f()?
    };
    let ledger = LEDGER
        .with(|l| l.borrow_mut().take())
        .expect("the ledger of this prediction");
    drop(end);
    let mut prediction = ledger.prediction;
    prediction.final_bytes = ledger.live;
    Ok((out, prediction))
}
