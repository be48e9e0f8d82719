//! The autograd layer of the dispatcher: for every differentiable operator
//! whose inputs require grad, it runs the kernel below itself, saves what
//! the operator's backward formula needs, and records a graph node.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use smallvec::SmallVec;

use super::graph::SavedTensor;
use super::graph::{Backward, Edges, Node};
use crate::dispatch::{
    BackwardCtx, Call, DispatchKey, DispatchKeySet, Op, SavedValues, TensorMeta, Tensors, exclude_keys, redispatch,
};
use crate::{DType, Device, Error, Result, Tensor};

/// The saved state of one node as its backward formula reads it (through
/// [`BackwardCtx`]): the node (for its name and edges) and its saved tensors.
struct NodeSaved<'a> {
    node: &'a Arc<Node>,
    inputs: &'a [Option<SavedTensor>],
    outputs: &'a [Option<SavedTensor>],
}

impl SavedValues for NodeSaved<'_> {
    fn input(&self, i: usize) -> Result<Tensor> {
        match self.inputs.get(i) {
            Some(Some(s)) => s.unpack(self.node),
            _ => Err(Error::invalid(
                "backward",
                format!("{}: input {i} was not saved", self.node.name()),
            )),
        }
    }

    fn output(&self, i: usize) -> Result<Tensor> {
        match self.outputs.get(i) {
            Some(Some(s)) => s.unpack(self.node),
            _ => Err(Error::invalid(
                "backward",
                format!("{}: output {i} was not saved", self.node.name()),
            )),
        }
    }

    fn same_edge(&self, i: usize, j: usize) -> bool {
        match (self.node.next_edges().get(i), self.node.next_edges().get(j)) {
            (Some(Some(a)), Some(Some(b))) => Arc::ptr_eq(&a.node, &b.node) && a.input_nr == b.input_nr,
            _ => false,
        }
    }
}

/// Per-input (or per-output) data of a node, inline for small operators.
type PerInput<T> = SmallVec<[T; 2]>;

struct SavedSet {
    inputs: PerInput<Option<SavedTensor>>,
    outputs: PerInput<Option<SavedTensor>>,
}

/// The node of one recorded operator call.
pub(crate) struct OpBackward {
    /// The operator (`None` only while the box waits for reuse).
    op: Option<Box<dyn Op>>,
    saved: Mutex<Option<SavedSet>>,
    has_saved: bool,
    meta: PerInput<TensorMeta>,
    needs: PerInput<bool>,
}

/// Most emptied `OpBackward` boxes kept per thread.
const SPARE_NODES: usize = 128;

thread_local! {
    // The boxes themselves are what is kept (they become nodes' functions).
    #[allow(clippy::vec_box)]
    static SPARE: RefCell<Vec<Box<OpBackward>>> = const { RefCell::new(Vec::new()) };
}

impl OpBackward {
    /// An empty node function to fill in place (no operator, nothing saved,
    /// no inputs): a box left by a dropped node when there is one.
    fn empty_box() -> Box<Self> {
        crate::spare::take(&SPARE).unwrap_or_else(|| {
            Box::new(OpBackward {
                op: None,
                saved: Mutex::new(None),
                has_saved: false,
                meta: PerInput::new(),
                needs: PerInput::new(),
            })
        })
    }

    /// The saved set, created empty if there is none yet.
    fn saved_mut(&mut self) -> &mut SavedSet {
        self.saved
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(|| SavedSet {
                inputs: SmallVec::new(),
                outputs: SmallVec::new(),
            })
    }

    /// The saved tensors (`None`: the node saved none), after PyTorch's
    /// checks on unpacking them: a freed set is an error, and so is one
    /// modified in place since saved, even if the formulas of this call
    /// would not read it (an output saved for an input that does not need
    /// its gradient), as PyTorch's generated nodes unpack every saved
    /// tensor first.
    fn checked_saved<'a>(&self, guard: &'a Option<SavedSet>, node: &Arc<Node>) -> Result<Option<&'a SavedSet>> {
        let Some(saved) = guard.as_ref() else {
            if self.has_saved {
                return Err(Error::GraphFreed {
                    detail: format!(
                        "trying to backward through the graph a second time (or directly access saved tensors after \
                         they have already been freed); saved intermediate values of the graph are freed when you \
                         call backward() or autograd::grad(); specify retain_graph=true if you need to backward \
                         through the graph a second time (node {})",
                        self.name()
                    ),
                });
            }
            return Ok(None);
        };
        for t in saved.inputs.iter().chain(&saved.outputs).flatten() {
            t.check_version(node)?;
        }
        Ok(Some(saved))
    }

    fn op(&self) -> &dyn Op {
        self.op.as_deref().expect("a live node has its operator")
    }
}

impl Backward for OpBackward {
    fn name(&self) -> String {
        self.op().backward_name()
    }

    fn check_saved(&self, node: &Arc<Node>) -> Result<()> {
        let guard = self.saved.lock().unwrap_or_else(|e| e.into_inner());
        self.checked_saved(&guard, node).map(drop)
    }

    fn apply(&self, node: &Arc<Node>, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let guard = self.saved.lock().unwrap_or_else(|e| e.into_inner());
        let empty = SavedSet {
            inputs: SmallVec::new(),
            outputs: SmallVec::new(),
        };
        let saved = self.checked_saved(&guard, node)?.unwrap_or(&empty);
        let values = NodeSaved {
            node,
            inputs: &saved.inputs,
            outputs: &saved.outputs,
        };
        let ctx = BackwardCtx::new(&values, &self.meta, &self.needs);
        let mut out = self.op().backward(&ctx, grads)?;
        out.resize(self.meta.len(), None);
        for (i, g) in out.iter_mut().enumerate() {
            if !self.needs[i] {
                *g = None;
            }
        }
        Ok(out)
    }

    fn release(&self) {
        if self.has_saved {
            *self.saved.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }

    fn input_shape(&self, i: usize) -> Option<&[usize]> {
        self.meta.get(i).map(|m| m.shape.as_slice())
    }

    fn input_dtype_device(&self, i: usize) -> Option<(DType, Device)> {
        self.meta.get(i).map(|m| (m.dtype, m.device))
    }

    fn recycle(mut self: Box<Self>) {
        // Free everything it holds now (saved tensors may release more of
        // the graph; nothing is borrowed here), keep the box.
        self.op = None;
        *self.saved.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
        self.has_saved = false;
        self.meta.clear();
        self.needs.clear();
        crate::spare::keep(&SPARE, self, SPARE_NODES);
    }
}

/// A node for `op` applied to `inputs`, nothing saved (view replays, CopySlices).
pub(crate) fn node_for(op: Box<dyn Op>, inputs: &[&Tensor]) -> Arc<Node> {
    let name = op.entry().name();
    let needs = inputs.iter().map(|t| t.requires_grad()).collect();
    let edges: Edges = inputs.iter().map(|t| t.gradient_edge()).collect();
    let meta = inputs.iter().map(|t| TensorMeta::of(t)).collect();
    let mut b = OpBackward::empty_box();
    b.op = Some(op);
    b.has_saved = false;
    b.meta = meta;
    b.needs = needs;
    Node::new(b, edges, name)
}

fn check_inplace(o: &Tensor, op: &str) -> Result<()> {
    if o.requires_grad() && o.is_leaf() {
        return Err(Error::invalid(
            "autograd",
            format!("{op}: a leaf Variable that requires grad is being used in an in-place operation"),
        ));
    }
    if let Some(b) = o.base()
        && b.requires_grad()
        && b.is_leaf()
    {
        return Err(Error::invalid(
            "autograd",
            format!("{op}: a view of a leaf Variable that requires grad is being used in an in-place operation"),
        ));
    }
    Ok(())
}

inventory::submit! {
    crate::dispatch::registration::Registration {
        stage: crate::dispatch::registration::Stage::Layers,
        what: "autograd fallback",
        run: || crate::dispatch::register_fallback_builtin(crate::dispatch::DispatchKey::Autograd, autograd_layer),
    }
}

/// The `Autograd` key's kernel for every operator (a boxed fallback).
fn autograd_layer(call: &Call, below: DispatchKeySet) -> Result<Tensors> {
    let entry = call.op.entry();
    let grad_on = super::is_grad_enabled();
    let inputs_req = call.inputs.iter().any(|t| t.requires_grad());
    let out_req = call.out.is_some_and(|o| o.iter().any(|t| t.requires_grad()));
    let run_below = || {
        let _x = exclude_keys(DispatchKeySet::of(DispatchKey::Autograd));
        redispatch(call, below)
    };
    if call.out.is_some() && !call.op.output_differentiable() {
        // As PyTorch's ops whose outputs are not differentiable (logical_and_
        // into a tensor that requires grad): no checks, nothing recorded.
        return run_below();
    }
    if grad_on && let Some(out) = call.out {
        for o in out {
            if inputs_req || out_req || o.base().is_some_and(Tensor::requires_grad) {
                super::view::check_inplace_view(o)?;
            }
            check_inplace(o, entry.base_name())?;
        }
    }
    if !grad_on || !(inputs_req || out_req) {
        return run_below();
    }
    if !entry.is_differentiable() {
        if call.out.is_some() && out_req {
            return Err(Error::invalid(
                entry.base_name(),
                "is not differentiable and cannot write in place into a tensor that requires grad",
            ));
        }
        return run_below();
    }
    let op = call.op;
    // The node's function is filled in place (in a box left by a dropped
    // node when there is one): per-input records built with pushes.
    let n = call.inputs.len();
    let mut b = OpBackward::empty_box();
    let mut edges = Edges::with_capacity(n);
    let mut needs = 0u64;
    for (i, t) in call.inputs.iter().enumerate() {
        let need = t.requires_grad() && op.differentiable_input(i);
        if need {
            super::view::check_view_use(t)?;
        }
        b.needs.push(need);
        edges.push(if need { t.gradient_edge() } else { None });
        b.meta.push(TensorMeta::of(t));
        // Inputs past 64 count as needing grad (their formulas save all).
        if need || i >= 64 {
            needs |= 1u64.checked_shl(i as u32).unwrap_or(0);
        }
    }
    let spec = op.saves_for(needs);
    let saved = b.saved_mut();
    for (i, t) in call.inputs.iter().enumerate() {
        saved.inputs.push(if spec.input(i) {
            // An input the call overwrites is saved as a copy.
            let aliased = call
                .out
                .is_some_and(|o| o.iter().any(|o| o.storage().same(t.storage())));
            Some(if aliased {
                let _x = exclude_keys(DispatchKeySet::of(DispatchKey::Autograd));
                SavedTensor::input(&t.detach().clone_tensor()?)
            } else {
                SavedTensor::input(t)
            })
        } else {
            None
        });
    }
    let outs = run_below()?;
    for (i, o) in outs.iter().enumerate() {
        saved.outputs.push(spec.output(i).then(|| SavedTensor::output(o, i)));
    }
    b.has_saved = saved.inputs.iter().chain(&saved.outputs).any(Option::is_some);
    b.op = Some(op.clone_op());
    let node = Node::new(b, edges, entry.name());
    match call.out {
        None => {
            // The last output takes the node itself (one clone fewer).
            let last = outs.iter().rposition(Tensor::is_floating_point);
            let mut node = Some(node);
            for (i, o) in outs.iter().enumerate() {
                if Some(i) == last {
                    o.set_grad_fn(node.take().expect("the node is moved once"), i);
                } else if o.is_floating_point() {
                    o.set_grad_fn(node.clone().expect("the node is still here"), i);
                }
            }
        }
        Some(out) => {
            for (i, o) in out.iter().enumerate() {
                // An integer or bool tensor written in place stays outside the
                // graph (PyTorch: `int_tensor.copy_(float_leaf)` does not
                // require grad).
                if !o.is_floating_point() {
                    continue;
                }
                let self_input = call
                    .inputs
                    .iter()
                    .position(|t| t.storage().same(o.storage()) && t.layout() == o.layout());
                super::view::rebase_history(o, node.clone(), i, self_input)?;
            }
        }
    }
    Ok(outs)
}
