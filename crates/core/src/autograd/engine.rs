//! The backward engine: dependency counting and a ready queue, no recursion.
//!
//! Nodes run in a fixed order — the ready node created last first (highest
//! sequence number), as in PyTorch — and gradients arriving at one input are
//! summed in that order, so the results are the same bits from run to run
//! and for any thread count. A node's saved tensors are freed as soon as it
//! has run (unless the graph is retained).

use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use smallvec::SmallVec;

use super::graph::{Edge, Node};
use crate::{Error, Result, Tensor};

/// Hashes node addresses (one multiply; std's SipHash costs more than the
/// small nodes it would index).
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_usize(b as usize);
        }
    }

    fn write_usize(&mut self, n: usize) {
        let h = (self.0 ^ n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }
}

type AddrMap<V> = HashMap<usize, V, BuildHasherDefault<AddrHasher>>;

fn key(n: &Arc<Node>) -> usize {
    Arc::as_ptr(n) as usize
}

/// Graphs up to this many nodes are searched linearly (no hash map).
const SMALL_GRAPH: usize = 16;

/// Marks an edge to a node outside the graph being run.
const NONE: usize = usize::MAX;

/// Everything one backward pass needs.
pub(crate) struct Task {
    /// Root edges and the gradients flowing into them.
    pub roots: Vec<(Edge, Tensor)>,
    /// For `autograd::grad`: the edges whose gradients are returned (nothing
    /// is accumulated into `.grad`); `None` for `backward()`.
    pub captures: Option<Vec<Edge>>,
    pub retain_graph: bool,
    pub create_graph: bool,
    /// For `autograd::grad`: whether a captured edge outside the graph is allowed.
    pub allow_unused: bool,
}

fn add_into(slot: &mut Option<Tensor>, g: Tensor) -> Result<()> {
    *slot = Some(match slot.take() {
        None => g,
        Some(old) => old.add(&g)?,
    });
    Ok(())
}

fn has_nan(t: &Tensor) -> bool {
    t.is_floating_point()
        && t.ne(t)
            .and_then(|m| m.any())
            .and_then(|a| a.item::<bool>())
            .unwrap_or(false)
}

/// The graph reachable from the roots, nodes numbered in discovery order.
struct Graph {
    nodes: Vec<Arc<Node>>,
    /// For each node, the index of each next edge's node (`NONE` for no edge).
    children: Vec<SmallVec<[usize; 2]>>,
    index: AddrMap<usize>,
}

impl Graph {
    fn discover(roots: &[(Edge, Tensor)]) -> Graph {
        let mut g = Graph {
            nodes: Vec::new(),
            children: Vec::new(),
            index: AddrMap::default(),
        };
        let mut stack: Vec<usize> = Vec::new();
        for (e, _) in roots {
            if let Some(i) = g.add(&e.node) {
                stack.push(i);
            }
        }
        while let Some(i) = stack.pop() {
            let node = g.nodes[i].clone();
            let mut kids = SmallVec::new();
            for e in node.next_edges() {
                kids.push(match e {
                    None => NONE,
                    Some(e) => match g.add(&e.node) {
                        Some(j) => {
                            stack.push(j);
                            j
                        }
                        None => g.find(&e.node).expect("node discovered"),
                    },
                });
            }
            g.children[i] = kids;
        }
        g
    }

    /// Adds a node; returns its index if it is new.
    fn add(&mut self, n: &Arc<Node>) -> Option<usize> {
        if self.find(n).is_some() {
            return None;
        }
        let i = self.nodes.len();
        self.nodes.push(n.clone());
        self.children.push(SmallVec::new());
        if i >= SMALL_GRAPH {
            if i == SMALL_GRAPH {
                // Past a handful of nodes a linear search costs more than
                // hashing (room for a few times as many, to spare rehashes).
                self.index.reserve(8 * SMALL_GRAPH);
                for (j, m) in self.nodes[..i].iter().enumerate() {
                    self.index.insert(key(m), j);
                }
            }
            self.index.insert(key(n), i);
        }
        Some(i)
    }

    fn find(&self, n: &Arc<Node>) -> Option<usize> {
        if self.nodes.len() <= SMALL_GRAPH {
            self.nodes.iter().position(|m| Arc::ptr_eq(m, n))
        } else {
            self.index.get(&key(n)).copied()
        }
    }
}

/// Runs backward; returns the captured gradients (empty for `backward()`).
pub(crate) fn execute(task: Task) -> Result<Vec<Option<Tensor>>> {
    let _mode = super::set_grad_enabled_guard(task.create_graph);
    let g = Graph::discover(&task.roots);
    let n = g.nodes.len();
    // For grad(): where each captured gradient is read (node, slot, capture index).
    let mut capture_at: Vec<SmallVec<[(usize, usize); 1]>> = Vec::new();
    if let Some(caps) = &task.captures {
        capture_at.resize(n, SmallVec::new());
        for (ci, e) in caps.iter().enumerate() {
            match g.find(&e.node) {
                Some(i) => capture_at[i].push((e.input_nr, ci)),
                None if task.allow_unused => {}
                None => return Err(super::unused_input(ci)),
            }
        }
    }
    // Which nodes must run: all for backward(); for grad(), those on a path
    // to a captured edge (leaves' AccumulateGrad never run).
    let needed: Vec<bool> = if task.captures.is_none() {
        vec![true; n]
    } else {
        let mut needed: Vec<bool> = capture_at.iter().map(|c| !c.is_empty()).collect();
        // Children are discovered after their first parent, so a reverse
        // sweep settles most graphs in one pass; iterate to a fixed point.
        loop {
            let mut changed = false;
            for i in (0..n).rev() {
                if !needed[i] && g.children[i].iter().any(|&c| c != NONE && needed[c]) {
                    needed[i] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        needed
    };
    let runs =
        |i: usize| -> bool { needed[i] && (task.captures.is_none() || g.nodes[i].backward_fn().leaf().is_none()) };
    // Dependencies among nodes that run.
    let mut deps: Vec<usize> = vec![0; n];
    for i in 0..n {
        if needed[i] {
            for &c in &g.children[i] {
                if c != NONE && needed[c] {
                    deps[c] += 1;
                }
            }
        }
    }
    let mut buffers: Vec<SmallVec<[Option<Tensor>; 2]>> = vec![SmallVec::new(); n];
    let put = |buffers: &mut [SmallVec<[Option<Tensor>; 2]>], i: usize, slot: usize, gr: Tensor| -> Result<()> {
        let b = &mut buffers[i];
        if b.len() <= slot {
            b.resize(slot + 1, None);
        }
        add_into(&mut b[slot], gr)
    };
    let mut ready: BinaryHeap<(u64, usize)> = BinaryHeap::new();
    for (e, gr) in &task.roots {
        let i = g.find(&e.node).expect("roots are discovered");
        put(&mut buffers, i, e.input_nr, gr.clone())?;
        if needed[i] && deps[i] == 0 && !ready.iter().any(|r| r.1 == i) {
            ready.push((e.node.sequence_nr(), i));
        }
    }
    let mut captured: Vec<Option<Tensor>> = vec![None; task.captures.as_ref().map_or(0, Vec::len)];
    while let Some((_, i)) = ready.pop() {
        let node = &g.nodes[i];
        let mut grads = std::mem::take(&mut buffers[i]);
        // Tensor hooks registered on this node's outputs.
        let hooks: SmallVec<[_; 2]> = node.hooks().iter().map(|h| (h.0, h.2.clone())).collect();
        for (slot, hook) in hooks {
            if let Some(Some(gr)) = grads.get(slot)
                && let Some(r) = hook(gr)?
            {
                grads[slot] = Some(r);
            }
        }
        if let Some(targets) = capture_at.get(i) {
            for &(slot, ci) in targets {
                captured[ci] = grads.get(slot).cloned().flatten();
            }
        }
        // A node that received no gradient at all (upstream formulas gave
        // none, as PyTorch's norm of order 0) passes none on, unrun; its
        // saved tensors are still checked (PyTorch runs it, and its first
        // act is to unpack them) and freed.
        let mut outputs = if runs(i) && grads.iter().all(Option::is_none) {
            node.backward_fn().check_saved(node)?;
            if !task.retain_graph {
                node.backward_fn().release();
            }
            Vec::new()
        } else if runs(i) {
            // The node as one event of a running profiler (nothing otherwise).
            let _scope = crate::profiler::node_scope(|| node.name());
            let mut out = node.backward_fn().apply(node, &grads).map_err(|e| {
                if super::is_anomaly_enabled() {
                    Error::invalid(
                        "backward",
                        format!(
                            "{e} (in {} of the forward operation '{}')",
                            node.name(),
                            node.forward_name()
                        ),
                    )
                } else {
                    e
                }
            })?;
            if !task.retain_graph {
                node.backward_fn().release();
            }
            validate_outputs(node, &mut out)?;
            out
        } else {
            Vec::new()
        };
        drop(grads);
        for (slot, &c) in g.children[i].iter().enumerate() {
            if c == NONE || !needed[c] {
                continue;
            }
            let e = node.next_edges()[slot].as_ref().expect("edge present");
            if let Some(gr) = outputs.get_mut(slot).and_then(Option::take) {
                put(&mut buffers, c, e.input_nr, gr)?;
            }
            deps[c] -= 1;
            if deps[c] == 0 {
                ready.push((e.node.sequence_nr(), c));
            }
        }
    }
    Ok(captured)
}

/// Validates the gradients a node returned against its inputs (PyTorch's
/// `validate_outputs`): their number and shapes must match, a gradient in
/// another floating dtype is cast to the input's (an f32 gradient of an f16
/// input arrives as f16), one on another device is an error.
fn validate_outputs(node: &Arc<Node>, out: &mut [Option<Tensor>]) -> Result<()> {
    if out.len() != node.next_edges().len() {
        return Err(Error::invalid(
            "backward",
            format!(
                "function {} returned {} gradients, expected {}",
                node.name(),
                out.len(),
                node.next_edges().len()
            ),
        ));
    }
    for (i, slot) in out.iter_mut().enumerate() {
        let Some(g) = slot else { continue };
        if let Some((dtype, device)) = node.backward_fn().input_dtype_device(i) {
            if g.device() != device {
                return Err(Error::invalid(
                    "backward",
                    format!(
                        "function {} returned a gradient on {} for an input on {device} at index {i}",
                        node.name(),
                        g.device()
                    ),
                ));
            }
            if g.dtype() != dtype && dtype.is_floating_point() {
                *g = g.to_dtype(dtype)?;
            }
        }
        if let Some(s) = node.backward_fn().input_shape(i)
            && !crate::layout::same_dims(g.shape(), s)
        {
            // As PyTorch: a gradient the input's shape broadcasts to is
            // summed back to it (e.g. scatter's src gradient, which has the
            // index's shape); any other shape is an error.
            let expandable = s.len() <= g.ndim()
                && crate::layout::broadcast_shapes("backward", s, g.shape()).is_ok_and(|b| b[..] == *g.shape());
            if !expandable {
                return Err(Error::shape(
                    "backward",
                    g.shape(),
                    s,
                    format!("function {} returned an invalid gradient at index {i}", node.name()),
                ));
            }
            *g = crate::ops::grad_util::sum_to(g, s)?;
        }
        let g = &*g;
        if super::is_anomaly_enabled() && has_nan(g) {
            return Err(Error::invalid(
                "backward",
                format!(
                    "function {} returned nan values in its {i}th output (forward operation '{}')",
                    node.name(),
                    node.forward_name()
                ),
            ));
        }
    }
    Ok(())
}
