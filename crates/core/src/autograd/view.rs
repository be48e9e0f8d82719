//! In-place operations on views (PyTorch's `CopySlices`) and the history of
//! views whose base changed.
//!
//! When `v = b[0:2]` is modified in place, the base `b` gets a new
//! `grad_fn`, `CopySlices`, whose backward routes the gradient of the
//! modified slice through the in-place operation's backward and passes the
//! rest through unchanged; `v` becomes `as_strided(b)` of the new base. Any
//! other view of `b` notices the base's new version and regenerates its
//! `grad_fn` the same way the next time it is used.

use std::sync::Arc;

use super::ViewCreation;
use super::graph::{Backward, Edge, Node};
use super::layer::node_for;
use crate::dispatch::OutSpec;
use crate::ops::{ViewKind, ViewOp};
use crate::{Error, Result, Tensor};

/// Geometry of a view in its base's memory, offsets counted from the base's
/// first element (the base's own strides are kept alongside).
#[derive(Debug, Clone)]
struct Geometry {
    shape: Vec<usize>,
    strides: Vec<usize>,
    offset: usize,
    base_strides: Vec<usize>,
}

fn geometry(view: &Tensor, base: &Tensor) -> Result<Geometry> {
    if !base.layout().is_non_overlapping_and_dense() || view.storage_offset() < base.storage_offset() {
        return Err(Error::invalid(
            "autograd",
            format!(
                "in-place operations on views need a base whose elements fill its memory without overlap \
                 (base shape {:?}, strides {:?})",
                base.shape(),
                base.strides()
            ),
        ));
    }
    Ok(Geometry {
        shape: view.shape().to_vec(),
        strides: view.strides().to_vec(),
        offset: view.storage_offset() - base.storage_offset(),
        base_strides: base.strides().to_vec(),
    })
}

fn as_strided_node(base: &Tensor, g: &Geometry) -> Arc<Node> {
    let op = ViewOp(ViewKind::AsStrided {
        shape: g.shape.clone(),
        strides: g.strides.clone(),
        offset: g.offset,
        input_strides: g.base_strides.clone(),
        input_offset: 0,
    });
    node_for(Box::new(op), &[base])
}

/// The name PyTorch's messages give a view's node: `SplitBackward0` is "Split".
fn view_node_name(view: &Tensor) -> (String, usize) {
    match view.gradient_edge() {
        Some(e) => {
            let name = e.node.name();
            let short = name.rfind("Backward").map_or(name.as_str(), |i| &name[..i]).to_string();
            (short, e.input_nr)
        }
        None => ("a view".into(), 0),
    }
}

const MULTI_VIEWS: &str = "This view is the output of a function that returns multiple views. Such functions do not \
                           allow the output views to be modified inplace. You should replace the inplace operation by \
                           an out-of-place one.";

/// Refuses an in-place write that autograd records into a view that may
/// not take one (PyTorch's `handle_view_on_rebase`): an output of a
/// multi-output view, or a view made in no-grad mode.
pub(crate) fn check_inplace_view(view: &Tensor) -> Result<()> {
    match view.view_creation() {
        ViewCreation::Default => Ok(()),
        ViewCreation::MultiOutput => {
            let (name, nr) = view_node_name(view);
            Err(Error::invalid(
                "autograd",
                format!("Output {nr} of {name} is a view and is being modified inplace. {MULTI_VIEWS}"),
            ))
        }
        ViewCreation::NoGrad { multi } => {
            let why = if multi {
                MULTI_VIEWS
            } else {
                "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by \
                 moving both the view and the inplace either both inside the no_grad block (if you don't want the \
                 inplace to be tracked) or both outside (if you want the inplace to be tracked)."
            };
            Err(Error::invalid(
                "autograd",
                format!(
                    "A view was created in no_grad mode and is being modified inplace with grad mode enabled. {why}"
                ),
            ))
        }
    }
}

/// Refuses to record a use of an output of a multi-output view whose base
/// was modified in place since (its history cannot be rebuilt, as in PyTorch).
pub(crate) fn check_view_use(view: &Tensor) -> Result<()> {
    let Some(base) = view.base() else {
        return Ok(());
    };
    if view.view_creation() != ViewCreation::MultiOutput || view.view_version() == Some(base.version()) {
        return Ok(());
    }
    let (name, nr) = view_node_name(view);
    Err(Error::invalid(
        "autograd",
        format!(
            "Output {nr} of {name} is a view and its base or another view of its base has been modified inplace. {MULTI_VIEWS}"
        ),
    ))
}

/// Brings a view's `grad_fn` up to date after its base changed in place.
pub(crate) fn refresh_view_grad_fn(view: &Tensor, base: &Tensor) {
    let Some(seen) = view.view_version() else {
        return;
    };
    if seen == base.version() || !base.requires_grad() {
        return;
    }
    if view.view_creation() == ViewCreation::MultiOutput {
        // Its history cannot be rebuilt: left stale, so that using it in
        // the graph is refused (`check_view_use`), as in PyTorch.
        return;
    }
    if let Ok(g) = geometry(view, base) {
        view.set_grad_fn(as_strided_node(base, &g), 0);
    }
}

/// Gives `view`, which has no history, its part of `base`'s
/// (`as_strided`); false when its geometry cannot be expressed.
pub(crate) fn take_base_history(view: &Tensor, base: &Tensor) -> bool {
    if view.view_creation() == ViewCreation::MultiOutput
        || view.autograd_meta().as_ref().is_some_and(|m| m.grad_fn.is_some())
    {
        return false;
    }
    match geometry(view, base) {
        Ok(g) => {
            view.set_grad_fn(as_strided_node(base, &g), 0);
            true
        }
        Err(_) => false,
    }
}

/// Makes `node` (output `output_nr`) the history of `out`, which an
/// in-place operation just wrote; `self_input` is the input that was `out`'s
/// old value, if any.
pub(crate) fn rebase_history(out: &Tensor, node: Arc<Node>, output_nr: usize, self_input: Option<usize>) -> Result<()> {
    let Some(base) = out.base().cloned() else {
        out.set_grad_fn(node, output_nr);
        return Ok(());
    };
    let g = geometry(out, &base)?;
    let mut next: Vec<Option<Edge>> = vec![base.gradient_edge()];
    for (i, e) in node.next_edges().iter().enumerate() {
        if Some(i) != self_input {
            next.push(e.clone());
        }
    }
    let copy_slices = Node::new(
        Box::new(CopySlices {
            base_shape: base.shape().to_vec(),
            base_dtype: base.dtype(),
            base_device: base.device(),
            view: g.clone(),
            func: node,
            self_input,
        }),
        next,
        "copy_slices",
    );
    base.set_grad_fn(copy_slices, 0);
    out.set_grad_fn(as_strided_node(&base, &g), 0);
    Ok(())
}

/// Backward of an in-place operation on a view, as a function of the base.
struct CopySlices {
    base_shape: Vec<usize>,
    base_dtype: crate::DType,
    base_device: crate::Device,
    view: Geometry,
    func: Arc<Node>,
    self_input: Option<usize>,
}

impl Backward for CopySlices {
    fn name(&self) -> String {
        "CopySlices".into()
    }

    fn apply(&self, _node: &Arc<Node>, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = grads.first().cloned().flatten() else {
            return Ok(vec![
                None;
                self.func.next_edges().len() + 1
                    - self.self_input.is_some() as usize
            ]);
        };
        // The base's gradient laid out like the base, so that the view's
        // geometry picks the same elements in it.
        let spec = OutSpec {
            shape: self.base_shape.as_slice().into(),
            dtype: g.dtype(),
            strides: Some(self.view.base_strides.as_slice().into()),
        };
        let result = Tensor::empty_for_spec(&spec, g.device())?;
        result.copy_(&g)?;
        let slice = result.as_strided(&self.view.shape, &self.view.strides, self.view.offset)?;
        let inner = self
            .func
            .backward_fn()
            .apply(&self.func, &[Some(slice.clone_tensor()?)])?;
        match self.self_input.and_then(|i| inner.get(i).cloned().flatten()) {
            Some(gs) => slice.copy_(&gs)?,
            None => slice.zero_()?,
        };
        let mut out = vec![Some(result)];
        for (i, r) in inner.into_iter().enumerate() {
            if Some(i) != self.self_input {
                out.push(r);
            }
        }
        Ok(out)
    }

    fn release(&self) {
        self.func.backward_fn().release();
    }

    fn input_shape(&self, i: usize) -> Option<&[usize]> {
        match self.func_input(i) {
            None => Some(&self.base_shape),
            Some(j) => self.func.backward_fn().input_shape(j),
        }
    }

    fn input_dtype_device(&self, i: usize) -> Option<(crate::DType, crate::Device)> {
        match self.func_input(i) {
            None => Some((self.base_dtype, self.base_device)),
            Some(j) => self.func.backward_fn().input_dtype_device(j),
        }
    }
}

impl CopySlices {
    /// The wrapped function's input behind this node's input `i` (`None`:
    /// input 0, the base): the function's inputs in order, less the one
    /// the in-place operation wrote.
    fn func_input(&self, i: usize) -> Option<usize> {
        let k = i.checked_sub(1)?;
        Some(match self.self_input {
            Some(s) if k >= s => k + 1,
            _ => k,
        })
    }
}
