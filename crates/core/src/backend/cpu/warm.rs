//! Keeping the thread pool warm between parallel regions.
//!
//! Rayon parks an idle worker after a few microseconds; waking it for the
//! next parallel region costs a futex call and a scheduler round trip (tens of
//! microseconds on a virtual machine), which dominates a training step made
//! of many mid-sized products separated by short serial work. OpenMP, which
//! PyTorch uses, has its threads spin for a while instead. [`keep_warm`] does
//! the same on top of rayon: after a parallel region it leaves a task on the
//! pool that keeps polling for new work (running it at once when it comes)
//! for [`SPIN`], then lets the worker sleep. Who runs a piece of work never
//! changes what it computes, so results stay bitwise identical.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long an idle worker keeps polling after its last work.
const SPIN: Duration = Duration::from_micros(300);

/// Spinning tasks alive now (at most one per other thread of a pool).
static SPINNERS: AtomicUsize = AtomicUsize::new(0);

/// Runs `f(i)` for every `i` in `0..n` on the pool, then keeps the pool
/// warm for the next region (the parallel loop of every CPU kernel).
pub(crate) fn par_for_each(n: usize, f: impl Fn(usize) + Sync + Send) {
    use rayon::prelude::*;
    (0..n).into_par_iter().for_each(f);
    keep_warm();
}

/// Called after a parallel region: makes sure the pool's other threads stay
/// awake for a short while (see the module docs). Cheap when they already are.
pub(crate) fn keep_warm() {
    let want = rayon::current_num_threads().saturating_sub(1);
    let mut cur = SPINNERS.load(Ordering::Relaxed);
    loop {
        if cur >= want {
            return;
        }
        match SPINNERS.compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => break,
            Err(now) => cur = now,
        }
    }
    let spawner = rayon::current_thread_index();
    rayon::spawn(move || {
        // Popped by the thread that left it (waiting in a join of its own),
        // it must not hold that thread up: only idle threads spin.
        if spawner.is_some() && rayon::current_thread_index() == spawner {
            SPINNERS.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let mut until = Instant::now() + SPIN;
        loop {
            match rayon::yield_now() {
                Some(rayon::Yield::Executed) => until = Instant::now() + SPIN,
                Some(rayon::Yield::Idle) => std::hint::spin_loop(),
                None => break,
            }
            if Instant::now() >= until {
                break;
            }
        }
        SPINNERS.fetch_sub(1, Ordering::AcqRel);
    });
}
