//! The backward engine: dependency counting and a ready queue, no recursion.
//!
//! Nodes run in a fixed order — the ready node created last first (highest
//! sequence number), as in PyTorch — and gradients arriving at one input are
//! summed in that order, so the results are the same bits from run to run
//! and for any thread count. A node's saved tensors are freed as soon as it
//! has run (unless the graph is retained).

use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use super::node::{Edge, Node};
use crate::{Error, Result, Tensor};

fn key(n: &Arc<Node>) -> usize {
    Arc::as_ptr(n) as usize
}

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

/// Runs backward; returns the captured gradients (empty for `backward()`).
pub(crate) fn execute(task: Task) -> Result<Vec<Option<Tensor>>> {
    let _mode = super::set_grad_enabled(task.create_graph);
    // Discover the graph (iteratively).
    let mut nodes: HashMap<usize, Arc<Node>> = HashMap::new();
    let mut stack: Vec<Arc<Node>> = Vec::new();
    for (e, _) in &task.roots {
        if nodes.insert(key(&e.node), e.node.clone()).is_none() {
            stack.push(e.node.clone());
        }
    }
    let mut order: Vec<usize> = Vec::new();
    while let Some(n) = stack.pop() {
        order.push(key(&n));
        for e in n.next_edges().iter().flatten() {
            if nodes.insert(key(&e.node), e.node.clone()).is_none() {
                stack.push(e.node.clone());
            }
        }
    }
    if let Some(caps) = &task.captures
        && !task.allow_unused
        && let Some(i) = caps.iter().position(|e| !nodes.contains_key(&key(&e.node)))
    {
        return Err(Error::invalid(
            "grad",
            format!(
                "one of the differentiated tensors (input {i}) appears to not have been used in the graph; \
                 set allow_unused=true if this is the desired behavior"
            ),
        ));
    }
    // Which nodes must run: all for backward(); for grad(), those on a path
    // to a captured edge (leaves' AccumulateGrad never run).
    let capture_targets: HashMap<usize, Vec<(usize, usize)>> = match &task.captures {
        None => HashMap::new(),
        Some(caps) => {
            let mut m: HashMap<usize, Vec<(usize, usize)>> = HashMap::new();
            for (i, e) in caps.iter().enumerate() {
                m.entry(key(&e.node)).or_default().push((e.input_nr, i));
            }
            m
        }
    };
    let needed: HashMap<usize, bool> = if task.captures.is_none() {
        nodes.keys().map(|&k| (k, true)).collect()
    } else {
        // Reverse discovery order visits a node after every node it points to
        // only in a DAG walk; iterate to a fixed point instead (cheap: a few passes).
        let mut needed: HashMap<usize, bool> = nodes.keys().map(|&k| (k, capture_targets.contains_key(&k))).collect();
        loop {
            let mut changed = false;
            for k in order.iter().rev() {
                if needed[k] {
                    continue;
                }
                let n = &nodes[k];
                if n.next_edges().iter().flatten().any(|e| needed[&key(&e.node)]) {
                    needed.insert(*k, true);
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
        |k: &usize| -> bool { needed[k] && (task.captures.is_none() || nodes[k].backward_fn().leaf().is_none()) };
    // Dependencies among nodes that run.
    let mut deps: HashMap<usize, usize> = HashMap::new();
    for k in &order {
        if !needed[k] {
            continue;
        }
        for e in nodes[k].next_edges().iter().flatten() {
            let nk = key(&e.node);
            if needed[&nk] {
                *deps.entry(nk).or_default() += 1;
            }
        }
    }
    let mut buffers: HashMap<usize, Vec<Option<Tensor>>> = HashMap::new();
    let put = |buffers: &mut HashMap<usize, Vec<Option<Tensor>>>, e: &Edge, g: Tensor| -> Result<()> {
        let b = buffers.entry(key(&e.node)).or_default();
        if b.len() <= e.input_nr {
            b.resize(e.input_nr + 1, None);
        }
        add_into(&mut b[e.input_nr], g)
    };
    for (e, g) in &task.roots {
        put(&mut buffers, e, g.clone())?;
    }
    let mut ready: BinaryHeap<(u64, usize)> = BinaryHeap::new();
    for (e, _) in &task.roots {
        let k = key(&e.node);
        if needed[&k] && deps.get(&k).copied().unwrap_or(0) == 0 && !ready.iter().any(|r| r.1 == k) {
            ready.push((e.node.sequence_nr(), k));
        }
    }
    let mut captured: Vec<Option<Tensor>> = vec![None; task.captures.as_ref().map_or(0, Vec::len)];
    while let Some((_, k)) = ready.pop() {
        let node = nodes[&k].clone();
        let mut grads = buffers.remove(&k).unwrap_or_default();
        // Tensor hooks registered on this node's outputs.
        let hooks: Vec<_> = node.hooks().iter().map(|h| (h.0, h.2.clone())).collect();
        for (slot, hook) in hooks {
            if let Some(Some(g)) = grads.get(slot)
                && let Some(r) = hook(g)
            {
                grads[slot] = Some(r);
            }
        }
        if let Some(targets) = capture_targets.get(&k) {
            for &(slot, idx) in targets {
                captured[idx] = grads.get(slot).cloned().flatten();
            }
        }
        let outputs = if runs(&k) {
            let out = node.backward_fn().apply(&node, &grads).map_err(|e| {
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
            check_outputs(&node, &out)?;
            out
        } else {
            Vec::new()
        };
        for (i, e) in node.next_edges().iter().enumerate() {
            let Some(e) = e else { continue };
            let nk = key(&e.node);
            if !needed[&nk] {
                continue;
            }
            if let Some(Some(g)) = outputs.get(i) {
                put(&mut buffers, e, g.clone())?;
            }
            let d = deps.get_mut(&nk).expect("dependency counted");
            *d -= 1;
            if *d == 0 {
                ready.push((e.node.sequence_nr(), nk));
            }
        }
    }
    Ok(captured)
}

/// Validates the gradients a node returned against its inputs.
fn check_outputs(node: &Arc<Node>, out: &[Option<Tensor>]) -> Result<()> {
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
    let shapes = node.backward_fn().input_shapes();
    for (i, g) in out.iter().enumerate() {
        let Some(g) = g else { continue };
        if let Some(Some(s)) = shapes.get(i)
            && g.shape() != s.as_slice()
        {
            return Err(Error::shape(
                "backward",
                g.shape(),
                s,
                format!("function {} returned an invalid gradient at index {i}", node.name()),
            ));
        }
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
