//! # ferrotorch-nn
//!
//! PyTorch's `torch.nn` for ferrotorch: the [`Module`] trait with derived
//! parameter discovery (`#[derive(Module)]`), [`Parameter`] and [`Buffer`]
//! handles, containers ([`Sequential`], `Vec<M>` as `ModuleList`,
//! [`ModuleDict`]), layers with PyTorch's initialisation, [`functional`]
//! [`init`] and [`utils`] (gradient clipping). Names, state-dict keys and their order are PyTorch's, so
//! a PyTorch checkpoint's keys match a model written the same way.
//!
//! The facade re-exports this crate as `ferrotorch::nn`.

pub mod attention;
pub mod containers;
pub mod forward;
pub mod functional;
pub mod init;
pub mod layers;
pub mod module;
pub mod parameter;
mod pyfmt;
pub mod repr;
pub mod state_dict;
pub mod utils;

pub use attention::{MhaForwardOptions, MultiheadAttention, MultiheadAttentionOptions};
pub use containers::{ModuleDict, Sequential};
pub use ferrotorch_nn_derive::{Module, Options};
pub use forward::Forward;
pub use layers::activation::{GELU, Gelu, LeakyReLU, LogSoftmax, ReLU, SiLU, Sigmoid, Softmax, Tanh};
pub use layers::conv::{Conv1d, Conv2d, ConvLayerOptions, ConvTranspose1d, ConvTranspose2d};
pub use layers::dropout::Dropout;
pub use layers::embedding::{Embedding, EmbeddingLayerOptions};
pub use layers::flatten::{Flatten, Unflatten};
pub use layers::linear::{Bilinear, Identity, Linear, LinearOptions};
pub use layers::loss::{
    BCELoss, BCEWithLogitsLoss, ClassLossOptions, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, MseLoss,
    NLLLoss, NllLoss, SmoothL1Loss,
};
pub use layers::norm::{
    BatchNorm1d, BatchNorm2d, BatchNorm3d, BatchNormLayerOptions, GroupNorm, GroupNormOptions, LayerNorm,
    LayerNormOptions, RMSNorm, RmsNorm, RmsNormOptions,
};
pub use layers::pool::{AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d};
pub use layers::rnn::{GRU, Gru, LSTM, Lstm, RnnOptions};
pub use layers::transformer::{
    DecoderForwardOptions, DecoderLayerForwardOptions, EncoderForwardOptions, EncoderLayerForwardOptions, Transformer,
    TransformerActivation, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
    TransformerForwardOptions, TransformerLayerOptions, TransformerOptions, generate_square_subsequent_mask,
};
pub use module::state;
pub use module::{__private, Module, Visitable, Visitor};
pub use parameter::{Buffer, Parameter};
pub use repr::repr;
pub use state::{
    Attachment, BackwardHook, ForwardHook, ForwardOutput, ForwardPreHook, HookHandle, ModuleState, call_with_hooks,
};
pub use state_dict::{IncompatibleKeys, StateDict};
