//! Creating tensors: constants, ranges, random samples, `*_like`.

use crate::dispatch::call1;
use crate::layout::{Dims, Layout};
use crate::ops::{Arange, Distribution, Fill, Linspace, Random};
use crate::storage::Storage;
use crate::{DType, Error, IntoShape, Result, Scalar, Tensor, TensorOptions};

impl TensorOptions {
    /// `torch.tensor(data, dtype=, device=)`: `data` (a number, an array or
    /// nested arrays, a `Vec`) in the options' dtype (the data's own when
    /// none is set) and device, converted as PyTorch converts Python
    /// numbers: integer dtypes refuse values out of range (PyTorch's "value
    /// cannot be converted to type uint8 without overflow"; uint8 takes
    /// integers in [-255, 255], wrapping), float dtypes turn overflow into
    /// inf. Errors for ragged data.
    ///
    /// ```
    /// use ferrotorch_core::{DType, TensorOptions};
    /// let t = TensorOptions::new().dtype(DType::U8).tensor([-1i64, 7])?;
    /// assert_eq!(t.to_vec::<u8>()?, [255, 7]);
    /// let h = TensorOptions::new().dtype(DType::F16).tensor([70000.0])?;
    /// assert!(h.item::<f32>()?.is_infinite());
    /// assert!(TensorOptions::new().dtype(DType::U8).tensor([300i64]).is_err());
    /// # Ok::<(), ferrotorch_core::Error>(())
    /// ```
    pub fn tensor<D: crate::TensorData>(&self, data: D) -> Result<Tensor> {
        let shape = data.shape()?;
        let mut flat = Vec::new();
        data.flatten_into(&mut flat);
        let dtype = self.dtype.unwrap_or(<D::Elem as crate::Element>::DTYPE);
        convert_python_numbers(&flat, dtype)?
            .reshape(&shape[..])?
            .to_device(self.device)
    }

    /// `torch.empty_strided(size, stride, dtype=, device=)`: a zeroed
    /// tensor with the given strides (see [`Tensor::empty_strided`]).
    pub fn empty_strided(&self, shape: impl IntoShape, strides: impl IntoShape) -> Result<Tensor> {
        empty_strided(self, shape, strides)
    }

    /// Every element `value`; without a dtype set, the dtype follows the
    /// value (bool, int64, or the default float dtype), as `torch.full`. A
    /// value outside the dtype's range is an error ([`Scalar::check_fits`]).
    pub fn full(&self, shape: impl IntoShape, value: impl Into<Scalar>) -> Result<Tensor> {
        let shape = crate::shape_arg::new_sizes("full", &shape.into_shape())?;
        let shape = &shape[..];
        let value = value.into();
        let dtype = self.dtype.unwrap_or_else(|| match value {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => crate::default_dtype(),
        });
        let numel = crate::layout::checked_numel("full", shape)?;
        value.check_fits_fill("full", dtype, numel)?;
        self.fill(shape, value, dtype)
    }

    fn fill(&self, shape: &[usize], value: Scalar, dtype: DType) -> Result<Tensor> {
        call1(
            &Fill {
                value,
                shape: shape.into(),
                dtype,
                device: self.device,
            },
            &[],
        )
    }

    /// Zeros.
    pub fn zeros(&self, shape: impl IntoShape) -> Result<Tensor> {
        let shape = crate::shape_arg::new_sizes("zeros", &shape.into_shape())?;
        let shape = &shape[..];
        self.fill(shape, Scalar::Int(0), self.dt())
    }

    /// Ones.
    pub fn ones(&self, shape: impl IntoShape) -> Result<Tensor> {
        let shape = crate::shape_arg::new_sizes("ones", &shape.into_shape())?;
        let shape = &shape[..];
        self.fill(shape, Scalar::Int(1), self.dt())
    }

    /// A tensor whose contents are unspecified in PyTorch; ferrotorch zeroes
    /// it, so no read ever sees memory it has not written.
    pub fn empty(&self, shape: impl IntoShape) -> Result<Tensor> {
        let shape = crate::shape_arg::new_sizes("empty", &shape.into_shape())?;
        let shape = &shape[..];
        self.zeros(shape)
    }

    /// `start, start + step, ...` below `end`. Integer arguments give int64
    /// unless a dtype is set; float arguments give the default float dtype.
    /// Errors for a bool dtype, a zero step, a step pointing away from
    /// `end`, infinite bounds (PyTorch's messages).
    pub fn arange(&self, start: impl Into<Scalar>, end: impl Into<Scalar>, step: impl Into<Scalar>) -> Result<Tensor> {
        let (start, end, step) = (start.into(), end.into(), step.into());
        let any_float = start.is_float() || end.is_float() || step.is_float();
        let dtype = self
            .dtype
            .unwrap_or(if any_float { crate::default_dtype() } else { DType::I64 });
        if dtype == DType::Bool {
            return Err(Error::invalid("arange", "\"arange_cpu\" not implemented for 'Bool'"));
        }
        let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
        if st == 0.0 {
            return Err(Error::invalid("arange", "step must be nonzero"));
        }
        if !(s.is_finite() && e.is_finite()) {
            return Err(Error::invalid("arange", format!("unsupported range: {s} -> {e}")));
        }
        if (st > 0.0 && e < s) || (st < 0.0 && e > s) {
            return Err(Error::invalid(
                "arange",
                "upper bound and larger bound inconsistent with step sign",
            ));
        }
        let ints = (!any_float).then(|| (start.to_i64(), end.to_i64(), step.to_i64()));
        let len = arange_len(s, e, st, ints)?;
        call1(
            &Arange {
                start: s,
                step: st,
                int_start: start.to_i64(),
                int_step: step.to_i64(),
                len,
                dtype,
                device: self.device,
            },
            &[],
        )
    }

    /// `steps` evenly spaced values from `start` to `end`, both included
    /// (PyTorch's arithmetic: the first half counted from `start`, the
    /// second from `end`). Errors for negative `steps`, a bool dtype, and
    /// `start` or `end` out of the dtype's range (PyTorch's messages).
    pub fn linspace(&self, start: f64, end: f64, steps: i64) -> Result<Tensor> {
        let Ok(steps) = usize::try_from(steps) else {
            return Err(Error::invalid("linspace", "number of steps must be non-negative"));
        };
        let dtype = self.dt();
        if dtype == DType::Bool {
            return Err(Error::invalid(
                "linspace",
                "\"linspace_cpu\" not implemented for 'Bool'",
            ));
        }
        Scalar::Float(start).check_fits("linspace", dtype)?;
        Scalar::Float(end).check_fits("linspace", dtype)?;
        call1(
            &Linspace {
                start,
                end,
                steps,
                dtype: self.dt(),
                device: self.device,
            },
            &[],
        )
    }

    /// An `n x m` matrix with ones on the diagonal. Errors for a negative
    /// `n` or `m` (PyTorch's messages).
    pub fn eye(&self, n: i64, m: i64) -> Result<Tensor> {
        let size = |v: i64, name: &str| {
            usize::try_from(v)
                .map_err(|_| Error::invalid("eye", format!("{name} must be greater or equal to 0, got {v}")))
        };
        let (n, m) = (size(n, "n")?, size(m, "m")?);
        let z = self.zeros([n, m])?;
        if n.min(m) > 0 {
            z.as_strided([n.min(m)], [m + 1], 0)?.fill_(Scalar::Int(1))?;
        }
        Ok(z)
    }

    fn random(&self, shape: &[usize], dist: Distribution, dtype: DType) -> Result<Tensor> {
        call1(
            &Random {
                dist,
                shape: shape.into(),
                dtype,
                device: self.device,
                generator: self.generator.clone(),
            },
            &[],
        )
    }

    /// Uniform samples in `[0, 1)` (float dtypes).
    pub fn rand(&self, shape: impl IntoShape) -> Result<Tensor> {
        let shape = crate::shape_arg::new_sizes("rand", &shape.into_shape())?;
        let shape = &shape[..];
        self.uniform(shape, 0.0, 1.0)
    }

    /// Uniform samples in `[low, high)` (float dtypes; errors with PyTorch's
    /// messages as [`Tensor::uniform_`]).
    pub fn uniform(&self, shape: impl IntoShape, low: f64, high: f64) -> Result<Tensor> {
        let shape = crate::shape_arg::new_sizes("uniform", &shape.into_shape())?;
        let shape = &shape[..];
        self.random(shape, Distribution::Uniform { low, high }, self.dt())
    }

    /// Standard normal samples.
    pub fn randn(&self, shape: impl IntoShape) -> Result<Tensor> {
        let shape = crate::shape_arg::new_sizes("randn", &shape.into_shape())?;
        let shape = &shape[..];
        self.normal(shape, 0.0, 1.0)
    }

    /// Normal samples with `mean` and `std` (float dtypes; an error when
    /// `std` is negative or NaN).
    pub fn normal(&self, shape: impl IntoShape, mean: f64, std: f64) -> Result<Tensor> {
        let shape = crate::shape_arg::new_sizes("normal", &shape.into_shape())?;
        let shape = &shape[..];
        self.random(shape, Distribution::Normal { mean, std }, self.dt())
    }

    /// Uniform integers in `[low, high)` (int64 unless a dtype is set; an
    /// error when `low >= high` or a bound does not fit the dtype).
    pub fn randint(&self, low: i64, high: i64, shape: impl IntoShape) -> Result<Tensor> {
        let shape = crate::shape_arg::new_sizes("randint", &shape.into_shape())?;
        let shape = &shape[..];
        self.random(
            shape,
            Distribution::RandInt { low, high },
            self.dtype.unwrap_or(DType::I64),
        )
    }

    /// 0/1 samples, 1 with probability `p` (an error unless `0 <= p <= 1`).
    pub fn bernoulli(&self, shape: impl IntoShape, p: f64) -> Result<Tensor> {
        let shape = crate::shape_arg::new_sizes("bernoulli", &shape.into_shape())?;
        let shape = &shape[..];
        self.random(shape, Distribution::Bernoulli { p }, self.dt())
    }

    /// A random permutation of `0..n` (`torch.randperm`): int64 unless a
    /// dtype is set (any but bool; values must fit: `n <= 2049` for f16,
    /// `2^24 + 1` for f32, `n - 1 <= 255` for uint8). Errors when `n < 0`.
    pub fn randperm(&self, n: i64) -> Result<Tensor> {
        let n = usize::try_from(n).map_err(|_| {
            Error::invalid(
                "randperm",
                format!("Trying to create tensor with negative dimension {n}: [{n}]"),
            )
        })?;
        call1(
            &crate::ops::sampling::Randperm {
                n,
                dtype: self.dtype.unwrap_or(DType::I64),
                device: self.device,
                generator: self.generator.clone(),
            },
            &[],
        )
    }
}

/// The number of values of `arange`: `ceil((end - start) / step)`,
/// computed in f64 for float arguments and exactly for integer ones
/// (`ints`); [`Error::SizeOverflow`] when it does not fit an `i64`
/// (PyTorch: "invalid size, possible overflow?").
fn arange_len(s: f64, e: f64, st: f64, ints: Option<(i64, i64, i64)>) -> Result<usize> {
    let too_big = |len: String| {
        Error::overflow(
            "arange",
            format!("invalid size, possible overflow? (start={s}, end={e}, step={st} give {len} values)"),
        )
    };
    match ints {
        None => {
            let len = ((e - s) / st).ceil();
            // Checked in f64: a cast would saturate a huge or NaN length silently.
            if !(len >= 0.0 && len <= i64::MAX as f64) {
                return Err(too_big(len.to_string()));
            }
            Ok(len as usize)
        }
        Some((si, ei, sti)) => {
            // In i128: `ei - si` of two i64 may not fit an i64.
            let (si, ei, sti) = (si as i128, ei as i128, sti as i128);
            let len = ((ei - si + sti - sti.signum()) / sti).max(0);
            i64::try_from(len)
                .map(|l| l as usize)
                .map_err(|_| too_big(len.to_string()))
        }
    }
}

/// `v` rounded (to nearest even) to f16 or bf16, as an exact f64 (so that
/// `Element::from_f64` does not round again).
fn round_to_half(v: f32, dtype: DType) -> f64 {
    if dtype == DType::BF16 {
        half::bf16::from_f32(v).to_f64()
    } else {
        half::f16::from_f32(v).to_f64()
    }
}

fn opts(dtype: DType) -> TensorOptions {
    TensorOptions::new().dtype(dtype)
}

/// # Creation
///
/// Constants, ranges, random samples and `*_like`, as `torch.zeros`,
/// `torch.randn`, ...; [`TensorOptions`] sets dtype, device and generator.
///
/// ```
/// use ferrotorch_core::{DType, Tensor, TensorOptions, manual_seed};
/// manual_seed(0);
/// let a = Tensor::randn((2, 3))?;                          // torch.randn(2, 3)
/// let b = Tensor::full((2, 3), 7)?;                         // torch.full((2, 3), 7): int64
/// let c = TensorOptions::new().dtype(DType::F64).ones(3)?;  // torch.ones(3, dtype=torch.float64)
/// assert_eq!((b.dtype(), c.dtype()), (DType::I64, DType::F64));
/// assert_eq!(Tensor::arange(5)?.to_vec::<i64>()?, [0, 1, 2, 3, 4]);
/// assert_eq!(a.zeros_like()?.shape(), [2, 3]);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
impl Tensor {
    /// A 0-d CPU tensor holding `value` as `dtype`.
    ///
    /// # Panics
    ///
    /// When the system cannot allocate the element's few bytes (as
    /// `Box::new` would).
    pub fn scalar_tensor(value: Scalar, dtype: DType) -> Tensor {
        Tensor::scalar_tensor_with(value, dtype, false)
    }

    /// [`Tensor::scalar_tensor`], refusing in-place writes when `read_only`
    /// (the cached wrapped scalars every `x * 2.0` shares).
    pub(crate) fn scalar_tensor_with(value: Scalar, dtype: DType, read_only: bool) -> Tensor {
        let es = dtype.element_size();
        let storage = Storage::cpu(es).unwrap_or_else(|e| panic!("scalar_tensor: {e}"));
        {
            let g = storage.write();
            let p = g.as_cpu().expect("fresh CPU storage").as_ptr();
            // f16 and bf16 values round through f32, as `c10::Half` /
            // `c10::BFloat16` convert (PyTorch rounds twice from f64).
            let half = matches!(dtype, DType::F16 | DType::BF16);
            crate::with_dtype!(dtype, T => {
                let v: T = match value {
                    Scalar::Float(f) if half => <T as crate::Element>::from_f64(round_to_half(f as f32, dtype)),
                    Scalar::Int(i) if half => <T as crate::Element>::from_f64(round_to_half(i as f32, dtype)),
                    Scalar::Float(f) => <T as crate::Element>::from_f64(f),
                    Scalar::Int(i) => <T as crate::Element>::from_i64(i),
                    Scalar::Bool(b) => <T as crate::Element>::from_i64(b as i64),
                };
                // SAFETY: the fresh buffer holds one element of T (es bytes,
                // aligned to 16), and the write lock makes this the only access.
                unsafe { (p as *mut T).write(v) };
            });
        }
        // A bool value was written as a `bool`, so the storage holds only 0 or 1.
        let storage = Storage::with_flags(storage, dtype, read_only);
        Tensor::from_fresh(storage, Layout::contiguous(&[]), dtype)
    }

    /// Zeros of the default dtype on the CPU.
    pub fn zeros(shape: impl IntoShape) -> Result<Tensor> {
        TensorOptions::new().zeros(shape)
    }

    /// Zeros of `dtype` on the CPU.
    pub fn zeros_dtype(shape: impl IntoShape, dtype: DType) -> Result<Tensor> {
        opts(dtype).zeros(shape)
    }

    /// Ones of the default dtype on the CPU.
    pub fn ones(shape: impl IntoShape) -> Result<Tensor> {
        TensorOptions::new().ones(shape)
    }

    /// `value` everywhere (dtype from the value: bool, int64, or the default float).
    pub fn full(shape: impl IntoShape, value: impl Into<Scalar>) -> Result<Tensor> {
        TensorOptions::new().full(shape, value)
    }

    /// Zero-initialised tensor (`torch.empty` gives uninitialised memory;
    /// ferrotorch never hands out memory it has not written).
    pub fn empty(shape: impl IntoShape) -> Result<Tensor> {
        TensorOptions::new().empty(shape)
    }

    /// `0, 1, ..., end - 1` as int64.
    pub fn arange(end: i64) -> Result<Tensor> {
        TensorOptions::new().arange(0, end, 1)
    }

    /// `start, start + step, ...` below `end` (see [`TensorOptions::arange`]).
    pub fn arange_step(start: impl Into<Scalar>, end: impl Into<Scalar>, step: impl Into<Scalar>) -> Result<Tensor> {
        TensorOptions::new().arange(start, end, step)
    }

    /// `steps` evenly spaced values from `start` to `end` (see
    /// [`TensorOptions::linspace`]).
    pub fn linspace(start: f64, end: f64, steps: i64) -> Result<Tensor> {
        TensorOptions::new().linspace(start, end, steps)
    }

    /// The `n x n` identity matrix (an error for a negative `n`).
    pub fn eye(n: i64) -> Result<Tensor> {
        TensorOptions::new().eye(n, n)
    }

    /// Uniform samples in `[0, 1)` from the global generator.
    pub fn rand(shape: impl IntoShape) -> Result<Tensor> {
        TensorOptions::new().rand(shape)
    }

    /// Standard normal samples from the global generator.
    pub fn randn(shape: impl IntoShape) -> Result<Tensor> {
        TensorOptions::new().randn(shape)
    }

    /// Uniform int64 samples in `[low, high)`.
    pub fn randint(low: i64, high: i64, shape: impl IntoShape) -> Result<Tensor> {
        TensorOptions::new().randint(low, high, shape)
    }

    /// Normal samples with `mean` and `std`.
    pub fn normal(mean: f64, std: f64, shape: impl IntoShape) -> Result<Tensor> {
        TensorOptions::new().normal(shape, mean, std)
    }

    /// A zeroed tensor with `self`'s shape and device in `dtype`, laid out
    /// as PyTorch's `memory_format=torch.preserve_format` lays it out:
    /// `self`'s strides when `self` is non-overlapping and dense (size-0 and
    /// size-1 dims keep any stride), else dense strides in the order of
    /// `self`'s ([`Layout::preserve_format_strides`](crate::backend::Layout::preserve_format_strides)).
    pub fn empty_like_dtype(&self, dtype: DType) -> Result<Tensor> {
        let spec = crate::dispatch::OutSpec {
            shape: self.dims(),
            dtype,
            strides: self.layout().preserve_format_strides(),
        };
        Tensor::empty_for_spec(&spec, self.device())
    }

    /// Zeros with `self`'s shape, dtype, device and layout (`torch.zeros_like`).
    pub fn zeros_like(&self) -> Result<Tensor> {
        self.empty_like_dtype(self.dtype())
    }

    /// Ones with `self`'s shape, dtype, device and layout.
    pub fn ones_like(&self) -> Result<Tensor> {
        self.empty_like_dtype(self.dtype())?.fill_(1)
    }

    /// `value` with `self`'s shape, dtype, device and layout; errors when
    /// `value` does not fit the dtype.
    pub fn full_like(&self, value: impl Into<Scalar>) -> Result<Tensor> {
        let value = value.into();
        value.check_fits_fill("full_like", self.dtype(), self.numel())?;
        self.empty_like_dtype(self.dtype())?.fill_(value)
    }

    /// A tensor like `self` (zeroed; PyTorch's is uninitialised).
    pub fn empty_like(&self) -> Result<Tensor> {
        self.empty_like_dtype(self.dtype())
    }

    /// Uniform samples like `self`, drawn in its memory order (`torch.rand_like`).
    pub fn rand_like(&self) -> Result<Tensor> {
        self.empty_like_dtype(self.dtype())?.uniform_(0.0, 1.0)
    }

    /// Standard normal samples like `self`, drawn in its memory order.
    pub fn randn_like(&self) -> Result<Tensor> {
        self.empty_like_dtype(self.dtype())?.normal_(0.0, 1.0)
    }

    /// Zeros like `self` in `dtype` (`torch.zeros_like(x, dtype=dtype)`).
    pub fn zeros_like_dtype(&self, dtype: DType) -> Result<Tensor> {
        self.empty_like_dtype(dtype)
    }

    /// Ones like `self` in `dtype` (`torch.ones_like(x, dtype=dtype)`).
    pub fn ones_like_dtype(&self, dtype: DType) -> Result<Tensor> {
        self.empty_like_dtype(dtype)?.fill_(1)
    }

    /// `value` like `self` in `dtype` (`torch.full_like(x, v,
    /// dtype=dtype)`); errors when `value` does not fit `dtype`.
    pub fn full_like_dtype(&self, value: impl Into<Scalar>, dtype: DType) -> Result<Tensor> {
        let value = value.into();
        value.check_fits_fill("full_like", dtype, self.numel())?;
        self.empty_like_dtype(dtype)?.fill_(value)
    }

    /// Uniform samples like `self` in `dtype` (`torch.rand_like(x,
    /// dtype=dtype)`); errors for a non-float `dtype`.
    pub fn rand_like_dtype(&self, dtype: DType) -> Result<Tensor> {
        self.empty_like_dtype(dtype)?.uniform_(0.0, 1.0)
    }

    /// Standard normal samples like `self` in `dtype` (`torch.randn_like(x,
    /// dtype=dtype)`); errors for a non-float `dtype`.
    pub fn randn_like_dtype(&self, dtype: DType) -> Result<Tensor> {
        self.empty_like_dtype(dtype)?.normal_(0.0, 1.0)
    }

    /// Random integers in `[low, high)` like `self`.
    pub fn randint_like(&self, low: i64, high: i64) -> Result<Tensor> {
        self.empty_like_dtype(self.dtype())?.random_from_(low, Some(high))
    }

    /// A tensor of `data` with `self`'s dtype and device
    /// (`self.new_tensor(data)`), converted as [`TensorOptions::tensor`]
    /// converts: integer dtypes check the range (PyTorch's "value cannot be
    /// converted to type uint8 without overflow"), float dtypes turn
    /// overflow into inf.
    pub fn new_tensor<T: crate::Element>(&self, data: Vec<T>, shape: impl IntoShape) -> Result<Tensor> {
        let shape = crate::shape_arg::new_sizes("new_tensor", &shape.into_shape())?;
        let t = convert_python_numbers(&data, self.dtype())?;
        t.reshape(&shape[..])?.to_device(self.device())
    }

    /// `torch.empty_strided(size, stride)`: a zeroed tensor with the given
    /// strides. Errors for negative sizes or strides, mismatched lengths,
    /// or strides that make elements overlap beyond what the sizes allow.
    pub fn empty_strided(shape: impl IntoShape, strides: impl IntoShape) -> Result<Tensor> {
        empty_strided(&TensorOptions::new(), shape, strides)
    }

    /// A tensor with the given data, shape and dtype `T`.
    pub fn from_vec<T: crate::Element>(data: Vec<T>, shape: impl IntoShape) -> Result<Tensor> {
        let shape = crate::shape_arg::new_sizes("from_vec", &shape.into_shape())?;
        let shape = &shape[..];
        let n = crate::layout::checked_numel("from_vec", shape)?;
        if n != data.len() {
            return Err(Error::invalid(
                "from_vec",
                format!("shape {shape:?} has {n} elements but the data has {}", data.len()),
            ));
        }
        Self::from_elems(&data, shape.into())
    }

    /// A 1-d tensor copying `data`.
    ///
    /// # Panics
    ///
    /// When the system cannot allocate the copy (as `slice::to_vec` would);
    /// [`Tensor::from_vec`] returns [`Error::OutOfMemory`] instead.
    pub fn from_slice<T: crate::Element>(data: &[T]) -> Tensor {
        Self::from_elems(data, Dims::from_slice(&[data.len()])).unwrap_or_else(|e| panic!("from_slice: {e}"))
    }

    /// A 0-d tensor holding `value`.
    ///
    /// # Panics
    ///
    /// When the system cannot allocate the element's few bytes (as `Box::new` would).
    pub fn scalar<T: crate::Element>(value: T) -> Tensor {
        Self::from_elems(&[value], Dims::new()).unwrap_or_else(|e| panic!("scalar: {e}"))
    }

    /// A tensor of `shape` (whose element count is `data.len()`) copying `data`.
    pub(crate) fn from_elems<T: crate::Element>(data: &[T], shape: Dims) -> Result<Tensor> {
        debug_assert_eq!(crate::layout::numel(&shape), data.len());
        let storage = Storage::cpu_from_elems(data)?;
        Ok(Tensor::from_fresh(storage, Layout::contiguous(&shape), T::DTYPE))
    }
}

/// `torch.empty_strided` with the options' dtype and device: a zeroed
/// storage just large enough for the strides, viewed with them.
fn empty_strided(opts: &TensorOptions, shape: impl IntoShape, strides: impl IntoShape) -> Result<Tensor> {
    let shape = crate::shape_arg::new_sizes("empty_strided", &shape.into_shape())?;
    let strides = strides.into_shape();
    if strides.len() != shape.len() {
        return Err(Error::invalid(
            "empty_strided",
            format!(
                "dimensionality of sizes ({}) must match dimensionality of strides ({})",
                shape.len(),
                strides.len()
            ),
        ));
    }
    if strides.iter().any(|&s| s < 0) {
        return Err(Error::invalid(
            "empty_strided",
            format!(
                "Storage size calculation overflowed with sizes={:?} and strides={:?}",
                &shape[..],
                &strides[..]
            ),
        ));
    }
    let storage: usize = shape
        .iter()
        .zip(strides.iter())
        .map(|(&n, &st)| n.saturating_sub(1).saturating_mul(st as usize))
        .fold(1usize, |a, b| a.saturating_add(b));
    let numel = crate::layout::checked_numel("empty_strided", &shape)?;
    let base = opts.zeros([if numel == 0 { 0 } else { storage }])?;
    Ok(base.as_strided(&shape[..], strides, 0)?.detach())
}

/// Numbers converted to `dtype` as `torch.tensor(data, dtype=dtype)`
/// converts Python numbers (`torch/csrc/utils/python_scalars.h`): into an
/// integer dtype, checked (integers within the type, or for uint8 within
/// [-255, 255], wrapping; floats finite and truncated, from -0.99.. up to
/// below max + 1); into a float dtype, unchecked (overflow is inf; f16 and
/// bf16 round through f32, as PyTorch's); into bool, nonzero (NaN is true).
pub(crate) fn convert_python_numbers<T: crate::Element>(data: &[T], dtype: DType) -> Result<Tensor> {
    let n = data.len();
    let from_float = T::DTYPE.is_floating_point();
    let scalar = |v: T| {
        if from_float {
            Scalar::Float(v.to_f64())
        } else if T::DTYPE == DType::Bool {
            Scalar::Bool(v.is_nonzero())
        } else {
            Scalar::Int(v.to_i64())
        }
    };
    let check = |v: T, name: &str| -> Result<i64> {
        let s = scalar(v);
        if s.fits(dtype) {
            Ok(s.to_i64())
        } else {
            Err(Error::invalid(
                "tensor",
                format!("value cannot be converted to type {name} without overflow"),
            ))
        }
    };
    match dtype {
        DType::Bool => Tensor::from_vec(data.iter().map(|v| v.is_nonzero()).collect::<Vec<bool>>(), [n]),
        DType::U8 => Tensor::from_vec(
            data.iter()
                .map(|&v| check(v, "uint8").map(|i| i.rem_euclid(256) as u8))
                .collect::<Result<Vec<u8>>>()?,
            [n],
        ),
        DType::I32 => Tensor::from_vec(
            data.iter()
                .map(|&v| check(v, "int32").map(|i| i as i32))
                .collect::<Result<Vec<i32>>>()?,
            [n],
        ),
        DType::I64 => Tensor::from_vec(
            data.iter().map(|&v| check(v, "int64")).collect::<Result<Vec<i64>>>()?,
            [n],
        ),
        DType::F64 => Tensor::from_vec(data.iter().map(|v| v.to_f64()).collect::<Vec<f64>>(), [n]),
        DType::F32 => Tensor::from_vec(data.iter().map(|v| v.to_f64() as f32).collect::<Vec<f32>>(), [n]),
        DType::F16 => Tensor::from_vec(
            data.iter()
                .map(|v| half::f16::from_f32(v.to_f64() as f32))
                .collect::<Vec<half::f16>>(),
            [n],
        ),
        DType::BF16 => Tensor::from_vec(
            data.iter()
                .map(|v| half::bf16::from_f32(v.to_f64() as f32))
                .collect::<Vec<half::bf16>>(),
            [n],
        ),
    }
}
