//! Modules against PyTorch (`tests/nn_data/modules.json`, written by
//! `tests/gen_nn_modules.py`): after the same `manual_seed`, the same
//! state-dict keys, shapes, dtypes and values, names, reprs and dropout
//! masks; plus the Module API (train/eval, hooks, to_dtype, load_state_dict
//! errors, tied weights) as a PyTorch user writes it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ferrotorch::nn::{
    self, Buffer, Dropout, Flatten, Forward, Gelu, Identity, LeakyReLU, Linear, LinearOptions, LogSoftmax, Module,
    ModuleState, Parameter, ReLU, Sequential, SiLU, Sigmoid, Softmax, StateDict, Tanh, Unflatten,
};
use ferrotorch::{DType, Result, Tensor, manual_seed};
use serde_json::Value;

/// Tests that seed and draw from the global generator run one at a time.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn rng_lock() -> std::sync::MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn cases() -> Vec<Value> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/nn_data/modules.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["cases"].as_array().unwrap().clone()
}

fn case(name: &str) -> Value {
    cases().into_iter().find(|c| c["name"] == name).unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Checks `t` against a summary: every value (or the f64 sum and every
/// k-th value) bit for bit in `t`'s dtype.
fn check_values(what: &str, t: &Tensor, want: &Value) {
    let shape: Vec<usize> = want["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(t.shape(), &shape[..], "{what}: shape");
    let got: Vec<f64> = t.to_dtype(DType::F64).unwrap().reshape([-1]).unwrap().to_vec().unwrap();
    let floats = |v: &Value| -> Vec<f64> { v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect() };
    if let Some(data) = want.get("data") {
        assert_eq!(got, floats(data), "{what}: values");
    } else {
        let every = want["every"].as_u64().unwrap() as usize;
        let samples: Vec<f64> = got.iter().step_by(every).copied().collect();
        assert_eq!(samples, floats(&want["samples"]), "{what}: sampled values");
        let sum: f64 = got.iter().sum();
        let want_sum = want["sum"].as_f64().unwrap();
        assert!(
            (sum - want_sum).abs() <= 1e-9 * want_sum.abs().max(1.0),
            "{what}: sum {sum} vs {want_sum}"
        );
    }
}

/// Compares a module built after `manual_seed(case.seed)` with PyTorch's.
fn check_module(name: &str, build: impl FnOnce() -> Result<Box<dyn Module>>) -> Result<()> {
    let c = case(name);
    manual_seed(c["seed"].as_u64().unwrap());
    let m = build()?;
    assert_eq!(m.repr(), c["repr"].as_str().unwrap(), "{name}: repr");
    let sd = m.state_dict();
    let want: Vec<(String, Vec<usize>, String)> = c["state_dict"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let shape = e[1]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect();
            (
                e[0].as_str().unwrap().to_string(),
                shape,
                e[2].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let got: Vec<(String, Vec<usize>, String)> = sd
        .iter()
        .map(|(k, t)| (k.to_string(), t.shape().to_vec(), t.dtype().to_string()))
        .collect();
    assert_eq!(got, want, "{name}: state_dict keys, shapes, dtypes");
    for (k, t) in sd.iter() {
        check_values(&format!("{name}: {k}"), t, &c["values"][k]);
    }
    let names = |v: Vec<String>| v;
    assert_eq!(
        names(m.named_parameters().into_iter().map(|(n, _)| n).collect()),
        strings(&c["named_parameters"]),
        "{name}: named_parameters"
    );
    assert_eq!(
        names(m.named_buffers().into_iter().map(|(n, _)| n).collect()),
        strings(&c["named_buffers"]),
        "{name}: named_buffers"
    );
    assert_eq!(
        names(m.named_modules().into_iter().map(|(n, _)| n).collect()),
        strings(&c["named_modules"]),
        "{name}: named_modules"
    );
    Ok(())
}

fn mnist_mlp() -> Result<Sequential> {
    Ok(Sequential::new()
        .push(Flatten::new())
        .push(Linear::new(784, 256)?)
        .push(ReLU::new())
        .push(Dropout::new(0.1)?)
        .push(Linear::new(256, 10)?))
}

#[derive(Module)]
struct Net {
    fc: Linear,
    scale: Parameter,
    blocks: Vec<Linear>,
    act: Gelu,
    steps: Buffer,
    cache: Buffer,
    hidden: usize,
    state: ModuleState,
}

impl Net {
    fn new() -> Result<Self> {
        Ok(Net {
            fc: Linear::new(3, 2)?,
            scale: Parameter::new(Tensor::ones(2)?)?,
            blocks: vec![
                Linear::new(2, 2)?,
                Linear::new(2, 2)?,
                Linear::new(2, 2)?,
                Linear::new(2, 4)?,
            ],
            act: Gelu::with_approximate(nn::functional::GeluApproximate::Tanh),
            steps: Buffer::new(Tensor::zeros_dtype((), DType::I64)?),
            cache: Buffer::non_persistent(Tensor::zeros(2)?),
            hidden: 2,
            state: ModuleState::default(),
        })
    }
}

#[test]
fn modules_match_pytorch_after_manual_seed() -> Result<()> {
    let _rng = rng_lock();
    check_module("mnist_mlp", || Ok(Box::new(mnist_mlp()?)))?;
    check_module("linear_small", || Ok(Box::new(Linear::new(5, 3)?)))?;
    check_module("linear_nobias_f64", || {
        let opts = LinearOptions::new().bias(false).dtype(DType::F64);
        Ok(Box::new(Linear::with_options(4, 6, opts)?))
    })?;
    check_module("bilinear", || Ok(Box::new(nn::Bilinear::new(3, 4, 2)?)))?;
    check_module("nested", || Ok(Box::new(Net::new()?)))?;
    check_module("activations", || {
        Ok(Box::new(
            Sequential::new()
                .push(LeakyReLU::default())
                .push(LeakyReLU::new(0.2))
                .push(SiLU::new())
                .push(Tanh::new())
                .push(Sigmoid::new())
                .push(Softmax::new(1))
                .push(LogSoftmax::new(-1))
                .push(Identity::new())
                .push(Unflatten::new(1, [2, 5]))
                .push(Flatten::with_dims(0, 1))
                .push(Dropout::new(1e-5)?),
        ))
    })?;
    let n = Net::new()?;
    assert_eq!(n.hidden, 2);
    Ok(())
}

#[test]
fn dropout_draws_pytorchs_mask() -> Result<()> {
    let _rng = rng_lock();
    let c = case("dropout_mask");
    manual_seed(11);
    let x = Tensor::randn([4, 6])?;
    check_values("dropout input", &x, &c["input"]);
    manual_seed(12);
    let d = Dropout::new(0.3)?;
    check_values("dropout output", &d.call(&x)?, &c["output"]);
    d.eval();
    assert_eq!(d.call(&x)?.to_vec::<f32>()?, x.to_vec::<f32>()?);
    Ok(())
}

#[test]
fn train_eval_zero_grad_and_to_dtype() -> Result<()> {
    let _rng = rng_lock();
    let net = mnist_mlp()?;
    assert!(net.is_training());
    net.eval();
    assert!(!net.is_training());
    assert!(net.modules().iter().all(|m| !m.is_training()));
    net.train();
    assert!(net.is_training());

    // An optimizer's handles stay valid across to_dtype.
    let params = net.parameters();
    let x = Tensor::randn([2, 1, 28, 28])?;
    net.call(&x)?.sum()?.backward()?;
    assert!(params.iter().all(|p| p.grad_opt().is_some()));
    net.to_dtype(DType::F64)?;
    assert!(
        params
            .iter()
            .all(|p| p.tensor().dtype() == DType::F64 && p.tensor().requires_grad())
    );
    assert!(
        params
            .iter()
            .all(|p| p.grad_opt().is_some_and(|g| g.dtype() == DType::F64))
    );
    net.zero_grad(false)?;
    assert!(
        params
            .iter()
            .all(|p| p.grad().unwrap().abs().unwrap().sum().unwrap().item::<f64>().unwrap() == 0.0)
    );
    net.zero_grad(true)?;
    assert!(params.iter().all(|p| p.grad_opt().is_none()));
    assert!(net.to_dtype(DType::I64).is_err());
    net.requires_grad_(false)?;
    assert!(params.iter().all(|p| !p.tensor().requires_grad()));
    Ok(())
}

#[test]
fn load_state_dict_reports_keys_and_shapes_by_name() -> Result<()> {
    let _rng = rng_lock();
    manual_seed(0);
    let a = mnist_mlp()?;
    manual_seed(1);
    let b = mnist_mlp()?;
    let r = b.load_state_dict(&a.state_dict(), true)?;
    assert!(r.missing_keys.is_empty() && r.unexpected_keys.is_empty());
    assert_eq!(
        b.state_dict().get("1.weight").unwrap().to_vec::<f32>()?,
        a.state_dict().get("1.weight").unwrap().to_vec::<f32>()?
    );
    // Loading copies in place: parameter handles keep their identity.
    let mut sd = a.state_dict();
    sd.remove("4.bias");
    sd.insert("extra.weight", Tensor::zeros(1)?);
    let e = b.load_state_dict(&sd, true).unwrap_err().to_string();
    assert!(e.starts_with("Error(s) in loading state_dict for Sequential:"), "{e}");
    assert!(e.contains("Missing key(s) in state_dict: \"4.bias\"."), "{e}");
    assert!(e.contains("Unexpected key(s) in state_dict: \"extra.weight\"."), "{e}");
    let r = b.load_state_dict(&sd, false)?;
    assert_eq!(r.missing_keys, ["4.bias"]);
    assert_eq!(r.unexpected_keys, ["extra.weight"]);
    let mut bad = a.state_dict();
    bad.insert("4.weight", Tensor::zeros([3, 256])?);
    let e = b.load_state_dict(&bad, false).unwrap_err().to_string();
    assert!(
        e.contains(
            "size mismatch for 4.weight: copying a param with shape torch.Size([3, 256]) from checkpoint, \
             the shape in current model is torch.Size([10, 256])."
        ),
        "{e}"
    );
    // `module.` prefixes of DataParallel checkpoints.
    let prefixed: StateDict = a
        .state_dict()
        .iter()
        .map(|(k, t)| (format!("module.{k}"), t.clone()))
        .collect();
    b.load_state_dict(&prefixed.strip_prefix("module."), true)?;
    Ok(())
}

#[derive(Module)]
struct Tied {
    emb: Linear,
    head: Linear,
}

#[test]
fn tied_weights_appear_once_in_parameters_and_twice_in_state_dict() -> Result<()> {
    let _rng = rng_lock();
    let emb = Linear::new(4, 4)?;
    let mut head = Linear::new(4, 4)?;
    head.weight = emb.weight.clone();
    let m = Tied { emb, head };
    let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["emb.weight", "emb.bias", "head.bias"]);
    let sd = m.state_dict();
    let keys: Vec<&str> = sd.keys().collect();
    assert_eq!(keys, ["emb.weight", "emb.bias", "head.weight", "head.bias"]);
    // No ModuleState of its own: the first descendant's flag.
    m.eval();
    assert!(m.state().is_none() && !m.is_training());
    Ok(())
}

#[test]
fn hooks_run_around_forward_and_backward_and_can_be_removed() -> Result<()> {
    let _rng = rng_lock();
    let fc = Linear::new(3, 2)?;
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let pre = fc.register_forward_pre_hook(move |_m, inputs| {
        seen.fetch_add(1, Ordering::Relaxed);
        Ok(Some(vec![inputs[0].mul(2.0)?]))
    })?;
    let post = fc.register_forward_hook(|m, _inputs, out| {
        assert_eq!(m.type_name(), "Linear");
        assert_eq!(out.len(), 1);
        Ok(Some(vec![out[0].add(100.0)?]))
    })?;
    let x = Tensor::ones([1, 3])?;
    let plain = nn::functional::linear(
        &x.mul(2.0)?,
        &fc.weight.tensor(),
        fc.bias.as_ref().map(Parameter::tensor).as_ref(),
    )?;
    let y = fc.call(&x)?;
    assert_eq!(y.to_vec::<f32>()?, plain.add(100.0)?.to_vec::<f32>()?);
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    pre.remove();
    post.remove();
    let y = fc.call(&x)?;
    assert_eq!(y.to_vec::<f32>()?, fc.forward(&x)?.to_vec::<f32>()?);
    assert_eq!(calls.load(Ordering::Relaxed), 1);

    // Full backward hook: gradients of the input and the output; it may
    // replace the input's gradient.
    let seen_shapes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen_shapes.clone();
    let h = fc.register_full_backward_hook(move |gin, gout| {
        log.lock().unwrap().push((
            gin[0].as_ref().map(|g| g.shape().to_vec()),
            gout[0].as_ref().map(|g| g.shape().to_vec()),
        ));
        Ok(Some(vec![gin[0].as_ref().map(|g| g.mul(0.0)).transpose()?]))
    })?;
    let xr = Tensor::ones([1, 3])?.requires_grad_(true)?;
    fc.call(&xr)?.sum()?.backward()?;
    assert_eq!(*seen_shapes.lock().unwrap(), [(Some(vec![1, 3]), Some(vec![1, 2]))]);
    assert_eq!(xr.grad()?.to_vec::<f32>()?, [0.0, 0.0, 0.0]);
    h.remove();
    // Hooks need a ModuleState field.
    let m = Tied {
        emb: Linear::new(1, 1)?,
        head: Linear::new(1, 1)?,
    };
    assert!(m.register_forward_hook(|_, _, _| Ok(None)).is_err());
    Ok(())
}

/// Sum of every element of `ts`, as a scalar loss.
fn total(ts: &[&Tensor]) -> Result<Tensor> {
    let mut s = ts[0].sum()?;
    for t in &ts[1..] {
        s = s.add(&t.sum()?)?;
    }
    Ok(s)
}

fn values(t: &Tensor) -> Vec<f32> {
    t.to_vec().unwrap()
}

#[test]
fn forward_pre_hook_replaces_multihead_attention_inputs() -> Result<()> {
    let _rng = rng_lock();
    manual_seed(1);
    let mha = nn::MultiheadAttention::new(4, 2)?;
    let (q, k, v) = (
        Tensor::randn([3, 2, 4])?,
        Tensor::randn([5, 2, 4])?,
        Tensor::randn([5, 2, 4])?,
    );
    let opts = nn::MhaForwardOptions::default();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    // PyTorch's `hook(module, args)`: the positional inputs; the value is
    // replaced by the key.
    let pre = mha.register_forward_pre_hook(move |m, args| {
        assert_eq!(m.type_name(), "MultiheadAttention");
        count.fetch_add(args.len(), Ordering::Relaxed);
        Ok(Some(vec![args[0].clone(), args[1].clone(), args[1].clone()]))
    })?;
    let (out, w) = mha.call_with(&q, &k, &v, opts)?;
    assert_eq!(seen.load(Ordering::Relaxed), 3);
    pre.remove();
    let (want, want_w) = mha.call_with(&q, &k, &k, opts)?;
    assert_eq!(values(&out), values(&want));
    assert_eq!(values(&w.unwrap()), values(&want_w.unwrap()));
    let (plain, _) = mha.call_with(&q, &k, &v, opts)?;
    assert_ne!(values(&plain), values(&want));
    assert_eq!(seen.load(Ordering::Relaxed), 3, "removed: not called again");
    // A pre-hook must give back one tensor per input.
    let bad = mha.register_forward_pre_hook(|_, args| Ok(Some(args[..2].to_vec())))?;
    let e = mha.call_with(&q, &k, &v, opts).unwrap_err().to_string();
    assert_eq!(
        e,
        "MultiheadAttention: a forward pre-hook returned 2 tensors, expected 3 (one per tensor it was given)"
    );
    bad.remove();
    // Inside a transformer layer, the attention's hooks run too (PyTorch's
    // `self.self_attn(x, x, x, ...)`).
    let layer = nn::TransformerEncoderLayer::with_options(4, 2, nn::TransformerLayerOptions::new().dim_feedforward(8))?;
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let h = layer.self_attn.register_forward_pre_hook(move |_, args| {
        assert_eq!(args.len(), 3);
        c.fetch_add(1, Ordering::Relaxed);
        Ok(None)
    })?;
    layer.call(&q)?;
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    h.remove();
    layer.call(&q)?;
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    Ok(())
}

#[test]
fn forward_hook_sees_and_replaces_every_lstm_output() -> Result<()> {
    let _rng = rng_lock();
    manual_seed(2);
    let lstm = nn::LSTM::new(3, 4)?;
    let x = Tensor::randn([5, 2, 3])?;
    let shapes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = shapes.clone();
    // PyTorch's `hook(module, args, output)`: output is (out, (h_n, c_n)),
    // seen flat; the cell state is replaced by zeros.
    let h = lstm.register_forward_hook(move |_, args, out| {
        log.lock().unwrap().push((
            args.iter().map(|a| a.shape().to_vec()).collect::<Vec<_>>(),
            out.iter().map(|o| o.shape().to_vec()).collect::<Vec<_>>(),
        ));
        Ok(Some(vec![out[0].clone(), out[1].clone(), out[2].zeros_like()?]))
    })?;
    let (out, (hn, cn)) = lstm.call(&x)?;
    assert_eq!(
        *shapes.lock().unwrap(),
        [(vec![vec![5, 2, 3]], vec![vec![5, 2, 4], vec![1, 2, 4], vec![1, 2, 4]])]
    );
    assert!(values(&cn).iter().all(|&v| v == 0.0));
    // With an initial state the hooks see it as inputs too.
    let (h0, c0) = (Tensor::randn([1, 2, 4])?, Tensor::randn([1, 2, 4])?);
    lstm.call_with(&x, (&h0, &c0))?;
    assert_eq!(
        shapes.lock().unwrap()[1].0,
        [vec![5, 2, 3], vec![1, 2, 4], vec![1, 2, 4]]
    );
    h.remove();
    let (out2, (hn2, cn2)) = lstm.call(&x)?;
    assert_eq!(values(&out), values(&out2));
    assert_eq!(values(&hn), values(&hn2));
    assert!(values(&cn2).iter().any(|&v| v != 0.0));
    assert_eq!(shapes.lock().unwrap().len(), 2);
    // A forward hook must return as many outputs as it saw.
    let bad = lstm.register_forward_hook(|_, _, out| Ok(Some(vec![out[0].clone()])))?;
    let e = lstm.call(&x).unwrap_err().to_string();
    assert_eq!(
        e,
        "LSTM: a forward hook returned 1 tensors, expected 3 (one per tensor it was given)"
    );
    bad.remove();
    // GRU: [output, h_n]; a pre-hook replacing the initial state.
    let gru = nn::GRU::new(3, 4)?;
    let h0 = Tensor::randn([1, 2, 4])?;
    let pre = gru.register_forward_pre_hook(|_, a| Ok(Some(vec![a[0].clone(), a[1].zeros_like()?])))?;
    let post = gru.register_forward_hook(|_, _, out| {
        assert_eq!(out.len(), 2);
        Ok(None)
    })?;
    let (o, hn) = gru.call_with(&x, &h0)?;
    pre.remove();
    post.remove();
    let (o0, hn0) = gru.call(&x)?;
    assert_eq!((values(&o), values(&hn)), (values(&o0), values(&hn0)));
    Ok(())
}

#[test]
fn full_backward_hook_sees_every_input_and_output_gradient() -> Result<()> {
    let _rng = rng_lock();
    manual_seed(3);
    let mha = nn::MultiheadAttention::new(4, 2)?;
    let q = Tensor::randn([3, 2, 4])?.requires_grad_(true)?;
    let k = Tensor::randn([5, 2, 4])?.requires_grad_(true)?;
    let v = Tensor::randn([5, 2, 4])?; // does not require grad
    let opts = nn::MhaForwardOptions::default();
    type Calls = Vec<(Vec<Option<Vec<usize>>>, Vec<Option<Vec<usize>>>)>;
    let calls: Arc<std::sync::Mutex<Calls>> = Arc::default();
    let log = calls.clone();
    let shapes = |gs: &[Option<Tensor>]| gs.iter().map(|g| g.as_ref().map(|g| g.shape().to_vec())).collect();
    let h = mha.register_full_backward_hook(move |gin, gout| {
        log.lock().unwrap().push((shapes(gin), shapes(gout)));
        Ok(None)
    })?;
    // Both outputs used: grad_output for both; grad_input for the query
    // and the key, None for the value.
    let (out, w) = mha.call_with(&q, &k, &v, opts)?;
    let w = w.unwrap();
    total(&[&out, &w.mul(3.0)?])?.backward()?;
    let (gq, gk) = (values(&q.grad()?), values(&k.grad()?));
    // Only the output used: grad_output None for the weights.
    let (out, _) = mha.call_with(&q, &k, &v, opts)?;
    out.sum()?.backward()?;
    assert_eq!(
        *calls.lock().unwrap(),
        [
            (
                vec![Some(vec![3, 2, 4]), Some(vec![5, 2, 4]), None],
                vec![Some(vec![3, 2, 4]), Some(vec![2, 3, 5])]
            ),
            (
                vec![Some(vec![3, 2, 4]), Some(vec![5, 2, 4]), None],
                vec![Some(vec![3, 2, 4]), None]
            ),
        ]
    );
    // The hook does not change the gradients when it returns None.
    h.remove();
    q.set_grad(None)?;
    k.set_grad(None)?;
    let (out, w) = mha.call_with(&q, &k, &v, opts)?;
    total(&[&out, &w.unwrap().mul(3.0)?])?.backward()?;
    assert_eq!(values(&q.grad()?), gq);
    assert_eq!(values(&k.grad()?), gk);
    assert_eq!(calls.lock().unwrap().len(), 2, "removed: not called again");

    // Replacing grad_input: the key's gradient zeroed, the query's kept.
    let h = mha.register_full_backward_hook(|gin, _| Ok(Some(vec![gin[0].clone(), None, None])))?;
    q.set_grad(None)?;
    k.set_grad(None)?;
    let (out, w) = mha.call_with(&q, &k, &v, opts)?;
    total(&[&out, &w.unwrap().mul(3.0)?])?.backward()?;
    assert_eq!(values(&q.grad()?), gq);
    assert!(k.grad_opt().is_none());
    h.remove();
    // A replacement of the wrong length is an error at backward.
    let h = mha.register_full_backward_hook(|gin, _| Ok(Some(gin[..1].to_vec())))?;
    let (out, _) = mha.call_with(&q, &k, &v, opts)?;
    let e = out.sum()?.backward().unwrap_err().to_string();
    assert!(
        e.contains("Backward hook returned an invalid number of grad_input, got 1, but expected 3"),
        "{e}"
    );
    h.remove();

    // LSTM with an initial state: grad_input [x, h0, c0], grad_output
    // [output, h_n, c_n].
    let lstm = nn::LSTM::new(3, 2)?;
    let x = Tensor::randn([4, 1, 3])?.requires_grad_(true)?;
    let h0 = Tensor::randn([1, 1, 2])?.requires_grad_(true)?;
    let c0 = Tensor::randn([1, 1, 2])?.requires_grad_(true)?;
    let seen: Arc<std::sync::Mutex<Calls>> = Arc::default();
    let log = seen.clone();
    let h = lstm.register_full_backward_hook(move |gin, gout| {
        log.lock().unwrap().push((shapes(gin), shapes(gout)));
        Ok(None)
    })?;
    let (o, (hn, cn)) = lstm.call_with(&x, (&h0, &c0))?;
    total(&[&o, &hn, &cn])?.backward()?;
    assert_eq!(
        *seen.lock().unwrap(),
        [(
            vec![Some(vec![4, 1, 3]), Some(vec![1, 1, 2]), Some(vec![1, 1, 2])],
            vec![Some(vec![4, 1, 2]), Some(vec![1, 1, 2]), Some(vec![1, 1, 2])]
        )]
    );
    h.remove();
    Ok(())
}

#[test]
fn backward_hook_without_input_gradients_runs_at_the_output() -> Result<()> {
    let _rng = rng_lock();
    let fc = Linear::new(3, 2)?;
    let calls: Arc<std::sync::Mutex<Vec<(usize, usize, usize)>>> = Arc::default();
    let log = calls.clone();
    let h = fc.register_full_backward_hook(move |gin, gout| {
        let some = |g: &[Option<Tensor>]| g.iter().filter(|g| g.is_some()).count();
        log.lock().unwrap().push((gin.len(), some(gin), some(gout)));
        Ok(None)
    })?;
    fc.call(&Tensor::ones([1, 3])?)?.sum()?.backward()?;
    assert_eq!(*calls.lock().unwrap(), [(1, 0, 1)]);
    assert!(fc.weight.grad_opt().is_some());
    // Replacing the input gradients when there are none is PyTorch's error.
    h.remove();
    let h = fc.register_full_backward_hook(|_, gout| Ok(Some(vec![gout[0].clone()])))?;
    let e = fc
        .call(&Tensor::ones([1, 3])?)?
        .sum()?
        .backward()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no input requires gradient should always return None"),
        "{e}"
    );
    h.remove();
    // No grad mode: no nodes, no calls.
    let h = fc.register_full_backward_hook(|_, _| panic!("not called"))?;
    let y = ferrotorch::autograd::no_grad(|| fc.call(&Tensor::ones([1, 3])?))?;
    assert!(!y.requires_grad());
    h.remove();
    Ok(())
}

#[test]
fn deep_copies_keep_hooks() -> Result<()> {
    let _rng = rng_lock();
    let o = nn::TransformerLayerOptions::new().dim_feedforward(8).dropout(0.0);
    let layer = nn::TransformerEncoderLayer::with_options(4, 2, o)?;
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let handle = layer.register_forward_hook(move |_, _, _| {
        c.fetch_add(1, Ordering::Relaxed);
        Ok(None)
    })?;
    let c = calls.clone();
    layer.linear1.register_forward_hook(move |_, _, _| {
        c.fetch_add(100, Ordering::Relaxed);
        Ok(None)
    })?;
    // copy.deepcopy keeps the hooks of the layer and of its children: each
    // of the encoder's copies runs them.
    let enc = nn::TransformerEncoder::new(layer.deep_clone()?, 2, None)?;
    enc.call(&Tensor::randn([3, 2, 4])?)?;
    assert_eq!(calls.load(Ordering::Relaxed), 202);
    // The original's handle removes the original's hook only (PyTorch's
    // RemovableHandle holds the original's dict).
    handle.remove();
    enc.call(&Tensor::randn([3, 2, 4])?)?;
    assert_eq!(calls.load(Ordering::Relaxed), 404);
    layer.call(&Tensor::randn([3, 2, 4])?)?;
    assert_eq!(calls.load(Ordering::Relaxed), 504);
    // A hook registered on a copy stays on that copy.
    let c = calls.clone();
    enc.layers[0].register_forward_pre_hook(move |_, _| {
        c.fetch_add(1000, Ordering::Relaxed);
        Ok(None)
    })?;
    layer.call(&Tensor::randn([3, 2, 4])?)?;
    assert_eq!(calls.load(Ordering::Relaxed), 604);
    // ModuleState's Clone is that copy.
    let s = ModuleState::default();
    s.register_forward_hook(|_, _, _| Ok(None));
    assert!(s.clone().has_hooks() && !ModuleState::default().has_hooks());
    Ok(())
}

#[test]
fn layers_name_themselves_and_both_shapes_on_bad_input() -> Result<()> {
    let _rng = rng_lock();
    let fc = Linear::new(784, 256)?;
    let e = fc.call(&Tensor::ones([64, 100])?).unwrap_err().to_string();
    assert_eq!(
        e,
        "Linear(in_features=784, out_features=256, bias=True): expected input [*, 784], got [64, 100]"
    );
    assert!(Dropout::new(1.5).is_err());
    let e = nn::functional::dropout(&Tensor::ones(2)?, -0.1, true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dropout probability has to be between 0 and 1, but got -0.1"),
        "{e}"
    );
    Ok(())
}

#[test]
fn models_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Sequential>();
    assert_send_sync::<Net>();
    assert_send_sync::<Box<dyn Forward>>();
}

fn tensor_of(v: &Value) -> Tensor {
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
    Tensor::from_slice(&data)
        .to_dtype(DType::F32)
        .unwrap()
        .reshape(shape.iter().map(|&d| d as i64).collect::<Vec<_>>())
        .unwrap()
}

/// `got` within f32 rounding of PyTorch's values (different GEMM blocking).
fn check_close(what: &str, got: &Tensor, want: &Value) {
    let w = tensor_of(want);
    assert_eq!(got.shape(), w.shape(), "{what}: shape");
    let g: Vec<f32> = got.reshape([-1]).unwrap().to_vec().unwrap();
    let w: Vec<f32> = w.reshape([-1]).unwrap().to_vec().unwrap();
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!((a - b).abs() <= 2e-6 + 2e-5 * b.abs(), "{what}[{i}]: {a} vs {b}");
    }
}

#[test]
fn attention_and_recurrent_layers_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    use nn::{Gru, Lstm, MhaForwardOptions, MultiheadAttention, MultiheadAttentionOptions, RnnOptions};
    check_module("mha", || Ok(Box::new(MultiheadAttention::new(8, 2)?)))?;
    check_module("mha_kdim_vdim_nobias", || {
        let o = MultiheadAttentionOptions::new().bias(false).kdim(4).vdim(5);
        Ok(Box::new(MultiheadAttention::with_options(6, 3, o)?))
    })?;
    let bi = RnnOptions::new().num_layers(2).bidirectional(true);
    check_module("lstm_2layer_bi", || Ok(Box::new(Lstm::with_options(10, 20, bi)?)))?;
    let gru_opts = RnnOptions::new().batch_first(true).bias(false);
    check_module("gru_batch_first", || Ok(Box::new(Gru::with_options(4, 6, gru_opts)?)))?;

    let c = case("mha_forward_weights");
    manual_seed(21);
    let mha = MultiheadAttention::new(8, 2)?;
    let ins: Vec<Tensor> = c["inputs"].as_array().unwrap().iter().map(tensor_of).collect();
    let (out, w) = mha.call(&ins[0], &ins[1], &ins[2])?;
    check_close("mha out", &out, &c["outputs"][0]);
    check_close("mha weights", &w.unwrap(), &c["outputs"][1]);

    let c = case("mha_forward_masks");
    let ins: Vec<Tensor> = c["inputs"].as_array().unwrap().iter().map(tensor_of).collect();
    let (kpm, am) = (ins[3].to_dtype(DType::Bool)?, ins[4].to_dtype(DType::Bool)?);
    let opts = MhaForwardOptions::new()
        .key_padding_mask(&kpm)
        .attn_mask(&am)
        .average_attn_weights(false);
    let (out, w) = mha.call_with(&ins[0], &ins[1], &ins[2], opts)?;
    check_close("mha masked out", &out, &c["outputs"][0]);
    check_close("mha per-head weights", &w.unwrap(), &c["outputs"][1]);

    let c = case("mha_forward_batch_first_no_weights");
    manual_seed(21);
    let mha = MultiheadAttention::with_options(8, 2, MultiheadAttentionOptions::new().batch_first(true))?;
    let q = tensor_of(&c["inputs"][0]);
    let opts = MhaForwardOptions::new().need_weights(false);
    let (out, w) = mha.call_with(&q, &q, &q, opts)?;
    assert!(w.is_none());
    check_close("mha batch_first out", &out, &c["outputs"][0]);
    // A mask of another shape is refused with PyTorch's message, even one
    // that would broadcast.
    let mha = MultiheadAttention::new(4, 2)?;
    let (q, k) = (Tensor::randn([3, 2, 4])?, Tensor::randn([5, 2, 4])?);
    for (shape, want) in [
        (
            vec![1, 5],
            "The shape of the 2D attn_mask is [1, 5], but should be [3, 5].",
        ),
        (
            vec![3, 1],
            "The shape of the 2D attn_mask is [3, 1], but should be [3, 5].",
        ),
        (
            vec![5, 3],
            "The shape of the 2D attn_mask is [5, 3], but should be [3, 5].",
        ),
        (
            vec![4, 3, 1],
            "The shape of the 3D attn_mask is [4, 3, 1], but should be [4, 3, 5].",
        ),
        (
            vec![1, 3, 5],
            "The shape of the 3D attn_mask is [1, 3, 5], but should be [4, 3, 5].",
        ),
        (vec![1, 1, 3, 5], "attn_mask's dimension 4 is not supported"),
    ] {
        let mask = Tensor::zeros(shape.as_slice())?;
        let e = mha
            .call_with(&q, &k, &k, MhaForwardOptions::new().attn_mask(&mask))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("MultiheadAttention(") && e.ends_with(want), "{e}");
    }
    // Inputs of the wrong rank or size: PyTorch's checks, in its order.
    let sep = MultiheadAttention::with_options(4, 2, MultiheadAttentionOptions::new().kdim(3).vdim(5))?;
    let r = |d: &[usize]| Tensor::randn(d);
    for (m, (qs, ks, vs), want) in [
        (
            &mha,
            (&[3, 2, 2, 4][..], &[3, 2, 2, 4][..], &[3, 2, 2, 4][..]),
            "query should be unbatched 2D or batched 3D tensor but received 4-D query tensor",
        ),
        (
            &mha,
            (&[3, 2, 4], &[5, 4], &[5, 4]),
            "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found 2-D and 2-D tensors respectively",
        ),
        (
            &mha,
            (&[3, 2, 4], &[5, 2, 4], &[5, 4]),
            "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found 3-D and 2-D tensors respectively",
        ),
        (
            &mha,
            (&[3, 4], &[5, 4], &[5, 2, 4]),
            "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found 2-D and 3-D tensors respectively",
        ),
        (
            &mha,
            (&[3, 2, 5], &[5, 2, 5], &[5, 2, 5]),
            "was expecting embedding dimension of 4, but got 5",
        ),
        (
            &mha,
            (&[3, 2, 4], &[5, 2, 3], &[5, 2, 4]),
            "key shape [5, 2, 3] does not match value shape [5, 2, 4]",
        ),
        (
            &mha,
            (&[3, 4], &[5, 4], &[6, 4]),
            "key shape [5, 1, 4] does not match value shape [6, 1, 4]",
        ),
        (
            &sep,
            (&[3, 2, 4], &[5, 2, 3], &[6, 2, 5]),
            "key's sequence and batch dims [5, 2] do not match value's [6, 2]",
        ),
        (
            &sep,
            (&[3, 2, 4], &[5, 2, 4], &[5, 2, 5]),
            "expected key [.., 3] and value [.., 5], got [5, 2, 4] and [5, 2, 5]",
        ),
    ] {
        let e = m.call(&r(qs)?, &r(ks)?, &r(vs)?).unwrap_err().to_string();
        assert!(e.starts_with("MultiheadAttention(") && e.ends_with(want), "{e}");
    }
    assert_eq!(sep.call(&r(&[3, 4])?, &r(&[5, 3])?, &r(&[5, 5])?)?.0.shape(), [3, 4]);
    let ok = Tensor::zeros([3, 5])?;
    assert_eq!(
        mha.call_with(&q, &k, &k, MhaForwardOptions::new().attn_mask(&ok))?
            .0
            .shape(),
        [3, 2, 4]
    );

    let c = case("lstm_forward");
    manual_seed(23);
    let lstm = Lstm::with_options(10, 20, bi)?;
    let (out, (h, cell)) = lstm.call(&tensor_of(&c["inputs"][0]))?;
    check_close("lstm out", &out, &c["outputs"][0]);
    check_close("lstm h_n", &h, &c["outputs"][1]);
    check_close("lstm c_n", &cell, &c["outputs"][2]);

    let c = case("gru_forward");
    manual_seed(24);
    let gru = Gru::with_options(4, 6, gru_opts)?;
    let (out, h) = gru.call_with(&tensor_of(&c["inputs"][0]), &tensor_of(&c["inputs"][1]))?;
    check_close("gru out", &out, &c["outputs"][0]);
    check_close("gru h_n", &h, &c["outputs"][1]);

    // Two layers, both directions, a given state: each (layer, direction)
    // starts from its own slice `layer * 2 + direction` of h0 and c0.
    let c = case("lstm_2layer_bi_state");
    manual_seed(25);
    let lstm = Lstm::with_options(5, 7, bi)?;
    let ins: Vec<Tensor> = (0..3).map(|i| tensor_of(&c["inputs"][i])).collect();
    let (out, (h, cell)) = lstm.call_with(&ins[0], (&ins[1], &ins[2]))?;
    check_close("lstm (state) out", &out, &c["outputs"][0]);
    check_close("lstm (state) h_n", &h, &c["outputs"][1]);
    check_close("lstm (state) c_n", &cell, &c["outputs"][2]);
    let c = case("gru_2layer_bi_state");
    manual_seed(26);
    let gru2 = Gru::with_options(5, 7, bi)?;
    let (out, h) = gru2.call_with(&ins[0], &ins[1])?;
    check_close("gru (state) out", &out, &c["outputs"][0]);
    check_close("gru (state) h_n", &h, &c["outputs"][1]);

    // Dropout after every layer but the last, in training: PyTorch's masks.
    let c = case("lstm_dropout_train");
    manual_seed(27);
    let drop = Lstm::with_options(5, 7, RnnOptions::new().num_layers(3).dropout(0.5))?;
    let (out, (h, cell)) = drop.call(&ins[0])?;
    check_close("lstm (dropout) out", &out, &c["outputs"][0]);
    check_close("lstm (dropout) h_n", &h, &c["outputs"][1]);
    check_close("lstm (dropout) c_n", &cell, &c["outputs"][2]);
    // One layer: no dropout at all (PyTorch warns that it does nothing).
    let one = Lstm::with_options(5, 7, RnnOptions::new().dropout(0.5))?;
    let (train, _) = one.call(&ins[0])?;
    one.eval();
    let (eval, _) = one.call(&ins[0])?;
    assert_eq!(train.to_vec::<f32>()?, eval.to_vec::<f32>()?);

    // Bad input names the layer and both sizes.
    let e = gru.call(&Tensor::ones([2, 5, 3])?).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "GRU(4, 6, bias=False, batch_first=True): input.size(-1) must be equal to input_size. Expected 4, got 3"
        ),
        "{e}"
    );
    Ok(())
}

#[test]
fn init_functions_draw_pytorchs_values() -> Result<()> {
    let _rng = rng_lock();
    use nn::init::{self, FanMode, Nonlinearity};
    type Init = Box<dyn Fn(&Tensor) -> Result<Tensor>>;
    let cases: Vec<(&str, Vec<usize>, Init, bool)> = vec![
        (
            "init_trunc_normal",
            vec![40, 50],
            Box::new(|t| init::trunc_normal_(t, 0.5, 2.0, -1.0, 3.0)),
            true,
        ),
        (
            "init_trunc_normal_tail",
            vec![7, 9],
            Box::new(|t| init::trunc_normal_(t, 0.0, 1.0, 1.5, 3.0)),
            true,
        ),
        (
            "init_trunc_normal_far_tail",
            vec![6, 7],
            Box::new(|t| init::trunc_normal_(t, 0.0, 2.0, 3.0, 5.0)),
            true,
        ),
        (
            "init_xavier_normal",
            vec![30, 20],
            Box::new(|t| init::xavier_normal_(t, 1.5)),
            true,
        ),
        (
            "init_xavier_uniform",
            vec![6, 5, 3],
            Box::new(|t| init::xavier_uniform_(t, 1.0)),
            true,
        ),
        (
            "init_kaiming_normal_fan_out",
            vec![8, 4, 3, 3],
            Box::new(|t| init::kaiming_normal_(t, FanMode::FanOut, Nonlinearity::Relu)),
            true,
        ),
        (
            "init_kaiming_uniform",
            vec![16, 9],
            Box::new(|t| init::kaiming_uniform_(t, FanMode::FanIn, Nonlinearity::LeakyRelu(Some(0.1)))),
            true,
        ),
        // QR by a different algorithm than LAPACK's: equal up to rounding.
        (
            "init_orthogonal",
            vec![6, 10],
            Box::new(|t| init::orthogonal_(t, 2.0)),
            false,
        ),
        (
            "init_orthogonal_tall",
            vec![10, 3, 2],
            Box::new(|t| init::orthogonal_(t, 1.0)),
            false,
        ),
    ];
    for (name, shape, f, exact) in cases {
        let c = case(name);
        manual_seed(c["seed"].as_u64().unwrap());
        let t = Tensor::empty(&shape[..])?;
        f(&t)?;
        if exact {
            check_values(name, &t, &c["output"]);
        } else {
            check_close(name, &t, &c["output"]);
        }
    }
    // Orthogonality itself: W Wᵀ = gain² I for a wide matrix.
    let w = Tensor::empty([4, 9])?;
    init::orthogonal_(&w, 3.0)?;
    let eye = w
        .matmul(&w.t()?)?
        .sub(&Tensor::eye(4)?.mul(9.0)?)?
        .abs()?
        .amax((), false)?;
    assert!(eye.item::<f32>()? < 1e-4);
    assert!(init::calculate_fan_in_and_fan_out(&Tensor::ones(3)?).is_err());
    assert!(init::Nonlinearity::from_name("swish", None).is_err());
    Ok(())
}

fn mnist_cnn() -> Result<Sequential> {
    use nn::{Conv2d, ConvLayerOptions, MaxPool2d};
    Ok(Sequential::new()
        .push(Conv2d::with_options(1, 32, 3, ConvLayerOptions::new().padding(1))?)
        .push(ReLU::new())
        .push(MaxPool2d::new(2))
        .push(Conv2d::with_options(32, 64, 3, ConvLayerOptions::new().padding(1))?)
        .push(ReLU::new())
        .push(MaxPool2d::new(2))
        .push(Flatten::new())
        .push(Linear::new(3136, 128)?)
        .push(ReLU::new())
        .push(Linear::new(128, 10)?))
}

#[test]
fn conv_and_pool_layers_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    use ferrotorch::{AvgPoolOptions, MaxPoolOptions, Padding};
    use nn::{
        AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, Conv1d, Conv2d, ConvLayerOptions as O,
        ConvTranspose1d, ConvTranspose2d, MaxPool1d, MaxPool2d,
    };
    check_module("mnist_cnn", || Ok(Box::new(mnist_cnn()?)))?;
    check_module("conv_variants", || {
        Ok(Box::new(
            Sequential::new()
                .push(Conv2d::with_options(
                    4,
                    6,
                    [3, 5],
                    O::new()
                        .stride(2)
                        .padding([1, 2])
                        .dilation([1, 2])
                        .groups(2)
                        .bias(false),
                )?)
                .push(Conv2d::with_options(6, 6, 3, O::new().padding(Padding::Same))?)
                .push(Conv1d::with_options(3, 5, 4, O::new().padding(Padding::Valid))?)
                .push(ConvTranspose2d::with_options(
                    6,
                    4,
                    3,
                    O::new().stride(2).padding(1).output_padding(1),
                )?)
                .push(ConvTranspose1d::with_options(2, 4, 3, O::new().groups(2))?)
                .push(MaxPool2d::new(
                    MaxPoolOptions::new([2, 3]).stride(1).padding(1).ceil_mode(true),
                ))
                .push(MaxPool1d::new(3))
                .push(AvgPool2d::new(AvgPoolOptions::new(3).stride(2).padding(1)))
                .push(AvgPool1d::new(2))
                .push(AdaptiveAvgPool2d::new([1, 1]))
                .push(AdaptiveAvgPool2d::new(7))
                .push(AdaptiveMaxPool2d::new(2)),
        ))
    })?;
    let c = case("cnn_forward");
    manual_seed(0);
    let net = mnist_cnn()?;
    check_close("cnn out", &net.call(&tensor_of(&c["inputs"][0]))?, &c["outputs"][0]);
    // The layer and both shapes on bad input; bad construction arguments.
    let conv = Conv2d::with_options(1, 32, 3, O::new().padding(1))?;
    let e = conv.call(&Tensor::ones([64, 3, 28, 28])?).unwrap_err().to_string();
    assert_eq!(
        e,
        "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)): expected input [N, 1, H, W], got [64, 3, 28, 28]"
    );
    assert!(Conv2d::with_options(3, 4, 3, O::new().groups(2)).is_err());
    assert!(Conv2d::with_options(4, 4, 3, O::new().stride(2).padding(Padding::Same)).is_err());
    assert!(Conv2d::new(4, 4, [3, 3, 3]).is_err());
    Ok(())
}

/// `nn.ModuleDict` as PyTorch's: insertion order, a key given again
/// replaces its module in place, parameters and state-dict keys named
/// `key.param`, the repr.
#[test]
fn module_dict_as_pytorch() -> Result<()> {
    let mut d: nn::ModuleDict = nn::ModuleDict::new();
    assert!(d.is_empty());
    assert_eq!(d.len(), 0);
    assert_eq!(d.repr(), "ModuleDict()");
    d.insert("fc", Box::new(Linear::new(2, 3)?) as Box<dyn Module>);
    d.insert("act", Box::new(ReLU::new()));
    d.insert("out", Box::new(Linear::new(3, 1)?));
    d.insert("act", Box::new(Tanh::new()));
    assert!(!d.is_empty());
    assert_eq!(d.len(), 3);
    assert_eq!(d.keys().collect::<Vec<_>>(), ["fc", "act", "out"]);
    assert_eq!(
        d.get("act").map(|m| m.type_name().into_owned()).as_deref(),
        Some("Tanh")
    );
    assert!(d.get("relu").is_none());
    let names: Vec<String> = d.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["fc.weight", "fc.bias", "out.weight", "out.bias"]);
    assert_eq!(d.state_dict().keys().collect::<Vec<_>>(), names);
    let modules: Vec<String> = d.named_modules().into_iter().map(|(n, _)| n).collect();
    assert_eq!(modules, ["", "fc", "act", "out"]);
    assert_eq!(
        d.repr(),
        "ModuleDict(\n  (fc): Linear(in_features=2, out_features=3, bias=True)\n  (act): Tanh()\n  \
         (out): Linear(in_features=3, out_features=1, bias=True)\n)"
    );
    Ok(())
}
