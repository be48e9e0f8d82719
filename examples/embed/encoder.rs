//! all-MiniLM-L6-v2 as sentence-transformers runs it: the model folder's
//! `tokenizer.json` (Hugging Face's `tokenizers`, at most 256 tokens,
//! padded to the batch's longest), the BERT encoder of `config.json` with
//! the weights of `model.safetensors`, mean pooling over the attention
//! mask and L2 normalisation.

use std::fmt;
use std::path::{Path, PathBuf};

use ferrotorch::autograd::no_grad;
use ferrotorch::nn::Module;
use ferrotorch::serialize::{LoadOptions, load_state_dict};
use ferrotorch::{Tensor, TensorOptions};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::bert::{BertConfig, BertModel, mean_pool_normalize};

/// The model folder the fetch script fills, relative to the repository root.
pub const MODEL_SUBDIR: &str = "models/all-MiniLM-L6-v2";
/// The command that fetches the model (from the repository root).
pub const FETCH_COMMAND: &str = "scripts/fetch_minilm.sh";
/// sentence-transformers' `max_seq_length` for this model.
pub const MAX_LENGTH: usize = 256;
/// The files a model folder must hold.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Why a sentence encoder could not be loaded or run.
#[derive(Debug)]
pub enum EmbedError {
    /// A model file is missing: the model has not been fetched there.
    NotFetched {
        /// The model folder.
        dir: PathBuf,
        /// The first missing file.
        file: &'static str,
    },
    /// A model file is there but unreadable or not what it should be.
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// The tokenizer failed on the input.
    Tokenizer(String),
    /// A tensor operation failed.
    Tensor(ferrotorch::Error),
}

impl fmt::Display for EmbedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmbedError::NotFetched { dir, file } => write!(
                f,
                "model not fetched: {} has no {file} (run {FETCH_COMMAND}, or point to a folder \
                 with {})",
                dir.display(),
                MODEL_FILES.join(", ")
            ),
            EmbedError::BadFile { path, detail } => write!(f, "{}: {detail}", path.display()),
            EmbedError::Tokenizer(detail) => write!(f, "tokenizer: {detail}"),
            EmbedError::Tensor(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for EmbedError {}

impl From<ferrotorch::Error> for EmbedError {
    fn from(e: ferrotorch::Error) -> Self {
        EmbedError::Tensor(e)
    }
}

/// Token ids and attention mask of a batch of sentences, both `[B, T]` int64.
pub struct Batch {
    /// The tokenizer's ids, padded with 0 to the longest sentence.
    pub input_ids: Tensor,
    /// 1 for a token, 0 for padding.
    pub attention_mask: Tensor,
}

/// A loaded model and its tokenizer.
pub struct SentenceEncoder {
    model: BertModel,
    tokenizer: Tokenizer,
    hidden_size: usize,
}

fn bad(path: &Path, detail: impl fmt::Display) -> EmbedError {
    EmbedError::BadFile {
        path: path.to_path_buf(),
        detail: detail.to_string(),
    }
}

impl SentenceEncoder {
    /// Loads the model folder `dir` (`config.json`, `tokenizer.json`,
    /// `model.safetensors`); the weights must fill the model exactly.
    pub fn load(dir: &Path) -> Result<SentenceEncoder, EmbedError> {
        if let Some(file) = MODEL_FILES.into_iter().find(|f| !dir.join(f).is_file()) {
            return Err(EmbedError::NotFetched {
                dir: dir.to_path_buf(),
                file,
            });
        }
        let [config_path, tokenizer_path, weights_path] = MODEL_FILES.map(|f| dir.join(f));
        let text = std::fs::read_to_string(&config_path).map_err(|e| bad(&config_path, e))?;
        let config = BertConfig::from_json(&text).map_err(|e| bad(&config_path, e))?;
        let tokenizer = load_tokenizer(&tokenizer_path, MAX_LENGTH.min(config.max_position_embeddings))?;
        let mut weights = load_state_dict(&weights_path, &LoadOptions::new()).map_err(|e| bad(&weights_path, e))?;
        // A buffer older transformers versions saved; BertModel no longer keeps it.
        weights.remove("embeddings.position_ids");
        let model = BertModel::new(&config)?;
        model
            .load_state_dict(&weights, true)
            .map_err(|e| bad(&weights_path, e))?;
        model.eval();
        Ok(SentenceEncoder {
            model,
            tokenizer,
            hidden_size: config.hidden_size,
        })
    }

    /// The width of an embedding.
    pub fn dim(&self) -> usize {
        self.hidden_size
    }

    /// Tokenizes `sentences` as one batch (special tokens added, at most
    /// `MAX_LENGTH` tokens each, padded to the longest).
    pub fn tokenize(&self, sentences: &[&str]) -> Result<Batch, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(sentences.to_vec(), true)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let (b, t) = (encodings.len(), encodings.first().map_or(0, |e| e.len()));
        let (mut ids, mut mask) = (Vec::with_capacity(b * t), Vec::with_capacity(b * t));
        for e in &encodings {
            ids.extend(e.get_ids().iter().map(|&i| i64::from(i)));
            mask.extend(e.get_attention_mask().iter().map(|&m| i64::from(m)));
        }
        Ok(Batch {
            input_ids: Tensor::from_vec(ids, [b, t])?,
            attention_mask: Tensor::from_vec(mask, [b, t])?,
        })
    }

    /// The unit-length embeddings `[B, dim]` of a tokenized batch.
    pub fn embed_batch(&self, batch: &Batch) -> Result<Tensor, EmbedError> {
        if batch.input_ids.numel() == 0 {
            return Ok(TensorOptions::new().zeros([batch.input_ids.shape()[0], self.hidden_size])?);
        }
        Ok(no_grad(|| {
            let hidden = self.model.forward(&batch.input_ids, &batch.attention_mask)?;
            mean_pool_normalize(&hidden, &batch.attention_mask)
        })?)
    }

    /// The unit-length embeddings `[len, dim]` of `sentences`, one batch.
    pub fn embed(&self, sentences: &[&str]) -> Result<Tensor, EmbedError> {
        self.embed_batch(&self.tokenize(sentences)?)
    }
}

/// `tokenizer.json` with truncation to `max_length` and padding to the
/// batch's longest sentence (the file's own padding id and token).
fn load_tokenizer(path: &Path, max_length: usize) -> Result<Tokenizer, EmbedError> {
    let mut tokenizer = Tokenizer::from_file(path).map_err(|e| bad(path, e))?;
    let padding = PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        ..tokenizer.get_padding().cloned().unwrap_or_default()
    };
    tokenizer.with_padding(Some(padding));
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length,
            ..Default::default()
        }))
        .map_err(|e| bad(path, e))?;
    Ok(tokenizer)
}
