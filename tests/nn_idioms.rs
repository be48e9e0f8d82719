//! Everyday PyTorch models written line by line with the nn API (the
//! Python is in the comments, from `tests/gen_nn_idioms.py`), built after
//! the same `manual_seed` and compared with what PyTorch 2.15 gives
//! (`tests/nn_data/idioms.json`). Where the natural translation of a line
//! does not compile, the API is wrong (issue 38: one calling convention).

use ferrotorch::nn::functional::{self as F, CrossEntropyOptions};
use ferrotorch::nn::{
    self, BatchNorm1d, Bilinear, Conv2d, ConvLayerOptions, Embedding, EmbeddingLayerOptions, Forward, GRU, LSTM,
    LayerNorm, Linear, MhaForwardOptions, Module, MultiheadAttention, MultiheadAttentionOptions, RnnOptions,
    Sequential, TransformerEncoder, TransformerEncoderLayer, TransformerLayerOptions,
};
use ferrotorch::{Result, Tensor, manual_seed};
use serde_json::Value;

static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The global generator is shared by the tests of this file.
fn rng_lock() -> std::sync::MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn case(name: &str) -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/nn_data/idioms.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v[name].clone()
}

/// A tensor as the generator wrote it (values as f64, with their dtype).
fn decode(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data: Vec<f64> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    match v["dtype"].as_str().unwrap() {
        "float32" => Tensor::from_vec(data.iter().map(|&x| x as f32).collect(), &shape),
        "int64" => Tensor::from_vec(data.iter().map(|&x| x as i64).collect(), &shape),
        "bool" => Tensor::from_vec(data.iter().map(|&x| x != 0.0).collect(), &shape),
        other => panic!("unsupported dtype {other}"),
    }
    .unwrap()
}

fn input(c: &Value, name: &str) -> Tensor {
    decode(&c["inputs"][name])
}

/// `got` against PyTorch's `name` output: same shape, values within
/// 2e-5 (relative to the largest) plus 1e-6.
fn check(c: &Value, name: &str, got: &Tensor) {
    let want = &c["outputs"][name];
    let shape: Vec<usize> = want["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(got.shape(), shape.as_slice(), "{name}: shape");
    let want: Vec<f64> = want["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let got = got.to_dtype(ferrotorch::DType::F64).unwrap().to_vec::<f64>().unwrap();
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 2e-5 * scale + 1e-6,
            "{name}[{i}]: ours {g}, PyTorch {w}"
        );
    }
}

#[test]
fn mlp_with_cross_entropy() -> Result<()> {
    let _rng = rng_lock();
    let c = case("mlp");
    // torch.manual_seed(0)
    manual_seed(0);
    // model = nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))
    let fc1 = Linear::new(12, 16)?;
    let w1 = fc1.weight.clone();
    let model = Sequential::new()
        .push(nn::Flatten::new())
        .push(fc1)
        .push(nn::ReLU::new())
        .push(Linear::new(16, 3)?);
    let (x, y) = (input(&c, "x"), input(&c, "y"));
    // loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
    let loss = F::cross_entropy(&model.call(&x)?, &y, &CrossEntropyOptions::new().label_smoothing(0.1))?;
    // loss.backward()
    loss.backward()?;
    check(&c, "loss", &loss);
    // model[1].weight.grad
    check(&c, "grad", &w1.grad()?);
    Ok(())
}

#[test]
fn cnn_with_functional_pooling() -> Result<()> {
    let _rng = rng_lock();
    let c = case("cnn");
    manual_seed(1);
    // conv = nn.Conv2d(1, 4, 3, padding=1)
    let conv = Conv2d::with_options(1, 4, 3, ConvLayerOptions::new().padding(1))?;
    // fc = nn.Linear(4 * 3 * 3, 5)
    let fc = Linear::new(4 * 3 * 3, 5)?;
    let x = input(&c, "x");
    // h = F.max_pool2d(F.relu(conv(x)), 2)
    let h = F::max_pool2d(&F::relu(&conv.call(&x)?)?, 2)?;
    // h = torch.flatten(h, 1)
    let h = h.flatten(1)?;
    // out = fc(F.gelu(h))
    let out = fc.call(&F::gelu(&h)?)?;
    // out.sum().backward()
    out.sum()?.backward()?;
    check(&c, "out", &out);
    check(&c, "grad", &conv.weight.grad()?);
    Ok(())
}

#[test]
fn lstm_classifier_over_embeddings() -> Result<()> {
    let _rng = rng_lock();
    let c = case("lstm_classifier");
    manual_seed(2);
    // emb = nn.Embedding(20, 8, padding_idx=0)
    let emb = Embedding::with_options(20, 8, EmbeddingLayerOptions::new().padding_idx(0))?;
    // lstm = nn.LSTM(8, 6, num_layers=2, batch_first=True)
    let lstm = LSTM::with_options(8, 6, RnnOptions::new().num_layers(2).batch_first(true))?;
    // fc = nn.Linear(6, 3)
    let fc = Linear::new(6, 3)?;
    let ids = input(&c, "ids");
    // out, (h, c) = lstm(emb(ids))
    let (out, (h, cell)) = lstm.call(&emb.call(&ids)?)?;
    // logits = fc(h[-1])
    let logits = fc.call(&h.i(-1)?)?;
    logits.sum()?.backward()?;
    check(&c, "out", &out);
    check(&c, "logits", &logits);
    check(&c, "c", &cell);
    // emb.weight.grad (the padding row stays zero)
    check(&c, "grad", &emb.weight.grad()?);
    Ok(())
}

#[test]
fn gru_from_a_given_state() -> Result<()> {
    let _rng = rng_lock();
    let c = case("gru_with_state");
    manual_seed(3);
    // gru = nn.GRU(5, 4, bidirectional=True)
    let gru = GRU::with_options(5, 4, RnnOptions::new().bidirectional(true))?;
    let (x, h0) = (input(&c, "x"), input(&c, "h0"));
    // out, hn = gru(x, h0)
    let (out, hn) = gru.call_with(&x, &h0)?;
    check(&c, "out", &out);
    check(&c, "hn", &hn);
    Ok(())
}

#[test]
fn multihead_attention_with_keywords() -> Result<()> {
    let _rng = rng_lock();
    let c = case("attention");
    manual_seed(4);
    // mha = nn.MultiheadAttention(8, 2, batch_first=True)
    let mha = MultiheadAttention::with_options(8, 2, MultiheadAttentionOptions::new().batch_first(true))?;
    let (q, kv, mask) = (input(&c, "q"), input(&c, "kv"), input(&c, "mask"));
    // out, w = mha(q, kv, kv, key_padding_mask=mask)
    let (out, w) = mha.call_with(&q, &kv, &kv, MhaForwardOptions::new().key_padding_mask(&mask))?;
    check(&c, "out", &out);
    check(&c, "w", &w.expect("weights by default"));
    // out2, none = mha(q, kv, kv, need_weights=False)
    let (out2, none) = mha.call_with(&q, &kv, &kv, MhaForwardOptions::new().need_weights(false))?;
    assert!(none.is_none());
    check(&c, "out2", &out2);
    Ok(())
}

#[test]
fn transformer_encoder_with_padding_mask() -> Result<()> {
    let _rng = rng_lock();
    let c = case("transformer_encoder");
    manual_seed(5);
    // layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)
    let layer = TransformerEncoderLayer::with_options(
        8,
        2,
        TransformerLayerOptions::new()
            .dim_feedforward(16)
            .dropout(0.0)
            .batch_first(true),
    )?;
    // encoder = nn.TransformerEncoder(layer, num_layers=2)  (PyTorch deep-copies the layer)
    let encoder = TransformerEncoder::new(layer.deep_clone()?, 2, None)?;
    let (x, pad) = (input(&c, "x"), input(&c, "pad"));
    // y = encoder(x, src_key_padding_mask=pad)
    let y = encoder.call_with(&x, nn::EncoderForwardOptions::new().src_key_padding_mask(&pad))?;
    // y0 = layer(x)
    let y0 = layer.call(&x)?;
    check(&c, "y", &y);
    check(&c, "y0", &y0);
    Ok(())
}

#[test]
fn norms_bilinear_and_stack() -> Result<()> {
    let _rng = rng_lock();
    let c = case("norms_and_joins");
    manual_seed(6);
    // ln = nn.LayerNorm(7); bn = nn.BatchNorm1d(7); bil = nn.Bilinear(7, 3, 2)
    let ln = LayerNorm::new(7)?;
    let bn = BatchNorm1d::new(7)?;
    let bil = Bilinear::new(7, 3, 2)?;
    let (a, b) = (input(&c, "a"), input(&c, "b"));
    // h = bn(ln(a)); z = bil(h, b)
    let h = bn.call(&ln.call(&a)?)?;
    let z = bil.call(&h, &b)?;
    // s = torch.stack([z, z * 2, z + 1], 1)
    let parts = vec![z.clone(), z.mul(2.0)?, z.add(1.0)?];
    let s = Tensor::stack(&parts, 1)?;
    // bn.eval(); e = bn(a)
    bn.eval();
    let e = bn.call(&a)?;
    check(&c, "s", &s);
    check(&c, "e", &e);
    check(&c, "rm", &bn.running_mean.as_ref().expect("tracked").tensor());
    Ok(())
}
