//! The fused LSTM cell (PyTorch's `_thnn_fused_lstm_cell`, node
//! `ThnnFusedLstmCellBackward0`): one operator for the pointwise part of
//! an LSTM step, which the composite form spends a dozen operators (and
//! twice as many in backward) on.
//!
//! Inputs `[input_gates, hidden_gates, cx]` (`[N, 4H]`, `[N, 4H]`,
//! `[N, H]`, one float dtype), the gates in PyTorch's order (input, forget,
//! cell, output). Outputs `hy`, `cy` and the workspace `[N, 4H]`: the
//! activated gates, which the backward formula reads. The CPU kernel
//! computes what the composite form computes, op by op with the same
//! roundings (`gates = ig + hg`; `i, f, o = sigmoid`, `g = tanh`;
//! `cy = f * cx + i * g`; `hy = o * tanh(cy)`), so the two give the same
//! bits; f16 and bf16 compute in f32 and round once (as PyTorch's fused
//! CUDA cell).
//!
//! Backward: the fused `_thnn_fused_lstm_cell_backward` (one kernel) when
//! the gradient is not recorded; otherwise the formula in differentiable
//! operators, recomputed from the inputs (PyTorch's
//! `_thnn_differentiable_lstm_cell_backward`), so higher derivatives are
//! exact. Other backends run both through the composite forms.

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call, call1, downcast_op};
use crate::ops::activation_backward::{ActivationBackward, ActivationKind};
use crate::{Error, Result, Tensor};

/// Dispatch table of `_thnn_fused_lstm_cell` (outputs: hy, cy, workspace).
pub static FUSED_LSTM_CELL: OpEntry = OpEntry::differentiable("_thnn_fused_lstm_cell");
/// Dispatch table of `_thnn_fused_lstm_cell_backward` (outputs: the gates'
/// gradient and cx's).
pub static FUSED_LSTM_CELL_BACKWARD: OpEntry = OpEntry::new("_thnn_fused_lstm_cell_backward");

/// The fused LSTM cell: inputs `[input_gates, hidden_gates, cx]`, outputs
/// `[hy, cy, workspace]` (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FusedLstmCell;

/// Checks the cell's operands and returns `(N, H)`: gates `[N, 4H]` of one
/// shape, `cx` `[N, H]`, one float dtype; errors name the operator and the
/// shapes.
fn cell_dims(name: &'static str, ig: &Tensor, hg: &Tensor, cx: &Tensor) -> Result<(usize, usize)> {
    if !ig.dtype().is_floating_point() {
        return Err(Error::dtype(name, ig.dtype(), "expects floating-point gates"));
    }
    for (what, t) in [("hidden_gates", hg), ("cx", cx)] {
        if t.dtype() != ig.dtype() {
            return Err(Error::DTypeMismatch {
                op: name,
                detail: format!("expected {what} of dtype {}, got {}", ig.dtype(), t.dtype()),
            });
        }
    }
    if ig.ndim() != 2 || !ig.shape()[1].is_multiple_of(4) {
        return Err(Error::invalid(
            name,
            format!("expected input_gates of shape [N, 4 * H], got {:?}", ig.shape()),
        ));
    }
    if hg.shape() != ig.shape() {
        return Err(Error::shape(
            name,
            ig.shape(),
            hg.shape(),
            "input_gates and hidden_gates must have one shape",
        ));
    }
    let (n, h) = (ig.shape()[0], ig.shape()[1] / 4);
    if cx.shape() != [n, h] {
        return Err(Error::shape(
            name,
            ig.shape(),
            cx.shape(),
            "cx must be [N, H] for gates [N, 4 * H]",
        ));
    }
    Ok((n, h))
}

impl Op for FusedLstmCell {
    fn entry(&self) -> &'static OpEntry {
        &FUSED_LSTM_CELL
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let (ig, hg, cx) = (inputs[0], inputs[1], inputs[2]);
        cell_dims("_thnn_fused_lstm_cell", ig, hg, cx)?;
        Ok(smallvec::smallvec![
            OutSpec::new(cx.dims(), cx.dtype()),
            OutSpec::new(cx.dims(), cx.dtype()),
            OutSpec::new(ig.dims(), ig.dtype()),
        ])
    }

    fn saves(&self) -> Saves {
        Saves {
            inputs: 0b111,
            outputs: 0b110,
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let (dhy, dcy) = (grads.first().cloned().flatten(), grads.get(1).cloned().flatten());
        if dhy.is_none() && dcy.is_none() {
            return Ok(vec![None; 3]);
        }
        let cx = ctx.input(2)?;
        let (dgates, dcx) = if crate::autograd::is_grad_enabled() {
            let (ig, hg) = (ctx.input(0)?, ctx.input(1)?);
            differentiable_cell_backward(dhy.as_ref(), dcy.as_ref(), &ig, &hg, &cx)?
        } else {
            let (cy, ws) = (ctx.output(1)?, ctx.output(2)?);
            let op = FusedLstmCellBackward {
                has_dhy: dhy.is_some(),
                has_dcy: dcy.is_some(),
            };
            let mut ins: Vec<&Tensor> = dhy.iter().chain(dcy.iter()).collect();
            ins.extend([&cx, &cy, &ws]);
            let mut r = call(&op, &ins)?.into_iter();
            match (r.next(), r.next()) {
                (Some(a), Some(b)) => (a, b),
                _ => {
                    return Err(Error::invalid(
                        "_thnn_fused_lstm_cell_backward",
                        "returned fewer than two outputs",
                    ));
                }
            }
        };
        let gi = ctx.needs_grad(0).then(|| dgates.clone());
        let gh = ctx.needs_grad(1).then_some(dgates);
        Ok(vec![gi, gh, ctx.needs_grad(2).then_some(dcx)])
    }
}

/// The fused first derivative of [`FusedLstmCell`]: inputs `[dhy?, dcy?,
/// cx, cy, workspace]` (the gradients present as the flags say), outputs
/// the gates' gradient `[N, 4H]` and cx's `[N, H]`. Not differentiable:
/// the cell's backward calls it only when the gradient is not recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FusedLstmCellBackward {
    /// The gradient of `hy` is given.
    pub has_dhy: bool,
    /// The gradient of `cy` is given.
    pub has_dcy: bool,
}

impl FusedLstmCellBackward {
    /// Number of gradient inputs before `cx`.
    pub(crate) fn n_grads(&self) -> usize {
        self.has_dhy as usize + self.has_dcy as usize
    }
}

impl Op for FusedLstmCellBackward {
    fn entry(&self) -> &'static OpEntry {
        &FUSED_LSTM_CELL_BACKWARD
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let name = "_thnn_fused_lstm_cell_backward";
        let k = self.n_grads();
        if k == 0 || inputs.len() != k + 3 {
            return Err(Error::invalid(
                name,
                "expected [dhy?, dcy?, cx, cy, workspace] with a gradient",
            ));
        }
        let (cx, cy, ws) = (inputs[k], inputs[k + 1], inputs[k + 2]);
        cell_dims(name, ws, ws, cx)?;
        for t in inputs[..k].iter().chain([&cy]) {
            if t.shape() != cx.shape() || t.dtype() != cx.dtype() {
                return Err(Error::shape(
                    name,
                    cx.shape(),
                    t.shape(),
                    "gradients and cy must match cx",
                ));
            }
        }
        Ok(smallvec::smallvec![
            OutSpec::new(ws.dims(), ws.dtype()),
            OutSpec::new(cx.dims(), cx.dtype()),
        ])
    }
}

/// `tanh_backward` / `sigmoid_backward` of `grad` given the result `y`.
fn grad_of(kind: ActivationKind, grad: &Tensor, y: &Tensor) -> Result<Tensor> {
    call1(&ActivationBackward(kind), &[grad, y])
}

/// The four gates of `[N, 4H]` gates (views).
fn four(t: &Tensor) -> Result<[Tensor; 4]> {
    let c = t.chunk(4, 1)?;
    match <[Tensor; 4]>::try_from(c) {
        Ok(a) => Ok(a),
        Err(_) => Err(Error::invalid("_thnn_fused_lstm_cell", "gates do not split in four")),
    }
}

/// The cell in operators: `(hy, cy, workspace)`.
fn composite_forward(ig: &Tensor, hg: &Tensor, cx: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
    let [i, f, g, o] = four(&ig.add(hg)?)?;
    let (i, f, g, o) = (i.sigmoid()?, f.sigmoid()?, g.tanh()?, o.sigmoid()?);
    let cy = f.mul(cx)?.add(&i.mul(&g)?)?;
    let hy = o.mul(&cy.tanh()?)?;
    let ws = Tensor::cat(&[&i, &f, &g, &o], 1)?;
    Ok((hy, cy, ws))
}

/// The backward formula in operators, from the activated gates and `cy`:
/// `(dgates, dcx)`, in the order autograd takes through the composite form.
pub(crate) fn cell_formula(
    dhy: Option<&Tensor>,
    dcy: Option<&Tensor>,
    cx: &Tensor,
    cy: &Tensor,
    gates: &[Tensor; 4],
) -> Result<(Tensor, Tensor)> {
    let [i, f, g, o] = gates;
    let tcy = cy.tanh()?;
    // hy = o * tanh(cy): do = dhy * tanh(cy); dcy += tanh_backward(dhy * o, tanh(cy)).
    let (d_o, dc) = match dhy {
        Some(dh) => {
            let local = grad_of(ActivationKind::Tanh, &dh.mul(o)?, &tcy)?;
            let dc = match dcy {
                Some(d) => d.add(&local)?,
                None => local,
            };
            (Some(dh.mul(&tcy)?), dc)
        }
        None => match dcy {
            Some(d) => (None, d.clone()),
            None => return Err(Error::invalid("_thnn_fused_lstm_cell_backward", "no gradient")),
        },
    };
    let zeros = || o.zeros_like();
    let d_o = match d_o {
        Some(d) => grad_of(ActivationKind::Sigmoid, &d, o)?,
        None => zeros()?,
    };
    // cy = f * cx + i * g.
    let d_i = grad_of(ActivationKind::Sigmoid, &dc.mul(g)?, i)?;
    let d_f = grad_of(ActivationKind::Sigmoid, &dc.mul(cx)?, f)?;
    let d_g = grad_of(ActivationKind::Tanh, &dc.mul(i)?, g)?;
    let dcx = dc.mul(f)?;
    Ok((Tensor::cat(&[&d_i, &d_f, &d_g, &d_o], 1)?, dcx))
}

/// The derivative recomputed from the inputs in differentiable operators.
pub(crate) fn differentiable_cell_backward(
    dhy: Option<&Tensor>,
    dcy: Option<&Tensor>,
    ig: &Tensor,
    hg: &Tensor,
    cx: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let [i, f, g, o] = four(&ig.add(hg)?)?;
    let gates = [i.sigmoid()?, f.sigmoid()?, g.tanh()?, o.sigmoid()?];
    let cy = gates[1].mul(cx)?.add(&gates[0].mul(&gates[2])?)?;
    cell_formula(dhy, dcy, cx, &cy, &gates)
}

fn forward_composite_kernel(c: &Call) -> Result<Tensors> {
    FusedLstmCell.infer(c.inputs)?;
    let (hy, cy, ws) = composite_forward(c.inputs[0], c.inputs[1], c.inputs[2])?;
    Ok(smallvec::smallvec![hy, cy, ws])
}

fn backward_composite_kernel(c: &Call) -> Result<Tensors> {
    let op: &FusedLstmCellBackward = downcast_op(c.op)?;
    op.infer(c.inputs)?;
    let k = op.n_grads();
    let dhy = op.has_dhy.then_some(c.inputs[0]);
    let dcy = op.has_dcy.then(|| c.inputs[op.has_dhy as usize]);
    let (cx, cy, ws) = (c.inputs[k], c.inputs[k + 1], c.inputs[k + 2]);
    let (dg, dcx) = cell_formula(dhy, dcy, cx, cy, &four(ws)?)?;
    Ok(smallvec::smallvec![dg, dcx])
}

/// Registers the composite forms for backends without fused kernels.
pub(crate) fn register() -> Result<()> {
    FUSED_LSTM_CELL.register_builtin(Slot::AnyBackend, Kernel::Functional(forward_composite_kernel))?;
    FUSED_LSTM_CELL_BACKWARD.register_builtin(Slot::AnyBackend, Kernel::Functional(backward_composite_kernel))?;
    Ok(())
}

/// # Recurrent cells
impl Tensor {
    /// PyTorch's `torch._thnn_fused_lstm_cell(input_gates, hidden_gates,
    /// cx)`: the pointwise part of an LSTM step as one operator. `self`
    /// and `hidden_gates` are the two projections `[N, 4H]` (gates in the
    /// order input, forget, cell, output; biases already added), `cx` the
    /// cell state `[N, H]`. Returns `(hy, cy, workspace)`, the workspace
    /// holding the activated gates. Gives the bits of the composite form
    /// (`sigmoid`, `tanh`, `cy = f * cx + i * g`, `hy = o * tanh(cy)`).
    /// Errors: gates not `[N, 4H]` or of different shapes, `cx` not
    /// `[N, H]`, mixed or integer dtypes.
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// let (ig, hg, cx) = (Tensor::randn([2, 8])?, Tensor::randn([2, 8])?, Tensor::randn([2, 2])?);
    /// let (hy, cy, _) = ig.fused_lstm_cell(&hg, &cx)?;
    /// let gates = ig.add(&hg)?.chunk(4, 1)?;
    /// let want = gates[1].sigmoid()?.mul(&cx)?.add(&gates[0].sigmoid()?.mul(&gates[2].tanh()?)?)?;
    /// assert_eq!(cy.to_vec::<f32>()?, want.to_vec::<f32>()?);
    /// assert_eq!(hy.shape(), &[2, 2]);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn fused_lstm_cell(&self, hidden_gates: &Tensor, cx: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let mut r = call(&FusedLstmCell, &[self, hidden_gates, cx])?.into_iter();
        match (r.next(), r.next(), r.next()) {
            (Some(a), Some(b), Some(c)) => Ok((a, b, c)),
            _ => Err(Error::invalid(
                "_thnn_fused_lstm_cell",
                "returned fewer than three outputs",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autograd::{GradOptions, grad};
    use crate::{DType, TensorOptions};

    fn bits(t: &Tensor) -> Vec<u64> {
        let v = t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// The fused kernels (forward, and backward with either gradient
    /// missing) give the bits of the composite form's graph, for shapes
    /// that run in one task and in several.
    #[test]
    fn fused_cell_matches_the_composite_graph_bitwise() {
        for dtype in [DType::F32, DType::F64] {
            for (n, h) in [(3, 5), (1, 1), (40, 256)] {
                let o = TensorOptions::new().dtype(dtype);
                let leaf = |s: [usize; 2], k: f64| o.randn(s).unwrap().mul(k).unwrap().requires_grad_(true).unwrap();
                let (ig, hg, cx) = (leaf([n, 4 * h], 2.0), leaf([n, 4 * h], 1.0), leaf([n, h], 1.5));
                let (dhy, dcy) = (o.randn([n, h]).unwrap(), o.randn([n, h]).unwrap());
                let (hy, cy, _) = ig.fused_lstm_cell(&hg, &cx).unwrap();
                let (ch, cc, _) = composite_forward(&ig, &hg, &cx).unwrap();
                assert_eq!(bits(&hy), bits(&ch), "hy {dtype} {n}x{h}");
                assert_eq!(bits(&cy), bits(&cc), "cy {dtype} {n}x{h}");
                let cases: [(Vec<&Tensor>, Vec<&Tensor>, Vec<Tensor>); 3] = [
                    (vec![&hy, &cy], vec![&ch, &cc], vec![dhy.clone(), dcy.clone()]),
                    (vec![&hy], vec![&ch], vec![dhy.clone()]),
                    (vec![&cy], vec![&cc], vec![dcy.clone()]),
                ];
                for (k, (fused, comp, gos)) in cases.iter().enumerate() {
                    let run = |outs: &[&Tensor]| {
                        let opts = GradOptions {
                            grad_outputs: Some(gos),
                            retain_graph: Some(true),
                            ..Default::default()
                        };
                        grad(outs, &[&ig, &hg, &cx], opts).unwrap()
                    };
                    let (a, b) = (run(fused), run(comp));
                    for j in 0..3 {
                        assert_eq!(bits(&a[j]), bits(&b[j]), "case {k} input {j} {dtype} {n}x{h}");
                    }
                }
            }
        }
    }

    /// The half-precision kernels compute in f32 and round once.
    #[test]
    fn half_precision_cells_compute_in_f32() {
        for dtype in [DType::F16, DType::BF16] {
            let o = TensorOptions::new().dtype(dtype);
            let (ig, hg, cx) = (
                o.randn([4, 12]).unwrap(),
                o.randn([4, 12]).unwrap(),
                o.randn([4, 3]).unwrap(),
            );
            let up = |t: &Tensor| t.to_dtype(DType::F32).unwrap();
            let (hy, cy, ws) = ig.fused_lstm_cell(&hg, &cx).unwrap();
            let (h32, c32, w32) = up(&ig).fused_lstm_cell(&up(&hg), &up(&cx)).unwrap();
            for (a, b) in [(hy, h32), (cy, c32), (ws, w32)] {
                assert_eq!(a.dtype(), dtype);
                assert_eq!(bits(&a), bits(&b.to_dtype(dtype).unwrap()));
            }
        }
    }

    #[test]
    fn bad_operands_are_errors_naming_the_op_and_shapes() {
        let t = |s: &[usize]| Tensor::zeros(s).unwrap();
        let msg = |r: Result<(Tensor, Tensor, Tensor)>| r.unwrap_err().to_string();
        let e = msg(t(&[2, 7]).fused_lstm_cell(&t(&[2, 7]), &t(&[2, 1])));
        assert!(e.contains("_thnn_fused_lstm_cell") && e.contains("[2, 7]"), "{e}");
        let e = msg(t(&[2, 8]).fused_lstm_cell(&t(&[3, 8]), &t(&[2, 2])));
        assert!(e.contains("[2, 8]") && e.contains("[3, 8]"), "{e}");
        let e = msg(t(&[2, 8]).fused_lstm_cell(&t(&[2, 8]), &t(&[2, 3])));
        assert!(e.contains("cx") && e.contains("[2, 3]"), "{e}");
        let e = msg(t(&[2, 8]).fused_lstm_cell(&t(&[2, 8]).to_dtype(DType::F64).unwrap(), &t(&[2, 2])));
        assert!(e.contains("hidden_gates"), "{e}");
        let i = Tensor::from_vec(vec![0i64; 8], [1, 8]).unwrap();
        assert!(
            i.fused_lstm_cell(&i, &Tensor::from_vec(vec![0i64; 2], [1, 2]).unwrap())
                .is_err()
        );
        // Empty batches are fine.
        let (hy, _, ws) = t(&[0, 8]).fused_lstm_cell(&t(&[0, 8]), &t(&[0, 2])).unwrap();
        assert_eq!((hy.shape(), ws.shape()), (&[0usize, 2][..], &[0usize, 8][..]));
    }

    /// The meta device runs the shape rule.
    #[test]
    fn meta_device_gives_the_shapes() {
        let m = TensorOptions::new().device(crate::Device::Meta);
        let (hy, cy, ws) = m
            .clone()
            .zeros([5, 12])
            .unwrap()
            .fused_lstm_cell(&m.clone().zeros([5, 12]).unwrap(), &m.zeros([5, 3]).unwrap())
            .unwrap();
        assert_eq!(
            (hy.shape(), cy.shape(), ws.shape()),
            (&[5usize, 3][..], &[5usize, 3][..], &[5usize, 12][..])
        );
    }

    /// The backward operator checks that each gradient and `cy` match
    /// `cx` in shape and in dtype, each on its own.
    #[test]
    fn backward_refuses_gradients_unlike_cx() {
        let o = TensorOptions::new();
        let (cx, cy, ws) = (
            o.randn([2, 3]).unwrap(),
            o.randn([2, 3]).unwrap(),
            o.randn([2, 12]).unwrap(),
        );
        let op = FusedLstmCellBackward {
            has_dhy: true,
            has_dcy: false,
        };
        let good = o.randn([2, 3]).unwrap();
        assert!(call(&op, &[&good, &cx, &cy, &ws]).is_ok());
        let wrong_shape = o.randn([3, 2]).unwrap();
        let wrong_dtype = good.to_dtype(DType::F64).unwrap();
        for bad in [&wrong_shape, &wrong_dtype] {
            let e = call(&op, &[bad, &cx, &cy, &ws]).unwrap_err().to_string();
            assert!(e.contains("gradients and cy must match cx"), "{e}");
            let e = call(&op, &[&good, &cx, bad, &ws]).unwrap_err().to_string();
            assert!(e.contains("gradients and cy must match cx"), "{e}");
        }
    }
}
