//! The `embed` example's model and pipeline (`examples/embed/`) without the
//! real weights (the oracle test checks those against PyTorch): a tiny
//! BERT with random weights, saved as safetensors next to a hand-written
//! WordPiece `tokenizer.json`, goes through the same loading, tokenizing,
//! masking and pooling; bad model folders are errors that name the file.

use std::path::{Path, PathBuf};

use ferrotorch::nn::{Module, StateDict};
use ferrotorch::{Tensor, manual_seed};

#[path = "../examples/embed/bert.rs"]
#[allow(dead_code)]
mod bert;
#[path = "../examples/embed/encoder.rs"]
#[allow(dead_code)]
mod encoder;

use bert::{BertConfig, BertModel};
use encoder::{EmbedError, SentenceEncoder};

const TINY_CONFIG: &str = r#"{"architectures": ["BertModel"], "hidden_act": "gelu", "hidden_size": 8,
 "intermediate_size": 16, "layer_norm_eps": 1e-12, "max_position_embeddings": 16, "model_type": "bert",
 "num_attention_heads": 2, "num_hidden_layers": 2, "type_vocab_size": 2, "vocab_size": 12}"#;

/// BERT's normaliser, pre-tokenizer and `[CLS] ... [SEP]` template over a 12-token WordPiece vocabulary.
const TINY_TOKENIZER: &str = r###"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
 "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
   "strip_accents": null, "lowercase": true},
 "pre_tokenizer": {"type": "BertPreTokenizer"},
 "post_processor": {"type": "TemplateProcessing",
   "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
              {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
   "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
            {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
            {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
   "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                      "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
 "decoder": null,
 "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
   "max_input_chars_per_word": 100,
   "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "the": 4, "cat": 5, "sits": 6,
             "outside": 7, ".": 8, "a": 9, "dog": 10, "runs": 11}}}"###;

/// A fresh, empty folder for one test.
fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ferrotorch-embed-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn tiny_config() -> BertConfig {
    BertConfig::from_json(TINY_CONFIG).unwrap()
}

/// The state dict of a tiny model with seeded random weights.
fn tiny_weights(config: &BertConfig) -> StateDict {
    manual_seed(7);
    BertModel::new(config).unwrap().state_dict()
}

/// A folder with the tiny model's three files (`weights` as its safetensors).
fn tiny_model_dir(name: &str, weights: &StateDict) -> PathBuf {
    let d = temp_dir(name);
    std::fs::write(d.join("config.json"), TINY_CONFIG).unwrap();
    std::fs::write(d.join("tokenizer.json"), TINY_TOKENIZER).unwrap();
    ferrotorch::serialize::save_safetensors(weights, None, d.join("model.safetensors")).unwrap();
    d
}

fn load_err(dir: &Path) -> EmbedError {
    match SentenceEncoder::load(dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e,
    }
}

fn rows(t: &Tensor) -> Vec<Vec<f32>> {
    let m = t.shape()[1];
    t.contiguous()
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
        .chunks(m)
        .map(<[f32]>::to_vec)
        .collect()
}

#[test]
fn missing_model_folder_names_the_fetch_script() {
    let dir = temp_dir("missing").join("nowhere");
    let e = load_err(&dir);
    assert!(
        matches!(
            e,
            EmbedError::NotFetched {
                file: "config.json",
                ..
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(msg.starts_with("model not fetched: "), "{msg}");
    assert!(
        msg.contains("scripts/fetch_minilm.sh") && msg.contains("nowhere"),
        "{msg}"
    );
}

#[test]
fn missing_weights_file_is_named() {
    let d = temp_dir("no-weights");
    std::fs::write(d.join("config.json"), TINY_CONFIG).unwrap();
    std::fs::write(d.join("tokenizer.json"), TINY_TOKENIZER).unwrap();
    let e = load_err(&d);
    assert!(
        matches!(
            e,
            EmbedError::NotFetched {
                file: "model.safetensors",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn bad_config_is_an_error_naming_the_file_and_field() {
    let weights = tiny_weights(&tiny_config());
    let cases = [
        ("not json", "not JSON"),
        (r#"{"hidden_size": 8}"#, "`vocab_size` missing"),
        (
            &TINY_CONFIG.replace("\"gelu\"", "\"relu\""),
            "`hidden_act` \"relu\" is not supported",
        ),
        (
            &TINY_CONFIG.replace("\"num_attention_heads\": 2", "\"num_attention_heads\": 3"),
            "not a multiple of `num_attention_heads` 3",
        ),
        (
            &TINY_CONFIG.replace("\"hidden_size\": 8", "\"hidden_size\": -8"),
            "`hidden_size` missing or not a positive integer",
        ),
    ];
    for (i, (config, want)) in cases.into_iter().enumerate() {
        let d = tiny_model_dir(&format!("bad-config-{i}"), &weights);
        std::fs::write(d.join("config.json"), config).unwrap();
        let msg = load_err(&d).to_string();
        assert!(msg.contains("config.json") && msg.contains(want), "{config}: {msg}");
    }
}

#[test]
fn bad_tokenizer_is_an_error_naming_the_file() {
    let d = tiny_model_dir("bad-tokenizer", &tiny_weights(&tiny_config()));
    std::fs::write(d.join("tokenizer.json"), "{}").unwrap();
    let e = load_err(&d);
    assert!(
        matches!(&e, EmbedError::BadFile { path, .. } if path.ends_with("tokenizer.json")),
        "{e:?}"
    );
}

#[test]
fn bad_weights_are_errors_naming_the_file() {
    let config = tiny_config();
    let d = tiny_model_dir("bad-weights", &tiny_weights(&config));
    let path = d.join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    // Truncated and garbage files.
    for (i, b) in [&bytes[..bytes.len() / 2], b"garbage, not a model".as_slice()]
        .into_iter()
        .enumerate()
    {
        std::fs::write(&path, b).unwrap();
        let e = load_err(&d);
        assert!(
            matches!(&e, EmbedError::BadFile { path, .. } if path.ends_with("model.safetensors")),
            "{i}: {e:?}"
        );
    }
    // Another model's weights: one layer fewer, then one tensor of the wrong shape.
    let one_layer = BertConfig {
        num_hidden_layers: 1,
        ..config
    };
    let mut weights = tiny_weights(&one_layer);
    ferrotorch::serialize::save_safetensors(&weights, None, &path).unwrap();
    let msg = load_err(&d).to_string();
    assert!(
        msg.contains("Missing key(s)") && msg.contains("encoder.layer.1.attention.self.query.weight"),
        "{msg}"
    );
    weights = tiny_weights(&config);
    weights.insert("pooler.dense.bias", Tensor::zeros(9).unwrap());
    ferrotorch::serialize::save_safetensors(&weights, None, &path).unwrap();
    let msg = load_err(&d).to_string();
    assert!(msg.contains("size mismatch for pooler.dense.bias"), "{msg}");
}

#[test]
fn state_dict_keys_are_bert_model_s() {
    let config = BertConfig {
        num_hidden_layers: 1,
        ..tiny_config()
    };
    let sd = BertModel::new(&config).unwrap().state_dict();
    let mut want: Vec<String> = [
        "word_embeddings.weight",
        "position_embeddings.weight",
        "token_type_embeddings.weight",
        "LayerNorm.weight",
        "LayerNorm.bias",
    ]
    .iter()
    .map(|k| format!("embeddings.{k}"))
    .collect();
    for k in [
        "attention.self.query.weight",
        "attention.self.query.bias",
        "attention.self.key.weight",
        "attention.self.key.bias",
        "attention.self.value.weight",
        "attention.self.value.bias",
        "attention.output.dense.weight",
        "attention.output.dense.bias",
        "attention.output.LayerNorm.weight",
        "attention.output.LayerNorm.bias",
        "intermediate.dense.weight",
        "intermediate.dense.bias",
        "output.dense.weight",
        "output.dense.bias",
        "output.LayerNorm.weight",
        "output.LayerNorm.bias",
    ] {
        want.push(format!("encoder.layer.0.{k}"));
    }
    want.extend(["pooler.dense.weight".to_string(), "pooler.dense.bias".to_string()]);
    assert_eq!(sd.keys().collect::<Vec<_>>(), want);
    assert_eq!(
        sd.get("encoder.layer.0.intermediate.dense.weight").unwrap().shape(),
        &[16, 8]
    );
}

#[test]
fn tiny_model_embeds_unit_vectors_independent_of_padding() {
    let mut weights = tiny_weights(&tiny_config());
    // Older transformers versions saved this buffer; loading drops it.
    weights.insert(
        "embeddings.position_ids",
        Tensor::arange(16i64).unwrap().view([1, 16]).unwrap(),
    );
    let enc = SentenceEncoder::load(&tiny_model_dir("tiny", &weights)).unwrap();
    assert_eq!(enc.dim(), 8);
    let sentences = ["The cat sits outside.", "A dog runs", "", "the zebra sits"];
    let batch = enc.tokenize(&sentences).unwrap();
    // [CLS] ... [SEP], padded with 0 to the longest; unknown words are [UNK].
    let ids = rows(&batch.input_ids.to_dtype(ferrotorch::DType::F32).unwrap());
    let ids: Vec<Vec<i64>> = ids.iter().map(|r| r.iter().map(|&x| x as i64).collect()).collect();
    assert_eq!(
        ids,
        [
            vec![2, 4, 5, 6, 7, 8, 3],
            vec![2, 9, 10, 11, 3, 0, 0],
            vec![2, 3, 0, 0, 0, 0, 0],
            vec![2, 4, 1, 6, 3, 0, 0]
        ]
    );
    assert_eq!(
        batch.attention_mask.sum_dim(1, false).unwrap().to_vec::<i64>().unwrap(),
        [7, 5, 2, 5]
    );
    let emb = enc.embed_batch(&batch).unwrap();
    assert_eq!(emb.shape(), &[4, 8]);
    for (i, (row, s)) in rows(&emb).iter().zip(sentences).enumerate() {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "row {i} has norm {norm}");
        // Alone (no padding) it gets the same embedding: padding is masked out.
        let alone = rows(&enc.embed(&[s]).unwrap()).remove(0);
        let diff = row
            .iter()
            .zip(&alone)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(diff < 1e-5, "{s:?}: batched and alone differ by {diff}");
    }
    // Truncated to the 16 positions: [CLS], 14 words, [SEP].
    let long = "the cat sits outside . ".repeat(10);
    let batch = enc.tokenize(&[&long]).unwrap();
    assert_eq!(batch.input_ids.shape(), &[1, 16]);
    assert_eq!(batch.input_ids.to_vec::<i64>().unwrap()[15], 3);
    assert_eq!(enc.embed_batch(&batch).unwrap().shape(), &[1, 8]);
    assert_eq!(enc.embed(&[]).unwrap().shape(), &[0, 8]);
}

#[test]
fn forward_rejects_bad_shapes() {
    let model = BertModel::new(&tiny_config()).unwrap();
    let ids = Tensor::zeros([2, 3]).unwrap().long().unwrap();
    let mask = Tensor::ones([2, 3]).unwrap().long().unwrap();
    assert_eq!(model.forward(&ids, &mask).unwrap().shape(), &[2, 3, 8]);
    let msg = model
        .forward(&ids, &mask.narrow(1, 0, 2).unwrap())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("attention_mask of the same shape"), "{msg}");
    let flat = ids.view([6]).unwrap();
    assert!(model.forward(&flat, &mask.view([6]).unwrap()).is_err());
    let long = Tensor::zeros([1, 17]).unwrap().long().unwrap();
    let msg = model
        .forward(&long, &Tensor::ones([1, 17]).unwrap().long().unwrap())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("17 tokens, more than the 16 position embeddings"), "{msg}");
    let out_of_vocab = Tensor::full([1, 2], 12.0).unwrap().long().unwrap();
    assert!(
        model
            .forward(&out_of_vocab, &Tensor::ones([1, 2]).unwrap().long().unwrap())
            .is_err()
    );
}
