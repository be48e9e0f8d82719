//! The in-place random fills: `uniform_`, `normal_`, `bernoulli_`,
//! `random_`, `exponential_`, `geometric_`, `cauchy_`, `log_normal_` (one
//! [`Random`] op each, written into `self`).

use crate::dispatch::call_out;
use crate::ops::promote::{IntoOperand, Operand};
use crate::ops::{Distribution, Random};
use crate::random::Generator;
use crate::{Result, Tensor};

impl Tensor {
    /// Fills `self` in place with samples of `dist` (drawn in `self`'s
    /// memory order, as PyTorch's kernels iterate); returns `self`.
    fn fill_random(&self, dist: Distribution, generator: Option<&Generator>) -> Result<Tensor> {
        let op = Random {
            dist,
            shape: self.dims(),
            dtype: self.dtype(),
            device: self.device(),
            generator: generator.cloned(),
        };
        call_out(&op, &[], &[self])?;
        Ok(self.clone())
    }
}

macro_rules! fills {
    ($(
        $(#[$doc:meta])*
        $name:ident, $with:ident ($($arg:ident: $ty:ty),*) => $dist:expr;
    )*) => {
        /// # Random fills
        ///
        /// PyTorch's in-place samplers: each overwrites `self` (any dtype the
        /// distribution allows, any layout; an expanded tensor is refused) with
        /// the numbers PyTorch draws for the same seed, and returns `self`.
        /// The `_with_` twin of each draws from the generator it is given
        /// instead of the global one. Bad parameters are an error with
        /// PyTorch's message, before any draw.
        ///
        /// ```
        /// use ferrotorch_core::{DType, Generator, Tensor, TensorOptions};
        /// let g = Generator::new(0);
        /// let x = Tensor::zeros(4)?.uniform_with_(-1.0, 1.0, &g)?;
        /// assert!(x.to_vec::<f32>()?.iter().all(|v| (-1.0..1.0).contains(v)));
        /// let k = TensorOptions::new().dtype(DType::I64).zeros((2, 3))?.random_to_with_(10, &g)?;
        /// assert!(k.to_vec::<i64>()?.iter().all(|v| (0..10).contains(v)));
        /// let coin = Tensor::zeros(5)?.bernoulli_with_(0.5, &g)?;   // or a tensor of probabilities
        /// assert!(coin.to_vec::<f32>()?.iter().all(|&v| v == 0.0 || v == 1.0));
        /// assert!(Tensor::zeros(3)?.exponential_(0.0).is_err());    // lambda must be > 0
        /// # Ok::<(), ferrotorch_core::Error>(())
        /// ```
        impl Tensor {
            $(
                $(#[$doc])*
                pub fn $name(&self, $($arg: $ty),*) -> Result<Tensor> {
                    self.fill_random($dist, None)
                }

                #[doc = concat!("[`Tensor::", stringify!($name), "`] drawing from `generator`.")]
                pub fn $with(&self, $($arg: $ty,)* generator: &Generator) -> Result<Tensor> {
                    self.fill_random($dist, Some(generator))
                }
            )*

            /// `bernoulli_(p)`: each element becomes 1 with probability `p`,
            /// else 0 (in `self`'s dtype, bool included). `p` is a number in
            /// [0, 1] (one 53-bit uniform per element; outside [0, 1], or NaN,
            /// is an error), or a float tensor of probabilities that
            /// broadcasts to `self` (f64 probabilities compare with a 53-bit
            /// uniform, f32/f16/bf16 ones with a 24-bit one; a probability
            /// outside [0, 1] is an error when its element is reached, as in
            /// PyTorch, after the elements before it are drawn and written).
            pub fn bernoulli_<'a>(&self, p: impl IntoOperand<'a>) -> Result<Tensor> {
                self.bernoulli_impl(p.into_operand(), None)
            }

            /// [`Tensor::bernoulli_`] drawing from `generator`.
            pub fn bernoulli_with_<'a>(&self, p: impl IntoOperand<'a>, generator: &Generator) -> Result<Tensor> {
                self.bernoulli_impl(p.into_operand(), Some(generator))
            }
        }
    };
}

fills! {
    /// `uniform_(from, to)`: uniform samples in `[from, to)` (float
    /// dtypes). Errors when a bound is outside the dtype's range, when
    /// `from > to`, or when `to - from` overflows the dtype.
    uniform_, uniform_with_(from: f64, to: f64) => Distribution::Uniform { low: from, high: to };
    /// `normal_(mean, std)`: normal samples (float dtypes; PyTorch's
    /// Box-Muller in blocks of 16 for contiguous tensors of 16 elements or
    /// more, its scalar path otherwise). Errors when `std < 0` or NaN.
    normal_, normal_with_(mean: f64, std: f64) => Distribution::Normal { mean, std };
    /// `random_()`: uniform integers over the dtype's range: `[0, max]` for
    /// integer dtypes, `[0, 2^digits]` for float ones (2^24 for f32), 0 or 1
    /// for bool.
    random_, random_with_() => Distribution::RandomBits;
    /// `random_(to)`: uniform integers in `[0, to)`. Errors when `to <= 0`
    /// or `to - 1` does not fit the dtype.
    random_to_, random_to_with_(to: i64) => Distribution::RandInt { low: 0, high: to };
    /// `random_(from, to)`: uniform integers in `[from, to)`, or, with
    /// `to = None`, from `from` up to the dtype's largest value (2^digits
    /// for float dtypes; `from = i64::MIN` then means any 64-bit value,
    /// for int64, f64, f32 and bf16). Errors when `from >= to` or a bound
    /// does not fit the dtype; float dtypes first move the bounds onto
    /// values they hold, as PyTorch does.
    random_from_, random_from_with_(from: i64, to: Option<i64>) => match to {
        Some(to) => Distribution::RandInt { low: from, high: to },
        None => Distribution::RandIntFrom { low: from },
    };
    /// `exponential_(lambd)`: exponential samples with rate `lambd` (float
    /// dtypes). Errors when `lambd <= 0` or NaN.
    exponential_, exponential_with_(lambd: f64) => Distribution::Exponential { lambd };
    /// `geometric_(p)`: the number of Bernoulli(`p`) trials up to the first
    /// success (every dtype but bool; values too large for an integer
    /// dtype wrap as PyTorch's x86-64 conversion does). Errors unless
    /// `0 < p < 1`.
    geometric_, geometric_with_(p: f64) => Distribution::Geometric { p };
    /// `cauchy_(median, sigma)`: Cauchy samples (float dtypes). Errors when
    /// `sigma <= 0` or NaN.
    cauchy_, cauchy_with_(median: f64, sigma: f64) => Distribution::Cauchy { median, sigma };
    /// `log_normal_(mean, std)`: `exp` of normal samples with `mean` and
    /// `std` (float dtypes). Errors when `std <= 0` or NaN.
    log_normal_, log_normal_with_(mean: f64, std: f64) => Distribution::LogNormal { mean, std };
}

impl Tensor {
    fn bernoulli_impl(&self, p: Operand, generator: Option<&Generator>) -> Result<Tensor> {
        match p {
            Operand::Scalar(p) => self.fill_random(Distribution::Bernoulli { p: p.to_f64() }, generator),
            Operand::Tensor(p) => {
                let op = super::BernoulliTensor {
                    shape: self.dims(),
                    dtype: self.dtype(),
                    generator: generator.cloned(),
                };
                call_out(&op, &[p], &[self])?;
                Ok(self.clone())
            }
        }
    }
}
