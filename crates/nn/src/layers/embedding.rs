//! `Embedding`.

use ferrotorch_core::{DType, Device, Error, Result, Tensor, autograd};

use crate::functional::{self as F, EmbeddingOptions};
use crate::parameter::tensor_options;
use crate::pyfmt::py_float;
use crate::{Forward, Module, ModuleState, Parameter, init};

/// The options of [`Embedding`] (PyTorch's keywords and defaults).
#[derive(Debug, Clone, Copy, PartialEq, crate::Options)]
pub struct EmbeddingLayerOptions {
    /// The row that is zero-initialised and gets no gradient; negative
    /// counts from the end (`None`).
    pub(crate) padding_idx: Option<i64>,
    /// Rows looked up whose `norm_type`-norm exceeds this are renormalised
    /// in place to it (`None`).
    pub(crate) max_norm: Option<f64>,
    /// The `p` of `max_norm`'s norm (`2.0`).
    pub(crate) norm_type: f64,
    /// Divide each row's gradient by its index's count in the batch
    /// (`false`).
    pub(crate) scale_grad_by_freq: bool,
    /// The weight's dtype (default: the default dtype).
    pub(crate) dtype: Option<DType>,
    /// The weight's device (the CPU).
    pub(crate) device: Device,
}

impl Default for EmbeddingLayerOptions {
    fn default() -> Self {
        EmbeddingLayerOptions {
            padding_idx: None,
            max_norm: None,
            norm_type: 2.0,
            scale_grad_by_freq: false,
            dtype: None,
            device: ferrotorch_core::default_device(),
        }
    }
}

/// A lookup table of `num_embeddings` rows of size `embedding_dim`
/// (PyTorch's `nn.Embedding`): `weight` drawn from N(0, 1), the
/// `padding_idx` row zeroed.
#[derive(Module)]
#[module(extra_repr = extra_repr)]
pub struct Embedding {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Parameter,
    num_embeddings: usize,
    embedding_dim: usize,
    padding_idx: Option<usize>,
    max_norm: Option<f64>,
    norm_type: f64,
    scale_grad_by_freq: bool,
    state: ModuleState,
}

/// `padding_idx` counted from the start; PyTorch's message when outside
/// `[-num_embeddings, num_embeddings)`.
fn wrap_padding_idx(padding_idx: Option<i64>, num_embeddings: usize) -> Result<Option<usize>> {
    let v = num_embeddings as i64;
    match padding_idx {
        None => Ok(None),
        Some(p) if (0..v).contains(&p) => Ok(Some(p as usize)),
        Some(p) if (-v..0).contains(&p) => Ok(Some((p + v) as usize)),
        Some(_) => Err(Error::invalid("Embedding", "Padding_idx must be within num_embeddings")),
    }
}

impl Embedding {
    /// The layer with PyTorch's defaults.
    pub fn new(num_embeddings: usize, embedding_dim: usize) -> Result<Self> {
        Self::with_options(num_embeddings, embedding_dim, EmbeddingLayerOptions::default())
    }

    /// The layer; errors for `padding_idx` outside `[-num_embeddings,
    /// num_embeddings)` (PyTorch's message).
    pub fn with_options(num_embeddings: usize, embedding_dim: usize, opts: EmbeddingLayerOptions) -> Result<Self> {
        let padding_idx = wrap_padding_idx(opts.padding_idx, num_embeddings)?;
        let w = tensor_options(opts.dtype, opts.device).empty([num_embeddings, embedding_dim])?;
        init::normal_(&w, 0.0, 1.0)?;
        if let Some(p) = padding_idx {
            autograd::no_grad(|| w.narrow(0, p as i64, 1)?.fill_(0.0))?;
        }
        Self::from_weight(Parameter::new(w)?, padding_idx, &opts)
    }

    /// The layer holding `embeddings` `[V, D]` as its weight, which does
    /// not require grad when `freeze` (PyTorch's
    /// `Embedding.from_pretrained`: no row is zeroed). Errors for a weight
    /// that is not 2-D and a bad `padding_idx`; `opts.dtype` and
    /// `opts.device` are not used.
    pub fn from_pretrained(embeddings: &Tensor, freeze: bool, opts: EmbeddingLayerOptions) -> Result<Self> {
        if embeddings.ndim() != 2 {
            return Err(Error::invalid(
                "Embedding.from_pretrained",
                format!(
                    "Embeddings parameter is expected to be 2-dimensional, got {:?}",
                    embeddings.shape()
                ),
            ));
        }
        let padding_idx = wrap_padding_idx(opts.padding_idx, embeddings.shape()[0])?;
        let w = if freeze {
            Parameter::frozen(embeddings.clone())
        } else {
            Parameter::new(embeddings.clone())?
        };
        Self::from_weight(w, padding_idx, &opts)
    }

    fn from_weight(weight: Parameter, padding_idx: Option<usize>, opts: &EmbeddingLayerOptions) -> Result<Self> {
        let s = weight.tensor().shape().to_vec();
        Ok(Embedding {
            weight,
            num_embeddings: s[0],
            embedding_dim: s[1],
            padding_idx,
            max_norm: opts.max_norm,
            norm_type: opts.norm_type,
            scale_grad_by_freq: opts.scale_grad_by_freq,
            state: ModuleState::default(),
        })
    }

    /// The number of rows.
    pub fn num_embeddings(&self) -> usize {
        self.num_embeddings
    }

    /// The row size.
    pub fn embedding_dim(&self) -> usize {
        self.embedding_dim
    }

    /// The padding row, counted from the start.
    pub fn padding_idx(&self) -> Option<usize> {
        self.padding_idx
    }

    fn extra_repr(&self) -> String {
        let mut s = format!("{}, {}", self.num_embeddings, self.embedding_dim);
        if let Some(p) = self.padding_idx {
            s += &format!(", padding_idx={p}");
        }
        if let Some(m) = self.max_norm {
            s += &format!(", max_norm={}", py_float(m));
        }
        if self.norm_type != 2.0 {
            s += &format!(", norm_type={}", py_float(self.norm_type));
        }
        if self.scale_grad_by_freq {
            s += ", scale_grad_by_freq=True";
        }
        s
    }
}

impl Forward for Embedding {
    /// The rows named by the int64/int32 indices `x` (any shape), `[*x,
    /// embedding_dim]`. Errors for an index outside `[0, num_embeddings)`
    /// naming the index, the row count and the layer.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if !matches!(x.dtype(), DType::I64 | DType::I32) {
            return Err(Error::module(
                self.repr(),
                format!(
                    "expected int64 or int32 indices, got {} of shape {:?}",
                    x.dtype(),
                    x.shape()
                ),
            ));
        }
        F::embedding(
            x,
            &self.weight.tensor(),
            &EmbeddingOptions {
                padding_idx: self.padding_idx.map(|p| p as i64),
                max_norm: self.max_norm,
                norm_type: self.norm_type,
                scale_grad_by_freq: self.scale_grad_by_freq,
            },
        )
        .map_err(|e| Error::module(self.repr(), e.to_string()))
    }
}
