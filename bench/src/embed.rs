//! The `embed_minilm_b32` figure: the `embed` example's whole pipeline
//! (tokenize, BERT encoder, mean pooling, L2 normalisation) on the 32
//! sentences of `bench/embed_sentences.txt`, one batch, with the real
//! all-MiniLM-L6-v2 weights (`scripts/fetch_minilm.sh`; `MINILM_DIR`
//! names another model folder).

use std::path::PathBuf;

#[path = "../../examples/embed/bert.rs"]
#[allow(dead_code)]
mod bert;
#[path = "../../examples/embed/encoder.rs"]
#[allow(dead_code)]
mod encoder;

pub use encoder::{EmbedError, SentenceEncoder};

/// The model folder: `MINILM_DIR`, else the repository's `models/all-MiniLM-L6-v2`.
pub fn model_dir() -> PathBuf {
    match std::env::var_os("MINILM_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(encoder::MODEL_SUBDIR),
    }
}

/// The figure's sentences, one per line of `bench/embed_sentences.txt`.
pub const SENTENCES: &str = include_str!("../embed_sentences.txt");

/// A loaded encoder and the batch it embeds.
pub struct EmbedStep {
    enc: SentenceEncoder,
    sentences: Vec<&'static str>,
}

impl EmbedStep {
    /// Loads the model from [`model_dir`].
    pub fn new() -> Result<EmbedStep, EmbedError> {
        Ok(EmbedStep {
            enc: SentenceEncoder::load(&model_dir())?,
            sentences: SENTENCES.lines().filter(|l| !l.is_empty()).collect(),
        })
    }

    /// Embeds the batch: `[32, 384]` unit rows.
    pub fn step(&self) -> Result<ferrotorch::Tensor, EmbedError> {
        self.enc.embed(&self.sentences)
    }
}
