//! The meta device's memory ledger: while a prediction runs on this thread
//! ([`crate::memory::predict_peak_memory`]), each meta storage charges its
//! bytes, rounded as the CPU allocator rounds its blocks, while it lives,
//! and the ledger keeps the peak and a timeline of the live bytes.

use std::cell::RefCell;

use super::cpu_alloc::class_of;

/// One point of a prediction's timeline: the live bytes after an
/// allocation by `op` (or after a free, with `op` `"free"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineEntry {
    /// The operator that allocated, or `"free"`.
    pub op: &'static str,
    /// Live bytes afterwards.
    pub live_bytes: usize,
}

/// What [`predict_peak_memory`](crate::memory::predict_peak_memory) found.
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

/// Starts a ledger on this thread; false if one is already running.
pub(crate) fn start() -> bool {
    LEDGER.with(|l| {
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
    })
}

/// Ends this thread's ledger and returns its prediction (the live bytes at
/// the end as `final_bytes`); `None` if none was running.
pub(crate) fn finish() -> Option<MemoryPrediction> {
    let ledger = LEDGER.try_with(|l| l.borrow_mut().take()).ok()??;
    let mut prediction = ledger.prediction;
    prediction.final_bytes = ledger.live;
    Some(prediction)
}
