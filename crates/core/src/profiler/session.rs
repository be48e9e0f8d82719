//! The recording side of the profiler: one session per thread, its open
//! events kept on a stack so that each event knows its parent, and each
//! finished event adds its time and memory to its parent's children.

use std::backtrace::Backtrace;
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::backend::dispatch::OpEntry;
use crate::backend::storage::{memory_allocated, set_thread_memory_tracing, thread_traced_bytes};
use crate::{DType, Tensor};

use super::{EventKind, ProfileOptions};

/// What an event is called, kept cheap to record: an operator's table (its
/// name is formatted when the results are read) or a string.
pub(crate) enum EventName {
    /// A dispatched operator.
    Op(&'static OpEntry),
    /// A scope or autograd node.
    Text(Cow<'static, str>),
}

impl EventName {
    /// The name as PyTorch's profiler shows it: `aten::add` for an ATen
    /// operator, a namespaced operator's full name as it is.
    pub(crate) fn render(&self) -> String {
        match self {
            EventName::Op(e) => {
                let base = e.base_name();
                if base.contains("::") {
                    base.to_string()
                } else {
                    format!("aten::{base}")
                }
            }
            EventName::Text(t) => t.to_string(),
        }
    }
}

/// An event as recorded (times in nanoseconds since the session started).
pub(crate) struct RawEvent {
    pub(crate) name: EventName,
    pub(crate) kind: EventKind,
    pub(crate) start: u64,
    /// `None` while the event is open.
    pub(crate) end: Option<u64>,
    pub(crate) parent: Option<usize>,
    pub(crate) depth: usize,
    /// Total time of the finished children.
    pub(crate) child_ns: u64,
    pub(crate) shapes: Vec<Vec<usize>>,
    pub(crate) dtypes: Vec<DType>,
    /// This thread's traced (allocated, freed) bytes when the event began.
    mem_start: (u64, u64),
    /// Bytes allocated minus bytes freed inside the event, children included.
    pub(crate) mem: i64,
    /// The children's `mem`.
    pub(crate) child_mem: i64,
    /// The allocator's live bytes when the event ended (with `profile_memory`).
    pub(crate) allocated_after: Option<usize>,
    pub(crate) stack: Option<Backtrace>,
}

/// One thread's recording.
pub(crate) struct Session {
    pub(crate) opts: ProfileOptions,
    pub(crate) id: u64,
    pub(crate) start: Instant,
    pub(crate) thread: u64,
    pub(crate) events: Vec<RawEvent>,
    /// Indices of the open events, innermost last.
    open: Vec<usize>,
    /// The thread's memory tracing before the session switched it on.
    tracing_before: bool,
}

thread_local! {
    /// Whether a session runs on this thread (read on every autograd node
    /// and every `record_function`, so a plain flag).
    static ON: Cell<bool> = const { Cell::new(false) };
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
    static THREAD_INDEX: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

/// Whether a profiler records on this thread.
#[inline]
pub(crate) fn is_on() -> bool {
    cfg!(not(ferrotorch_no_profiler)) && ON.try_with(Cell::get).unwrap_or(false)
}

/// A small number naming this thread in events (1 for the first thread
/// that recorded or asked).
pub(crate) fn thread_index() -> u64 {
    THREAD_INDEX.with(|t| *t)
}

/// Starts a session on this thread; `false` if one is already running.
pub(crate) fn start(opts: ProfileOptions) -> Option<u64> {
    SESSION.with(|s| {
        let mut s = s.borrow_mut();
        if s.is_some() {
            return None;
        }
        let id = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
        let tracing_before = if opts.profile_memory {
            set_thread_memory_tracing(true)
        } else {
            false
        };
        *s = Some(Session {
            opts,
            id,
            start: Instant::now(),
            thread: thread_index(),
            events: Vec::new(),
            open: Vec::new(),
            tracing_before,
        });
        ON.with(|o| o.set(true));
        Some(id)
    })
}

/// Ends session `id` on this thread and returns it (events still open are
/// closed now); `None` if it is not running.
pub(crate) fn finish(id: u64) -> Option<Session> {
    let now_session = SESSION.try_with(|s| {
        let mut s = s.borrow_mut();
        if s.as_ref().is_none_or(|x| x.id != id) {
            return None;
        }
        s.take()
    });
    let mut session = now_session.ok().flatten()?;
    let _ = ON.try_with(|o| o.set(false));
    if session.opts.profile_memory {
        set_thread_memory_tracing(session.tracing_before);
    }
    while let Some(&i) = session.open.last() {
        session.close(i);
    }
    Some(session)
}

/// An open event: the session and index [`end`] closes.
#[must_use = "the event ends when the token is passed to `end`"]
pub(crate) struct Token {
    session: u64,
    index: usize,
}

/// Opens an event on this thread's session, recording `inputs`' shapes and
/// dtypes when the session asks for them; `None` when no session runs.
pub(crate) fn begin(name: EventName, kind: EventKind, inputs: &[&Tensor]) -> Option<Token> {
    if !is_on() {
        return None;
    }
    SESSION
        .try_with(|s| {
            let mut guard = s.borrow_mut();
            let s = guard.as_mut()?;
            let (shapes, dtypes) = if s.opts.record_shapes {
                (
                    inputs.iter().map(|t| t.shape().to_vec()).collect(),
                    inputs.iter().map(|t| t.dtype()).collect(),
                )
            } else {
                (Vec::new(), Vec::new())
            };
            let stack = s.opts.with_stack.then(Backtrace::force_capture);
            let parent = s.open.last().copied();
            let index = s.events.len();
            s.events.push(RawEvent {
                name,
                kind,
                start: 0,
                end: None,
                parent,
                depth: s.open.len(),
                child_ns: 0,
                shapes,
                dtypes,
                mem_start: if s.opts.profile_memory {
                    thread_traced_bytes()
                } else {
                    (0, 0)
                },
                mem: 0,
                child_mem: 0,
                allocated_after: None,
                stack,
            });
            s.open.push(index);
            // Last, so the bookkeeping above is not timed.
            s.events[index].start = elapsed_ns(s.start);
            Some(Token { session: s.id, index })
        })
        .ok()
        .flatten()
}

/// Closes the event of `token` (and any event opened inside it and left
/// open); nothing if its session has ended.
pub(crate) fn end(token: Token) {
    let _ = SESSION.try_with(|s| {
        if let Some(s) = s.borrow_mut().as_mut()
            && s.id == token.session
        {
            s.close(token.index);
        }
    });
}

fn elapsed_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl Session {
    /// Ends event `index` now, first ending events opened inside it.
    fn close(&mut self, index: usize) {
        let now = elapsed_ns(self.start);
        let Some(pos) = self.open.iter().rposition(|&i| i == index) else {
            return;
        };
        while self.open.len() > pos {
            let i = self.open.pop().expect("an open event");
            let mem = if self.opts.profile_memory {
                let (a, f) = thread_traced_bytes();
                let (a0, f0) = self.events[i].mem_start;
                (a - a0) as i64 - (f - f0) as i64
            } else {
                0
            };
            let e = &mut self.events[i];
            e.end = Some(now);
            e.mem = mem;
            if self.opts.profile_memory {
                e.allocated_after = Some(memory_allocated());
            }
            let dur = now.saturating_sub(e.start);
            if let Some(p) = e.parent {
                self.events[p].child_ns += dur;
                self.events[p].child_mem += mem;
            }
        }
    }
}
