//! The corners of `nn`'s modules against PyTorch
//! (`tests/nn_data/group_c.json`, written by `tests/gen_nn_group_c.py`):
//! the repr of every layer at non-default options (convolution strides,
//! paddings, dilations, groups, output paddings and no bias; norms'
//! eps / affine / bias / momentum / running stats; embeddings' options;
//! pools' tuples and ceil mode; flatten dims; dropout p; activation
//! slopes and approximations) and of `ModuleList`s grouping repeated
//! layers; the accessors against PyTorch's attributes; everything `Module`
//! derives for a nested model with a tied weight (named_* names and
//! prefixes, modules, children, apply order, train / eval on every module,
//! state_dict keys, load_state_dict's missing and unexpected keys);
//! `zero_grad` both ways, `requires_grad_`, `to_dtype`, `to_device`,
//! `to_empty`; `Sequential` / `ModuleDict` / boxed modules; hooks added,
//! run, removed and copied; layers built after `manual_seed` (initial
//! parameters bit for bit, outputs); the loss modules at non-default
//! options; and the errors for inputs a layer cannot take.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ferrotorch::nn::functional::{GeluApproximate, KlDivReduction, Reduction};
use ferrotorch::nn::{
    AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, BCELoss, BCEWithLogitsLoss, BatchNorm1d, BatchNorm2d,
    BatchNormLayerOptions, Bilinear, Buffer, ClassLossOptions, Conv1d, Conv2d, ConvLayerOptions, ConvTranspose1d,
    ConvTranspose2d, CrossEntropyLoss, Dropout, Embedding, EmbeddingLayerOptions, Flatten, Forward, Gelu, GroupNorm,
    GroupNormOptions, HuberLoss, Identity, KLDivLoss, LayerNorm, LayerNormOptions, LeakyReLU, Linear, LinearOptions,
    MaxPool1d, MaxPool2d, Module, ModuleDict, ModuleState, NLLLoss, RMSNorm, ReLU, RmsNormOptions, Sequential,
    SmoothL1Loss, Tanh, Unflatten, call_with_hooks,
};
use ferrotorch::{AvgPoolOptions, DType, Device, MaxPoolOptions, Padding, Result, Tensor, manual_seed};
use serde_json::Value;

#[path = "support/nn_json.rs"]
mod nn_json;

use nn_json::{check, check_shape_dtype, err, floats, rng_lock, strings, tensor_of, values};

fn data() -> &'static Value {
    nn_json::data("group_c.json")
}

/// Shape, dtype and every value bit for bit (`==`: `-0.0` matches `0.0`).
fn check_exact(what: &str, got: &Tensor, want: &Value) {
    check_shape_dtype(what, got, want);
    assert_eq!(values(got), floats(&want["data"]), "{what}: values");
}

/// Shape, dtype and every value within `1e-5` (relative above 1).
fn check_close(what: &str, got: &Tensor, want: &Value) {
    check(what, got, want, 1e-5);
}

fn repr_of(key: &str) -> &'static str {
    data()["reprs"][key].as_str().unwrap()
}

fn layer(key: &str) -> &'static Value {
    &data()["layers"][key]
}

fn names<T>(v: Vec<(String, T)>) -> Vec<String> {
    v.into_iter().map(|(n, _)| n).collect()
}

#[test]
fn layer_reprs_match_pytorch_at_non_default_options() -> Result<()> {
    let _rng = rng_lock();
    let mut got: Vec<(&str, String)> = Vec::new();
    let conv = ConvLayerOptions::new;
    got.push(("conv1d_defaults", Conv1d::new(2, 4, 3)?.repr()));
    let o = conv().stride(2).padding(1).dilation(2).groups(2).bias(false);
    got.push(("conv1d_all", Conv1d::with_options(4, 6, 3, o)?.repr()));
    let o = conv().padding(Padding::Same).dilation(2);
    got.push(("conv1d_same", Conv1d::with_options(2, 2, 3, o)?.repr()));
    let o = conv().padding(Padding::Valid);
    got.push(("conv1d_valid", Conv1d::with_options(2, 2, 3, o)?.repr()));
    let o = conv().stride([1, 2]).padding([0, 1]).dilation([2, 1]);
    got.push(("conv2d_tuple", Conv2d::with_options(2, 4, [2, 3], o)?.repr()));
    let o = conv().stride(2).padding(1).output_padding(1).groups(2).bias(false);
    got.push(("convt1d_all", ConvTranspose1d::with_options(4, 2, 3, o)?.repr()));
    let o = conv().stride(2).padding([1, 0]).output_padding([1, 0]).dilation(2);
    got.push(("convt2d_all", ConvTranspose2d::with_options(2, 4, 3, o)?.repr()));
    let o = LayerNormOptions::new().eps(1e-3).bias(false);
    got.push(("layernorm", LayerNorm::with_options([3, 4], o)?.repr()));
    let o = LayerNormOptions::new().elementwise_affine(false);
    got.push(("layernorm_noaffine", LayerNorm::with_options(5, o)?.repr()));
    let o = GroupNormOptions::new().eps(0.25).affine(false);
    got.push(("groupnorm", GroupNorm::with_options(2, 4, o)?.repr()));
    let o = GroupNormOptions::new().bias(false);
    got.push(("groupnorm_nobias", GroupNorm::with_options(1, 4, o)?.repr()));
    let o = RmsNormOptions::new().eps(1e-6).elementwise_affine(false);
    got.push(("rmsnorm", RMSNorm::with_options([2, 3], o)?.repr()));
    got.push(("rmsnorm_default", RMSNorm::new(3)?.repr()));
    let o = BatchNormLayerOptions::new()
        .eps(1e-3)
        .momentum(None)
        .affine(false)
        .track_running_stats(false);
    got.push(("batchnorm1d", BatchNorm1d::with_options(3, o)?.repr()));
    let o = BatchNormLayerOptions::new().momentum(0.25).bias(false);
    got.push(("batchnorm2d_nobias", BatchNorm2d::with_options(2, o)?.repr()));
    let nobias = LinearOptions::new().bias(false);
    got.push(("linear_nobias", Linear::with_options(3, 2, nobias)?.repr()));
    got.push(("bilinear_nobias", Bilinear::with_options(3, 4, 2, nobias)?.repr()));
    let o = EmbeddingLayerOptions::new()
        .padding_idx(-3)
        .max_norm(2.0)
        .norm_type(1.0)
        .scale_grad_by_freq(true);
    got.push(("embedding_all", Embedding::with_options(10, 3, o)?.repr()));
    let o = EmbeddingLayerOptions::new().padding_idx(0);
    got.push(("embedding_pad0", Embedding::with_options(5, 2, o)?.repr()));
    got.push(("maxpool1d", MaxPool1d::new(3).repr()));
    let o = MaxPoolOptions::new([2, 3])
        .stride([1, 2])
        .padding([1, 0])
        .dilation([2, 1])
        .ceil_mode(true);
    got.push(("maxpool2d_all", MaxPool2d::new(o).repr()));
    got.push((
        "avgpool1d",
        AvgPool1d::new(AvgPoolOptions::new(3).stride(2).padding(1)).repr(),
    ));
    let o = AvgPoolOptions::new([2, 3]).stride(1).padding([1, 0]);
    got.push(("avgpool2d", AvgPool2d::new(o).repr()));
    got.push(("adaptive_avg_int", AdaptiveAvgPool2d::new(3).repr()));
    got.push(("adaptive_avg_pair", AdaptiveAvgPool2d::new([2, 3]).repr()));
    got.push(("adaptive_max_pair", AdaptiveMaxPool2d::new([1, 2]).repr()));
    got.push(("adaptive_max_int", AdaptiveMaxPool2d::new(2).repr()));
    got.push(("flatten", Flatten::with_dims(0, 2).repr()));
    got.push(("unflatten_one", Unflatten::new(1, vec![4]).repr()));
    got.push(("unflatten_two", Unflatten::new(-1, vec![2, 3]).repr()));
    got.push(("dropout", Dropout::new(0.25)?.repr()));
    got.push(("leaky_relu", LeakyReLU::new(0.2).repr()));
    got.push(("gelu_tanh", Gelu::with_approximate(GeluApproximate::Tanh).repr()));
    got.push(("relu", ReLU::new().repr()));
    got.push(("identity", Identity::new().repr()));
    let list: Vec<Box<dyn Module>> = vec![
        Box::new(Linear::new(2, 3)?),
        Box::new(Linear::new(2, 3)?),
        Box::new(Linear::new(3, 3)?),
        Box::new(ReLU::new()),
        Box::new(ReLU::new()),
        Box::new(ReLU::new()),
        Box::new(Linear::new(2, 3)?),
    ];
    got.push(("module_list_groups", list.repr()));
    got.push(("module_list_one", vec![ReLU::new()].repr()));
    got.push(("module_list_empty", Vec::<ReLU>::new().repr()));
    let mut dict: ModuleDict = ModuleDict::new();
    dict.insert("b", Box::new(ReLU::new()));
    dict.insert("a", Box::new(Linear::new(2, 2)?));
    got.push(("module_dict", dict.repr()));
    for (key, r) in &got {
        assert_eq!(r, repr_of(key), "{key}");
    }
    assert_eq!(got.len(), data()["reprs"].as_object().unwrap().len());
    Ok(())
}

#[test]
fn accessors_match_pytorchs_attributes() -> Result<()> {
    let _rng = rng_lock();
    let a = &data()["accessors"];
    let o = EmbeddingLayerOptions::new()
        .padding_idx(-3)
        .max_norm(2.0)
        .norm_type(1.0)
        .scale_grad_by_freq(true);
    let e = Embedding::with_options(10, 3, o)?;
    assert_eq!(
        e.padding_idx(),
        Some(a["embedding_all_padding_idx"].as_u64().unwrap() as usize)
    );
    assert_eq!(
        e.num_embeddings() as u64,
        a["embedding_all_num_embeddings"].as_u64().unwrap()
    );
    assert_eq!(
        e.embedding_dim() as u64,
        a["embedding_all_embedding_dim"].as_u64().unwrap()
    );
    assert_eq!(Embedding::new(4, 2)?.padding_idx(), None);
    let ln = LayerNorm::with_options([3, 4], LayerNormOptions::new().eps(1e-3).bias(false))?;
    let want: Vec<usize> = a["layernorm_normalized_shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(ln.normalized_shape(), &want[..]);
    assert_eq!(ln.eps(), a["layernorm_eps"].as_f64().unwrap());
    let lin = Linear::with_options(3, 2, LinearOptions::new().bias(false))?;
    assert_eq!(lin.in_features() as u64, a["linear_in"].as_u64().unwrap());
    assert_eq!(lin.out_features() as u64, a["linear_out"].as_u64().unwrap());
    assert!(lin.bias.is_none());
    assert_eq!(Dropout::new(0.25)?.p(), a["dropout_p"].as_f64().unwrap());
    // PyTorch's `NonDynamicallyQuantizableLinear` is a renamed Linear.
    let renamed = Linear::new(2, 2)?.renamed("NonDynamicallyQuantizableLinear");
    assert_eq!(renamed.type_name(), "NonDynamicallyQuantizableLinear");
    assert!(
        renamed
            .repr()
            .starts_with("NonDynamicallyQuantizableLinear(in_features=2")
    );
    assert_eq!(Linear::new(2, 2)?.type_name(), "Linear");
    Ok(())
}

#[derive(Module)]
struct Block {
    fc: Linear,
    bn: BatchNorm1d,
    seq: Sequential,
    heads: Vec<Linear>,
    tied: Linear,
}

#[derive(Module)]
struct Net {
    block: Block,
    norm: LayerNorm,
}

fn net() -> Result<Net> {
    let fc = Linear::new(3, 4)?;
    let mut tied = Linear::with_options(3, 4, LinearOptions::new().bias(false))?;
    tied.weight = fc.weight.clone();
    Ok(Net {
        block: Block {
            fc,
            bn: BatchNorm1d::new(4)?,
            seq: Sequential::new()
                .push(Linear::new(4, 4)?)
                .push(ReLU::new())
                .push(Linear::new(4, 4)?),
            heads: vec![Linear::new(4, 2)?, Linear::new(4, 2)?],
            tied,
        },
        norm: LayerNorm::new(2)?,
    })
}

#[test]
fn a_nested_model_names_orders_and_flags_as_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let want = &data()["model"];
    let m = net()?;
    assert_eq!(names(m.named_parameters()), strings(&want["named_parameters"]));
    assert_eq!(m.parameters().len(), want["named_parameters"].as_array().unwrap().len());
    assert!(m.parameters()[0].same_as(&m.block.fc.weight));
    assert_eq!(names(m.named_buffers()), strings(&want["named_buffers"]));
    assert_eq!(m.buffers().len(), 3);
    assert_eq!(
        m.buffers()[2].id(),
        m.block.bn.num_batches_tracked.as_ref().unwrap().id()
    );
    assert_eq!(names(m.named_modules()), strings(&want["named_modules"]));
    assert_eq!(names(m.named_children()), strings(&want["named_children"]));
    assert_eq!(names(m.block.named_children()), strings(&want["block_named_children"]));
    let child_types: Vec<String> = m.block.children().iter().map(|c| c.type_name().into_owned()).collect();
    assert_eq!(
        child_types,
        ["Linear", "BatchNorm1d", "Sequential", "ModuleList", "Linear"]
    );
    let types: Vec<String> = m.modules().iter().map(|c| c.type_name().into_owned()).collect();
    assert_eq!(types, strings(&want["module_types"]));
    let keys: Vec<String> = m.state_dict().keys().map(String::from).collect();
    assert_eq!(keys, strings(&want["state_dict"]));

    let mut order = Vec::new();
    m.apply(&mut |c| {
        order.push(c.type_name().into_owned());
        Ok(())
    })?;
    assert_eq!(order, strings(&want["apply_order"]));
    // apply stops at the first error.
    let mut calls = 0;
    assert!(
        m.apply(&mut |_| {
            calls += 1;
            Err(ferrotorch::Error::invalid("apply", "stop"))
        })
        .is_err()
    );
    assert_eq!(calls, 1);

    let flags = |m: &Net| -> Vec<bool> { m.modules().iter().map(|c| c.is_training()).collect() };
    m.eval();
    assert_eq!(serde_json::json!(flags(&m)), want["after_eval"]);
    assert!(!m.is_training() && !m.block.heads.is_training());
    m.train();
    assert_eq!(serde_json::json!(flags(&m)), want["after_train"]);
    assert!(m.is_training() && m.block.heads.is_training());
    m.train_mode(false);
    assert_eq!(serde_json::json!(flags(&m)), want["after_train_false"]);
    // A module without a flag of its own and no descendant with one.
    assert!(Vec::<Vec<Linear>>::new().is_training());

    // load_state_dict: missing and unexpected keys, the rest copied.
    let mut sd = m.state_dict();
    sd.remove("block.bn.running_var");
    sd.remove("norm.bias");
    sd.insert("block.extra.weight", Tensor::zeros([1])?);
    sd.insert("norm.weight", Tensor::new([5.0f32, 6.0])?);
    let strict = err(m.load_state_dict(&sd, true));
    for k in ["block.bn.running_var", "norm.bias", "block.extra.weight"] {
        assert!(strict.contains(k), "{strict}");
    }
    let r = m.load_state_dict(&sd, false)?;
    assert_eq!(r.missing_keys, strings(&want["missing_keys"]));
    assert_eq!(r.unexpected_keys, strings(&want["unexpected_keys"]));
    assert_eq!(values(&m.norm.weight.as_ref().unwrap().tensor()), [5.0, 6.0]);
    Ok(())
}

#[test]
fn zero_grad_requires_grad_and_conversions_reach_every_member() -> Result<()> {
    let _rng = rng_lock();
    let m = net()?;
    let x = Tensor::ones([2, 3])?;
    let b = &m.block;
    let h = b.seq.call(&b.bn.call(&b.fc.call(&x)?)?)?;
    b.heads[0].call(&h)?.sum()?.backward()?;
    let with_grad = |m: &Net| -> Vec<bool> { m.parameters().iter().map(|p| p.grad_opt().is_some()).collect() };
    let before = with_grad(&m);
    assert!(before[0] && !before[before.len() - 1]);
    m.zero_grad(false)?;
    assert_eq!(with_grad(&m), before);
    for p in m.parameters() {
        if let Some(g) = p.grad_opt() {
            assert_eq!(g.shape(), p.tensor().shape());
            assert!(values(&g).iter().all(|&v| v == 0.0));
        }
    }
    m.zero_grad(true)?;
    assert!(with_grad(&m).iter().all(|&g| !g));

    m.requires_grad_(false)?;
    assert!(m.parameters().iter().all(|p| !p.tensor().requires_grad()));
    m.requires_grad_(true)?;
    assert!(m.parameters().iter().all(|p| p.tensor().requires_grad()));

    // to_dtype: float parameters, buffers and gradients; integer buffers keep theirs.
    b.fc.call(&x)?.sum()?.backward()?;
    assert!(m.to_dtype(DType::I64).is_err());
    assert_eq!(b.fc.weight.tensor().dtype(), DType::F32);
    m.to_dtype(DType::F64)?;
    for p in m.parameters() {
        assert_eq!(p.tensor().dtype(), DType::F64);
    }
    assert_eq!(b.fc.weight.grad()?.dtype(), DType::F64);
    let bufs: Vec<DType> = m.buffers().iter().map(|b| b.tensor().dtype()).collect();
    assert_eq!(bufs, [DType::F64, DType::F64, DType::I64]);

    // to_device / to_empty keep shapes and dtypes.
    m.to_device(Device::Meta)?;
    assert!(m.parameters().iter().all(|p| p.tensor().device() == Device::Meta));
    assert!(m.buffers().iter().all(|b| b.tensor().device() == Device::Meta));
    m.to_empty(Device::Cpu)?;
    assert!(m.parameters().iter().all(|p| p.tensor().device() == Device::Cpu));
    assert!(m.buffers().iter().all(|b| b.tensor().device() == Device::Cpu));
    assert_eq!(b.fc.weight.tensor().shape(), &[4, 3]);
    assert_eq!(b.bn.num_batches_tracked.as_ref().unwrap().tensor().dtype(), DType::I64);
    m.to_empty(Device::Meta)?;
    assert!(m.parameters().iter().all(|p| p.tensor().device() == Device::Meta));
    Ok(())
}

#[test]
fn sequential_module_dict_and_boxes_as_pytorch() -> Result<()> {
    let _rng = rng_lock();
    let empty = Sequential::new();
    assert!(empty.is_empty());
    assert_eq!(empty.len(), 0);
    assert!(empty.get(0).is_none());
    let c = layer("sequential");
    let x = tensor_of(&c["x"]);
    let s = Sequential::new()
        .push_named("a", Identity::new())
        .push_named("b", LeakyReLU::new(0.2))
        .push_named("c", Flatten::with_dims(0, 1));
    assert!(!s.is_empty());
    assert_eq!(s.len(), 3);
    assert_eq!(s.get(1).unwrap().repr(), "LeakyReLU(negative_slope=0.2)");
    assert!(s.get(3).is_none());
    check_exact("sequential", &s.call(&x)?, &c["out"]);
    let s = s.push_named("a", Tanh::new());
    assert_eq!(s.len(), 3);
    assert_eq!(format!("{s}"), c["replaced_repr"].as_str().unwrap());
    check_close("sequential replaced", &s.call(&x)?, &c["replaced_out"]);
    let s = s.push(ReLU::new());
    assert_eq!(names(s.named_children()), ["a", "b", "c", "3"]);
    // Its own flag (`seq.training = False` sets that module only).
    s.state().unwrap().set_training(false);
    assert!(!s.is_training());
    assert!(s.get(0).unwrap().is_training());
    let handle = s.register_forward_hook(|_, _, out| Ok(Some(vec![out[0].mul(2.0)?])))?;
    // tanh, leaky_relu, flatten(0, 1), relu: tanh alone on positive values.
    let doubled = s.call(&Tensor::new([1.0f32, 2.0])?.reshape([1, 2])?)?;
    assert_eq!(values(&doubled), values(&Tensor::new([1.0f32, 2.0])?.tanh()?.mul(2.0)?));
    handle.remove();

    let mut d: ModuleDict = ModuleDict::new();
    assert!(d.is_empty());
    assert_eq!(d.len(), 0);
    d.insert("b", Box::new(ReLU::new()));
    d.insert("a", Box::new(Identity::new()));
    d.insert("b", Box::new(Tanh::new()));
    let want = layer("module_dict_replaced");
    assert_eq!(d.repr(), want["repr"].as_str().unwrap());
    assert_eq!(d.keys().collect::<Vec<_>>(), strings(&want["keys"]));
    assert_eq!(d.len(), 2);
    assert!(!d.is_empty());
    assert_eq!(d.get("a").unwrap().type_name(), "Identity");
    assert_eq!(d.get("b").unwrap().repr(), "Tanh()");
    assert!(d.get("c").is_none());
    assert_eq!(d.type_name(), "ModuleDict");
    // No state of its own: no hooks.
    assert!(d.register_forward_hook(|_, _, _| Ok(None)).is_err());
    assert!(d.state().is_none());

    // A boxed module is the module inside.
    let b: Box<Linear> = Box::new(Linear::new(2, 3)?);
    assert_eq!(b.type_name(), "Linear");
    assert_eq!(b.extra_repr(), "in_features=2, out_features=3, bias=True");
    assert_eq!(b.repr(), "Linear(in_features=2, out_features=3, bias=True)");
    assert_eq!(names(b.named_parameters()), ["weight", "bias"]);
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    b.register_forward_hook(move |_, _, _| {
        r.fetch_add(1, Ordering::Relaxed);
        Ok(None)
    })?;
    b.as_ref().call(&Tensor::ones([1, 2])?)?;
    assert_eq!(runs.load(Ordering::Relaxed), 1);
    b.state().unwrap().set_training(false);
    assert!(!b.as_ref().is_training());
    Ok(())
}

#[derive(Module)]
struct Hooked {
    state: ModuleState,
}

impl Hooked {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        call_with_hooks(self, std::slice::from_ref(x), |a| a[0].mul(2.0))
    }

    fn forward_pair(&self, x: &Tensor, second: bool) -> Result<(Tensor, Option<Tensor>)> {
        call_with_hooks(self, std::slice::from_ref(x), |a| {
            Ok((a[0].clone(), if second { Some(a[0].neg()?) } else { None }))
        })
    }

    fn forward_list(&self, x: &Tensor) -> Result<Vec<Tensor>> {
        call_with_hooks(self, std::slice::from_ref(x), |a| {
            Ok(vec![a[0].add(1.0)?, a[0].add(2.0)?])
        })
    }
}

/// A #[derive(Module)] struct with a leaf's extra_repr and children.
#[derive(Module)]
#[module(extra_repr = extra)]
struct Wrapper {
    inner: ReLU,
    lines: usize,
}

impl Wrapper {
    fn extra(&self) -> String {
        (0..self.lines)
            .map(|i| format!("line{i}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[derive(Module)]
#[module(extra_repr = extra)]
struct Leaf {
    lines: usize,
}

impl Leaf {
    fn extra(&self) -> String {
        (0..self.lines)
            .map(|i| format!("line{i}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[test]
fn reprs_put_extra_lines_and_children_where_pytorch_does() {
    // nn.Module.__repr__: one extra line and no children stay on one line;
    // anything else goes on indented lines, extra lines first.
    let want = &data()["custom_reprs"];
    for lines in 0..3 {
        assert_eq!(Leaf { lines }.repr(), want["leaf"][lines].as_str().unwrap());
        let w = Wrapper {
            inner: ReLU::new(),
            lines,
        };
        assert_eq!(w.repr(), want["wrapper"][lines].as_str().unwrap());
    }
}

#[test]
fn hooks_are_counted_removed_one_by_one_and_copied() -> Result<()> {
    let m = Hooked {
        state: ModuleState::default(),
    };
    assert_eq!(format!("{:?}", m.state), "ModuleState { training: true, hooks: 0 }");
    assert!(!m.state.has_hooks());
    let hits: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let handles: Vec<_> = hits
        .iter()
        .map(|h| {
            let h = h.clone();
            m.register_forward_hook(move |_, _, _| {
                h.fetch_add(1, Ordering::Relaxed);
                Ok(None)
            })
        })
        .collect::<Result<_>>()?;
    assert!(m.state.has_hooks());
    assert_eq!(format!("{:?}", m.state), "ModuleState { training: true, hooks: 3 }");
    let x = Tensor::new([1.0f32, -2.0])?;
    assert_eq!(values(&m.forward(&x)?), [2.0, -4.0]);
    handles[1].remove();
    assert_eq!(format!("{:?}", m.state), "ModuleState { training: true, hooks: 2 }");
    handles[1].remove();
    assert_eq!(format!("{:?}", m.state), "ModuleState { training: true, hooks: 2 }");
    m.forward(&x)?;
    let counts: Vec<usize> = hits.iter().map(|h| h.load(Ordering::Relaxed)).collect();
    assert_eq!(counts, [2, 1, 2]);

    // A copy has the same flag and hooks, in lists of its own.
    m.state.set_training(false);
    let copy = Hooked { state: m.state.clone() };
    assert_eq!(format!("{:?}", copy.state), "ModuleState { training: false, hooks: 2 }");
    copy.forward(&x)?;
    let counts: Vec<usize> = hits.iter().map(|h| h.load(Ordering::Relaxed)).collect();
    assert_eq!(counts, [3, 1, 3]);
    handles[0].remove();
    handles[2].remove();
    assert!(!m.state.has_hooks());
    assert!(copy.state.has_hooks());
    m.state.set_training(true);
    assert!(m.state.is_training() && !copy.state.is_training());

    // A pre-hook replaces the inputs; a count that does not fit is an error naming the module.
    let pre = m.register_forward_pre_hook(|_, a| Ok(Some(vec![a[0].add(1.0)?])))?;
    assert_eq!(values(&m.forward(&x)?), [4.0, -2.0]);
    pre.remove();
    let pre = m.register_forward_pre_hook(|_, a| Ok(Some(vec![a[0].clone(), a[0].clone()])))?;
    assert!(err(m.forward(&x)).contains("Hooked"));
    pre.remove();
    let post = m.register_forward_hook(|_, _, o| Ok(Some(vec![o[0].clone(), o[0].clone()])))?;
    assert!(err(m.forward(&x)).contains("Hooked"));
    post.remove();

    // Forward hooks see every tensor of an Option / Vec output and replace them in order.
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let post = m.register_forward_hook(move |_, _, o| {
        s.store(o.len(), Ordering::Relaxed);
        Ok(Some(o.iter().map(|t| t.mul(10.0)).collect::<Result<_>>()?))
    })?;
    let (a, b) = m.forward_pair(&x, true)?;
    assert_eq!(seen.load(Ordering::Relaxed), 2);
    assert_eq!(
        (values(&a), values(&b.unwrap())),
        (vec![10.0, -20.0], vec![-10.0, 20.0])
    );
    let (a, b) = m.forward_pair(&x, false)?;
    assert_eq!(seen.load(Ordering::Relaxed), 1);
    assert_eq!(values(&a), [10.0, -20.0]);
    assert!(b.is_none());
    let l = m.forward_list(&x)?;
    assert_eq!(seen.load(Ordering::Relaxed), 2);
    assert_eq!((values(&l[0]), values(&l[1])), (vec![20.0, -10.0], vec![30.0, 0.0]));
    post.remove();
    // Modules without a ModuleState have no hooks.
    assert!(Leaf { lines: 0 }.register_forward_pre_hook(|_, _| Ok(None)).is_err());
    Ok(())
}

#[test]
fn full_backward_hook_on_linear_sees_pytorchs_gradients() -> Result<()> {
    let _rng = rng_lock();
    let c = &data()["backward_hook"];
    manual_seed(12);
    let lin = Linear::new(3, 2)?;
    let gin: Arc<std::sync::Mutex<Vec<Option<Tensor>>>> = Arc::default();
    let gout: Arc<std::sync::Mutex<Vec<Option<Tensor>>>> = Arc::default();
    let (gi, go) = (gin.clone(), gout.clone());
    lin.register_full_backward_hook(move |i, o| {
        *gi.lock().unwrap() = i.to_vec();
        *go.lock().unwrap() = o.to_vec();
        Ok(Some(vec![Some(i[0].clone().unwrap().mul(3.0)?)]))
    })?;
    let x = tensor_of(&c["x"]).requires_grad_(true)?;
    let y = lin.call(&x)?;
    assert_eq!(y.grad_fn().unwrap().name(), c["grad_fn"].as_str().unwrap());
    y.mul(&tensor_of(&c["r"]))?.sum()?.backward()?;
    let gin = gin.lock().unwrap().clone();
    let gout = gout.lock().unwrap().clone();
    assert_eq!((gin.len(), gout.len()), (1, 1));
    check_close("grad_input", gin[0].as_ref().unwrap(), &c["grad_input"][0]);
    check_close("grad_output", gout[0].as_ref().unwrap(), &c["grad_output"][0]);
    check_close("x.grad", &x.grad()?, &c["x_grad"]);

    // Only a forward hook: the output keeps the forward's own node.
    let lin2 = Linear::new(3, 2)?;
    lin2.register_forward_hook(|_, _, _| Ok(None))?;
    assert_ne!(lin2.call(&x)?.grad_fn().unwrap().name(), "BackwardHookFunctionBackward");

    // No input requires grad: the hook runs at the output with grad_input [None].
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let h = lin2.register_full_backward_hook(move |i, o| {
        assert!(i[0].is_none() && o[0].is_some());
        r.fetch_add(1, Ordering::Relaxed);
        Ok(None)
    })?;
    lin2.call(&tensor_of(&c["x"]))?.sum()?.backward()?;
    assert_eq!(runs.load(Ordering::Relaxed), 1);
    h.remove();
    lin2.call(&tensor_of(&c["x"]))?.sum()?.backward()?;
    assert_eq!(runs.load(Ordering::Relaxed), 1);
    // ... and may not return gradients; nor may a hook return the wrong count.
    let h = lin2.register_full_backward_hook(|_, o| Ok(Some(vec![o[0].clone()])))?;
    assert!(lin2.call(&tensor_of(&c["x"]))?.sum()?.backward().is_err());
    h.remove();
    lin2.register_full_backward_hook(|i, _| Ok(Some(vec![i[0].clone(), i[0].clone()])))?;
    let x2 = tensor_of(&c["x"]).requires_grad_(true)?;
    assert!(lin2.call(&x2)?.sum()?.backward().is_err());
    Ok(())
}

#[test]
fn layers_built_after_manual_seed_match_pytorch() -> Result<()> {
    let _rng = rng_lock();
    manual_seed(3);
    let m = Linear::new(5, 3)?;
    let c = layer("linear_init");
    check_exact("linear weight", &m.weight.tensor(), &c["weight"]);
    check_exact("linear bias", &m.bias.as_ref().unwrap().tensor(), &c["bias"]);
    m.reset_parameters()?;
    let c = layer("linear_reset");
    check_exact("reset weight", &m.weight.tensor(), &c["weight"]);
    check_exact("reset bias", &m.bias.as_ref().unwrap().tensor(), &c["bias"]);
    manual_seed(4);
    let m = Linear::new(0, 3)?;
    check_exact(
        "empty linear bias",
        &m.bias.as_ref().unwrap().tensor(),
        &layer("linear_empty")["bias"],
    );
    let f64_lin = Linear::with_options(2, 2, LinearOptions::new().dtype(DType::F64))?;
    assert_eq!(f64_lin.weight.tensor().dtype(), DType::F64);
    let f64_conv = Conv1d::with_options(2, 2, 3, ConvLayerOptions::new().dtype(DType::F64))?;
    assert_eq!(f64_conv.weight.tensor().dtype(), DType::F64);
    assert_eq!(f64_conv.bias.as_ref().unwrap().tensor().dtype(), DType::F64);

    manual_seed(5);
    let m = Bilinear::new(3, 4, 2)?;
    let c = layer("bilinear");
    check_exact("bilinear weight", &m.weight.tensor(), &c["weight"]);
    check_exact("bilinear bias", &m.bias.as_ref().unwrap().tensor(), &c["bias"]);
    let (x1, x2) = (tensor_of(&c["x1"]), tensor_of(&c["x2"]));
    check_close("bilinear call", &m.call(&x1, &x2)?, &c["out"]);
    check_close("bilinear forward", &m.forward(&x1, &x2)?, &c["out"]);

    manual_seed(6);
    let o = ConvLayerOptions::new()
        .stride(2)
        .padding(1)
        .dilation(2)
        .groups(2)
        .bias(false);
    let m = Conv1d::with_options(4, 6, 3, o)?;
    let c = layer("conv1d");
    check_exact("conv1d weight", &m.weight.tensor(), &c["weight"]);
    let x = tensor_of(&c["x"]);
    check_close("conv1d", &m.call(&x)?, &c["out"]);
    check_close("conv1d unbatched", &m.call(&x.select(0, 0)?)?, &c["out_unbatched"]);

    manual_seed(7);
    let o = ConvLayerOptions::new().stride(2).padding(1).output_padding(1).groups(2);
    let m = ConvTranspose1d::with_options(4, 2, 3, o)?;
    let c = layer("convt1d");
    check_exact("convt1d weight", &m.weight.tensor(), &c["weight"]);
    check_exact("convt1d bias", &m.bias.as_ref().unwrap().tensor(), &c["bias"]);
    check_close("convt1d", &m.call(&tensor_of(&c["x"]))?, &c["out"]);

    manual_seed(8);
    let o = ConvLayerOptions::new()
        .stride(2)
        .padding([1, 0])
        .output_padding([1, 0])
        .dilation(2);
    let m = ConvTranspose2d::with_options(2, 4, 3, o)?;
    let c = layer("convt2d");
    check_exact("convt2d weight", &m.weight.tensor(), &c["weight"]);
    check_exact("convt2d bias", &m.bias.as_ref().unwrap().tensor(), &c["bias"]);
    check_close("convt2d", &m.call(&tensor_of(&c["x"]))?, &c["out"]);

    manual_seed(9);
    let o = ConvLayerOptions::new().stride([1, 2]).padding([0, 1]).dilation([2, 1]);
    let m = Conv2d::with_options(2, 4, [2, 3], o)?;
    let c = layer("conv2d");
    check_exact("conv2d weight", &m.weight.tensor(), &c["weight"]);
    check_exact("conv2d bias", &m.bias.as_ref().unwrap().tensor(), &c["bias"]);
    check_close("conv2d", &m.call(&tensor_of(&c["x"]))?, &c["out"]);

    manual_seed(10);
    let m = Conv1d::with_options(2, 2, 3, ConvLayerOptions::new().padding(Padding::Same).dilation(2))?;
    let c = layer("conv1d_same");
    check_exact("conv1d same weight", &m.weight.tensor(), &c["weight"]);
    check_exact("conv1d same bias", &m.bias.as_ref().unwrap().tensor(), &c["bias"]);
    check_close("conv1d same", &m.call(&tensor_of(&c["x"]))?, &c["out"]);

    manual_seed(11);
    let o = EmbeddingLayerOptions::new()
        .padding_idx(-3)
        .max_norm(1.5)
        .norm_type(1.0);
    let m = Embedding::with_options(10, 3, o)?;
    let c = layer("embedding");
    check_exact("embedding weight", &m.weight.tensor(), &c["weight"]);
    check_close("embedding", &m.call(&tensor_of(&c["idx"]))?, &c["out"]);
    check_close(
        "embedding weight after max_norm",
        &m.weight.tensor(),
        &c["weight_after"],
    );
    assert!(m.call(&tensor_of(&c["idx"]).to_dtype(DType::F32)?).is_err());

    let c = layer("embedding_pretrained");
    let w = tensor_of(&c["weights"]);
    let m = Embedding::from_pretrained(&w, false, EmbeddingLayerOptions::new().padding_idx(-1))?;
    assert_eq!(m.padding_idx(), Some(c["padding_idx"].as_u64().unwrap() as usize));
    assert_eq!(m.weight.tensor().requires_grad(), c["requires_grad"].as_bool().unwrap());
    assert_eq!((m.num_embeddings(), m.embedding_dim()), (4, 2));
    check_exact("pretrained", &m.weight.tensor(), &c["weights"]);
    let frozen = Embedding::from_pretrained(&w, true, EmbeddingLayerOptions::new())?;
    assert!(!frozen.weight.tensor().requires_grad());
    assert!(Embedding::from_pretrained(&w.reshape([-1])?, true, EmbeddingLayerOptions::new()).is_err());
    for bad in [10, -11] {
        assert!(Embedding::with_options(10, 3, EmbeddingLayerOptions::new().padding_idx(bad)).is_err());
    }
    for (idx, want) in [(0, 0), (9, 9), (-1, 9), (-10, 0)] {
        let e = Embedding::with_options(10, 3, EmbeddingLayerOptions::new().padding_idx(idx))?;
        assert_eq!(e.padding_idx(), Some(want));
    }
    Ok(())
}

#[test]
fn norms_activations_and_shape_layers_match_pytorch() -> Result<()> {
    let _rng = rng_lock(); // dropout in training draws
    let c = layer("groupnorm_2d");
    let gn = GroupNorm::with_options(2, 4, GroupNormOptions::new().eps(0.25))?;
    check_close("groupnorm 2d", &gn.call(&tensor_of(&c["x"]))?, &c["out"]);
    let c = layer("rmsnorm");
    let o = RmsNormOptions::new().eps(0.5).elementwise_affine(false);
    check_close(
        "rmsnorm",
        &RMSNorm::with_options([2, 3], o)?.call(&tensor_of(&c["x"]))?,
        &c["out"],
    );
    let c = layer("layernorm_exact");
    let ln = LayerNorm::with_options([3, 4], LayerNormOptions::new().eps(1e-3))?;
    check_close("layernorm", &ln.call(&tensor_of(&c["x"]))?, &c["out"]);
    check_close(
        "layernorm batched",
        &ln.call(&tensor_of(&c["x"]).unsqueeze(0)?)?.squeeze_dim(0)?,
        &c["out"],
    );

    let c = layer("batchnorm_counts");
    let bn = BatchNorm1d::with_options(3, BatchNormLayerOptions::new().momentum(None))?;
    let x = tensor_of(&c["x"]);
    let nbt = || bn.num_batches_tracked.as_ref().unwrap().tensor().item::<i64>().unwrap();
    bn.eval();
    bn.call(&x)?;
    assert_eq!(nbt(), c["nbt_eval"].as_i64().unwrap());
    bn.train();
    bn.call(&x)?;
    bn.call(&x.mul(2.0)?)?;
    assert_eq!(nbt(), c["nbt_train"].as_i64().unwrap());
    check_close(
        "running_mean",
        &bn.running_mean.as_ref().unwrap().tensor(),
        &c["running_mean"],
    );
    check_close(
        "running_var",
        &bn.running_var.as_ref().unwrap().tensor(),
        &c["running_var"],
    );

    // Running stats a user sets on a layer built without them: used in
    // eval, left alone in training; eval without running_var is an error.
    let c = layer("batchnorm_user_stats");
    let mut bn = BatchNorm1d::with_options(3, BatchNormLayerOptions::new().track_running_stats(false))?;
    bn.running_mean = Some(Buffer::new(tensor_of(&c["mean"])));
    bn.running_var = Some(Buffer::new(tensor_of(&c["var"])));
    let x = tensor_of(&c["x"]);
    bn.eval();
    check_close("user stats eval", &bn.call(&x)?, &c["eval"]);
    bn.train();
    check_close("user stats train", &bn.call(&x)?, &c["train"]);
    check_exact(
        "user mean after",
        &bn.running_mean.as_ref().unwrap().tensor(),
        &c["mean_after"],
    );
    check_exact(
        "user var after",
        &bn.running_var.as_ref().unwrap().tensor(),
        &c["var_after"],
    );
    let mut bn = BatchNorm1d::new(3)?;
    bn.running_var = None;
    bn.eval();
    assert!(bn.call(&x).is_err());

    let c = layer("leaky_relu");
    check_exact("leaky_relu", &LeakyReLU::new(0.2).call(&tensor_of(&c["x"]))?, &c["out"]);
    let c = layer("gelu_tanh");
    check_close(
        "gelu tanh",
        &Gelu::with_approximate(GeluApproximate::Tanh).call(&tensor_of(&c["x"]))?,
        &c["out"],
    );
    let c = layer("flatten");
    check_exact(
        "flatten",
        &Flatten::with_dims(0, 1).call(&tensor_of(&c["x"]))?,
        &c["out"],
    );
    let c = layer("unflatten");
    check_exact(
        "unflatten",
        &Unflatten::new(-1, vec![2, 3]).call(&tensor_of(&c["x"]))?,
        &c["out"],
    );
    let c = layer("adaptive_max");
    let x = tensor_of(&c["x"]);
    let (v, i) = AdaptiveMaxPool2d::new([2, 3]).forward_with_indices(&x)?;
    check_exact("adaptive max", &v, &c["values"]);
    check_exact("adaptive max indices", &i, &c["indices"]);
    check_exact(
        "adaptive max forward",
        &AdaptiveMaxPool2d::new([2, 3]).call(&x)?,
        &c["values"],
    );
    check_close("adaptive avg", &AdaptiveAvgPool2d::new([2, 3]).call(&x)?, &c["avg"]);

    // Dropout: identity in eval, every element dropped at p = 1 in training.
    let d = Dropout::new(1.0)?;
    let x = tensor_of(&layer("leaky_relu")["x"]);
    d.eval();
    assert_eq!(values(&d.call(&x)?), values(&x));
    d.train();
    assert!(values(&d.call(&x)?).iter().all(|&v| v == 0.0));
    Ok(())
}

#[test]
fn losses_match_pytorch_at_non_default_options() -> Result<()> {
    let c = &data()["losses"];
    let logits = tensor_of(&c["logits"]);
    let target = Tensor::new([0i64, 2, -100, 1])?;
    let t2 = Tensor::new([0i64, 2, 1, 1])?;
    let w = Tensor::new([0.5f32, 1.0, 2.0])?;
    let ce = CrossEntropyLoss::new();
    assert_eq!(ce.ignore_index, -100);
    let close = |what: &str, got: Tensor, want: f64| {
        let g = got.item::<f32>().unwrap() as f64;
        assert!((g - want).abs() <= 1e-6 * want.abs().max(1.0), "{what}: {g} vs {want}");
    };
    close(
        "ce call",
        ce.call(&logits, &target)?,
        c["ce_default_ignore"].as_f64().unwrap(),
    );
    close(
        "ce forward",
        ce.forward(&logits, &target)?,
        c["ce_default_ignore"].as_f64().unwrap(),
    );
    let o = ClassLossOptions::new()
        .weight(w.clone())
        .ignore_index(1)
        .reduction(Reduction::Sum)
        .label_smoothing(0.2);
    let ce = CrossEntropyLoss::with_options(o);
    check_close("ce all", &ce.call(&logits, &t2)?, &c["ce_all"]);
    check_close("ce all forward", &ce.forward(&logits, &t2)?, &c["ce_all"]);

    let logp = logits.log_softmax(1)?;
    let nll = NLLLoss::new();
    assert_eq!(nll.ignore_index, -100);
    close(
        "nll call",
        nll.call(&logp, &target)?,
        c["nll_default_ignore"].as_f64().unwrap(),
    );
    close(
        "nll forward",
        nll.forward(&logp, &target)?,
        c["nll_default_ignore"].as_f64().unwrap(),
    );
    let o = ClassLossOptions::new()
        .weight(w.clone())
        .ignore_index(2)
        .reduction(Reduction::None);
    let nll = NLLLoss::with_options(o);
    check_close("nll all", &nll.call(&logp, &t2)?, &c["nll_all"]);
    check_close("nll all forward", &nll.forward(&logp, &t2)?, &c["nll_all"]);

    let (p, y) = (tensor_of(&c["p"]), tensor_of(&c["y"]));
    let bce = BCELoss::with_options(Some(w.clone()), Reduction::Sum);
    check_close("bce", &bce.call(&p, &y)?, &c["bce_weight"]);
    check_close("bce forward", &bce.forward(&p, &y)?, &c["bce_weight"]);
    let pw = Tensor::new([2.0f32, 0.5, 1.0])?;
    let bcel = BCEWithLogitsLoss::with_options(Some(w), Reduction::None, Some(pw));
    check_close("bce logits", &bcel.call(&logits, &y)?, &c["bce_logits"]);
    check_close("bce logits forward", &bcel.forward(&logits, &y)?, &c["bce_logits"]);
    let q = tensor_of(&c["q"]);
    let kl = KLDivLoss::with_options(KlDivReduction::BatchMean, true);
    check_close("kl", &kl.call(&logp, &q)?, &c["kl_log_target"]);
    check_close("kl forward", &kl.forward(&logp, &q)?, &c["kl_log_target"]);
    let s = SmoothL1Loss::with_reduction(Reduction::Sum).beta(0.5);
    check_close("smooth l1", &s.call(&logits, &q)?, &c["smooth_l1_beta"]);
    let h = HuberLoss::with_reduction(Reduction::None).delta(0.3);
    check_close("huber", &h.forward(&logits, &q)?, &c["huber_delta"]);
    // An error from the loss names the loss.
    assert!(err(BCELoss::new().call(&p, &y.reshape([-1])?)).contains("BCELoss"));
    Ok(())
}

#[test]
fn layers_refuse_inputs_and_options_pytorch_refuses() -> Result<()> {
    let _rng = rng_lock();
    let c1 = Conv1d::new(4, 2, 3)?;
    assert!(c1.call(&Tensor::zeros([4, 5])?).is_ok());
    assert!(c1.call(&Tensor::zeros([1, 4, 5])?).is_ok());
    for bad in [vec![1usize, 3, 5], vec![3, 5], vec![5], vec![1, 1, 4, 5]] {
        let e = err(c1.call(&Tensor::zeros(&bad[..])?));
        assert!(e.contains("expected input [N, 4, L]") && e.contains(&c1.repr()), "{e}");
    }
    let c2 = Conv2d::new(2, 2, 1)?;
    assert!(c2.call(&Tensor::zeros([2, 3, 3])?).is_ok());
    let e = err(c2.call(&Tensor::zeros([1, 3, 3, 3])?));
    assert!(e.contains("expected input [N, 2, H, W]"), "{e}");
    assert!(c2.call(&Tensor::zeros([3, 3])?).is_err());
    let t1 = ConvTranspose1d::new(3, 2, 2)?;
    assert!(t1.call(&Tensor::zeros([3, 4])?).is_ok());
    assert!(t1.call(&Tensor::zeros([2, 4])?).is_err());
    assert!(Conv2d::new(2, 2, [1, 2, 3]).is_err());
    assert!(Conv1d::with_options(2, 2, 3, ConvLayerOptions::new().padding([1, 1])).is_err());
    assert!(Conv2d::with_options(2, 2, 3, ConvLayerOptions::new().stride([1, 1, 1])).is_err());
    assert!(Conv2d::with_options(2, 2, 3, ConvLayerOptions::new().dilation([1, 2])).is_ok());

    let ln = LayerNorm::new([3, 4])?;
    assert!(ln.call(&Tensor::zeros([4])?).is_err());
    assert!(ln.call(&Tensor::zeros([2, 4, 3])?).is_err());
    assert!(ln.call(&Tensor::zeros([2, 3, 4])?).is_ok());
    let rms = RMSNorm::new(4)?;
    assert!(rms.call(&Tensor::zeros([2, 3])?).is_err());
    assert!(rms.call(&Tensor::zeros([4])?).is_ok());

    assert!(GroupNorm::new(0, 4).is_err());
    assert!(GroupNorm::new(3, 4).is_err());
    let gn = GroupNorm::new(2, 4)?;
    assert!(gn.call(&Tensor::zeros([4])?).is_err());
    let e = err(gn.call(&Tensor::zeros([2, 6, 3])?));
    assert!(e.contains(&gn.repr()), "{e}");
    assert!(gn.call(&Tensor::zeros([2, 4])?).is_ok());

    let bl = Bilinear::new(2, 3, 4)?;
    assert!(bl.call(&Tensor::zeros([5, 2])?, &Tensor::zeros([5, 3])?).is_ok());
    assert!(bl.forward(&Tensor::zeros([2])?, &Tensor::zeros([3])?).is_ok());
    for (a, b) in [([5, 3], [5, 3]), ([5, 2], [5, 2]), ([5, 2], [4, 3])] {
        let e = err(bl.call(&Tensor::zeros(a)?, &Tensor::zeros(b)?));
        assert!(e.contains(&bl.repr()), "{e}");
        assert!(bl.forward(&Tensor::zeros(a)?, &Tensor::zeros(b)?).is_err());
    }
    let lin = Linear::new(3, 2)?;
    assert!(err(lin.call(&Tensor::zeros([2, 2])?)).contains(&lin.repr()));
    Ok(())
}
