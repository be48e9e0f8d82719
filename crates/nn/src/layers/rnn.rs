//! `LSTM` and `GRU`: PyTorch's parameters (`weight_ih_l0`,
//! `weight_hh_l1_reverse`, ...), initialisation (every parameter
//! U(-1/sqrt(hidden), 1/sqrt(hidden)) in registration order) and cell
//! arithmetic in PyTorch's operation order (the input projection of a whole
//! layer as one GEMM, then per step the hidden projection and the gates).

use std::borrow::Cow;

use ferrotorch_core::{DType, Error, Result, Tensor, TensorOptions};

use crate::pyfmt::py_bool;
use crate::pyfmt::py_float;
use crate::state::call_with_hooks;
use crate::{Module, ModuleState, Parameter, Visitor, functional as F, init};

/// Which recurrent cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cell {
    Lstm,
    Gru,
}

impl Cell {
    fn gates(self) -> usize {
        match self {
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Cell::Lstm => "LSTM",
            Cell::Gru => "GRU",
        }
    }
}

/// The construction options of [`Lstm`] and [`Gru`] (PyTorch's keywords).
#[derive(Debug, Clone, Copy, PartialEq, crate::Options)]
pub struct RnnOptions {
    /// Stacked layers (default 1).
    pub(crate) num_layers: usize,
    /// Biases `b_ih`, `b_hh` (default true).
    pub(crate) bias: bool,
    /// Inputs and outputs are `[N, L, *]` instead of `[L, N, *]`.
    pub(crate) batch_first: bool,
    /// Dropout on the outputs of every layer but the last, in training.
    pub(crate) dropout: f64,
    /// A second direction per layer, run over the reversed sequence.
    pub(crate) bidirectional: bool,
    /// The parameters' dtype (default: the default dtype).
    pub(crate) dtype: Option<DType>,
}

impl Default for RnnOptions {
    fn default() -> Self {
        RnnOptions {
            num_layers: 1,
            bias: true,
            batch_first: false,
            dropout: 0.0,
            bidirectional: false,
            dtype: None,
        }
    }
}

/// The shared body of LSTM and GRU.
struct Rnn {
    cell: Cell,
    input_size: usize,
    hidden_size: usize,
    opts: RnnOptions,
    /// `(name, parameter)` in PyTorch's registration order.
    params: Vec<(String, Parameter)>,
    state: ModuleState,
}

impl Rnn {
    fn new(cell: Cell, input_size: usize, hidden_size: usize, opts: RnnOptions) -> Result<Self> {
        if opts.num_layers == 0 {
            return Err(Error::invalid(
                cell.name(),
                "num_layers must be greater than or equal to 1",
            ));
        }
        if !(0.0..=1.0).contains(&opts.dropout) {
            return Err(Error::invalid(
                cell.name(),
                "dropout should be a number in range [0, 1] representing the probability of an element being zeroed",
            ));
        }
        let t = match opts.dtype {
            Some(dt) => TensorOptions::new().dtype(dt),
            None => TensorOptions::new(),
        };
        let dirs = if opts.bidirectional { 2 } else { 1 };
        let gate = cell.gates() * hidden_size;
        let mut params = Vec::new();
        for layer in 0..opts.num_layers {
            for d in 0..dirs {
                let in_size = if layer == 0 { input_size } else { hidden_size * dirs };
                let sfx = if d == 1 { "_reverse" } else { "" };
                params.push((format!("weight_ih_l{layer}{sfx}"), t.clone().empty([gate, in_size])?));
                params.push((
                    format!("weight_hh_l{layer}{sfx}"),
                    t.clone().empty([gate, hidden_size])?,
                ));
                if opts.bias {
                    params.push((format!("bias_ih_l{layer}{sfx}"), t.clone().empty([gate])?));
                    params.push((format!("bias_hh_l{layer}{sfx}"), t.clone().empty([gate])?));
                }
            }
        }
        let stdv = if hidden_size > 0 {
            1.0 / (hidden_size as f64).sqrt()
        } else {
            0.0
        };
        let params = params
            .into_iter()
            .map(|(n, w)| {
                init::uniform_(&w, -stdv, stdv)?;
                Ok((n, Parameter::new(w)?))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Rnn {
            cell,
            input_size,
            hidden_size,
            opts,
            params,
            state: ModuleState::default(),
        })
    }

    fn dirs(&self) -> usize {
        if self.opts.bidirectional { 2 } else { 1 }
    }

    fn extra_repr(&self) -> String {
        let o = &self.opts;
        let mut s = format!("{}, {}", self.input_size, self.hidden_size);
        if o.num_layers != 1 {
            s += &format!(", num_layers={}", o.num_layers);
        }
        if !o.bias {
            s += ", bias=False";
        }
        if o.batch_first {
            s += ", batch_first=True";
        }
        if o.dropout != 0.0 {
            s += &format!(", dropout={}", py_float(o.dropout));
        }
        if o.bidirectional {
            s += &format!(", bidirectional={}", py_bool(true));
        }
        s
    }

    fn repr_line(&self) -> String {
        format!("{}({})", self.cell.name(), self.extra_repr())
    }

    /// The parameters of one layer and direction: (w_ih, w_hh, b_ih, b_hh).
    fn layer_params(&self, layer: usize, dir: usize) -> (Tensor, Tensor, Option<Tensor>, Option<Tensor>) {
        let per = if self.opts.bias { 4 } else { 2 };
        let base = (layer * self.dirs() + dir) * per;
        let p = |i: usize| self.params[base + i].1.tensor();
        if self.opts.bias {
            (p(0), p(1), Some(p(2)), Some(p(3)))
        } else {
            (p(0), p(1), None, None)
        }
    }

    /// Validates `x` and the initial states; returns `x` as `[L, N, in]`,
    /// whether it was batched, and the zero or given states `[D*layers, N, H]`.
    fn prepare(&self, x: &Tensor, states: &[Option<&Tensor>]) -> Result<(Tensor, bool, Vec<Tensor>)> {
        let bad = |detail: String| Error::module(self.repr_line(), detail);
        if x.ndim() != 2 && x.ndim() != 3 {
            return Err(bad(format!(
                "expected input [L, N, {}] (or unbatched [L, {}]), got {:?}",
                self.input_size,
                self.input_size,
                x.shape()
            )));
        }
        if x.shape().last() != Some(&self.input_size) {
            return Err(bad(format!(
                "input.size(-1) must be equal to input_size. Expected {}, got {} (input {:?})",
                self.input_size,
                x.shape()[x.ndim() - 1],
                x.shape()
            )));
        }
        let batched = x.ndim() == 3;
        let x = match (batched, self.opts.batch_first) {
            (false, _) => x.unsqueeze(1)?,
            (true, true) => x.transpose(0, 1)?,
            (true, false) => x.clone(),
        };
        let n = x.shape()[1];
        let want = [self.opts.num_layers * self.dirs(), n, self.hidden_size];
        let mut out = Vec::new();
        for s in states {
            out.push(match s {
                Some(h) => {
                    let h = if batched { (*h).clone() } else { h.unsqueeze(1)? };
                    if h.shape() != want {
                        return Err(bad(format!("Expected hidden size {want:?}, got {:?}", h.shape())));
                    }
                    h
                }
                None => TensorOptions::like(&x).zeros(want)?,
            });
        }
        Ok((x, batched, out))
    }

    /// Runs every layer; `h0` (and `c0` for LSTM) `[D*layers, N, H]`.
    /// Returns the last layer's outputs `[L, N, D*H]` and the final states.
    fn run(&self, x: &Tensor, h0: &Tensor, c0: Option<&Tensor>) -> Result<(Tensor, Tensor, Option<Tensor>)> {
        let (mut input, dirs) = (x.clone(), self.dirs());
        let (mut hn, mut cn) = (Vec::new(), Vec::new());
        let len = x.shape()[0];
        // An f32 / f64 LSTM direction is one `lstm_layer` operator; f16 /
        // bf16 go op by op, each result rounded to the dtype, as PyTorch's
        // CPU cell does (the fused kernels compute them in f32).
        let fused = matches!(x.dtype(), DType::F32 | DType::F64);
        for layer in 0..self.opts.num_layers {
            let mut outs = Vec::new();
            for dir in 0..dirs {
                let (w_ih, w_hh, b_ih, b_hh) = self.layer_params(layer, dir);
                let idx = (layer * dirs + dir) as i64;
                let mut h = h0.select(0, idx)?;
                let mut c = c0.map(|c| c.select(0, idx)).transpose()?;
                if let (Cell::Lstm, true, Some(c)) = (self.cell, fused, c.as_ref()) {
                    // The whole direction as one operator: no graph node per step.
                    let xw = F::linear(&input, &w_ih, b_ih.as_ref())?;
                    let (out, h_n, c_n) = xw.lstm_layer(&w_hh, b_hh.as_ref(), &h, c, dir == 1)?;
                    outs.push(out);
                    hn.push(h_n);
                    cn.push(c_n);
                    continue;
                }
                // The whole layer's input projection as one GEMM, unbound
                // into steps by one node (PyTorch's CPU path): per-step
                // `select`s would each scatter a full-size gradient.
                let xw = F::linear(&input, &w_ih, b_ih.as_ref())?.unbind(0)?;
                let mut steps: Vec<Tensor> = Vec::with_capacity(len);
                let order: Vec<usize> = if dir == 0 {
                    (0..len).collect()
                } else {
                    (0..len).rev().collect()
                };
                for t in order {
                    let xt = xw[t].clone();
                    let hw = F::linear(&h, &w_hh, b_hh.as_ref())?;
                    match self.cell {
                        Cell::Lstm => {
                            let gates = hw.add(&xt)?.chunk(4, 1)?;
                            let i = gates[0].sigmoid()?;
                            let f = gates[1].sigmoid()?;
                            let g = gates[2].tanh()?;
                            let o = gates[3].sigmoid()?;
                            let cx = c.as_ref().ok_or_else(|| Error::invalid("LSTM", "missing cell state"))?;
                            let cy = f.mul(cx)?.add(&i.mul(&g)?)?;
                            h = o.mul(&cy.tanh()?)?;
                            c = Some(cy);
                        }
                        Cell::Gru => {
                            let ig = xt.chunk(3, 1)?;
                            let hg = hw.chunk(3, 1)?;
                            let r = hg[0].add(&ig[0])?.sigmoid()?;
                            let z = hg[1].add(&ig[1])?.sigmoid()?;
                            let n = ig[2].add(&hg[2].mul(&r)?)?.tanh()?;
                            h = h.sub(&n)?.mul(&z)?.add(&n)?;
                        }
                    }
                    steps.push(h.clone());
                }
                if dir == 1 {
                    steps.reverse();
                }
                let refs: Vec<&Tensor> = steps.iter().collect();
                outs.push(Tensor::stack(&refs, 0)?);
                hn.push(h);
                if let Some(c) = c {
                    cn.push(c);
                }
            }
            let refs: Vec<&Tensor> = outs.iter().collect();
            input = if dirs == 1 {
                outs[0].clone()
            } else {
                Tensor::cat(&refs, 2)?
            };
            if self.opts.dropout > 0.0 && self.state.is_training() && layer + 1 < self.opts.num_layers {
                input = F::dropout(&input, self.opts.dropout, true)?;
            }
        }
        let stack = |v: &[Tensor]| -> Result<Tensor> {
            let refs: Vec<&Tensor> = v.iter().collect();
            Tensor::stack(&refs, 0)
        };
        let c = if cn.is_empty() { None } else { Some(stack(&cn)?) };
        Ok((input, stack(&hn)?, c))
    }

    /// Puts the output back in the caller's layout.
    fn finish(&self, out: Tensor, batched: bool) -> Result<Tensor> {
        match (batched, self.opts.batch_first) {
            (false, _) => out.squeeze_dims([1]),
            (true, true) => out.transpose(0, 1),
            (true, false) => Ok(out),
        }
    }

    fn finish_state(h: Tensor, batched: bool) -> Result<Tensor> {
        if batched { Ok(h) } else { h.squeeze_dims([1]) }
    }

    fn visit<'a>(&'a self, visitor: &mut dyn Visitor<'a>) {
        for (name, p) in &self.params {
            visitor.parameter(name, p);
        }
    }
}

macro_rules! rnn_module {
    ($(#[$doc:meta])* $name:ident, $cell:expr) => {
        $(#[$doc])*
        pub struct $name {
            rnn: Rnn,
        }

        impl $name {
            /// The layer with one layer, biases, sequence-first layout.
            pub fn new(input_size: usize, hidden_size: usize) -> Result<Self> {
                Self::with_options(input_size, hidden_size, RnnOptions::default())
            }

            /// The layer with the given options; errors for zero layers or a
            /// dropout outside [0, 1].
            pub fn with_options(input_size: usize, hidden_size: usize, opts: RnnOptions) -> Result<Self> {
                Ok($name { rnn: Rnn::new($cell, input_size, hidden_size, opts)? })
            }

            /// The parameter names in registration order (`weight_ih_l0`, ...).
            pub fn flat_weights_names(&self) -> Vec<&str> {
                self.rnn.params.iter().map(|(n, _)| n.as_str()).collect()
            }
        }

        // Parameter names are built from the layer count, so the members
        // are listed by this one impl rather than derived from fields.
        impl Module for $name {
            fn visit<'a>(&'a self, visitor: &mut dyn Visitor<'a>) {
                self.rnn.visit(visitor);
            }

            fn type_name(&self) -> Cow<'static, str> {
                Cow::Borrowed($cell.name())
            }

            fn as_dyn(&self) -> &dyn Module {
                self
            }

            fn extra_repr(&self) -> String {
                self.rnn.extra_repr()
            }

            fn state(&self) -> Option<&ModuleState> {
                Some(&self.rnn.state)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.repr())
            }
        }
    };
}

rnn_module!(
    /// A multi-layer LSTM (PyTorch's `nn.LSTM`).
    Lstm,
    Cell::Lstm
);
rnn_module!(
    /// A multi-layer GRU (PyTorch's `nn.GRU`).
    Gru,
    Cell::Gru
);

/// PyTorch's spelling.
pub type LSTM = Lstm;
/// PyTorch's spelling.
pub type GRU = Gru;

impl Lstm {
    /// Runs the LSTM over `x` (`[L, N, input_size]`, `[N, L, input_size]`
    /// with `batch_first`, or unbatched `[L, input_size]`) from zeros (or
    /// `(h0, c0)`, `[D*num_layers, N, hidden]`, with [`Lstm::call_with`]). Returns the
    /// outputs `[L, N, D*hidden]` and `(h_n, c_n)`. Errors naming the layer
    /// and the shapes when they do not fit.
    ///
    /// Runs between the module's hooks (PyTorch's `lstm(x)`): they see the
    /// inputs `[x]` (`[x, h0, c0]` with [`Lstm::call_with`]) and the
    /// outputs `[output, h_n, c_n]`.
    pub fn call(&self, x: &Tensor) -> Result<(Tensor, (Tensor, Tensor))> {
        self.call_state(x, None)
    }

    /// [`Lstm::call`] from the state `(h0, c0)` (PyTorch's `lstm(x, (h0,
    /// c0))`).
    pub fn call_with(&self, x: &Tensor, state: (&Tensor, &Tensor)) -> Result<(Tensor, (Tensor, Tensor))> {
        self.call_state(x, Some(state))
    }

    /// [`Lstm::call`] without the hooks (`lstm.forward(x)`).
    pub fn forward(&self, x: &Tensor) -> Result<(Tensor, (Tensor, Tensor))> {
        self.run(x, None)
    }

    /// [`Lstm::call_with`] without the hooks.
    pub fn forward_with(&self, x: &Tensor, state: (&Tensor, &Tensor)) -> Result<(Tensor, (Tensor, Tensor))> {
        self.run(x, Some(state))
    }

    fn call_state(&self, x: &Tensor, state: Option<(&Tensor, &Tensor)>) -> Result<(Tensor, (Tensor, Tensor))> {
        if !self.rnn.state.has_hooks() {
            return self.run(x, state);
        }
        let args = match state {
            Some((h, c)) => vec![x.clone(), h.clone(), c.clone()],
            None => vec![x.clone()],
        };
        call_with_hooks(self, &args, |a| match a {
            [x, h, c] => self.run(x, Some((h, c))),
            _ => self.run(&a[0], None),
        })
    }

    fn run(&self, x: &Tensor, state: Option<(&Tensor, &Tensor)>) -> Result<(Tensor, (Tensor, Tensor))> {
        let (h0, c0) = (state.map(|s| s.0), state.map(|s| s.1));
        let (x, batched, s) = self.rnn.prepare(x, &[h0, c0])?;
        let (out, h, c) = self.rnn.run(&x, &s[0], Some(&s[1]))?;
        let c = c.ok_or_else(|| Error::invalid("LSTM", "missing cell state"))?;
        Ok((
            self.rnn.finish(out, batched)?,
            (Rnn::finish_state(h, batched)?, Rnn::finish_state(c, batched)?),
        ))
    }
}

impl Gru {
    /// Runs the GRU over `x` (layouts as [`Lstm::call`]) from zeros.
    /// Returns the outputs and `h_n`.
    ///
    /// Runs between the module's hooks (PyTorch's `gru(x)`): they see the
    /// inputs `[x]` (`[x, h0]` with [`Gru::call_with`]) and the outputs
    /// `[output, h_n]`.
    pub fn call(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        self.call_state(x, None)
    }

    /// [`Gru::call`] from the state `h0` (PyTorch's `gru(x, h0)`).
    pub fn call_with(&self, x: &Tensor, h0: &Tensor) -> Result<(Tensor, Tensor)> {
        self.call_state(x, Some(h0))
    }

    /// [`Gru::call`] without the hooks (`gru.forward(x)`).
    pub fn forward(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        self.run(x, None)
    }

    /// [`Gru::call_with`] without the hooks.
    pub fn forward_with(&self, x: &Tensor, h0: &Tensor) -> Result<(Tensor, Tensor)> {
        self.run(x, Some(h0))
    }

    fn call_state(&self, x: &Tensor, h0: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        if !self.rnn.state.has_hooks() {
            return self.run(x, h0);
        }
        let args = match h0 {
            Some(h) => vec![x.clone(), h.clone()],
            None => vec![x.clone()],
        };
        call_with_hooks(self, &args, |a| match a {
            [x, h] => self.run(x, Some(h)),
            _ => self.run(&a[0], None),
        })
    }

    fn run(&self, x: &Tensor, h0: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        let (x, batched, s) = self.rnn.prepare(x, &[h0])?;
        let (out, h, _) = self.rnn.run(&x, &s[0], None)?;
        Ok((self.rnn.finish(out, batched)?, Rnn::finish_state(h, batched)?))
    }
}
