//! `Work`: the handle of a collective in flight (`c10d::Work`), completed
//! by the backend's own thread, off the calling thread (as NCCL's work is
//! completed by the device stream).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use ferrotorch_core::Tensor;

use crate::error::{DistError, Result};

type Callback = Box<dyn FnOnce(&std::result::Result<Vec<Tensor>, String>) + Send>;

/// The handle of one collective or point-to-point operation. Cloning it
/// gives another handle to the same operation.
///
/// `wait` blocks until the operation completed or failed; a failure (a
/// timeout, a dead peer, a mismatched collective) is a
/// [`DistError::Collective`] naming the operation and its sequence number.
#[derive(Clone)]
pub struct Work {
    inner: Arc<Inner>,
}

struct Inner {
    op: &'static str,
    seq: u64,
    state: Mutex<State>,
    done: Condvar,
    /// Threads blocked on `done` (changed only under `state`'s lock): a
    /// finish with none skips the wake-up (a system call each time).
    waiters: AtomicUsize,
}

enum State {
    Pending {
        callbacks: Vec<Callback>,
        wakers: Vec<Waker>,
    },
    Done(std::result::Result<Vec<Tensor>, String>),
}

impl std::fmt::Debug for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Work")
            .field("op", &self.inner.op)
            .field("seq", &self.inner.seq)
            .field("completed", &self.is_completed())
            .finish()
    }
}

impl Work {
    /// A pending work for `op` at sequence number `seq`.
    pub fn new(op: &'static str, seq: u64) -> Self {
        Work {
            inner: Arc::new(Inner {
                op,
                seq,
                state: Mutex::new(State::Pending {
                    callbacks: Vec::new(),
                    wakers: Vec::new(),
                }),
                done: Condvar::new(),
                waiters: AtomicUsize::new(0),
            }),
        }
    }

    /// A work already completed with `outputs`.
    pub fn completed(op: &'static str, seq: u64, outputs: Vec<Tensor>) -> Self {
        let w = Work::new(op, seq);
        w.finish(Ok(outputs));
        w
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Completes the work (the backend's call): wakes waiters, runs the
    /// callbacks of [`Work::then`] on this thread. A second call is ignored.
    pub fn finish(&self, result: std::result::Result<Vec<Tensor>, String>) {
        let mut st = self.lock();
        let State::Pending { callbacks, wakers } = &mut *st else {
            return;
        };
        let callbacks = std::mem::take(callbacks);
        let wakers = std::mem::take(wakers);
        *st = State::Done(result);
        let waiting = self.inner.waiters.load(Ordering::Relaxed) > 0;
        drop(st);
        if waiting {
            self.inner.done.notify_all();
        }
        wakers.into_iter().for_each(Waker::wake);
        if !callbacks.is_empty() {
            let st = self.lock();
            if let State::Done(r) = &*st {
                let r = r.clone();
                drop(st);
                callbacks.into_iter().for_each(|cb| cb(&r));
            }
        }
    }

    /// The operation's name (`"all_reduce"`, ...).
    pub fn op(&self) -> &'static str {
        self.inner.op
    }

    /// The operation's sequence number in its group.
    pub fn seq(&self) -> u64 {
        self.inner.seq
    }

    /// Whether the operation has finished, successfully or not.
    pub fn is_completed(&self) -> bool {
        matches!(*self.lock(), State::Done(_))
    }

    /// Whether the operation finished successfully.
    pub fn is_success(&self) -> bool {
        matches!(*self.lock(), State::Done(Ok(_)))
    }

    /// The failure's message, once the operation failed.
    pub fn exception(&self) -> Option<String> {
        match &*self.lock() {
            State::Done(Err(e)) => Some(e.clone()),
            _ => None,
        }
    }

    /// Blocks until the operation finished; its error if it failed.
    pub fn wait(&self) -> Result<()> {
        self.wait_for(None).map(drop)
    }

    /// Blocks up to `timeout`; a [`DistError::Timeout`] if the operation
    /// has not finished by then (it goes on; the group's watchdog ends it).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<()> {
        self.wait_for(Some(timeout)).map(drop)
    }

    /// Waits, then the output tensors (`work.result()`).
    pub fn result(&self) -> Result<Vec<Tensor>> {
        self.wait_for(None)
    }

    fn wait_for(&self, timeout: Option<Duration>) -> Result<Vec<Tensor>> {
        let end = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut st = self.lock();
        loop {
            if let State::Done(r) = &*st {
                return r.clone().map_err(DistError::Collective);
            }
            self.inner.waiters.fetch_add(1, Ordering::Relaxed);
            st = match end {
                None => self.inner.done.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(end) => {
                    let now = Instant::now();
                    if now >= end {
                        self.inner.waiters.fetch_sub(1, Ordering::Relaxed);
                        return Err(DistError::Timeout {
                            op: "Work.wait",
                            what: format!("{} (sequence number {})", self.inner.op, self.inner.seq),
                            after: timeout.unwrap_or_default(),
                        });
                    }
                    self.inner
                        .done
                        .wait_timeout(st, end - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
            self.inner.waiters.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Runs `f` with the outcome once the operation finished (at once, on
    /// this thread, if it has): `get_future().then(...)`.
    pub fn then(&self, f: impl FnOnce(&std::result::Result<Vec<Tensor>, String>) + Send + 'static) {
        let mut st = self.lock();
        match &mut *st {
            State::Pending { callbacks, .. } => callbacks.push(Box::new(f)),
            State::Done(r) => {
                let r = r.clone();
                drop(st);
                f(&r);
            }
        }
    }
}

/// `work.get_future()` for async code: `work.clone().await` gives the
/// output tensors or the error.
impl std::future::Future for Work {
    type Output = Result<Vec<Tensor>>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.lock();
        match &mut *st {
            State::Done(r) => Poll::Ready(r.clone().map_err(DistError::Collective)),
            State::Pending { wakers, .. } => {
                if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    wakers.push(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_on_other_threads_are_woken_by_finish() {
        let w = Work::new("all_reduce", 7);
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let w = w.clone();
                std::thread::spawn(move || w.wait())
            })
            .collect();
        // Give them time to block (the finish must wake, not find, them).
        std::thread::sleep(Duration::from_millis(50));
        assert!(!w.is_completed());
        w.finish(Ok(vec![]));
        for h in waiters {
            h.join().unwrap().unwrap();
        }
        assert!(w.is_success());
    }

    #[test]
    fn a_timed_out_wait_leaves_later_waits_working() {
        let w = Work::new("barrier", 1);
        let err = w.wait_timeout(Duration::from_millis(20)).unwrap_err();
        assert!(err.to_string().contains("barrier (sequence number 1)"), "{err}");
        assert_eq!(w.inner.waiters.load(Ordering::Relaxed), 0);
        let w2 = w.clone();
        let h = std::thread::spawn(move || w2.wait_timeout(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(30));
        w.finish(Err("peer 1 died".into()));
        let err = h.join().unwrap().unwrap_err();
        assert!(err.to_string().contains("peer 1 died"), "{err}");
        assert_eq!(w.exception().as_deref(), Some("peer 1 died"));
        assert_eq!(w.inner.waiters.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn finish_runs_callbacks_once_and_ignores_a_second_result() {
        let w = Work::new("broadcast", 2);
        let (tx, rx) = std::sync::mpsc::channel();
        w.then(move |r| tx.send(r.is_ok()).unwrap());
        w.finish(Ok(vec![]));
        w.finish(Err("late".into()));
        assert!(rx.recv().unwrap());
        assert!(rx.try_recv().is_err());
        assert!(w.is_success());
    }
}
