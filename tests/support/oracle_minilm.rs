//! The model-level file of the shared oracle, `minilm_embeddings.json`:
//! PyTorch's sentence embeddings of all-MiniLM-L6-v2 (tokenizer.json ->
//! BertModel -> mean pooling -> L2 normalise) against the `embed`
//! example's pipeline (`examples/embed/`). The model itself is not in the
//! repository: `scripts/fetch_minilm.sh` fetches it into
//! `models/all-MiniLM-L6-v2/` (or `MINILM_DIR` names another folder).
//! Without it the file is skipped by name, unless
//! `FERROTORCH_REQUIRE_MINILM=1` (CI) makes that a failure.
//!
//! Per sentence: the tokenizer's ids and attention mask must equal the
//! file's, and the embedding must have cosine >= [`MIN_COSINE`] and max abs
//! difference <= [`MAX_ABS_DIFF`] to PyTorch's; the cosine matrix must
//! agree within [`MAX_ABS_DIFF`] too.

use std::path::PathBuf;

use serde_json::Value;

#[path = "../../examples/embed/bert.rs"]
#[allow(dead_code)]
mod bert;
#[path = "../../examples/embed/encoder.rs"]
#[allow(dead_code)]
mod encoder;

use encoder::{EmbedError, FETCH_COMMAND, MODEL_SUBDIR, SentenceEncoder};

/// Least cosine similarity of an embedding to PyTorch's.
pub const MIN_COSINE: f64 = 0.9999;
/// Largest absolute difference of any embedding component (and cosine).
pub const MAX_ABS_DIFF: f64 = 1e-4;

/// What checking the file gave.
pub enum Checked {
    /// Every sentence agreed; `detail` has the worst cosine and difference.
    Passed { sentences: usize, detail: String },
    /// The model is not there (the reason, with the command that fetches it).
    NotFetched(String),
    /// Disagreements or errors, one line each.
    Failed(Vec<String>),
}

/// The model folder: `MINILM_DIR`, else `models/all-MiniLM-L6-v2` in the repository.
pub fn model_dir() -> PathBuf {
    match std::env::var_os("MINILM_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(MODEL_SUBDIR),
    }
}

/// Whether a missing model fails the check instead of skipping it.
fn required() -> bool {
    std::env::var("FERROTORCH_REQUIRE_MINILM").is_ok_and(|v| v == "1")
}

fn rows_f64(doc: &Value, key: &str) -> Result<Vec<Vec<f64>>, String> {
    doc[key]
        .as_array()
        .ok_or_else(|| format!("`{key}` is not a list"))?
        .iter()
        .map(|row| {
            row.as_array()
                .ok_or_else(|| format!("`{key}`: a row is not a list"))?
                .iter()
                .map(|x| x.as_f64().ok_or_else(|| format!("`{key}`: {x} is not a number")))
                .collect()
        })
        .collect()
}

fn rows_i64(doc: &Value, key: &str) -> Result<Vec<Vec<i64>>, String> {
    Ok(rows_f64(doc, key)?
        .into_iter()
        .map(|r| r.into_iter().map(|x| x as i64).collect())
        .collect())
}

/// Tensor rows `[n, m]` as `Vec`s.
fn tensor_rows(t: &ferrotorch::Tensor) -> Result<Vec<Vec<f64>>, String> {
    let m = t.shape().get(1).copied().unwrap_or(0);
    let flat = t
        .to_dtype(ferrotorch::DType::F64)
        .and_then(|x| x.contiguous())
        .and_then(|x| x.to_vec::<f64>())
        .map_err(|e| e.to_string())?;
    Ok(flat.chunks(m.max(1)).map(<[f64]>::to_vec).collect())
}

fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f64 = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    dot / (na * nb)
}

fn max_abs(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max)
}

/// Checks `doc` (the parsed `minilm_embeddings.json`) against the model in [`model_dir`].
pub fn check(doc: &Value) -> Checked {
    let dir = model_dir();
    let enc = match SentenceEncoder::load(&dir) {
        Ok(enc) => enc,
        Err(EmbedError::NotFetched { dir, file }) if !required() => {
            return Checked::NotFetched(format!(
                "model not fetched: run {FETCH_COMMAND} (no {file} in {})",
                dir.display()
            ));
        }
        Err(e) => return Checked::Failed(vec![format!("loading the model: {e}")]),
    };
    match compare(doc, &enc) {
        Ok((n, detail)) => Checked::Passed { sentences: n, detail },
        Err(failures) => Checked::Failed(failures),
    }
}

/// The comparisons; `Ok((sentences, detail))` when all hold.
fn compare(doc: &Value, enc: &SentenceEncoder) -> Result<(usize, String), Vec<String>> {
    let one = |e: String| vec![e];
    let sentences: Vec<&str> = doc["sentences"]
        .as_array()
        .and_then(|a| a.iter().map(Value::as_str).collect())
        .ok_or_else(|| one("`sentences` is not a list of strings".into()))?;
    let want_ids = rows_i64(doc, "input_ids").map_err(one)?;
    let want_mask = rows_i64(doc, "attention_mask").map_err(one)?;
    let want_emb = rows_f64(doc, "embeddings").map_err(one)?;
    let want_cos = rows_f64(doc, "cosine").map_err(one)?;
    let n = sentences.len();
    if [want_ids.len(), want_mask.len(), want_emb.len(), want_cos.len()] != [n; 4] {
        return Err(one(format!("the file's lists do not all have {n} rows")));
    }
    let batch = enc.tokenize(&sentences).map_err(|e| one(e.to_string()))?;
    let ids: Vec<Vec<i64>> = tensor_rows(&batch.input_ids)
        .map_err(one)?
        .into_iter()
        .map(|r| r.into_iter().map(|x| x as i64).collect())
        .collect();
    let mask: Vec<Vec<i64>> = tensor_rows(&batch.attention_mask)
        .map_err(one)?
        .into_iter()
        .map(|r| r.into_iter().map(|x| x as i64).collect())
        .collect();
    let emb = enc.embed_batch(&batch).map_err(|e| one(e.to_string()))?;
    let cos = bert::cosine_matrix(&emb).map_err(|e| one(e.to_string()))?;
    let (emb, cos) = (tensor_rows(&emb).map_err(one)?, tensor_rows(&cos).map_err(one)?);
    let mut failures = Vec::new();
    let (mut worst_cos, mut worst_abs, mut worst_cos_matrix) = (f64::INFINITY, 0.0f64, 0.0f64);
    for i in 0..n {
        let s = sentences[i];
        if ids.get(i) != Some(&want_ids[i]) || mask.get(i) != Some(&want_mask[i]) {
            failures.push(format!(
                "sentence {i} {s:?}: ids {:?} mask {:?}, PyTorch's tokenizer {:?} mask {:?}",
                ids.get(i),
                mask.get(i),
                want_ids[i],
                want_mask[i]
            ));
            continue;
        }
        let (c, d) = (cosine(&emb[i], &want_emb[i]), max_abs(&emb[i], &want_emb[i]));
        if emb[i].len() != want_emb[i].len() || c.is_nan() || c < MIN_COSINE || d.is_nan() || d > MAX_ABS_DIFF {
            failures.push(format!(
                "sentence {i} {s:?}: embedding of {} dims, cosine {c:.7} to PyTorch's (>= {MIN_COSINE}), \
                 max abs diff {d:.2e} (<= {MAX_ABS_DIFF:.0e})",
                emb[i].len()
            ));
        }
        worst_cos = worst_cos.min(c);
        worst_abs = worst_abs.max(d);
        let dc = max_abs(&cos[i], &want_cos[i]);
        if cos[i].len() != n || dc.is_nan() || dc > MAX_ABS_DIFF {
            failures.push(format!("cosine matrix row {i}: max abs diff {dc:.2e} to PyTorch's"));
        }
        worst_cos_matrix = worst_cos_matrix.max(dc);
    }
    if failures.is_empty() {
        Ok((
            n,
            format!(
                "ids exact, worst cosine 1 - {:.1e}, max abs diff {worst_abs:.2e}, \
                 cosine matrix within {worst_cos_matrix:.2e}",
                1.0 - worst_cos
            ),
        ))
    } else {
        Err(failures)
    }
}
