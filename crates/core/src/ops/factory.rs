//! Factory operators without tensor inputs: `arange`, `linspace` and random
//! sampling (`zeros`/`ones`/`full` use [`crate::ops::Fill`]). [`Random`]
//! also runs the in-place fills (`uniform_`, `normal_`, `random_`, ...,
//! front ends in [`crate::ops::sampling`]), whose checks live there.

use crate::dispatch::{Op, OpEntry, OutSpec, OutSpecs};
use crate::layout::Dims;
use crate::random::Generator;
use crate::{DType, Device, Result};

/// Dispatch table of `arange.start_step`, which also runs PyTorch's
/// `arange` and `arange.start`.
pub static ARANGE: OpEntry = OpEntry::new("arange.start_step");
/// Dispatch table of `linspace`.
pub static LINSPACE: OpEntry = OpEntry::new("linspace");
/// Dispatch table of `uniform_` ([`Distribution::Uniform`]: `rand`, `uniform`).
pub static UNIFORM: OpEntry = OpEntry::new("uniform_");
/// Dispatch table of `normal_` ([`Distribution::Normal`]: `randn`, `normal`).
pub static NORMAL: OpEntry = OpEntry::new("normal_");
/// Dispatch table of `random_.from` ([`Distribution::RandInt`]: `randint`,
/// `random_(from, to)`, `random_(to)` (PyTorch's `random_.to`), and
/// [`Distribution::RandIntFrom`]: `random_(from, None)`).
pub static RANDINT: OpEntry = OpEntry::new("random_.from");
/// Dispatch table of `random_` ([`Distribution::RandomBits`]).
pub static RANDOM: OpEntry = OpEntry::new("random_");
/// Dispatch table of `bernoulli_.float` ([`Distribution::Bernoulli`]).
pub static BERNOULLI: OpEntry = OpEntry::new("bernoulli_.float");
/// Dispatch table of `exponential_` ([`Distribution::Exponential`]).
pub static EXPONENTIAL: OpEntry = OpEntry::new("exponential_");
/// Dispatch table of `geometric_` ([`Distribution::Geometric`]).
pub static GEOMETRIC: OpEntry = OpEntry::new("geometric_");
/// Dispatch table of `cauchy_` ([`Distribution::Cauchy`]).
pub static CAUCHY: OpEntry = OpEntry::new("cauchy_");
/// Dispatch table of `log_normal_` ([`Distribution::LogNormal`]).
pub static LOG_NORMAL: OpEntry = OpEntry::new("log_normal_");

/// `start, start + step, ...` (`len` values), computed in f64 for float
/// dtypes and exactly in i64 for integer ones (from `int_start` and
/// `int_step`, the arguments truncated to integers, as PyTorch does).
#[derive(Debug, Clone)]
pub struct Arange {
    /// First value.
    pub start: f64,
    /// Increment.
    pub step: f64,
    /// First value for integer dtypes.
    pub int_start: i64,
    /// Increment for integer dtypes.
    pub int_step: i64,
    /// Number of values.
    pub len: usize,
    /// Output dtype.
    pub dtype: DType,
    /// Output device.
    pub device: Device,
}

impl Op for Arange {
    fn entry(&self) -> &'static OpEntry {
        &ARANGE
    }

    fn infer(&self, _inputs: &[&crate::Tensor]) -> Result<OutSpecs> {
        Ok(smallvec::smallvec![OutSpec::new(
            Dims::from_slice(&[self.len]),
            self.dtype
        )])
    }

    fn device(&self) -> Option<Device> {
        Some(self.device)
    }
}

/// `steps` evenly spaced values from `start` to `end` inclusive.
#[derive(Debug, Clone)]
pub struct Linspace {
    /// First value.
    pub start: f64,
    /// Last value.
    pub end: f64,
    /// Number of values.
    pub steps: usize,
    /// Output dtype.
    pub dtype: DType,
    /// Output device.
    pub device: Device,
}

impl Op for Linspace {
    fn entry(&self) -> &'static OpEntry {
        &LINSPACE
    }

    fn infer(&self, _inputs: &[&crate::Tensor]) -> Result<OutSpecs> {
        Ok(smallvec::smallvec![OutSpec::new(
            Dims::from_slice(&[self.steps]),
            self.dtype
        )])
    }

    fn device(&self) -> Option<Device> {
        Some(self.device)
    }
}

/// A probability distribution to sample from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    /// Uniform on `[low, high)`.
    Uniform {
        /// Lower bound.
        low: f64,
        /// Upper bound.
        high: f64,
    },
    /// Gaussian.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
    /// Uniform integers in `[low, high)`.
    RandInt {
        /// Lower bound.
        low: i64,
        /// Upper bound (exclusive).
        high: i64,
    },
    /// Uniform integers from `low` to the largest value of the dtype (2^digits
    /// for float dtypes); with `low == i64::MIN`, any 64-bit value.
    RandIntFrom {
        /// Lower bound.
        low: i64,
    },
    /// `random_()`: uniform integers over the dtype's range (`[0, 2^digits]`
    /// for float dtypes, `[0, max]` for integer ones, both values for bool).
    RandomBits,
    /// 1 with probability `p`, else 0.
    Bernoulli {
        /// Probability of 1.
        p: f64,
    },
    /// Exponential with rate `lambd`.
    Exponential {
        /// Rate (> 0).
        lambd: f64,
    },
    /// The number of Bernoulli(`p`) trials up to the first success (1, 2, ...).
    Geometric {
        /// Success probability, in (0, 1).
        p: f64,
    },
    /// Cauchy (Lorentz) with location `median` and scale `sigma`.
    Cauchy {
        /// Location.
        median: f64,
        /// Scale (> 0).
        sigma: f64,
    },
    /// `exp` of a normal sample with `mean` and `std`.
    LogNormal {
        /// Mean of the logarithm.
        mean: f64,
        /// Standard deviation of the logarithm (> 0).
        std: f64,
    },
}

impl Distribution {
    /// The dispatch table of sampling from this distribution.
    pub fn entry(&self) -> &'static OpEntry {
        match self {
            Distribution::Uniform { .. } => &UNIFORM,
            Distribution::Normal { .. } => &NORMAL,
            Distribution::RandInt { .. } | Distribution::RandIntFrom { .. } => &RANDINT,
            Distribution::RandomBits => &RANDOM,
            Distribution::Bernoulli { .. } => &BERNOULLI,
            Distribution::Exponential { .. } => &EXPONENTIAL,
            Distribution::Geometric { .. } => &GEOMETRIC,
            Distribution::Cauchy { .. } => &CAUCHY,
            Distribution::LogNormal { .. } => &LOG_NORMAL,
        }
    }
}

/// Samples of a distribution: a fresh tensor (`torch.rand`, ...), or written
/// into `self` in place (`uniform_`, ...; then `shape` and `dtype` are
/// `self`'s). Draws are sequential from the generator (the global one when
/// `None`), in the output's memory order, matching PyTorch's CPU sampling;
/// the shape rule checks the parameters against the dtype with PyTorch's
/// messages ([`crate::ops::sampling`]).
#[derive(Debug, Clone)]
pub struct Random {
    /// What to sample.
    pub dist: Distribution,
    /// Output shape.
    pub shape: Dims,
    /// Output dtype.
    pub dtype: DType,
    /// Output device.
    pub device: Device,
    /// Explicit generator.
    pub generator: Option<Generator>,
}

impl Op for Random {
    fn entry(&self) -> &'static OpEntry {
        self.dist.entry()
    }

    fn infer(&self, _inputs: &[&crate::Tensor]) -> Result<OutSpecs> {
        crate::ops::sampling::check_distribution(&self.dist, self.dtype, crate::layout::numel(&self.shape))?;
        Ok(smallvec::smallvec![OutSpec::new(self.shape.clone(), self.dtype)])
    }

    fn device(&self) -> Option<Device> {
        Some(self.device)
    }
}
