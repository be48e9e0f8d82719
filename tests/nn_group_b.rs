//! MultiheadAttention, `scaled_dot_product_attention`, the transformer
//! layers and LSTM / GRU against PyTorch with non-default options
//! (`tests/nn_data/group_b.json`, written by `tests/gen_nn_group_b.py`):
//! float64 modules with PyTorch's random parameters copied in, every entry
//! point (`call`, `call_with`, `forward`, `forward_with`, `Forward`) giving
//! PyTorch's outputs within 1e-10; f32 attention within 1e-6 and with the
//! bits of the kernel PyTorch's dispatch picks (fused or math). Masks of
//! every kind and shape, `kdim` / `vdim`, `batch_first`, unbatched inputs,
//! given states, dropout in eval and dropout 1 in training
//! (deterministic), reprs, accessors, hooks that replace outputs, the
//! causal-mask detection of the stacks, and the errors for bad shapes and
//! options.

use ferrotorch::autograd;
use ferrotorch::nn::functional::{self as F, SdpaOptions};
use ferrotorch::nn::{
    DecoderForwardOptions, DecoderLayerForwardOptions, EncoderForwardOptions, EncoderLayerForwardOptions, Forward, GRU,
    LSTM, LayerNorm, LayerNormOptions, MhaForwardOptions, Module, MultiheadAttention, MultiheadAttentionOptions,
    RnnOptions, Transformer, TransformerActivation, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
    TransformerEncoderLayer, TransformerForwardOptions, TransformerLayerOptions, TransformerOptions,
};
use ferrotorch::{DType, Result, Tensor};
use serde_json::Value;

#[path = "support/nn_json.rs"]
mod nn_json;

use nn_json::{dtype_of, err, floats, rng_lock, shape_of, tensor_of, values};

fn case(name: &str) -> &'static Value {
    let c = &nn_json::data("group_b.json")["cases"][name];
    assert!(!c.is_null(), "no case {name}");
    c
}

/// `got` has PyTorch's shape and dtype and its values within 1e-10
/// (relative above 1); infinities and NaN where PyTorch has them.
fn check(what: &str, got: &Tensor, want: &Value) {
    nn_json::check(what, got, want, 1e-10);
}

/// Copies PyTorch's parameters in, checking the names, order, shapes and dtypes.
fn load(m: &dyn Module, c: &Value) -> Result<()> {
    let want = c["params"].as_array().unwrap();
    let got = m.named_parameters();
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    let want_names: Vec<&str> = want.iter().map(|p| p[0].as_str().unwrap()).collect();
    assert_eq!(names, want_names, "parameter names");
    for ((n, p), w) in got.iter().zip(want) {
        let (t, w) = (p.tensor(), &w[1]);
        assert_eq!(t.shape(), &shape_of(w)[..], "{n}: shape");
        assert_eq!(t.dtype(), dtype_of(w), "{n}: dtype");
        let new = Tensor::from_vec(floats(&w["data"]), t.shape())?.to_dtype(t.dtype())?;
        autograd::no_grad(|| t.detach().copy_(&new))?;
    }
    Ok(())
}

/// [`load`], then eval mode.
fn load_eval(m: &dyn Module, c: &Value) -> Result<()> {
    load(m, c)?;
    m.eval();
    Ok(())
}

fn t(c: &Value, key: &str) -> Tensor {
    tensor_of(&c[key])
}

// ------------------------------------------------------------------ MHA

fn mha(e: usize, h: usize, o: MultiheadAttentionOptions, c: &Value) -> Result<MultiheadAttention> {
    let m = MultiheadAttention::with_options(e, h, o.dtype(DType::F64))?;
    load_eval(&m, c)?;
    Ok(m)
}

/// The `mha_plain` case's module, the case, and its query, key and value.
fn mha_plain() -> Result<(MultiheadAttention, &'static Value, (Tensor, Tensor, Tensor))> {
    let c = case("mha_plain");
    let m = mha(6, 2, MultiheadAttentionOptions::new(), c)?;
    Ok((m, c, (t(c, "q"), t(c, "k"), t(c, "v"))))
}

/// Runs an MHA case through `forward_with` and `call_with` with its options.
fn mha_check(name: &str, m: &MultiheadAttention) -> Result<()> {
    let c = case(name);
    let (q, k, v) = (t(c, "q"), t(c, "k"), t(c, "v"));
    let masks = &c["masks"];
    let am = masks.get("attn_mask").map(tensor_of);
    let kpm = masks.get("key_padding_mask").map(tensor_of);
    let mut o = MhaForwardOptions::new()
        .need_weights(c["need_weights"].as_bool().unwrap())
        .average_attn_weights(c["average_attn_weights"].as_bool().unwrap())
        .is_causal(c["is_causal"].as_bool().unwrap());
    if let Some(m) = &am {
        o = o.attn_mask(m);
    }
    if let Some(m) = &kpm {
        o = o.key_padding_mask(m);
    }
    for (how, (out, w)) in [
        ("forward_with", m.forward_with(&q, &k, &v, o)?),
        ("call_with", m.call_with(&q, &k, &v, o)?),
    ] {
        check(&format!("{name} {how}: out"), &out, &c["out"]);
        match (&w, c["weights"].is_null()) {
            (None, true) => {}
            (Some(w), false) => check(&format!("{name} {how}: weights"), w, &c["weights"]),
            _ => panic!(
                "{name} {how}: weights {:?} vs {}",
                w.as_ref().map(Tensor::shape),
                c["weights"]
            ),
        }
    }
    Ok(())
}

#[test]
fn mha_every_entry_point_matches_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let (m, c, (q, k, v)) = mha_plain()?;
    let runs = [
        ("call", m.call(&q, &k, &v)?),
        ("forward", m.forward(&q, &k, &v)?),
        ("call_with", m.call_with(&q, &k, &v, MhaForwardOptions::default())?),
        (
            "forward_with",
            m.forward_with(&q, &k, &v, MhaForwardOptions::default())?,
        ),
    ];
    for (how, (out, w)) in runs {
        check(&format!("{how}: out"), &out, &c["out"]);
        check(&format!("{how}: weights"), &w.unwrap(), &c["weights"]);
    }
    mha_check("mha_plain", &m)?;
    mha_check("mha_plain_noweights", &m)?;
    // Unbatched, sequence first and batch first.
    mha_check(
        "mha_unbatched",
        &mha(6, 2, MultiheadAttentionOptions::new(), case("mha_unbatched"))?,
    )?;
    let bf = MultiheadAttentionOptions::new().batch_first(true);
    mha_check(
        "mha_unbatched_noweights",
        &mha(6, 2, bf, case("mha_unbatched_noweights"))?,
    )?;
    Ok(())
}

#[test]
fn mha_kdim_vdim_bias_and_batch_first_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let o = MultiheadAttentionOptions::new()
        .kdim(4)
        .vdim(5)
        .bias(false)
        .batch_first(true);
    let m = mha(6, 2, o, case("mha_kv_bf"))?;
    assert!(m.in_proj_weight.is_none() && m.in_proj_bias.is_none() && m.out_proj.bias.is_none());
    assert_eq!(m.out_proj.weight.tensor().dtype(), DType::F64);
    mha_check("mha_kv_bf", &m)?;
    // Only vdim differs: separate q / k / v projections too.
    let m = mha(6, 2, MultiheadAttentionOptions::new().vdim(5), case("mha_vdim_only"))?;
    assert!(m.in_proj_weight.is_none());
    mha_check("mha_vdim_only", &m)?;
    Ok(())
}

#[test]
fn mha_masks_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    for (name, params) in [
        ("mha_fmask_bkpm", "mha_fmask_bkpm"),
        ("mha_fmask_bkpm_noweights", "mha_fmask_bkpm"),
        ("mha_bmask3_fkpm", "mha_bmask3_fkpm"),
        ("mha_bmask3_fkpm_noweights", "mha_bmask3_fkpm"),
        ("mha_bmask2_noweights", "mha_bmask3_fkpm"),
        ("mha_causal_noweights", "mha_causal_noweights"),
        ("mha_causal_weights", "mha_causal_noweights"),
        ("mha_hint_dropped", "mha_causal_noweights"),
        ("mha_causal_kpm_noweights", "mha_causal_noweights"),
    ] {
        let m = mha(6, 2, MultiheadAttentionOptions::new(), case(params))?;
        mha_check(name, &m)?;
    }
    Ok(())
}

#[test]
fn mha_dropout_one_in_training_drops_every_weight() -> Result<()> {
    let _rng = rng_lock();
    for name in ["mha_train_dropout1", "mha_train_dropout1_noweights"] {
        let m = mha(6, 2, MultiheadAttentionOptions::new().dropout(1.0), case(name))?;
        m.train();
        mha_check(name, &m)?;
    }
    Ok(())
}

#[test]
fn mha_hooks_replace_the_outputs_of_call_only() -> Result<()> {
    let _rng = rng_lock();
    let (m, c, (q, k, v)) = mha_plain()?;
    let _h = m.register_forward_hook(|_, _, out| Ok(Some(out.iter().map(|o| o.mul(2.0)).collect::<Result<_>>()?)))?;
    let (out, w) = m.call(&q, &k, &v)?;
    check("hooked call: out", &out.mul(0.5)?, &c["out"]);
    check("hooked call: weights", &w.unwrap().mul(0.5)?, &c["weights"]);
    let (out, _) = m.call_with(&q, &k, &v, MhaForwardOptions::new())?;
    check("hooked call_with: out", &out.mul(0.5)?, &c["out"]);
    let (out, _) = m.forward(&q, &k, &v)?;
    check("forward skips the hooks", &out, &c["out"]);
    Ok(())
}

#[test]
fn mha_bad_options_and_shapes_are_errors() -> Result<()> {
    let _rng = rng_lock();
    assert!(MultiheadAttention::new(8, 0).is_err());
    let e = err(MultiheadAttention::new(8, 3));
    assert!(e.contains("embed_dim must be divisible by num_heads"), "{e}");
    assert!(MultiheadAttention::new(8, 2).is_ok());
    let m = MultiheadAttention::new(6, 2)?;
    let who = "MultiheadAttention(embed_dim=6, num_heads=2, batch_first=False): ";
    let z = |s: &[usize]| Tensor::zeros(s.to_vec()).unwrap();
    let (q, k) = (z(&[3, 3, 6]), z(&[5, 3, 6]));
    let call = |q: &Tensor, k: &Tensor, v: &Tensor, o: MhaForwardOptions| err(m.call_with(q, k, v, o));
    let d = MhaForwardOptions::new;
    let cases: Vec<(String, String)> = vec![
        (
            call(&z(&[1, 3, 3, 6]), &k, &k, d()),
            "query should be unbatched 2D or batched 3D tensor but received 4-D query tensor".into(),
        ),
        (
            call(&q, &z(&[5, 6]), &k, d()),
            "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found 2-D and 3-D tensors respectively".into(),
        ),
        (
            call(&q, &k, &z(&[5, 6]), d()),
            "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found 3-D and 2-D tensors respectively".into(),
        ),
        (
            call(&z(&[3, 6]), &z(&[5, 6]), &k, d()),
            "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found 2-D and 3-D tensors respectively".into(),
        ),
        (call(&z(&[3, 3, 5]), &k, &k, d()), "was expecting embedding dimension of 6, but got 5".into()),
        (
            call(&q, &k, &z(&[5, 3, 7]), d()),
            "key shape [5, 3, 6] does not match value shape [5, 3, 7]".into(),
        ),
        (
            call(&q, &z(&[5, 2, 6]), &z(&[5, 2, 6]), d()),
            "key and value must have the query's batch size and the same length, got [3, 3, 6], [5, 2, 6] and [5, 2, 6]".into(),
        ),
        (
            call(&q, &k, &k, d().is_causal(true)),
            "Need attn_mask if specifying the is_causal hint. You may use the Transformer module method \
             `generate_square_subsequent_mask` to create this mask."
                .into(),
        ),
        (
            call(&q, &k, &k, d().attn_mask(&z(&[4, 5]))),
            "The shape of the 2D attn_mask is [4, 5], but should be [3, 5].".into(),
        ),
        (
            call(&q, &k, &k, d().attn_mask(&z(&[3, 4]))),
            "The shape of the 2D attn_mask is [3, 4], but should be [3, 5].".into(),
        ),
        (
            call(&q, &k, &k, d().attn_mask(&z(&[7, 3, 5]))),
            "The shape of the 3D attn_mask is [7, 3, 5], but should be [6, 3, 5].".into(),
        ),
        (
            call(&q, &k, &k, d().attn_mask(&z(&[6, 4, 5]))),
            "The shape of the 3D attn_mask is [6, 4, 5], but should be [6, 3, 5].".into(),
        ),
        (
            call(&q, &k, &k, d().attn_mask(&z(&[6, 3, 4]))),
            "The shape of the 3D attn_mask is [6, 3, 4], but should be [6, 3, 5].".into(),
        ),
        (
            call(&q, &k, &k, d().attn_mask(&z(&[1, 6, 3, 5]))),
            "attn_mask's dimension 4 is not supported".into(),
        ),
        (
            call(&q, &k, &k, d().key_padding_mask(&z(&[3, 4]))),
            "expected key_padding_mask of shape [3, 5], got [3, 4]".into(),
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got, format!("{who}{want}"));
    }
    // Separate projections: the key's and the value's feature sizes.
    let sep = MultiheadAttention::with_options(6, 2, MultiheadAttentionOptions::new().kdim(4).vdim(5))?;
    let e = err(sep.call(&q, &z(&[5, 3, 6]), &z(&[5, 3, 5])));
    assert_eq!(
        e,
        format!("{who}expected key [.., 4] and value [.., 5], got [5, 3, 6] and [5, 3, 5]")
    );
    let e = err(sep.call(&q, &z(&[5, 3, 4]), &z(&[5, 3, 6])));
    assert_eq!(
        e,
        format!("{who}expected key [.., 4] and value [.., 5], got [5, 3, 4] and [5, 3, 6]")
    );
    let e = err(sep.call(&q, &z(&[5, 3, 4]), &z(&[4, 3, 5])));
    assert_eq!(
        e,
        format!("{who}key's sequence and batch dims [5, 3] do not match value's [4, 3]")
    );
    Ok(())
}

// ------------------------------------------------------------------ sdpa

fn sdpa_run(name: &str) -> Result<(Tensor, &'static Value)> {
    let c = case(name);
    let mask = c.get("attn_mask").map(tensor_of);
    let mut o = SdpaOptions::new();
    if let Some(m) = &mask {
        o = o.attn_mask(m);
    }
    if let Some(b) = c.get("is_causal") {
        o = o.is_causal(b.as_bool().unwrap());
    }
    if let Some(s) = c.get("scale") {
        o = o.scale(s.as_f64().unwrap());
    }
    if let Some(p) = c.get("dropout_p") {
        o = o.dropout_p(p.as_f64().unwrap());
    }
    Ok((
        F::scaled_dot_product_attention(&t(c, "q"), &t(c, "k"), &t(c, "v"), &o)?,
        c,
    ))
}

#[test]
fn sdpa_matches_pytorch_for_every_rank_mask_and_scale() -> Result<()> {
    for name in [
        "sdpa_2d",
        "sdpa_2d_causal",
        "sdpa_3d",
        "sdpa_3d_square",
        "sdpa_3d_fmask_negscale",
        "sdpa_3d_negscale",
        "sdpa_3d_posscale_mask",
        "sdpa_3d_bmask_deadrow",
        "sdpa_q3_kv4",
        "sdpa_4d_mask",
        "sdpa_4d_dropout1",
        "sdpa_4d_kv_bcast",
        "sdpa_4d_v_bcast",
        "sdpa_4d_ev",
        "sdpa_2d_empty_q",
        "sdpa_3d_no_keys_inf",
    ] {
        let (out, c) = sdpa_run(name)?;
        check(name, &out, &c["out"]);
    }
    Ok(())
}

/// PyTorch's CPU dispatch: the fused operator's bits for 4-d inputs of one
/// batch and head count and one head dim without a mask, the math path's
/// (those of a zero float mask) otherwise; within f32 rounding of
/// PyTorch's values either way.
#[test]
fn sdpa_picks_pytorchs_kernel() -> Result<()> {
    for name in ["sdpa_4d_fused_f32", "sdpa_4d_fused_causal_f32"] {
        let (out, c) = sdpa_run(name)?;
        nn_json::check(name, &out, &c["out"], 1e-6);
    }
    for (i, c) in case("sdpa_kernels")["cases"].as_array().unwrap().iter().enumerate() {
        let (q, k, v) = (t(c, "q"), t(c, "k"), t(c, "v"));
        let causal = c["causal"].as_bool().unwrap();
        let out = F::scaled_dot_product_attention(&q, &k, &v, &SdpaOptions::new().is_causal(causal))?;
        nn_json::check(&format!("kernel case {i}"), &out, &c["out"], 1e-6);
        let same = if c["kind"] == "fused" {
            q.scaled_dot_product_flash_attention(&k, &v, causal, None)?.0
        } else {
            let zero = Tensor::zeros([q.shape()[q.ndim() - 2], k.shape()[k.ndim() - 2]])?;
            F::scaled_dot_product_attention(&q, &k, &v, &SdpaOptions::new().attn_mask(&zero))?
        };
        assert_eq!(values(&out), values(&same), "kernel case {i}: {}", c["kind"]);
    }
    Ok(())
}

#[test]
fn sdpa_bad_inputs_are_errors() -> Result<()> {
    let z = |s: &[usize]| Tensor::zeros(s.to_vec()).unwrap();
    let o = SdpaOptions::new();
    let sdpa = |q: &Tensor, k: &Tensor, v: &Tensor, o: &SdpaOptions| err(F::scaled_dot_product_attention(q, k, v, o));
    let (a, one) = (z(&[3, 4]), z(&[4]));
    for (q, k, v) in [(&one, &a, &a), (&a, &one, &a), (&a, &a, &one)] {
        let e = sdpa(q, k, v, &o);
        assert!(e.contains("expected query, key and value of at least 2 dims"), "{e}");
    }
    let msgs = &case("sdpa_errors")["messages"];
    let d = |s: &[usize]| z(s).to_dtype(DType::F64).unwrap();
    let f = z(&[2, 3, 4]);
    let e = sdpa(&d(&[2, 3, 4]), &f, &d(&[2, 3, 4]), &o);
    assert!(e.ends_with(msgs["dtype_k"].as_str().unwrap()), "{e}");
    let e = sdpa(&d(&[2, 3, 4]), &d(&[2, 3, 4]), &f, &o);
    assert!(e.ends_with(msgs["dtype_v"].as_str().unwrap()), "{e}");
    let fit = "do not fit: key needs the query's last dim and value the key's length";
    let e = sdpa(&z(&[2, 3, 4]), &z(&[2, 5, 3]), &z(&[2, 5, 4]), &o);
    assert!(e.contains(fit), "{e}");
    let e = sdpa(&z(&[2, 3, 4]), &z(&[2, 5, 4]), &z(&[2, 4, 4]), &o);
    assert!(e.contains(fit), "{e}");
    let m = z(&[3, 3]);
    let e = sdpa(&f, &f, &f, &SdpaOptions::new().attn_mask(&m).is_causal(true));
    assert!(e.ends_with(msgs["causal_mask"].as_str().unwrap()), "{e}");
    let e = sdpa(&f, &f, &f, &SdpaOptions::new().dropout_p(1.5));
    assert!(
        e.contains("dropout probability has to be between 0 and 1, but got 1.5"),
        "{e}"
    );
    Ok(())
}

// ------------------------------------------------------------------ RNN

fn rnn_opts(name: &str) -> RnnOptions {
    let o = RnnOptions::new().dtype(DType::F64);
    match name {
        "lstm_3_bi" | "lstm_3_bi_state" | "gru_3_bi_state" => o.num_layers(3).bidirectional(true),
        "lstm_2_bi_state" | "gru_unbatched_state" => o.num_layers(2).bidirectional(true),
        "lstm_2_nobias_bf_state" | "gru_2_nobias_bf" => o.num_layers(2).bias(false).batch_first(true),
        "lstm_unbatched_state" => o.num_layers(2),
        "lstm_unbatched" => o.bidirectional(true),
        "lstm_eval_dropout" => o.num_layers(2).dropout(0.5),
        "lstm_train_dropout1" => o.num_layers(3).dropout(1.0),
        "gru_1" => o,
        "gru_eval_dropout" => o.num_layers(2).dropout(0.5).bidirectional(true),
        "gru_train_dropout1" => o.num_layers(2).dropout(1.0).batch_first(true),
        other => panic!("{other}"),
    }
}

/// The module of RNN case `name`, built with [`rnn_opts`] by `new`, with
/// PyTorch's repr and parameters, in training for the dropout-1 cases and
/// in eval otherwise.
fn rnn_case<M: Module>(name: &str, new: impl FnOnce(RnnOptions) -> Result<M>) -> Result<(M, &'static Value)> {
    let c = case(name);
    let m = new(rnn_opts(name))?;
    assert_eq!(m.repr(), c["repr"].as_str().unwrap(), "{name}: repr");
    load(&m, c)?;
    if name.contains("train") {
        m.train();
    } else {
        m.eval();
    }
    Ok((m, c))
}

/// An RNN's output, final hidden state and (LSTM) final cell state
/// against the case's `out`, `hn` and `cn`.
fn check_rnn(what: &str, c: &Value, out: &Tensor, hn: &Tensor, cn: Option<&Tensor>) {
    check(&format!("{what}: out"), out, &c["out"]);
    check(&format!("{what}: h_n"), hn, &c["hn"]);
    if let Some(cn) = cn {
        check(&format!("{what}: c_n"), cn, &c["cn"]);
    }
}

#[test]
fn lstm_matches_pytorch_for_every_option() -> Result<()> {
    let _rng = rng_lock();
    for name in [
        "lstm_3_bi",
        "lstm_3_bi_state",
        "lstm_2_bi_state",
        "lstm_2_nobias_bf_state",
        "lstm_unbatched_state",
        "lstm_unbatched",
        "lstm_eval_dropout",
        "lstm_train_dropout1",
    ] {
        let (m, c) = rnn_case(name, |o| LSTM::with_options(3, 4, o))?;
        let x = t(c, "x");
        let runs = if c.get("h0").is_some() {
            let (h0, c0) = (t(c, "h0"), t(c, "c0"));
            vec![m.call_with(&x, (&h0, &c0))?, m.forward_with(&x, (&h0, &c0))?]
        } else {
            vec![m.call(&x)?, m.forward(&x)?]
        };
        for (out, (hn, cn)) in runs {
            check_rnn(name, c, &out, &hn, Some(&cn));
        }
    }
    Ok(())
}

#[test]
fn gru_matches_pytorch_for_every_option() -> Result<()> {
    let _rng = rng_lock();
    for name in [
        "gru_1",
        "gru_3_bi_state",
        "gru_2_nobias_bf",
        "gru_unbatched_state",
        "gru_eval_dropout",
        "gru_train_dropout1",
    ] {
        let (m, c) = rnn_case(name, |o| GRU::with_options(3, 4, o))?;
        let x = t(c, "x");
        let runs = if c.get("h0").is_some() {
            let h0 = t(c, "h0");
            vec![m.call_with(&x, &h0)?, m.forward_with(&x, &h0)?]
        } else {
            vec![m.call(&x)?, m.forward(&x)?]
        };
        for (out, hn) in runs {
            check_rnn(name, c, &out, &hn, None);
        }
    }
    Ok(())
}

#[test]
fn rnn_reprs_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let r = &case("rnn_reprs")["reprs"];
    let o = RnnOptions::new;
    assert_eq!(LSTM::new(3, 4)?.repr(), r["lstm_default"]);
    let all = o()
        .num_layers(2)
        .bias(false)
        .batch_first(true)
        .dropout(0.25)
        .bidirectional(true);
    assert_eq!(LSTM::with_options(3, 4, all)?.repr(), r["lstm_all"]);
    assert_eq!(GRU::with_options(3, 4, o().batch_first(true))?.repr(), r["gru_bf"]);
    assert_eq!(
        GRU::with_options(3, 4, o().num_layers(3).dropout(0.5))?.repr(),
        r["gru_dropout"]
    );
    Ok(())
}

#[test]
fn rnn_hooks_see_the_given_state_and_replace_outputs() -> Result<()> {
    let _rng = rng_lock();
    let double = |_: &dyn Module, _: &[Tensor], out: &[Tensor]| -> Result<Option<Vec<Tensor>>> {
        Ok(Some(out.iter().map(|o| o.mul(2.0)).collect::<Result<_>>()?))
    };
    let c = case("lstm_3_bi_state");
    let m = LSTM::with_options(3, 4, rnn_opts("lstm_3_bi_state"))?;
    load_eval(&m, c)?;
    let _h = m.register_forward_hook(double)?;
    let (x, h0, c0) = (t(c, "x"), t(c, "h0"), t(c, "c0"));
    let (out, (hn, cn)) = m.call_with(&x, (&h0, &c0))?;
    check_rnn("hooked LSTM", c, &out.mul(0.5)?, &hn.mul(0.5)?, Some(&cn.mul(0.5)?));
    let (out, _) = m.forward_with(&x, (&h0, &c0))?;
    check("LSTM forward_with skips the hooks", &out, &c["out"]);
    let c = case("gru_3_bi_state");
    let m = GRU::with_options(3, 4, rnn_opts("gru_3_bi_state"))?;
    load_eval(&m, c)?;
    let _h = m.register_forward_hook(double)?;
    let (x, h0) = (t(c, "x"), t(c, "h0"));
    let (out, hn) = m.call_with(&x, &h0)?;
    check_rnn("hooked GRU", c, &out.mul(0.5)?, &hn.mul(0.5)?, None);
    let (out, _) = m.forward_with(&x, &h0)?;
    check("GRU forward_with skips the hooks", &out, &c["out"]);
    Ok(())
}

#[test]
fn rnn_bad_shapes_are_errors() -> Result<()> {
    let _rng = rng_lock();
    let m = LSTM::with_options(3, 4, RnnOptions::new().num_layers(2))?;
    let z = |s: &[usize]| Tensor::zeros(s.to_vec()).unwrap();
    let who = "LSTM(3, 4, num_layers=2): ";
    assert_eq!(
        err(m.call(&z(&[1, 5, 2, 3]))),
        format!("{who}expected input [L, N, 3] (or unbatched [L, 3]), got [1, 5, 2, 3]")
    );
    assert_eq!(
        err(m.call(&z(&[5, 2, 2]))),
        format!("{who}input.size(-1) must be equal to input_size. Expected 3, got 2 (input [5, 2, 2])")
    );
    assert_eq!(
        err(m.call_with(&z(&[5, 2, 3]), (&z(&[1, 2, 4]), &z(&[2, 2, 4])))),
        format!("{who}Expected hidden size [2, 2, 4], got [1, 2, 4]")
    );
    assert_eq!(
        err(m.call_with(&z(&[5, 2, 3]), (&z(&[2, 2, 4]), &z(&[2, 3, 4])))),
        format!("{who}Expected hidden size [2, 2, 4], got [2, 3, 4]")
    );
    let g = GRU::with_options(3, 4, RnnOptions::new().bidirectional(true))?;
    assert_eq!(
        err(g.call_with(&z(&[5, 3]), &z(&[1, 4]))),
        "GRU(3, 4, bidirectional=True): Expected hidden size [2, 1, 4], got [1, 1, 4]"
    );
    Ok(())
}

// ------------------------------------------------------------------ transformers

fn layer_opts() -> TransformerLayerOptions {
    TransformerLayerOptions::new().dim_feedforward(6).dtype(DType::F64)
}

#[test]
fn encoder_layer_options_and_entry_points_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let o = layer_opts()
        .activation(TransformerActivation::parse("gelu")?)
        .layer_norm_eps(0.5)
        .batch_first(true)
        .norm_first(true);
    let m = TransformerEncoderLayer::with_options(4, 2, o)?;
    assert_eq!(*m.options(), o);
    let c = case("enc_layer_gelu_nf_bf");
    load_eval(&m, c)?;
    let (src, mask, kpm) = (t(c, "src"), t(c, "src_mask"), t(c, "src_key_padding_mask"));
    let fo = EncoderLayerForwardOptions::new()
        .src_mask(&mask)
        .src_key_padding_mask(&kpm);
    check("enc layer call_with", &m.call_with(&src, fo)?, &c["out"]);
    check("enc layer forward_with", &m.forward_with(&src, fo)?, &c["out"]);
    let c = case("enc_layer_gelu_nf_bf_nomask");
    check("enc layer Forward::forward", &Forward::forward(&m, &src)?, &c["out"]);
    check("enc layer Forward::call", &m.call(&src)?, &c["out"]);
    // No biases anywhere, ReLU, post-norm, unbatched.
    let o = layer_opts().bias(false).layer_norm_eps(0.25);
    let m = TransformerEncoderLayer::with_options(4, 2, o)?;
    let c = case("enc_layer_nobias_unbatched");
    load_eval(&m, c)?;
    check("unbatched enc layer", &m.call(&t(c, "src"))?, &c["out"]);
    // The attention's own dropout (1: every weight dropped) in training,
    // the layer's Dropout modules in eval.
    let m = TransformerEncoderLayer::with_options(4, 2, layer_opts().dropout(1.0))?;
    let c = case("enc_layer_attn_dropout1");
    load(&m, c)?;
    m.train();
    for d in [&m.dropout, &m.dropout1, &m.dropout2] {
        d.eval();
    }
    check("attention dropout", &m.call(&t(c, "src"))?, &c["out"]);
    Ok(())
}

#[test]
fn activation_parses_pytorchs_spellings() {
    assert_eq!(
        TransformerActivation::parse("gelu").unwrap(),
        TransformerActivation::Gelu
    );
    assert_eq!(
        TransformerActivation::parse("relu").unwrap(),
        TransformerActivation::Relu
    );
    assert_eq!(
        err(TransformerActivation::parse("tanh")),
        "TransformerEncoderLayer: activation should be relu/gelu, not tanh"
    );
}

#[test]
fn decoder_layer_options_and_entry_points_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let o = layer_opts().activation(TransformerActivation::Gelu).layer_norm_eps(0.5);
    let m = TransformerDecoderLayer::with_options(4, 2, o)?;
    assert_eq!(*m.options(), o);
    let c = case("dec_layer_masks");
    load_eval(&m, c)?;
    let (tgt, mem) = (t(c, "tgt"), t(c, "memory"));
    let (tm, mm, tk, mk) = (
        t(c, "tgt_mask"),
        t(c, "memory_mask"),
        t(c, "tgt_key_padding_mask"),
        t(c, "memory_key_padding_mask"),
    );
    let fo = DecoderLayerForwardOptions::new()
        .tgt_mask(&tm)
        .memory_mask(&mm)
        .tgt_key_padding_mask(&tk)
        .memory_key_padding_mask(&mk);
    check("dec layer call_with", &m.call_with(&tgt, &mem, fo)?, &c["out"]);
    check("dec layer forward_with", &m.forward_with(&tgt, &mem, fo)?, &c["out"]);
    let o = layer_opts().norm_first(true).batch_first(true).bias(false);
    let m = TransformerDecoderLayer::with_options(4, 2, o)?;
    let c = case("dec_layer_nf_bf");
    load_eval(&m, c)?;
    let (tgt, mem) = (t(c, "tgt"), t(c, "memory"));
    check("dec layer call", &m.call(&tgt, &mem)?, &c["out"]);
    check("dec layer forward", &m.forward(&tgt, &mem)?, &c["out"]);
    Ok(())
}

/// The stacks' layer options and their final norm, if any.
fn stack_parts(batch_first: bool, norm: bool) -> Result<(TransformerLayerOptions, Option<LayerNorm>)> {
    let o = layer_opts().batch_first(batch_first).layer_norm_eps(0.5);
    let norm = if norm {
        Some(LayerNorm::with_options(
            vec![4],
            LayerNormOptions::new().dtype(DType::F64),
        )?)
    } else {
        None
    };
    Ok((o, norm))
}

fn encoder(batch_first: bool, norm: bool) -> Result<TransformerEncoder> {
    let (o, norm) = stack_parts(batch_first, norm)?;
    TransformerEncoder::new(TransformerEncoderLayer::with_options(4, 2, o)?, 3, norm)
}

fn decoder(batch_first: bool, norm: bool) -> Result<TransformerDecoder> {
    let (o, norm) = stack_parts(batch_first, norm)?;
    TransformerDecoder::new(TransformerDecoderLayer::with_options(4, 2, o)?, 2, norm)
}

#[test]
fn encoder_and_decoder_stacks_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let m = encoder(false, true)?;
    assert_eq!(m.num_layers(), 3);
    let c = case("encoder_nomask");
    load_eval(&m, c)?;
    let x = t(c, "x");
    check("encoder call", &m.call(&x)?, &c["out"]);
    check("encoder Forward::forward", &Forward::forward(&m, &x)?, &c["out"]);
    check(
        "encoder call_with",
        &m.call_with(&x, EncoderForwardOptions::new())?,
        &c["out"],
    );
    let c = case("encoder_kpm");
    let kpm = t(c, "src_key_padding_mask");
    let fo = EncoderForwardOptions::new().src_key_padding_mask(&kpm);
    check("encoder forward_with kpm", &m.forward_with(&x, fo)?, &c["out"]);
    let m = encoder(true, false)?;
    let c = case("encoder_fmask_bf");
    load_eval(&m, c)?;
    let mask = t(c, "mask");
    check(
        "encoder mask",
        &m.call_with(&t(c, "x"), EncoderForwardOptions::new().mask(&mask))?,
        &c["out"],
    );

    let m = decoder(false, true)?;
    assert_eq!(m.num_layers(), 2);
    let c = case("decoder_fmask");
    load_eval(&m, c)?;
    let (x, mem, tm, mm) = (t(c, "x"), t(c, "memory"), t(c, "tgt_mask"), t(c, "memory_mask"));
    let fo = DecoderForwardOptions::new().tgt_mask(&tm).memory_mask(&mm);
    check("decoder call_with", &m.call_with(&x, &mem, fo)?, &c["out"]);
    check("decoder forward_with", &m.forward_with(&x, &mem, fo)?, &c["out"]);
    let m = decoder(true, false)?;
    let c = case("decoder_bf_nonorm");
    load_eval(&m, c)?;
    let (x, mem) = (t(c, "x"), t(c, "memory"));
    check("decoder call", &m.call(&x, &mem)?, &c["out"]);
    check("decoder forward", &m.forward(&x, &mem)?, &c["out"]);
    Ok(())
}

/// PyTorch's stacks pass `is_causal=True` to their layers when the mask
/// equals `generate_square_subsequent_mask` (float, or boolean true above
/// the diagonal) and no hint is given: the detected run is the hinted one,
/// bit for bit, for sequence-first and batch-first inputs.
#[test]
fn stacks_detect_the_causal_mask_as_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let causal = Transformer::generate_square_subsequent_mask(5, Some(DType::F64))?;
    check(
        "square mask",
        &Transformer::generate_square_subsequent_mask(3, Some(DType::F64))?,
        &case("transformer_errors")["square_mask"],
    );
    let bool_causal = causal.isneginf()?;
    for batch_first in [false, true] {
        let m = encoder(batch_first, true)?;
        load_eval(&m, case("encoder_nomask"))?;
        // [S=5, N=2, E] or [N=2, S=5, E].
        let x = t(case("encoder_nomask"), "x");
        let x = if batch_first {
            x.transpose(0, 1)?.contiguous()?
        } else {
            x
        };
        let run = |mask: &Tensor, hint: Option<bool>| -> Result<Vec<f64>> {
            let mut o = EncoderForwardOptions::new().mask(mask);
            if let Some(h) = hint {
                o = o.is_causal(h);
            }
            Ok(values(&m.call_with(&x, o)?))
        };
        let hinted = run(&causal, Some(true))?;
        assert_eq!(
            run(&causal, None)?,
            hinted,
            "float causal mask, batch_first={batch_first}"
        );
        assert_eq!(
            run(&bool_causal, None)?,
            hinted,
            "bool causal mask, batch_first={batch_first}"
        );
        let m = decoder(batch_first, true)?;
        load_eval(&m, case("decoder_fmask"))?;
        let (tgt, mem) = (t(case("decoder_fmask"), "x"), t(case("decoder_fmask"), "memory"));
        let (tgt, mem) = if batch_first {
            (tgt.transpose(0, 1)?.contiguous()?, mem.transpose(0, 1)?.contiguous()?)
        } else {
            (tgt, mem)
        };
        let tc = Transformer::generate_square_subsequent_mask(3, Some(DType::F64))?;
        let run = |hint: Option<bool>| -> Result<Vec<f64>> {
            let mut o = DecoderForwardOptions::new().tgt_mask(&tc);
            if let Some(h) = hint {
                o = o.tgt_is_causal(h);
            }
            Ok(values(&m.call_with(&tgt, &mem, o)?))
        };
        assert_eq!(run(None)?, run(Some(true))?, "decoder, batch_first={batch_first}");
    }
    Ok(())
}

fn transformer(o: TransformerLayerOptions) -> Result<Transformer> {
    Transformer::with_options(
        4,
        2,
        TransformerOptions::new()
            .num_encoder_layers(2)
            .num_decoder_layers(1)
            .layer(o),
    )
}

#[test]
fn transformer_matches_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let m = transformer(layer_opts().batch_first(true))?;
    assert_eq!((m.d_model(), m.nhead()), (4, 2));
    let c = case("transformer_bf");
    load_eval(&m, c)?;
    let (src, tgt) = (t(c, "src"), t(c, "tgt"));
    check("transformer call", &m.call(&src, &tgt)?, &c["out"]);
    check("transformer forward", &m.forward(&src, &tgt)?, &c["out"]);
    let m = transformer(layer_opts().activation(TransformerActivation::Gelu).norm_first(true))?;
    let c = case("transformer_masks");
    load_eval(&m, c)?;
    let (src, tgt) = (t(c, "src"), t(c, "tgt"));
    let k = |key: &str| t(c, key);
    let (sm, tm, mm, sk, tk, mk) = (
        k("src_mask"),
        k("tgt_mask"),
        k("memory_mask"),
        k("src_key_padding_mask"),
        k("tgt_key_padding_mask"),
        k("memory_key_padding_mask"),
    );
    let fo = TransformerForwardOptions::new()
        .src_mask(&sm)
        .tgt_mask(&tm)
        .memory_mask(&mm)
        .src_key_padding_mask(&sk)
        .tgt_key_padding_mask(&tk)
        .memory_key_padding_mask(&mk);
    check("transformer call_with", &m.call_with(&src, &tgt, fo)?, &c["out"]);
    check("transformer forward_with", &m.forward_with(&src, &tgt, fo)?, &c["out"]);
    Ok(())
}

#[test]
fn transformer_bad_shapes_are_pytorchs_errors() -> Result<()> {
    let _rng = rng_lock();
    let msgs = &case("transformer_errors")["messages"];
    let m = transformer(layer_opts())?;
    let z = |s: &[usize]| Tensor::zeros(s.to_vec()).unwrap().to_dtype(DType::F64).unwrap();
    let who = "Transformer(d_model=4, nhead=2, batch_first=False): ";
    for (key, src, tgt) in [
        ("src3_tgt2", z(&[5, 2, 4]), z(&[3, 4])),
        ("batch", z(&[5, 2, 4]), z(&[3, 3, 4])),
        ("tgt_feature", z(&[5, 2, 4]), z(&[3, 2, 3])),
    ] {
        let want = format!(
            "{who}{}, got src {:?} and tgt {:?}",
            msgs[key].as_str().unwrap(),
            src.shape(),
            tgt.shape()
        );
        assert_eq!(err(m.call(&src, &tgt)), want, "{key}");
    }
    // Batch first: the batch is dim 0 (different sequence lengths are fine).
    let bf = transformer(layer_opts().batch_first(true))?;
    bf.eval();
    assert_eq!(bf.call(&z(&[2, 5, 4]), &z(&[2, 3, 4]))?.shape(), &[2, 3, 4]);
    let e = err(bf.call(&z(&[2, 5, 4]), &z(&[3, 5, 4])));
    assert!(e.contains("the batch number of src and tgt must be equal"), "{e}");
    // The layers check their inputs.
    let layer = TransformerEncoderLayer::with_options(4, 2, layer_opts())?;
    let lwho = "TransformerEncoderLayer(d_model=4, nhead=2, dim_feedforward=6, batch_first=False, norm_first=False): ";
    for s in [&[1usize, 5, 2, 4][..], &[5, 2, 3], &[4]] {
        assert_eq!(
            err(layer.call(&z(s))),
            format!("{lwho}expected src [S, N, 4] (or unbatched [S, 4]), got {s:?}")
        );
    }
    let dec = TransformerDecoderLayer::with_options(4, 2, layer_opts().batch_first(true).norm_first(true))?;
    let dwho = "TransformerDecoderLayer(d_model=4, nhead=2, dim_feedforward=6, batch_first=True, norm_first=True): ";
    assert_eq!(
        err(dec.call(&z(&[2, 3, 4]), &z(&[5, 4]))),
        format!("{dwho}tgt and memory must both be batched or both unbatched, got [2, 3, 4] and [5, 4]")
    );
    assert_eq!(
        err(dec.call(&z(&[2, 3, 4]), &z(&[2, 5, 3]))),
        format!("{dwho}expected memory [N, S, 4] (or unbatched [S, 4]), got [2, 5, 3]")
    );
    Ok(())
}
