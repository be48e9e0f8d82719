//! Graph nodes: a backward function, the edges to the nodes of its inputs,
//! and the hooks on its outputs' gradients.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use smallvec::SmallVec;

use crate::{Result, Tensor};

/// A gradient hook: sees the gradient and may return a replacement
/// (`Ok(Some(..))`), leave it (`Ok(None)`), or fail, which ends the backward
/// pass with that error (returned by `backward()` / `autograd::grad`).
/// [`Tensor::register_hook`] takes an infallible closure and
/// [`Tensor::register_fallible_hook`] one of this form.
pub type GradHook = Arc<dyn Fn(&Tensor) -> Result<Option<Tensor>> + Send + Sync>;

/// What a node computes in backward.
pub trait Backward: Send + Sync {
    /// The node's name as PyTorch prints it (`MulBackward0`).
    fn name(&self) -> String;

    /// Gradients for the node's inputs (one entry per next edge) from the
    /// gradients of its outputs (`None` where no gradient flowed).
    fn apply(&self, node: &Arc<Node>, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>>;

    /// Checks what [`Backward::apply`] would unpack first (its saved
    /// tensors: freed, or modified in place since saved) without computing
    /// anything: the engine calls it for a node that received no gradient,
    /// as PyTorch's engine runs such a node, whose first act is to unpack.
    fn check_saved(&self, node: &Arc<Node>) -> Result<()> {
        let _ = node;
        Ok(())
    }

    /// Frees saved tensors (after a backward without `retain_graph`).
    fn release(&self) {}

    /// Called with the boxed function when its node is dropped; the default
    /// drops it. (The built-in operator nodes keep their emptied boxes for
    /// reuse: graphs free hundreds of them at once.)
    fn recycle(self: Box<Self>) {}

    /// The leaf this node accumulates into (for `AccumulateGrad`).
    fn leaf(&self) -> Option<&Tensor> {
        None
    }

    /// Shape of input `i`, to validate the gradient returned for it
    /// (`None`: not checked).
    fn input_shape(&self, i: usize) -> Option<&[usize]> {
        let _ = i;
        None
    }

    /// Dtype and device of input `i`: a gradient returned in another dtype
    /// is cast to it, one on another device is an error (PyTorch's
    /// `validate_outputs`); `None`: not checked.
    fn input_dtype_device(&self, i: usize) -> Option<(crate::DType, crate::Device)> {
        let _ = i;
        None
    }
}

/// A node's edges, inline for the common one- and two-input operators.
pub type Edges = SmallVec<[Option<Edge>; 2]>;

/// A reference to one input slot (`input_nr`) of a node: where a gradient goes.
#[derive(Clone)]
pub struct Edge {
    /// The node.
    pub node: Arc<Node>,
    /// Which of the node's outputs' gradient this edge carries.
    pub input_nr: usize,
}

static HOOK_ID: AtomicUsize = AtomicUsize::new(0);

/// A node of the autograd graph.
pub struct Node {
    backward: Option<Box<dyn Backward>>,
    next: Edges,
    seq: u64,
    /// Hooks on the gradient of each output slot, in registration order.
    pre_hooks: Mutex<Vec<(usize, usize, GradHook)>>,
    /// The forward operator's name, for anomaly reports.
    forward_name: Cow<'static, str>,
}

impl Node {
    /// A node running `backward`, whose inputs' gradients go to `next`
    /// (an `Edges` or a `Vec<Option<Edge>>`).
    pub fn new(
        backward: Box<dyn Backward>,
        next: impl Into<Edges>,
        forward_name: impl Into<Cow<'static, str>>,
    ) -> Arc<Node> {
        Arc::new(Node {
            backward: Some(backward),
            next: next.into(),
            seq: SEQ.with(|s| {
                let n = s.get();
                s.set(n + 1);
                n
            }),
            pre_hooks: Mutex::new(Vec::new()),
            forward_name: forward_name.into(),
        })
    }

    /// The backward function.
    pub fn backward_fn(&self) -> &dyn Backward {
        self.backward.as_deref().expect("node used after drop")
    }

    /// PyTorch's name of the node (`AddBackward0`).
    pub fn name(&self) -> String {
        self.backward_fn().name()
    }

    /// The edges to the nodes of this node's inputs.
    pub fn next_edges(&self) -> &[Option<Edge>] {
        &self.next
    }

    /// Creation order among the nodes created on the same thread; later
    /// nodes run first in backward.
    pub fn sequence_nr(&self) -> u64 {
        self.seq
    }

    /// The forward operator that created the node.
    pub fn forward_name(&self) -> &str {
        &self.forward_name
    }

    pub(crate) fn hooks(&self) -> MutexGuard<'_, Vec<(usize, usize, GradHook)>> {
        self.pre_hooks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a hook on the gradient of output slot `slot`; returns its id.
    pub(crate) fn add_hook(&self, slot: usize, hook: GradHook) -> usize {
        let id = next_hook_id();
        self.hooks().push((slot, id, hook));
        id
    }
}

pub(crate) fn next_hook_id() -> usize {
    HOOK_ID.fetch_add(1, Ordering::Relaxed)
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{}>", self.name())
    }
}

/// What a dropped node still owns: its backward function and its edges.
type NodeContents = (Option<Box<dyn Backward>>, Edges);

thread_local! {
    /// Creation order of this thread's nodes (per thread, as PyTorch's
    /// sequence numbers: no shared counter for threads to contend on).
    static SEQ: Cell<u64> = const { Cell::new(0) };
    static DROPPING: Cell<bool> = const { Cell::new(false) };
    static PENDING: RefCell<Vec<NodeContents>> = const { RefCell::new(Vec::new()) };
}

/// Drops what a node owned: its backward function (through
/// [`Backward::recycle`]), then its edges.
fn drop_contents((backward, edges): NodeContents) {
    if let Some(b) = backward {
        b.recycle();
    }
    drop(edges);
}

/// Queues `contents` on this thread's pending list; gives them back when
/// the list is gone (a node dropped while the thread's locals are destroyed).
fn queue(contents: NodeContents) -> std::result::Result<(), NodeContents> {
    let mut item = Some(contents);
    let _ = PENDING.try_with(|p| {
        if let Some(c) = item.take() {
            p.borrow_mut().push(c);
        }
    });
    match item {
        None => Ok(()),
        Some(c) => Err(c),
    }
}

/// The next queued contents, if any (none once the list is gone).
fn dequeue() -> Option<NodeContents> {
    PENDING.try_with(|p| p.borrow_mut().pop()).ok().flatten()
}

/// Drops `contents` without this thread's locals, at thread exit after
/// they were destroyed: still without recursion along the edges, by taking
/// apart each node this is the last owner of, with a local stack.
fn drop_detached(contents: NodeContents) {
    let mut stack = vec![contents];
    while let Some((backward, edges)) = stack.pop() {
        // Saved tensors go first: they may hold the edges' nodes too.
        drop(backward);
        for edge in edges.into_iter().flatten() {
            if let Ok(mut node) = Arc::try_unwrap(edge.node) {
                stack.push((node.backward.take(), std::mem::take(&mut node.next)));
                // `node` drops here with nothing left to free.
            }
        }
    }
}

impl Drop for Node {
    /// Drops the graph behind this node without recursion: nodes released
    /// while another node is being dropped are queued and freed in a loop, so
    /// a chain of a million nodes does not overflow the stack. During the
    /// destruction of the thread's locals (a graph held by another
    /// thread-local, freed at thread exit) the queue may be gone: the graph
    /// is then taken apart with a local stack instead (`drop_detached`),
    /// never a panic.
    fn drop(&mut self) {
        let contents = (self.backward.take(), std::mem::take(&mut self.next));
        if contents.0.is_none() && contents.1.is_empty() {
            return;
        }
        match DROPPING.try_with(Cell::get) {
            Ok(false) => {}
            Ok(true) => {
                if let Err(contents) = queue(contents) {
                    drop_detached(contents);
                }
                return;
            }
            Err(_) => {
                drop_detached(contents);
                return;
            }
        }
        let _ = DROPPING.try_with(|d| d.set(true));
        drop_contents(contents);
        while let Some(next) = dequeue() {
            drop_contents(next);
        }
        let _ = DROPPING.try_with(|d| d.set(false));
    }
}
