//! Samplers with tensor arguments or whole-tensor algorithms: `randperm`,
//! `multinomial`, `poisson`, `bernoulli_` with a probability tensor (and
//! `bernoulli`), and `normal` with tensor mean and/or std.

use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs, call1};
use crate::layout::Dims;
use crate::ops::promote::{IntoOperand, Operand};
use crate::random::Generator;
use crate::{DType, Device, Error, Result, Scalar, Tensor, TensorOptions};

use super::checks::{fmt_g, not_implemented};
use super::zero_grad::attach_zero_grad;

/// Dispatch table of `randperm` ([`Randperm`]).
pub static RANDPERM: OpEntry = OpEntry::new("randperm");
/// Dispatch table of `multinomial` ([`Multinomial`]).
pub static MULTINOMIAL: OpEntry = OpEntry::new("multinomial");
/// Dispatch table of `poisson` ([`Poisson`]).
pub static POISSON: OpEntry = OpEntry::new("poisson");
/// Dispatch table of `bernoulli_.Tensor` ([`BernoulliTensor`]; also runs
/// `bernoulli`, which fills a new tensor).
pub static BERNOULLI_TENSOR: OpEntry = OpEntry::new("bernoulli_.Tensor");

/// A random permutation of `0..n` (PyTorch's `randperm`: a Fisher-Yates
/// shuffle with one 32-bit draw per position for `n < 214748364`, the
/// "inside-out" form with 64-bit draws above).
#[derive(Debug, Clone)]
pub struct Randperm {
    /// Number of values.
    pub n: usize,
    /// Output dtype (any but bool).
    pub dtype: DType,
    /// Output device.
    pub device: Device,
    /// Explicit generator (the global one when `None`).
    pub generator: Option<Generator>,
}

impl Op for Randperm {
    fn entry(&self) -> &'static OpEntry {
        &RANDPERM
    }

    fn infer(&self, _inputs: &[&Tensor]) -> Result<OutSpecs> {
        let n = self.n;
        let last = n.saturating_sub(1);
        let overflow = |ty: &str| {
            Error::invalid(
                "randperm",
                format!("value cannot be converted to type {ty} without overflow"),
            )
        };
        match self.dtype {
            DType::Bool => return Err(not_implemented("randperm", "randperm", DType::Bool)),
            DType::U8 if last > u8::MAX as usize => return Err(overflow("uint8_t")),
            DType::I32 if last > i32::MAX as usize => return Err(overflow("int")),
            DType::F16 if n > 2049 => {
                return Err(Error::invalid(
                    "randperm",
                    "n cannot be greater than 2049 for Half type.",
                ));
            }
            DType::F32 if n > (1 << 24) + 1 => {
                return Err(Error::invalid(
                    "randperm",
                    "n cannot be greater than 2^24+1 for Float type.",
                ));
            }
            DType::F64 if n as u64 > (1 << 53) + 1 => {
                return Err(Error::invalid(
                    "randperm",
                    "n cannot be greater than 2^53+1 for Double type.",
                ));
            }
            _ => {}
        }
        Ok(smallvec::smallvec![OutSpec::new(Dims::from_slice(&[n]), self.dtype)])
    }

    fn device(&self) -> Option<Device> {
        Some(self.device)
    }
}

/// Indices sampled from the rows of a probability tensor (1-d: one
/// distribution; 2-d: one per row), input `[probs]`, int64 output of shape
/// `[num_samples]` or `[rows, num_samples]`.
///
/// Without replacement, or for one sample, PyTorch's Gumbel trick: one
/// exponential draw per probability (in the input's memory order), then
/// the `num_samples` largest `p / q` (its `topk`, ties in libstdc++'s
/// order). With replacement, a binary search of the normalised cumulative
/// sums for one 53-bit uniform per sample, row by row.
#[derive(Debug, Clone)]
pub struct Multinomial {
    /// Samples per distribution.
    pub num_samples: usize,
    /// Whether a category may be drawn more than once.
    pub replacement: bool,
    /// Explicit generator (the global one when `None`).
    pub generator: Option<Generator>,
}

impl Op for Multinomial {
    fn entry(&self) -> &'static OpEntry {
        &MULTINOMIAL
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let p = inputs[0];
        let bad = |msg: String| Error::invalid("multinomial", msg);
        if !(1..=2).contains(&p.ndim()) {
            return Err(bad("prob_dist must be 1 or 2 dim".into()));
        }
        if !p.is_floating_point() {
            return Err(Error::dtype(
                "multinomial",
                p.dtype(),
                format!(
                    "multinomial only supports floating-point dtypes for input, got: {}",
                    p.dtype().scalar_type_name()
                ),
            ));
        }
        if self.num_samples == 0 {
            return Err(bad("cannot sample n_sample <= 0 samples".into()));
        }
        let ncat = p.shape()[p.ndim() - 1];
        if !self.replacement && self.num_samples > ncat {
            return Err(bad(
                "cannot sample n_sample > prob_dist.size(-1) samples without replacement".into(),
            ));
        }
        if ncat > 1 << 24 {
            return Err(bad("number of categories cannot exceed 2^24".into()));
        }
        let shape: Dims = if p.ndim() == 1 {
            Dims::from_slice(&[self.num_samples])
        } else {
            Dims::from_slice(&[p.shape()[0], self.num_samples])
        };
        Ok(smallvec::smallvec![OutSpec::new(shape, DType::I64)])
    }
}

/// Poisson samples, one per rate of the input `[rates]` (float dtypes; the
/// result has the rates' shape and dtype). PyTorch's algorithm: products of
/// uniforms below rate 10, Hörmann's transformed rejection (PTRS) from 10
/// on; a negative or NaN rate is an error when its element is reached.
#[derive(Debug, Clone)]
pub struct Poisson {
    /// Explicit generator (the global one when `None`).
    pub generator: Option<Generator>,
}

impl Op for Poisson {
    fn entry(&self) -> &'static OpEntry {
        &POISSON
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let r = inputs[0];
        if !r.is_floating_point() {
            return Err(not_implemented("poisson", "poisson_cpu", r.dtype()));
        }
        Ok(smallvec::smallvec![OutSpec::new(r.dims(), r.dtype())])
    }
}

/// `self.bernoulli_(p)` with a tensor of probabilities `p` (input `[p]`,
/// expanded to `self`'s shape; output `self`, of shape `shape` and dtype
/// `dtype`). Elements are drawn in `self`'s memory order.
#[derive(Debug, Clone)]
pub struct BernoulliTensor {
    /// Shape of the filled tensor.
    pub shape: Dims,
    /// Dtype of the filled tensor.
    pub dtype: DType,
    /// Explicit generator (the global one when `None`).
    pub generator: Option<Generator>,
}

impl Op for BernoulliTensor {
    fn entry(&self) -> &'static OpEntry {
        &BERNOULLI_TENSOR
    }

    fn infer(&self, inputs: &[&Tensor]) -> Result<OutSpecs> {
        let p = inputs[0];
        let target: Vec<i64> = self.shape.iter().map(|&s| s as i64).collect();
        p.layout().expand("bernoulli_", &target)?;
        if !p.is_floating_point() {
            return Err(not_implemented("bernoulli_", "bernoulli_tensor_cpu_p_", p.dtype()));
        }
        Ok(smallvec::smallvec![OutSpec::new(self.shape.clone(), self.dtype)])
    }

    fn alias_safe(&self) -> bool {
        // The kernel reads all of `p` before it writes.
        true
    }
}

/// # Random sampling with tensor arguments
///
/// `randperm`, `multinomial`, `poisson`, `bernoulli` and `normal` with
/// tensor mean / std, with PyTorch's numbers for the same seed. Each has a
/// `_with` twin taking the generator to draw from (the plain form uses the
/// global one; `randperm` takes it from [`TensorOptions::generator`]).
///
/// ```
/// use ferrotorch_core::{Generator, Tensor};
/// let g = Generator::new(0);
/// let p = Tensor::new([0.1f32, 0.0, 0.6, 0.3])?;
/// let idx = p.multinomial_with(2, false, &g)?;          // two distinct categories
/// assert!(idx.to_vec::<i64>()?.iter().all(|&i| i != 1)); // never the zero one
/// let counts = Tensor::new([0.5f64, 4.0, 20.0])?.poisson_with(&g)?;
/// assert_eq!(counts.shape(), [3]);
/// let z = Tensor::normal_tensor_with(&Tensor::zeros(3)?, 2.0, &g)?;
/// assert_eq!(z.shape(), [3]);
/// let perm = Tensor::randperm(5)?;
/// let mut v = perm.to_vec::<i64>()?;
/// v.sort();
/// assert_eq!(v, [0, 1, 2, 3, 4]);
/// assert!(p.multinomial(5, false).is_err()); // 5 > 4 categories
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// A random permutation of `0..n` as int64 (`torch.randperm(n)`), from
    /// the global generator; other dtypes and generators through
    /// [`TensorOptions::randperm`]. Errors when `n < 0`.
    pub fn randperm(n: i64) -> Result<Tensor> {
        TensorOptions::new().randperm(n)
    }

    /// `num_samples` category indices (int64) per distribution: `self` is a
    /// 1-d tensor of non-negative weights (need not sum to 1), or a 2-d one
    /// with a distribution per row. Errors (PyTorch's messages) for 3-d or
    /// integer input, zero samples, more samples than categories without
    /// replacement, negative, infinite or NaN weights, or a row of zeros.
    pub fn multinomial(&self, num_samples: i64, replacement: bool) -> Result<Tensor> {
        self.multinomial_impl(num_samples, replacement, None)
    }

    /// [`Tensor::multinomial`] drawing from `generator`.
    pub fn multinomial_with(&self, num_samples: i64, replacement: bool, generator: &Generator) -> Result<Tensor> {
        self.multinomial_impl(num_samples, replacement, Some(generator))
    }

    fn multinomial_impl(&self, num_samples: i64, replacement: bool, generator: Option<&Generator>) -> Result<Tensor> {
        // Non-positive counts reach the shape rule as 0, its error.
        let num_samples = usize::try_from(num_samples).unwrap_or(0);
        let op = Multinomial {
            num_samples,
            replacement,
            generator: generator.cloned(),
        };
        call1(&op, &[self])
    }

    /// A Poisson sample for each rate in `self` (float dtypes; same shape and
    /// dtype). Errors for integer dtypes and, when its element is reached, for
    /// a negative or NaN rate.
    pub fn poisson(&self) -> Result<Tensor> {
        self.poisson_impl(None)
    }

    /// [`Tensor::poisson`] drawing from `generator`.
    pub fn poisson_with(&self, generator: &Generator) -> Result<Tensor> {
        self.poisson_impl(Some(generator))
    }

    fn poisson_impl(&self, generator: Option<&Generator>) -> Result<Tensor> {
        let op = Poisson {
            generator: generator.cloned(),
        };
        let sample = crate::autograd::no_grad(|| call1(&op, &[self]))?;
        attach_zero_grad(sample, &[self], "PoissonBackward0")
    }

    /// 0/1 samples where each element of `self` is the probability of a 1
    /// (`torch.bernoulli(self)`: a new tensor of `self`'s shape and dtype,
    /// filled with [`Tensor::bernoulli_`]). Errors for integer
    /// probabilities and probabilities outside [0, 1].
    pub fn bernoulli(&self) -> Result<Tensor> {
        // PyTorch: `empty_like(p, LEGACY_CONTIGUOUS_MEMORY_FORMAT).bernoulli_(p)`,
        // so the draws follow the logical (row-major) order whatever p's layout.
        let sample =
            crate::autograd::no_grad(|| crate::TensorOptions::like(self).empty(self.shape())?.bernoulli_(self))?;
        attach_zero_grad(sample, &[self], "BernoulliBackward0")
    }

    /// [`Tensor::bernoulli`] drawing from `generator`.
    pub fn bernoulli_with(&self, generator: &Generator) -> Result<Tensor> {
        let sample = crate::autograd::no_grad(|| {
            crate::TensorOptions::like(self)
                .empty(self.shape())?
                .bernoulli_with_(self, generator)
        })?;
        attach_zero_grad(sample, &[self], "BernoulliBackward0")
    }

    /// Normal samples with elementwise `mean` and `std` (`torch.normal`
    /// with tensor arguments): both tensors (broadcast; the mean's dtype),
    /// or one of them a number (the tensor's shape and dtype). As PyTorch,
    /// it draws standard normal samples (or, for a number `std`, with that
    /// std) and then multiplies by `std` and adds `mean` in the dtype.
    /// Errors when `std` has a negative or NaN element, for integer dtypes,
    /// and when both are numbers (use [`Tensor::normal`] with a shape).
    /// The result requires grad when a tensor argument does, with
    /// PyTorch's zero gradient (node `NormalBackward1/2/3`).
    pub fn normal_tensor<'a, 'b>(mean: impl IntoOperand<'a>, std: impl IntoOperand<'b>) -> Result<Tensor> {
        normal_tensor(mean.into_operand(), std.into_operand(), None)
    }

    /// [`Tensor::normal_tensor`] drawing from `generator`.
    pub fn normal_tensor_with<'a, 'b>(
        mean: impl IntoOperand<'a>,
        std: impl IntoOperand<'b>,
        generator: &Generator,
    ) -> Result<Tensor> {
        normal_tensor(mean.into_operand(), std.into_operand(), Some(generator))
    }
}

/// `CHECK_NORMAL_TENSOR_STD`: every element of `std` is `>= 0` (not NaN);
/// not checked on the meta device, which has no values.
fn check_std_tensor(std: &Tensor) -> Result<()> {
    if std.device() == Device::Meta || std.numel() == 0 {
        return Ok(());
    }
    if std.to_vec::<f64>()?.iter().all(|&s| s >= 0.0) {
        Ok(())
    } else {
        Err(Error::invalid("normal", "normal expects all elements of std >= 0.0"))
    }
}

/// `torch.normal(mean, std)` with at least one tensor argument, as PyTorch's
/// `normal_out_impl`: samples, then `mul_(std)` and `add_(mean)` in the
/// output dtype (each rounded, with PyTorch's in-place type promotion).
fn normal_tensor(mean: Operand, std: Operand, generator: Option<&Generator>) -> Result<Tensor> {
    let opts = |like: &Tensor| {
        let o = TensorOptions::like(like);
        match generator {
            Some(g) => o.generator(g),
            None => o,
        }
    };
    let sample = crate::autograd::no_grad(|| match (mean.clone(), std.clone()) {
        (Operand::Tensor(m), Operand::Tensor(s)) => {
            check_std_tensor(s)?;
            let shape = crate::layout::broadcast_shapes("normal", m.shape(), s.shape())?;
            let out = opts(m).normal(&shape[..], 0.0, 1.0)?;
            out.mul_(s)?;
            out.add_(m)?;
            Ok(out)
        }
        (Operand::Tensor(m), Operand::Scalar(s)) => {
            let s = s.to_f64();
            if s.is_nan() || s < 0.0 {
                return Err(Error::invalid(
                    "normal",
                    format!("normal expects std >= 0.0, but found std {}", fmt_g(s)),
                ));
            }
            let out = opts(m).normal(m.shape(), 0.0, s)?;
            out.add_(m)?;
            Ok(out)
        }
        (Operand::Scalar(m), Operand::Tensor(s)) => {
            check_std_tensor(s)?;
            let out = opts(s).normal(s.shape(), 0.0, 1.0)?;
            out.mul_(s)?;
            out.add_(&Tensor::scalar_tensor(Scalar::Float(m.to_f64()), out.dtype()))?;
            Ok(out)
        }
        (Operand::Scalar(_), Operand::Scalar(_)) => Err(Error::invalid(
            "normal",
            "mean and std are both numbers: give the shape with Tensor::normal / TensorOptions::normal",
        )),
    })?;
    match (mean, std) {
        (Operand::Tensor(m), Operand::Tensor(s)) => attach_zero_grad(sample, &[m, s], "NormalBackward3"),
        (Operand::Tensor(m), Operand::Scalar(_)) => attach_zero_grad(sample, &[m], "NormalBackward1"),
        (Operand::Scalar(_), Operand::Tensor(s)) => attach_zero_grad(sample, &[s], "NormalBackward2"),
        (Operand::Scalar(_), Operand::Scalar(_)) => Ok(sample),
    }
}
