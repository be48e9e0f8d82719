//! Gradient checks by finite differences (`torch.autograd.gradcheck`).

use crate::{DType, Error, Result, Tensor};

/// Tolerances of [`gradcheck`] and [`gradgradcheck`].
#[derive(Debug, Clone, Copy)]
pub struct GradcheckOptions {
    /// Finite-difference step.
    pub eps: f64,
    /// Absolute tolerance.
    pub atol: f64,
    /// Relative tolerance.
    pub rtol: f64,
}

impl Default for GradcheckOptions {
    fn default() -> Self {
        GradcheckOptions {
            eps: 1e-6,
            atol: 1e-5,
            rtol: 1e-3,
        }
    }
}

type Func<'a> = dyn Fn(&[Tensor]) -> Result<Tensor> + 'a;

/// The Jacobian of `f` at `inputs` with respect to `inputs[i]`, by central
/// differences: `[out.numel()][in.numel()]`.
fn numerical(f: &Func, inputs: &[Tensor], i: usize, eps: f64) -> Result<Vec<Vec<f64>>> {
    let base: Vec<f64> = inputs[i].to_vec()?;
    let shape = inputs[i].shape().to_vec();
    let mut cols = Vec::with_capacity(base.len());
    for k in 0..base.len() {
        let eval = |delta: f64| -> Result<Vec<f64>> {
            let mut v = base.clone();
            v[k] += delta;
            let mut xs = inputs.to_vec();
            // Keep requires_grad: `f` may itself differentiate (gradgradcheck).
            xs[i] = Tensor::from_vec(v, &shape)?.requires_grad_(inputs[i].requires_grad())?;
            f(&xs)?.to_vec::<f64>()
        };
        let (hi, lo) = (eval(eps)?, eval(-eps)?);
        cols.push(
            hi.iter()
                .zip(&lo)
                .map(|(a, b)| (a - b) / (2.0 * eps))
                .collect::<Vec<f64>>(),
        );
    }
    // Transpose to [out][in].
    let n_out = cols.first().map_or(0, Vec::len);
    Ok((0..n_out).map(|o| cols.iter().map(|c| c[o]).collect()).collect())
}

/// The Jacobian by backward passes, one per output element: `[out.numel()][in.numel()]`.
fn analytical(f: &Func, inputs: &[Tensor], i: usize) -> Result<Vec<Vec<f64>>> {
    let out = f(inputs)?;
    let n_out = out.numel();
    let n_in = inputs[i].numel();
    let mut rows = Vec::with_capacity(n_out);
    for o in 0..n_out {
        let mut onehot = vec![0.0f64; n_out];
        onehot[o] = 1.0;
        let go = Tensor::from_vec(onehot, out.shape())?.to_dtype(out.dtype())?;
        let g = super::grad(
            &[&out],
            &[&inputs[i]],
            super::GradOptions {
                grad_outputs: Some(std::slice::from_ref(&go)),
                retain_graph: Some(true),
                create_graph: false,
                allow_unused: true,
            },
        )?;
        rows.push(match g.get(0) {
            Some(t) => t.to_vec::<f64>()?,
            None => vec![0.0; n_in],
        });
    }
    Ok(rows)
}

/// Checks the gradients of `f` at `inputs` (f64 tensors; those that
/// require grad are checked) against central finite differences. Returns an
/// error describing the first mismatch.
///
/// ```
/// use ferrotorch_core::{Tensor, autograd};
/// let x = Tensor::new([0.3f64, -1.2, 2.0])?.requires_grad_(true)?;
/// autograd::gradcheck(&|xs: &[Tensor]| xs[0].tanh()?.mul(&xs[0]), &[x], Default::default())?;
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub fn gradcheck(f: &Func, inputs: &[Tensor], opts: GradcheckOptions) -> Result<()> {
    for (i, x) in inputs.iter().enumerate() {
        if !x.requires_grad() {
            continue;
        }
        if x.dtype() != DType::F64 {
            return Err(Error::dtype(
                "gradcheck",
                x.dtype(),
                "inputs must be float64 for finite differences",
            ));
        }
        let num = numerical(f, inputs, i, opts.eps)?;
        let ana = analytical(f, inputs, i)?;
        for (o, (nr, ar)) in num.iter().zip(&ana).enumerate() {
            for (k, (n, a)) in nr.iter().zip(ar).enumerate() {
                if (n - a).abs() > opts.atol + opts.rtol * n.abs() || n.is_nan() != a.is_nan() {
                    return Err(Error::invalid(
                        "gradcheck",
                        format!(
                            "Jacobian mismatch for output {o} with respect to input {i} element {k}: \
                             numerical {n}, analytical {a}"
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Checks second derivatives, as PyTorch's `gradgradcheck`: [`gradcheck`]
/// of the function `(inputs, v) -> d(f(inputs) . v)/d(inputs)` (computed with
/// `create_graph`), where the output gradient `v` (random, fixed seed) is an
/// input too.
pub fn gradgradcheck(f: &Func, inputs: &[Tensor], opts: GradcheckOptions) -> Result<()> {
    let out = f(inputs)?;
    let generator = crate::Generator::new(0);
    let v = crate::TensorOptions::new()
        .dtype(out.dtype())
        .generator(&generator)
        .randn(out.shape())?
        .requires_grad_(true)?;
    let n = inputs.len();
    let first = |xs: &[Tensor]| -> Result<Tensor> {
        let (args, v) = (&xs[..n], &xs[n]);
        let y = f(args)?;
        let diff: Vec<&Tensor> = args.iter().filter(|t| t.requires_grad()).collect();
        let gs = super::grad(
            &[&y],
            &diff,
            super::GradOptions {
                grad_outputs: Some(std::slice::from_ref(v)),
                retain_graph: Some(true),
                create_graph: true,
                allow_unused: true,
            },
        )?;
        let flat: Vec<Tensor> = gs
            .into_iter()
            .zip(&diff)
            .map(|(g, x)| match g {
                Some(g) => g.reshape([-1]),
                None => x.zeros_like()?.reshape([-1]),
            })
            .collect::<Result<_>>()?;
        let refs: Vec<&Tensor> = flat.iter().collect();
        Tensor::cat(&refs, 0)
    };
    let mut all = inputs.to_vec();
    all.push(v);
    gradcheck(&first, &all, opts)
}
