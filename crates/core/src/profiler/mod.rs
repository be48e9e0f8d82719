//! The profiler (`torch.profiler`): a layer of the dispatcher that records
//! every operator call made while it runs (name, input shapes and dtypes,
//! start and end, thread, bytes allocated and freed), nested
//! [`record_function`] scopes and the autograd engine's nodes; then
//! [`Profile::key_averages`] groups the events into PyTorch's table and
//! [`Profile::export_chrome_trace`] writes a trace that Perfetto and
//! `chrome://tracing` open.
//!
//! The profiler records on the thread that started it (operators run by
//! other threads, such as data loader workers, are not seen), so profilers
//! on different threads do not mix their events. When no profiler runs,
//! the dispatcher does no profiling work at all: the Profiler key is simply
//! not in any call's key set.
//!
//! ```
//! use ferrotorch_core::Tensor;
//! use ferrotorch_core::profiler::{self, ProfileOptions, SortBy};
//!
//! let x = Tensor::randn([64, 32])?.requires_grad_(true)?;
//! let w = Tensor::randn([32, 16])?;
//! let prof = profiler::profile(ProfileOptions { record_shapes: true, ..Default::default() }, || {
//!     let _scope = profiler::record_function("model_inference");
//!     x.matmul(&w)?.relu()?.sum()?.backward()
//! })?
//! .1;
//! let table = prof.key_averages().table(SortBy::CpuTimeTotal, 10);
//! assert!(table.contains("model_inference") && table.contains("aten::mm"));
//! assert!(prof.events().iter().any(|e| e.name == "MmBackward0"));
//! # Ok::<(), ferrotorch_core::Error>(())
//! ```

mod averages;
mod layer;
mod session;
mod trace;

use std::borrow::Cow;
use std::marker::PhantomData;

#[cfg_attr(ferrotorch_no_profiler, allow(unused_imports))]
use crate::backend::dispatch::{DispatchKey, DispatchKeySet, KeyGuard, include_keys};
use crate::{Error, Result};
pub use averages::{EventAverage, KeyAverages, SortBy};
use session::{EventName, Token};

/// What a profiler records (`torch.profiler.ProfilerActivity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProfilerActivity {
    /// Operators run on the CPU (and the host side of every other device).
    Cpu,
    /// CUDA kernels: needs the CUDA backend, which this build does not have.
    Cuda,
}

/// The options of [`profile`] (`torch.profiler.profile`'s keywords).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileOptions {
    /// What to record; an empty list means the CPU, as in PyTorch.
    pub activities: Vec<ProfilerActivity>,
    /// Record each operator's input shapes and dtypes.
    pub record_shapes: bool,
    /// Record the bytes allocated and freed inside each event.
    pub profile_memory: bool,
    /// Record the call stack of each event (a backtrace per event: slow,
    /// and only useful with debug information).
    pub with_stack: bool,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            activities: vec![ProfilerActivity::Cpu],
            record_shapes: false,
            profile_memory: false,
            with_stack: false,
        }
    }
}

/// What kind of code an event timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// A dispatched operator (`aten::mm`).
    Op,
    /// A [`record_function`] scope.
    UserScope,
    /// An autograd node run by the backward engine (`MmBackward0`).
    BackwardNode,
}

/// One recorded event (`torch.autograd.profiler_util.FunctionEvent`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProfilerEvent {
    /// The name: `aten::add`, a scope's name, or an autograd node's.
    pub name: String,
    /// What the event timed.
    pub kind: EventKind,
    /// The recording thread's number (the `tid` of the trace).
    pub thread: u64,
    /// Start, in nanoseconds since the profiler started.
    pub start_ns: u64,
    /// End, in nanoseconds since the profiler started.
    pub end_ns: u64,
    /// Time not spent in child events.
    pub self_ns: u64,
    /// Nesting depth (0 for the outermost events).
    pub depth: usize,
    /// The index in [`Profile::events`] of the enclosing event.
    pub parent: Option<usize>,
    /// Input shapes (with `record_shapes`; empty otherwise).
    pub input_shapes: Vec<Vec<usize>>,
    /// Input dtypes, as PyTorch names them (with `record_shapes`).
    pub input_dtypes: Vec<String>,
    /// Bytes allocated minus bytes freed inside the event, children
    /// included (with `profile_memory`; 0 otherwise).
    pub cpu_memory: i64,
    /// [`cpu_memory`](Self::cpu_memory) without the children's.
    pub self_cpu_memory: i64,
    /// Bytes in live CPU buffers when the event ended (with `profile_memory`).
    pub allocated_after: Option<usize>,
    /// The call stack, innermost frame first, without the frames of the
    /// profiler, the dispatcher and the standard library (with `with_stack`).
    pub stack: Vec<String>,
}

impl ProfilerEvent {
    /// Duration in nanoseconds, children included.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// A running profiler: every operator dispatched on this thread is
/// recorded until [`stop`](Self::stop). Dropping it without `stop` (as on
/// a panic) discards what it recorded and writes nothing.
#[must_use = "the profiler stops when this guard is dropped"]
pub struct ProfilerGuard {
    session: u64,
    _keys: KeyGuard,
    /// The profiler belongs to its thread.
    _not_send: PhantomData<*const ()>,
}

/// Starts a profiler on this thread (`with torch.profiler.profile(...)`).
/// Errors: another profiler already runs on this thread, or an activity
/// this build cannot record (CUDA).
pub fn start(options: ProfileOptions) -> Result<ProfilerGuard> {
    crate::dispatch::ensure_init()?;
    if cfg!(ferrotorch_no_profiler) {
        return Err(Error::invalid(
            "profile",
            "this build of ferrotorch has no profiler (built with --cfg ferrotorch_no_profiler)",
        ));
    }
    if options.activities.contains(&ProfilerActivity::Cuda) {
        return Err(Error::DeviceUnavailable {
            device: crate::Device::Cuda(0),
            reason: "the profiler cannot record CUDA activity: ferrotorch was built without the CUDA backend".into(),
        });
    }
    let Some(session) = session::start(options) else {
        return Err(Error::invalid(
            "profile",
            "a profiler is already running on this thread; stop it before starting another",
        ));
    };
    Ok(ProfilerGuard {
        session,
        _keys: include_keys(DispatchKeySet::of(DispatchKey::Profiler)),
        _not_send: PhantomData,
    })
}

impl ProfilerGuard {
    /// Stops recording and returns what was recorded; scopes still open are
    /// closed now.
    pub fn stop(self) -> Profile {
        let session = session::finish(self.session);
        // `self` drops here: the Profiler key leaves the thread's key set.
        Profile::from_session(session)
    }
}

impl Drop for ProfilerGuard {
    fn drop(&mut self) {
        // Without `stop` (a panic, an early return): the session is discarded.
        let _ = session::finish(self.session);
    }
}

/// Runs `f` under a profiler and returns its result with the recording:
/// `with torch.profiler.profile(...) as prof:` as a closure. An error of
/// `f` is returned as it is (the recording is discarded).
pub fn profile<T>(options: ProfileOptions, f: impl FnOnce() -> Result<T>) -> Result<(T, Profile)> {
    let guard = start(options)?;
    let out = f()?;
    Ok((out, guard.stop()))
}

/// A finished recording (`prof` after `with profile() as prof:`).
#[derive(Debug, Clone, Default)]
pub struct Profile {
    events: Vec<ProfilerEvent>,
    options: Option<ProfileOptions>,
}

impl Profile {
    fn from_session(session: Option<session::Session>) -> Profile {
        let Some(s) = session else {
            return Profile::default();
        };
        let events = s
            .events
            .into_iter()
            .map(|e| {
                let end = e.end.unwrap_or(e.start);
                ProfilerEvent {
                    name: e.name.render(),
                    kind: e.kind,
                    thread: s.thread,
                    start_ns: e.start,
                    end_ns: end,
                    self_ns: end.saturating_sub(e.start).saturating_sub(e.child_ns),
                    depth: e.depth,
                    parent: e.parent,
                    input_shapes: e.shapes,
                    input_dtypes: e.dtypes.iter().map(|d| d.to_string()).collect(),
                    cpu_memory: e.mem,
                    self_cpu_memory: e.mem - e.child_mem,
                    allocated_after: e.allocated_after,
                    stack: e.stack.map(|b| trace::user_frames(&b)).unwrap_or_default(),
                }
            })
            .collect();
        Profile {
            events,
            options: Some(s.opts),
        }
    }

    /// Every event, in the order they started.
    pub fn events(&self) -> &[ProfilerEvent] {
        &self.events
    }

    /// The options the profiler ran with (`None` for an empty profile).
    pub fn options(&self) -> Option<&ProfileOptions> {
        self.options.as_ref()
    }

    /// The events grouped by name (`prof.key_averages()`).
    pub fn key_averages(&self) -> KeyAverages {
        KeyAverages::new(self, false, 0)
    }

    /// The events grouped by name and input shapes
    /// (`prof.key_averages(group_by_input_shape=True)`).
    pub fn key_averages_by_input_shape(&self) -> KeyAverages {
        KeyAverages::new(self, true, 0)
    }

    /// The events grouped by name and the innermost `n` frames of their
    /// call stacks (`prof.key_averages(group_by_stack_n=n)`; needs `with_stack`).
    pub fn key_averages_by_stack(&self, n: usize) -> KeyAverages {
        KeyAverages::new(self, false, n)
    }

    /// Writes the events as a Chrome trace (JSON of complete events, and a
    /// counter of live bytes with `profile_memory`) that Perfetto and
    /// `chrome://tracing` open. The file is written whole or not at all
    /// (temporary file and rename); an error names the path.
    pub fn export_chrome_trace(&self, path: impl AsRef<std::path::Path>) -> Result<()> {
        trace::export(self, path.as_ref())
    }

    /// The trace [`export_chrome_trace`](Self::export_chrome_trace) writes, as a string.
    pub fn chrome_trace_json(&self) -> String {
        trace::to_json(self)
    }
}

/// A named scope in the profile (`torch.profiler.record_function`): ops
/// run while it lives are its children. Costs a thread-local read when
/// no profiler runs.
#[must_use = "the scope ends when this guard is dropped"]
pub struct RecordFunction {
    token: Option<Token>,
    _not_send: PhantomData<*const ()>,
}

/// Opens a named scope; it ends when the returned guard drops.
pub fn record_function(name: impl Into<Cow<'static, str>>) -> RecordFunction {
    scope(EventKind::UserScope, || name.into())
}

/// An event of `kind` named by `name` (called only when a profiler runs).
fn scope(kind: EventKind, name: impl FnOnce() -> Cow<'static, str>) -> RecordFunction {
    let token = if session::is_on() {
        session::begin(EventName::Text(name()), kind, &[])
    } else {
        None
    };
    RecordFunction {
        token,
        _not_send: PhantomData,
    }
}

impl Drop for RecordFunction {
    fn drop(&mut self) {
        if let Some(t) = self.token.take() {
            session::end(t);
        }
    }
}

/// Whether a profiler records on this thread.
pub fn is_profiling() -> bool {
    session::is_on()
}

/// The autograd engine's scope around one node's backward (named after
/// the node), when a profiler runs.
pub(crate) fn node_scope(name: impl FnOnce() -> String) -> RecordFunction {
    scope(EventKind::BackwardNode, || Cow::Owned(name()))
}
