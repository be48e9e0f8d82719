//! One LSTM layer over a whole sequence, in one direction, as one
//! operator (`ferrotorch::lstm_layer`; PyTorch's CPU build has the like in
//! `mkldnn_rnn_layer`): the recurrence without a graph node per step.
//!
//! Inputs `[xw, w_hh, b_hh?, h0, c0]`: `xw` `[L, N, 4H]` is the layer's
//! input projection for every step (`x @ w_ih^T + b_ih`, one GEMM outside
//! the operator), `w_hh` `[4H, H]`, `b_hh` `[4H]`, the initial states
//! `[N, H]`. Outputs `out` `[L, N, H]` (every step's `h`, in time order),
//! `h_n`, `c_n` and two workspaces the derivative reads: every step's
//! cell state `[L, N, H]` and activated gates `[L, N, 4H]` (not
//! differentiable). Step `t` is `gates = xw[t] + (h @ w_hh^T + b_hh)` and
//! the fused cell ([`crate::ops::rnn_cell`]); `reverse` runs the steps
//! from the last.
//!
//! The derivative (`ferrotorch::lstm_layer_backward`) runs the steps
//! backwards with one product by `w_hh` per step, and gets `w_hh`'s and
//! `b_hh`'s gradients from all steps at once (one product over the whole
//! sequence, one column sum) instead of one small product and one
//! accumulation per step. With `create_graph` it is recomputed in
//! differentiable operators from the inputs. Other backends run both
//! forms through operators (`AnyBackend`).

use crate::autograd::{BackwardCtx, Saves};
use crate::dispatch::{Call, Kernel, Op, OpEntry, OutSpec, OutSpecs, Slot, Tensors, call, downcast_op};
use crate::layout::Dims;
use crate::ops::rnn_cell::{cell_formula, differentiable_cell_backward};
use crate::{Error, Result, Tensor};

/// Dispatch table of `ferrotorch::lstm_layer`.
pub static LSTM_LAYER: OpEntry = OpEntry::differentiable("ferrotorch::lstm_layer");
/// Dispatch table of `ferrotorch::lstm_layer_backward`.
pub static LSTM_LAYER_BACKWARD: OpEntry = OpEntry::new("ferrotorch::lstm_layer_backward");

const NAME: &str = "ferrotorch::lstm_layer";

/// One LSTM layer over a sequence (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LstmLayer {
    /// Run the steps from the last one (the backward direction of a
    /// bidirectional LSTM).
    pub reverse: bool,
    /// `b_hh` is given.
    pub bias: bool,
}

impl LstmLayer {
    /// Index of `h0` among the inputs (`c0` follows).
    pub(crate) fn h0_at(&self) -> usize {
        2 + self.bias as usize
    }

    /// The step indices in the order the recurrence visits them.
    pub(crate) fn order(&self, len: usize) -> Vec<usize> {
        if self.reverse {
            (0..len).rev().collect()
        } else {
            (0..len).collect()
        }
    }
}

/// `(L, N, H)` of a layer's operands, checked: `xw` `[L, N, 4H]`, `w_hh`
/// `[4H, H]`, `b_hh` `[4H]`, `h0` / `c0` `[N, H]`, one float dtype.
fn layer_dims(xw: &Tensor, w: &Tensor, b: Option<&Tensor>, h0: &Tensor, c0: &Tensor) -> Result<(usize, usize, usize)> {
    if !xw.dtype().is_floating_point() {
        return Err(Error::dtype(
            NAME,
            xw.dtype(),
            "expects a floating-point input projection",
        ));
    }
    for (what, t) in [("w_hh", Some(w)), ("b_hh", b), ("h0", Some(h0)), ("c0", Some(c0))] {
        if let Some(t) = t
            && t.dtype() != xw.dtype()
        {
            return Err(Error::DTypeMismatch {
                op: NAME,
                detail: format!("expected {what} of dtype {}, got {}", xw.dtype(), t.dtype()),
            });
        }
    }
    if w.ndim() != 2 || w.shape()[0] != 4 * w.shape()[1] {
        return Err(Error::invalid(
            NAME,
            format!("expected w_hh of shape [4 * H, H], got {:?}", w.shape()),
        ));
    }
    let h = w.shape()[1];
    if xw.ndim() != 3 || xw.shape()[2] != 4 * h {
        return Err(Error::shape(
            NAME,
            xw.shape(),
            w.shape(),
            "xw must be [L, N, 4 * H] for w_hh [4 * H, H]",
        ));
    }
    let (l, n) = (xw.shape()[0], xw.shape()[1]);
    if let Some(b) = b
        && b.shape() != [4 * h]
    {
        return Err(Error::shape(
            NAME,
            b.shape(),
            w.shape(),
            "b_hh must be [4 * H] for w_hh [4 * H, H]",
        ));
    }
    for (what, t) in [("h0", h0), ("c0", c0)] {
        if t.shape() != [n, h] {
            return Err(Error::shape(
                NAME,
                xw.shape(),
                t.shape(),
                format!("{what} must be [N, H]"),
            ));
        }
    }
    Ok((l, n, h))
}

impl Op for LstmLayer {
    fn entry(&self) -> &'static OpEntry {
        &LSTM_LAYER
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let k = self.h0_at();
        if inputs.len() != k + 2 {
            return Err(Error::invalid(NAME, "expected [xw, w_hh, b_hh?, h0, c0]"));
        }
        let b = self.bias.then(|| inputs[2]);
        let (l, n, h) = layer_dims(inputs[0], inputs[1], b, inputs[k], inputs[k + 1])?;
        let dt = inputs[0].dtype();
        let state = Dims::from_slice(&[n, h]);
        Ok(smallvec::smallvec![
            OutSpec::new(Dims::from_slice(&[l, n, h]), dt),
            OutSpec::new(state.clone(), dt),
            OutSpec::new(state, dt),
            OutSpec::new(Dims::from_slice(&[l, n, h]), dt),
            OutSpec::new(Dims::from_slice(&[l, n, 4 * h]), dt),
        ])
    }

    fn saves(&self) -> Saves {
        Saves {
            inputs: (1 << (self.h0_at() + 2)) - 1,
            outputs: 0b11001,
        }
    }

    fn backward(&self, ctx: &BackwardCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let n_in = ctx.num_inputs();
        if grads.iter().skip(3).any(|g| g.is_some()) {
            return Err(Error::invalid(
                NAME,
                "the workspace outputs (cell states, gates) are not differentiable",
            ));
        }
        let g: [Option<Tensor>; 3] = std::array::from_fn(|i| grads.get(i).cloned().flatten());
        if g.iter().all(|g| g.is_none()) {
            return Ok(vec![None; n_in]);
        }
        let k = self.h0_at();
        let ins: Vec<Tensor> = (0..n_in).map(|i| ctx.input(i)).collect::<Result<_>>()?;
        let b = self.bias.then(|| &ins[2]);
        let r = if crate::autograd::is_grad_enabled() {
            // Recompute the layer in operators and differentiate that.
            let fwd = composite_forward(*self, &ins[0], &ins[1], b, &ins[k], &ins[k + 1])?;
            let cell = |t: usize, dh: Option<&Tensor>, dc: Option<&Tensor>| {
                let xt = ins[0].select(0, t as i64)?;
                differentiable_cell_backward(dh, dc, &xt, &fwd.hidden_gates[t], &fwd.c_prev[t])
            };
            composite_backward(self, &g, &ins[0], &ins[1], &ins[k], &fwd.out, &cell)?
        } else {
            let op = LstmLayerBackward {
                layer: *self,
                has: [g[0].is_some(), g[1].is_some(), g[2].is_some()],
            };
            let mut v: Vec<&Tensor> = g.iter().flatten().collect();
            let (out, cs, ws) = (ctx.output(0)?, ctx.output(3)?, ctx.output(4)?);
            v.extend([&ins[0], &ins[1], &ins[k], &ins[k + 1], &out, &cs, &ws]);
            call(&op, &v)?
        };
        let mut it = r.into_iter();
        let mut next = |i: usize| it.next().filter(|_| ctx.needs_grad(i));
        let mut out = vec![None; n_in];
        out[0] = next(0);
        out[1] = next(1);
        let db = next(2);
        if self.bias {
            out[2] = db;
        }
        out[k] = next(k);
        out[k + 1] = next(k + 1);
        Ok(out)
    }
}

/// The derivative of [`LstmLayer`]: inputs `[dout?, dh_n?, dc_n?, xw,
/// w_hh, h0, c0, out, cells, gates]` (the gradients present as `has`
/// says); outputs the gradients of `xw`, `w_hh`, `b_hh` (`[0]` without a
/// bias), `h0` and `c0`. Not differentiable: the layer's backward calls it
/// only when the gradient is not recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LstmLayerBackward {
    /// The forward operator.
    pub layer: LstmLayer,
    /// Which of the gradients of `out`, `h_n`, `c_n` are given.
    pub has: [bool; 3],
}

impl LstmLayerBackward {
    /// Number of gradient inputs.
    pub(crate) fn n_grads(&self) -> usize {
        self.has.iter().filter(|&&h| h).count()
    }

    /// The given gradients, by output (`None` where absent).
    pub(crate) fn grads<'a>(&self, inputs: &[&'a Tensor]) -> [Option<&'a Tensor>; 3] {
        let mut at = 0;
        std::array::from_fn(|i| {
            self.has[i].then(|| {
                at += 1;
                inputs[at - 1]
            })
        })
    }
}

impl Op for LstmLayerBackward {
    fn entry(&self) -> &'static OpEntry {
        &LSTM_LAYER_BACKWARD
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let name = "ferrotorch::lstm_layer_backward";
        let k = self.n_grads();
        if k == 0 || inputs.len() != k + 7 {
            return Err(Error::invalid(
                name,
                "expected [dout?, dh_n?, dc_n?, xw, w_hh, h0, c0, out, cells, gates] with a gradient",
            ));
        }
        let [xw, w, h0, c0, out, cs, ws] = [0, 1, 2, 3, 4, 5, 6].map(|i| inputs[k + i]);
        let (l, n, h) = layer_dims(xw, w, None, h0, c0)?;
        let g = self.grads(inputs);
        let want: [(&str, Option<&Tensor>, [usize; 3]); 6] = [
            ("dout", g[0], [1, l * n, h]),
            ("dh_n", g[1], [1, n, h]),
            ("dc_n", g[2], [1, n, h]),
            ("out", Some(out), [1, l * n, h]),
            ("cells", Some(cs), [1, l * n, h]),
            ("gates", Some(ws), [1, l * n, 4 * h]),
        ];
        for (what, t, [_, rows, cols]) in want {
            if let Some(t) = t
                && (t.numel() != rows * cols
                    || t.shape().last().copied().unwrap_or(0) != cols
                    || t.dtype() != xw.dtype())
            {
                return Err(Error::shape(
                    name,
                    xw.shape(),
                    t.shape(),
                    format!("{what} does not fit the layer"),
                ));
            }
        }
        let dt = xw.dtype();
        let bias = if self.layer.bias { 4 * h } else { 0 };
        Ok(smallvec::smallvec![
            OutSpec::new(xw.dims(), dt),
            OutSpec::new(w.dims(), dt),
            OutSpec::new(Dims::from_slice(&[bias]), dt),
            OutSpec::new(h0.dims(), dt),
            OutSpec::new(c0.dims(), dt),
        ])
    }
}

/// The layer's tensors as a graph of operators sees them: every step's
/// `h` and `c` before and after, in time order, plus the gates' workspace.
struct Unrolled {
    /// `[L, N, H]`.
    out: Tensor,
    /// `(h_n, c_n)`.
    last: (Tensor, Tensor),
    /// `[L, N, H]`.
    cells: Tensor,
    /// `[L, N, 4H]`.
    gates: Tensor,
    /// Per step (time order): the hidden projection `h_prev @ w_hh^T + b_hh`.
    hidden_gates: Vec<Tensor>,
    /// Per step (time order): the cell state the step started from.
    c_prev: Vec<Tensor>,
}

/// The forward in operators (per step: a product and the fused cell).
fn composite_forward(
    op: LstmLayer,
    xw: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
    h0: &Tensor,
    c0: &Tensor,
) -> Result<Unrolled> {
    let len = xw.shape()[0];
    let wt = w.t()?;
    let steps = xw.unbind(0)?;
    let (mut h, mut c) = (h0.clone(), c0.clone());
    let none = || vec![None::<Tensor>; len];
    let (mut hs, mut cs, mut ws, mut hgs, mut cps) = (none(), none(), none(), none(), none());
    for t in op.order(len) {
        let mut hg = h.matmul(&wt)?;
        if let Some(b) = b {
            hg = hg.add(b)?;
        }
        let (hy, cy, g) = steps[t].fused_lstm_cell(&hg, &c)?;
        cps[t] = Some(c);
        hgs[t] = Some(hg);
        (hs[t], cs[t], ws[t]) = (Some(hy.clone()), Some(cy.clone()), Some(g));
        (h, c) = (hy, cy);
    }
    let all = |v: Vec<Option<Tensor>>| -> Vec<Tensor> { v.into_iter().flatten().collect() };
    let stack = |v: &[Tensor], shape: [usize; 3]| -> Result<Tensor> {
        if v.is_empty() {
            return Tensor::zeros(shape)?.to_dtype(xw.dtype());
        }
        let r: Vec<&Tensor> = v.iter().collect();
        Tensor::stack(&r, 0)
    };
    let (n, hd) = (h0.shape()[0], h0.shape()[1]);
    let (hs, cs, ws) = (all(hs), all(cs), all(ws));
    Ok(Unrolled {
        out: stack(&hs, [0, n, hd])?,
        cells: stack(&cs, [0, n, hd])?,
        gates: stack(&ws, [0, n, 4 * hd])?,
        last: (h, c),
        hidden_gates: all(hgs),
        c_prev: all(cps),
    })
}

/// Row block `t` of `seq` (`[L, ...]`) as the state step `t` started
/// from: the previous step's in the direction of the recurrence, or
/// `init` for the first step.
fn started_from(op: &LstmLayer, seq: &Tensor, init: &Tensor, t: usize) -> Result<Tensor> {
    let prev = if op.reverse { t + 1 } else { t.wrapping_sub(1) };
    if prev < seq.shape()[0] {
        seq.select(0, prev as i64)
    } else {
        Ok(init.clone())
    }
}

/// The cell's derivative at step `t` given the gradients reaching its
/// `h` and `c`: the gates' gradient and `c`'s before the step.
type CellStep<'a> = dyn Fn(usize, Option<&Tensor>, Option<&Tensor>) -> Result<(Tensor, Tensor)> + 'a;

/// The derivative in operators: gradients of `[xw, w_hh, b_hh, h0, c0]`,
/// from every step's output `out` and the cell's derivative `cell`.
fn composite_backward(
    op: &LstmLayer,
    g: &[Option<Tensor>; 3],
    xw: &Tensor,
    w: &Tensor,
    h0: &Tensor,
    out: &Tensor,
    cell: &CellStep<'_>,
) -> Result<Tensors> {
    let len = xw.shape()[0];
    let order = op.order(len);
    let douts = g[0].as_ref().map(|d| d.unbind(0)).transpose()?;
    let (mut dh, mut dc) = (g[1].clone(), g[2].clone());
    let mut dgs: Vec<Option<Tensor>> = vec![None; len];
    for &t in order.iter().rev() {
        dh = match (douts.as_ref().map(|d| &d[t]), dh) {
            (Some(a), Some(b)) => Some(a.add(&b)?),
            (Some(a), None) => Some(a.clone()),
            (None, b) => b,
        };
        let (dg, dcx) = cell(t, dh.as_ref(), dc.as_ref())?;
        dh = Some(dg.matmul(w)?);
        dc = Some(dcx);
        dgs[t] = Some(dg);
    }
    let dgs: Vec<Tensor> = dgs.into_iter().flatten().collect();
    let (n, hd) = (h0.shape()[0], h0.shape()[1]);
    let dt = xw.dtype();
    let zeros = |s: &[usize]| Tensor::zeros(s)?.to_dtype(dt);
    let (dxw, dw, db) = if dgs.is_empty() {
        (zeros(xw.shape())?, zeros(w.shape())?, zeros(&[4 * hd])?)
    } else {
        let r: Vec<&Tensor> = dgs.iter().collect();
        let dxw = Tensor::stack(&r, 0)?;
        // The state each step started from, in time order.
        let hprev: Vec<Tensor> = (0..len).map(|t| started_from(op, out, h0, t)).collect::<Result<_>>()?;
        let r: Vec<&Tensor> = hprev.iter().collect();
        let hprev = Tensor::cat(&r, 0)?;
        let flat = dxw.reshape([(len * n) as i64, (4 * hd) as i64])?;
        let dw = flat.t()?.matmul(&hprev)?;
        let db = flat.sum_dim([0], false)?;
        (dxw, dw, db)
    };
    let dh0 = match dh {
        Some(d) => d,
        None => zeros(&[n, hd])?,
    };
    let dc0 = match dc {
        Some(d) => d,
        None => zeros(&[n, hd])?,
    };
    let db = if op.bias { db } else { zeros(&[0])? };
    Ok(smallvec::smallvec![dxw, dw, db, dh0, dc0])
}

fn forward_composite_kernel(c: &Call) -> Result<Tensors> {
    let op: &LstmLayer = downcast_op(c.op)?;
    op.infer(c.inputs)?;
    let k = op.h0_at();
    let b = op.bias.then(|| c.inputs[2]);
    let u = composite_forward(*op, c.inputs[0], c.inputs[1], b, c.inputs[k], c.inputs[k + 1])?;
    Ok(smallvec::smallvec![u.out, u.last.0, u.last.1, u.cells, u.gates])
}

fn backward_composite_kernel(c: &Call) -> Result<Tensors> {
    let op: &LstmLayerBackward = downcast_op(c.op)?;
    op.infer(c.inputs)?;
    let k = op.n_grads();
    let g = op.grads(c.inputs).map(|t| t.cloned());
    let [xw, w, h0, c0, out, cs, ws] = [0, 1, 2, 3, 4, 5, 6].map(|i| c.inputs[k + i]);
    let layer = op.layer;
    let cell = |t: usize, dh: Option<&Tensor>, dc: Option<&Tensor>| {
        let gates: [Tensor; 4] = ws
            .select(0, t as i64)?
            .chunk(4, 1)?
            .try_into()
            .map_err(|_| Error::invalid(NAME, "gates do not split in four"))?;
        let c_prev = started_from(&layer, cs, c0, t)?;
        cell_formula(dh, dc, &c_prev, &cs.select(0, t as i64)?, &gates)
    };
    composite_backward(&layer, &g, xw, w, h0, out, &cell)
}

/// Registers the operator forms for backends without kernels.
pub(crate) fn register() -> Result<()> {
    LSTM_LAYER.register_builtin(Slot::AnyBackend, Kernel::Functional(forward_composite_kernel))?;
    LSTM_LAYER_BACKWARD.register_builtin(Slot::AnyBackend, Kernel::Functional(backward_composite_kernel))?;
    Ok(())
}

/// # Recurrent layers
impl Tensor {
    /// One LSTM layer over a sequence in one direction (see
    /// [`crate::ops::rnn_layer`]): `self` is the input projection `xw`
    /// `[L, N, 4H]` (`x @ w_ih^T + b_ih`), then `w_hh` `[4H, H]`, `b_hh`
    /// `[4H]`, the initial states `h0`, `c0` `[N, H]`; `reverse` runs
    /// from the last step. Returns `(out [L, N, H], h_n, c_n)`, the
    /// values of PyTorch's LSTM layer. Errors: shapes that do not fit
    /// (both named), mixed or integer dtypes.
    ///
    /// ```
    /// use ferrotorch_core::Tensor;
    /// let (xw, w) = (Tensor::randn([5, 2, 12])?, Tensor::randn([12, 3])?);
    /// let (h0, c0) = (Tensor::zeros([2, 3])?, Tensor::zeros([2, 3])?);
    /// let (out, h_n, _) = xw.lstm_layer(&w, None, &h0, &c0, false)?;
    /// assert_eq!(out.shape(), &[5, 2, 3]);
    /// assert_eq!(out.select(0, 4)?.to_vec::<f32>()?, h_n.to_vec::<f32>()?);
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn lstm_layer(
        &self,
        w_hh: &Tensor,
        b_hh: Option<&Tensor>,
        h0: &Tensor,
        c0: &Tensor,
        reverse: bool,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let op = LstmLayer {
            reverse,
            bias: b_hh.is_some(),
        };
        let mut ins = vec![self, w_hh];
        ins.extend(b_hh);
        ins.extend([h0, c0]);
        let mut r = call(&op, &ins)?.into_iter();
        match (r.next(), r.next(), r.next()) {
            (Some(a), Some(b), Some(c)) => Ok((a, b, c)),
            _ => Err(Error::invalid(NAME, "returned fewer than three outputs")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autograd::{GradOptions, grad};
    use crate::{DType, TensorOptions};

    fn close(a: &Tensor, b: &Tensor, tol: f64, what: &str) {
        assert_eq!(a.shape(), b.shape(), "{what}");
        let (x, y) = (a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
        for (i, (u, v)) in x.iter().zip(&y).enumerate() {
            assert!((u - v).abs() <= tol * (1.0 + v.abs()), "{what}[{i}]: {u} vs {v}");
        }
    }

    /// The layer's outputs from the CPU kernel and from the operator form
    /// other backends run.
    fn both_forms(op: LstmLayer, ins: &[&Tensor]) -> (Tensors, Tensors) {
        let fast = call(&op, ins).unwrap();
        let composite = forward_composite_kernel(&Call {
            op: &op,
            inputs: ins,
            out: None,
        })
        .unwrap();
        (fast, composite)
    }

    /// The CPU kernels agree with the operator forms other backends run
    /// (forward and every gradient), in both directions, with and without
    /// a bias, with any subset of the output gradients.
    #[test]
    fn kernels_match_the_operator_forms() {
        let o = TensorOptions::new().dtype(DType::F64);
        for (l, n, h) in [(4, 3, 5), (1, 2, 1), (6, 40, 16)] {
            for reverse in [false, true] {
                for bias in [false, true] {
                    let leaf = |s: &[usize]| o.randn(s).unwrap().mul(0.7).unwrap().requires_grad_(true).unwrap();
                    let (xw, w, b, h0, c0) = (
                        leaf(&[l, n, 4 * h]),
                        leaf(&[4 * h, h]),
                        leaf(&[4 * h]),
                        leaf(&[n, h]),
                        leaf(&[n, h]),
                    );
                    let op = LstmLayer { reverse, bias };
                    let mut ins = vec![&xw, &w];
                    if bias {
                        ins.push(&b);
                    }
                    ins.extend([&h0, &c0]);
                    let (fast, composite) = both_forms(op, &ins);
                    let tag = format!("{l}x{n}x{h} reverse={reverse} bias={bias}");
                    for k in 0..5 {
                        close(&fast[k], &composite[k], 1e-12, &format!("output {k} {tag}"));
                    }
                    let gos = [
                        o.randn([l, n, h]).unwrap(),
                        o.randn([n, h]).unwrap(),
                        o.randn([n, h]).unwrap(),
                    ];
                    for mask in [0b111u8, 0b001, 0b010, 0b100, 0b110] {
                        let (mut outs_f, mut outs_c, mut go) = (vec![], vec![], vec![]);
                        for k in 0..3 {
                            if mask >> k & 1 == 1 {
                                outs_f.push(&fast[k]);
                                outs_c.push(&composite[k]);
                                go.push(gos[k].clone());
                            }
                        }
                        let run = |outs: &[&Tensor]| {
                            let opts = GradOptions {
                                grad_outputs: Some(&go),
                                retain_graph: Some(true),
                                ..Default::default()
                            };
                            grad(outs, &ins, opts).unwrap()
                        };
                        let (a, c) = (run(&outs_f), run(&outs_c));
                        for j in 0..ins.len() {
                            close(&a[j], &c[j], 1e-11, &format!("grad {j} mask {mask:03b} {tag}"));
                        }
                    }
                }
            }
        }
    }

    /// f32 steps give the bits of the step-by-step form the kernel
    /// replaces (product, then the fused cell) when there is no bias, and
    /// the same results for any thread count.
    #[test]
    fn f32_forward_is_the_step_by_step_form_and_thread_independent() {
        let (l, n, h) = (5, 33, 24);
        let xw = Tensor::randn([l, n, 4 * h]).unwrap();
        let w = Tensor::randn([4 * h, h]).unwrap().mul(0.2).unwrap();
        let (h0, c0) = (Tensor::randn([n, h]).unwrap(), Tensor::randn([n, h]).unwrap());
        let (out, _, c_n) = xw.lstm_layer(&w, None, &h0, &c0, false).unwrap();
        let (mut hh, mut cc) = (h0.clone(), c0.clone());
        for t in 0..l {
            let hg = hh.matmul(&w.t().unwrap()).unwrap();
            let (a, b, _) = xw.select(0, t as i64).unwrap().fused_lstm_cell(&hg, &cc).unwrap();
            (hh, cc) = (a, b);
            assert_eq!(
                out.select(0, t as i64).unwrap().to_vec::<f32>().unwrap(),
                hh.to_vec::<f32>().unwrap(),
                "step {t}"
            );
        }
        assert_eq!(c_n.to_vec::<f32>().unwrap(), cc.to_vec::<f32>().unwrap());
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let (o1, _, _) = one.install(|| xw.lstm_layer(&w, None, &h0, &c0, false)).unwrap();
        assert_eq!(o1.to_vec::<f32>().unwrap(), out.to_vec::<f32>().unwrap());
    }

    #[test]
    fn bad_operands_are_errors_naming_the_shapes() {
        let z = |s: &[usize]| Tensor::zeros(s).unwrap();
        let e = |r: Result<(Tensor, Tensor, Tensor)>| r.unwrap_err().to_string();
        let m = e(z(&[3, 2, 8]).lstm_layer(&z(&[8, 3]), None, &z(&[2, 2]), &z(&[2, 2]), false));
        assert!(m.contains("w_hh") && m.contains("[8, 3]"), "{m}");
        let m = e(z(&[3, 2, 12]).lstm_layer(&z(&[8, 2]), None, &z(&[2, 2]), &z(&[2, 2]), false));
        assert!(m.contains("[3, 2, 12]") && m.contains("[8, 2]"), "{m}");
        let m = e(z(&[3, 2, 8]).lstm_layer(&z(&[8, 2]), Some(&z(&[4])), &z(&[2, 2]), &z(&[2, 2]), false));
        assert!(m.contains("b_hh") && m.contains("[4]"), "{m}");
        let m = e(z(&[3, 2, 8]).lstm_layer(&z(&[8, 2]), None, &z(&[3, 2]), &z(&[2, 2]), false));
        assert!(m.contains("h0") && m.contains("[3, 2]"), "{m}");
        let m = e(z(&[3, 2, 8]).lstm_layer(
            &z(&[8, 2]).to_dtype(DType::F64).unwrap(),
            None,
            &z(&[2, 2]),
            &z(&[2, 2]),
            false,
        ));
        assert!(m.contains("w_hh"), "{m}");
        // An empty sequence passes the states through.
        let (h0, c0) = (Tensor::randn([2, 2]).unwrap(), Tensor::randn([2, 2]).unwrap());
        let (out, h, c) = z(&[0, 2, 8]).lstm_layer(&z(&[8, 2]), None, &h0, &c0, false).unwrap();
        assert_eq!(out.shape(), &[0, 2, 2]);
        assert_eq!(h.to_vec::<f32>().unwrap(), h0.to_vec::<f32>().unwrap());
        assert_eq!(c.to_vec::<f32>().unwrap(), c0.to_vec::<f32>().unwrap());
    }

    /// Backward through a workspace output is refused.
    #[test]
    fn workspaces_are_not_differentiable() {
        let xw = Tensor::randn([2, 1, 4]).unwrap().requires_grad_(true).unwrap();
        let w = Tensor::randn([4, 1]).unwrap();
        let z = Tensor::zeros([1, 1]).unwrap();
        let outs = call(
            &LstmLayer {
                reverse: false,
                bias: false,
            },
            &[&xw, &w, &z, &z],
        )
        .unwrap();
        let e = grad(&[&outs[4].sum().unwrap()], &[&xw], GradOptions::default()).unwrap_err();
        assert!(e.to_string().contains("not differentiable"), "{e}");
    }

    /// An empty sequence, on the CPU kernel and on the operator form: empty
    /// outputs and workspaces (gates `[0, N, 4H]`), and the initial states
    /// as the final ones.
    #[test]
    fn empty_sequences_end_in_the_initial_states() {
        let o = TensorOptions::new().dtype(DType::F64);
        let r = |s: &[usize]| o.randn(s).unwrap();
        let (xw, w, b, h0, c0) = (r(&[0, 2, 12]), r(&[12, 3]), r(&[12]), r(&[2, 3]), r(&[2, 3]));
        for reverse in [false, true] {
            let op = LstmLayer { reverse, bias: true };
            let ins = [&xw, &w, &b, &h0, &c0];
            let (fast, composite) = both_forms(op, &ins);
            for outs in [&fast, &composite] {
                let shapes: Vec<&[usize]> = outs.iter().map(|t| t.shape()).collect();
                assert_eq!(shapes, [&[0, 2, 3][..], &[2, 3], &[2, 3], &[0, 2, 3], &[0, 2, 12]]);
                close(&outs[1], &h0, 0.0, "h_n");
                close(&outs[2], &c0, 0.0, "c_n");
            }
        }
    }
}
