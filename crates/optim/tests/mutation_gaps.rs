//! Paths of the schedulers and optimizers that the full-run tests do not
//! reach: the closed forms at any epoch, ReduceLROnPlateau at exactly its
//! thresholds and `eps`, per-group length errors (PyTorch 2.15's values,
//! `tests/data/mutation_gaps.json`, written by `tests/gen_mutation_gaps.py`);
//! state dicts loaded into a scheduler built with other arguments (PyTorch's
//! `__dict__.update`: the loaded scheduler is the saved one), and the
//! accessors of optimizers and schedulers.

mod common;

use common::data;
use ferrotorch::Tensor;
use ferrotorch::nn::Parameter;
use ferrotorch::optim::lr_scheduler::{
    AnnealStrategy, CosineAnnealingLR, ExponentialLR, LinearLR, LrScheduler, MultiStepLR, OneCycleLR,
    OneCycleLrOptions, PerGroup, PlateauMode, ReduceLROnPlateau, ReduceLrOnPlateauOptions, SequentialLR, StepLR,
    ThresholdMode,
};
use ferrotorch::optim::{
    Adagrad, AdagradOptions, Adam, AdamOptions, AdamW, AdamWOptions, Algorithm, GradScaler, GradScalerOptions, Optim,
    Optimizer, RMSprop, RmsPropOptions, SGD, SgdOptions, Value,
};
use serde_json::Value as Json;

fn sgd(lrs: &[f64]) -> SGD {
    let d = SgdOptions::new().lr(lrs[0]).momentum(0.9);
    let groups: Vec<_> = lrs
        .iter()
        .map(|&lr| {
            (
                vec![Parameter::new(Tensor::zeros([2]).unwrap()).unwrap()],
                d.clone().lr(lr),
            )
        })
        .collect();
    SGD::with_groups(groups, d).unwrap()
}

fn adam(lrs: &[f64]) -> Adam {
    let d = AdamOptions::new().lr(lrs[0]);
    let groups: Vec<_> = lrs
        .iter()
        .map(|&lr| {
            (
                vec![Parameter::new(Tensor::zeros([2]).unwrap()).unwrap()],
                d.clone().lr(lr),
            )
        })
        .collect();
    Adam::with_groups(groups, d).unwrap()
}

fn floats(v: &Json) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

fn bits(x: &[f64]) -> Vec<u64> {
    x.iter().map(|v| v.to_bits()).collect()
}

fn momenta(opt: &dyn Optimizer) -> Vec<f64> {
    (0..opt.num_param_groups())
        .map(|g| match opt.hyperparameter(g, "betas") {
            Some(b) => b.as_seq().unwrap()[0].as_f64().unwrap(),
            None => opt.hyperparameter(g, "momentum").unwrap().as_f64().unwrap(),
        })
        .collect()
}

/// `scheduler._update_lr(epoch)` (ferrotorch's `update_lr_at`) at epochs
/// past 0, in any order: PyTorch's closed forms, bit for bit.
#[test]
fn closed_forms_at_any_epoch_are_pytorchs() {
    let file = data("mutation_gaps.json");
    for case in file["closed_form"].as_array().unwrap() {
        let kind = case["scheduler"].as_str().unwrap();
        let c = &case["config"];
        let mut opt = sgd(&floats(&case["lrs"]));
        let o = &mut opt;
        let mut s: Box<dyn LrScheduler> = match kind {
            "StepLR" => Box::new(StepLR::new(o, 3, 0.5).unwrap()),
            "MultiStepLR" => Box::new(MultiStepLR::new(o, &[2, 5, 5, 9], 0.3).unwrap()),
            "ExponentialLR" => Box::new(ExponentialLR::new(o, 0.9).unwrap()),
            "CosineAnnealingLR" => Box::new(CosineAnnealingLR::new(o, 10, 0.01).unwrap()),
            "LinearLR" => Box::new(LinearLR::new(o, 0.25, 0.75, 8).unwrap()),
            other => panic!("{other}"),
        };
        assert!(c.is_object());
        for step in case["steps"].as_array().unwrap() {
            let e = step["epoch"].as_i64().unwrap();
            s.update_lr_at(o, e).unwrap();
            assert_eq!(bits(&o.lrs()), bits(&floats(&step["lr"])), "{kind} at epoch {e}");
            assert_eq!(
                bits(s.get_last_lr()),
                bits(&floats(&step["last_lr"])),
                "{kind} at epoch {e}"
            );
            assert_eq!(
                s.last_epoch(),
                step["last_epoch"].as_i64().unwrap(),
                "{kind} at epoch {e}"
            );
        }
    }
}

/// CosineAnnealingLR loaded with `last_epoch = -1` and `_step_count = 0`
/// and stepped: its first step is at epoch 0 with a step count of 1, which
/// PyTorch computes in the chainable form (not the closed form of a
/// restart past epoch 0).
#[test]
fn cosine_annealing_stepped_to_epoch_zero_after_a_load() {
    let file = data("mutation_gaps.json");
    let c = &file["cosine_epoch0_restart"];
    let mut opt = sgd(&[c["lr"].as_f64().unwrap()]);
    let mut s = CosineAnnealingLR::new(&mut opt, c["T_max"].as_i64().unwrap(), c["eta_min"].as_f64().unwrap()).unwrap();
    let mut sd = s.state_dict();
    sd.insert("last_epoch", -1i64);
    sd.insert("_step_count", 0i64);
    s.load_state_dict(&sd).unwrap();
    for (k, want) in c["lrs"].as_array().unwrap().iter().enumerate() {
        s.step(&mut opt).unwrap();
        assert_eq!(bits(&opt.lrs()), bits(&floats(want)), "step {k}");
    }
}

fn plateau_options(c: &Json) -> ReduceLrOnPlateauOptions {
    let mut o = ReduceLrOnPlateauOptions::default();
    for (k, v) in c.as_object().unwrap() {
        match k.as_str() {
            "mode" => o.mode = if v == "max" { PlateauMode::Max } else { PlateauMode::Min },
            "threshold_mode" => {
                o.threshold_mode = if v == "abs" {
                    ThresholdMode::Abs
                } else {
                    ThresholdMode::Rel
                }
            }
            "threshold" => o.threshold = v.as_f64().unwrap(),
            "patience" => o.patience = v.as_i64().unwrap(),
            "cooldown" => o.cooldown = v.as_i64().unwrap(),
            "factor" => o.factor = v.as_f64().unwrap(),
            "eps" => o.eps = v.as_f64().unwrap(),
            "min_lr" => o.min_lr = v.as_f64().unwrap().into(),
            other => panic!("plateau option {other}"),
        }
    }
    o
}

/// ReduceLROnPlateau with metrics exactly at the threshold of each mode
/// (not an improvement), with cooldown, and with reductions equal to or
/// smaller than `eps` (skipped): PyTorch's rates, best values and counters
/// after every step.
#[test]
fn plateau_thresholds_cooldown_and_eps_are_pytorchs() {
    let file = data("mutation_gaps.json");
    for case in file["plateau"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let mut opt = sgd(&[case["lr"].as_f64().unwrap()]);
        let mut s = ReduceLROnPlateau::new(&mut opt, plateau_options(&case["config"])).unwrap();
        for (k, (m, want)) in floats(&case["metrics"])
            .into_iter()
            .zip(case["steps"].as_array().unwrap())
            .enumerate()
        {
            s.step(&mut opt, m).unwrap();
            let what = format!("{name} step {k}");
            assert_eq!(bits(&opt.lrs()), bits(&floats(&want["lr"])), "{what}");
            assert_eq!(bits(s.get_last_lr()), bits(&floats(&want["lr"])), "{what}");
            assert_eq!(s.best(), want["best"].as_f64().unwrap(), "{what}");
            assert_eq!(s.num_bad_epochs(), want["num_bad_epochs"].as_i64().unwrap(), "{what}");
            assert_eq!(s.last_epoch(), want["last_epoch"].as_i64().unwrap(), "{what}");
            let sd = s.state_dict();
            assert_eq!(
                sd.get("cooldown_counter").and_then(Value::as_i64),
                want["cooldown_counter"].as_i64(),
                "{what}"
            );
        }
    }
}

/// Per-group lists of the wrong length: PyTorch's messages.
#[test]
fn per_group_lists_of_the_wrong_length_are_refused_with_pytorchs_messages() {
    let file = data("mutation_gaps.json");
    let e = &file["errors"];
    let msg = |r: Result<(), ferrotorch::optim::Error>| r.unwrap_err().to_string();
    let mut one = sgd(&[0.1]);
    let mut two = sgd(&[0.1, 0.2]);
    let base = OneCycleLrOptions::new().max_lr(PerGroup::All(0.1)).total_steps(10);
    assert_eq!(
        msg(OneCycleLR::new(&mut one, base.clone().max_lr(PerGroup::Each(vec![0.1, 0.2]))).map(drop)),
        e["onecycle_max_lr"].as_str().unwrap()
    );
    assert_eq!(
        msg(OneCycleLR::new(
            &mut two,
            base.clone().max_momentum(PerGroup::Each(vec![0.9, 0.95, 0.99]))
        )
        .map(drop)),
        e["onecycle_max_momentum"].as_str().unwrap()
    );
    assert_eq!(
        msg(OneCycleLR::new(&mut two, base.clone().base_momentum(PerGroup::Each(vec![0.8]))).map(drop)),
        e["onecycle_base_momentum"].as_str().unwrap()
    );
    assert_eq!(
        msg(ReduceLROnPlateau::new(
            &mut one,
            ReduceLrOnPlateauOptions::new().min_lr(PerGroup::Each(vec![0.1, 0.2]))
        )
        .map(drop)),
        e["plateau_min_lr"].as_str().unwrap()
    );
}

/// Saves `src` after 5 steps, loads it (with the optimizer's state) into
/// `dst`, built with other arguments, and checks what PyTorch's
/// `load_state_dict` (`__dict__.update`) gives: the loaded scheduler's state
/// dict is the saved one, and it goes on exactly as the saved one.
fn load_into_other<O: Optimizer>(
    what: &str,
    make_opt: impl Fn() -> O,
    src: impl FnOnce(&mut O) -> Box<dyn LrScheduler>,
    dst: impl FnOnce(&mut O) -> Box<dyn LrScheduler>,
    steps: usize,
) {
    let mut a = make_opt();
    let mut sa = src(&mut a);
    for _ in 0..5 {
        sa.step(&mut a).unwrap();
    }
    let saved = sa.state_dict();
    let mut b = make_opt();
    let mut sb = dst(&mut b);
    assert!(
        !sb.state_dict().same(&saved),
        "{what}: the configurations should differ"
    );
    b.load_state_dict(&a.state_dict()).unwrap();
    sb.load_state_dict(&saved).unwrap();
    assert!(
        sb.state_dict().same(&saved),
        "{what}: {:?}\nwant {saved:?}",
        sb.state_dict()
    );
    assert_eq!(sb.last_epoch(), sa.last_epoch(), "{what}");
    assert_eq!(bits(sb.get_last_lr()), bits(sa.get_last_lr()), "{what}");
    for k in 0..steps {
        sa.step(&mut a).unwrap();
        sb.step(&mut b).unwrap();
        assert_eq!(bits(&b.lrs()), bits(&a.lrs()), "{what} step {k}");
        assert_eq!(bits(&momenta(&b)), bits(&momenta(&a)), "{what} step {k}");
    }
}

#[test]
fn a_state_dict_loaded_into_a_scheduler_built_otherwise_replaces_its_arguments() {
    let two = || sgd(&[0.1, 0.05]);
    load_into_other(
        "StepLR",
        two,
        |o| Box::new(StepLR::new(o, 3, 0.5).unwrap()),
        |o| Box::new(StepLR::new(o, 7, 0.9).unwrap()),
        20,
    );
    load_into_other(
        "MultiStepLR",
        two,
        |o| Box::new(MultiStepLR::new(o, &[6, 8, 8, 12], 0.3).unwrap()),
        |o| Box::new(MultiStepLR::new(o, &[7], 0.5).unwrap()),
        20,
    );
    load_into_other(
        "ExponentialLR",
        two,
        |o| Box::new(ExponentialLR::new(o, 0.9).unwrap()),
        |o| Box::new(ExponentialLR::new(o, 0.5).unwrap()),
        20,
    );
    load_into_other(
        "CosineAnnealingLR",
        two,
        |o| Box::new(CosineAnnealingLR::new(o, 10, 0.01).unwrap()),
        |o| Box::new(CosineAnnealingLR::new(o, 25, 0.0).unwrap()),
        30,
    );
    load_into_other(
        "LinearLR",
        two,
        |o| Box::new(LinearLR::new(o, 0.25, 0.75, 12).unwrap()),
        |o| Box::new(LinearLR::new(o, 0.5, 1.0, 3).unwrap()),
        20,
    );
    load_into_other(
        "OneCycleLR",
        two,
        |o| {
            let c = OneCycleLrOptions::new()
                .max_lr(PerGroup::All(0.2))
                .total_steps(50)
                .pct_start(0.4)
                .anneal_strategy(AnnealStrategy::Linear)
                .div_factor(5.0)
                .final_div_factor(50.0);
            Box::new(OneCycleLR::new(o, c).unwrap())
        },
        |o| Box::new(OneCycleLR::new(o, OneCycleLrOptions::new().max_lr(PerGroup::All(0.1)).total_steps(30)).unwrap()),
        45,
    );
    load_into_other(
        "OneCycleLR cos into linear",
        two,
        |o| Box::new(OneCycleLR::new(o, OneCycleLrOptions::new().max_lr(PerGroup::All(0.1)).total_steps(40)).unwrap()),
        |o| {
            let c = OneCycleLrOptions::new()
                .max_lr(PerGroup::All(0.3))
                .total_steps(40)
                .anneal_strategy(AnnealStrategy::Linear);
            Box::new(OneCycleLR::new(o, c).unwrap())
        },
        35,
    );
    // Momentum cycled on Adam's beta1 (`use_beta1`), loaded into a schedule
    // that did not cycle it.
    load_into_other(
        "OneCycleLR beta1",
        || adam(&[0.01]),
        |o| {
            let c = OneCycleLrOptions::new()
                .max_lr(PerGroup::All(0.01))
                .total_steps(30)
                .three_phase(true);
            Box::new(OneCycleLR::new(o, c).unwrap())
        },
        |o| {
            let c = OneCycleLrOptions::new()
                .max_lr(PerGroup::All(0.05))
                .total_steps(30)
                .three_phase(true)
                .cycle_momentum(false);
            Box::new(OneCycleLR::new(o, c).unwrap())
        },
        25,
    );
}

/// Every key of ReduceLROnPlateau's state dict is loaded (PyTorch's
/// `__dict__.update`), whatever the loading one was built with.
#[test]
fn a_plateau_state_dict_loaded_into_one_built_otherwise_replaces_every_key() {
    let configs = [
        (
            ReduceLrOnPlateauOptions::new()
                .mode(PlateauMode::Max)
                .threshold_mode(ThresholdMode::Abs)
                .threshold(0.1)
                .factor(0.5)
                .patience(1)
                .cooldown(3)
                .min_lr(PerGroup::Each(vec![0.01]))
                .eps(1e-3),
            ReduceLrOnPlateauOptions::default(),
            // Saved two epochs into a cooldown.
            vec![0.0, 0.05, 0.05, 0.05],
        ),
        (
            ReduceLrOnPlateauOptions::new()
                .threshold(0.2)
                .factor(0.25)
                .patience(2)
                .cooldown(1)
                .min_lr(PerGroup::All(0.002))
                .eps(1e-4),
            ReduceLrOnPlateauOptions::new()
                .mode(PlateauMode::Max)
                .threshold_mode(ThresholdMode::Abs)
                .min_lr(PerGroup::Each(vec![0.5]))
                .patience(5),
            // Saved with a bad epoch counted.
            vec![1.0, 0.9, 0.95, 0.97, 0.99, 0.5, 0.6],
        ),
    ];
    for (k, (src, dst, metrics)) in configs.into_iter().enumerate() {
        let mut a = sgd(&[0.1]);
        let mut sa = ReduceLROnPlateau::new(&mut a, src).unwrap();
        for &m in &metrics {
            sa.step(&mut a, m).unwrap();
        }
        let saved = sa.state_dict();
        let nonzero = |k: &str| saved.get(k).and_then(Value::as_i64).is_some_and(|n| n != 0);
        assert!(nonzero(["cooldown_counter", "num_bad_epochs"][k]), "{saved:?}");
        let mut b = sgd(&[0.1]);
        let mut sb = ReduceLROnPlateau::new(&mut b, dst).unwrap();
        assert!(!sb.state_dict().same(&saved));
        b.load_state_dict(&a.state_dict()).unwrap();
        sb.load_state_dict(&saved).unwrap();
        assert!(
            sb.state_dict().same(&saved),
            "{k}: {:?}\nwant {saved:?}",
            sb.state_dict()
        );
        assert_eq!(sb.get_last_lr(), sa.get_last_lr());
        for m in [0.4, 0.4, 0.4, 0.45, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2] {
            sa.step(&mut a, m).unwrap();
            sb.step(&mut b, m).unwrap();
            assert_eq!(bits(&b.lrs()), bits(&a.lrs()), "{k}");
            assert_eq!(
                (sb.best(), sb.num_bad_epochs()),
                (sa.best(), sa.num_bad_epochs()),
                "{k}"
            );
        }
    }
}

/// `last_epoch()` of a SequentialLR counts its steps (0 after
/// construction), and the schedulers' `Debug` forms name them.
#[test]
fn sequential_last_epoch_and_debug_forms() {
    let mut opt = sgd(&[0.1]);
    let o = &mut opt;
    let warmup = LinearLR::new(o, 0.5, 1.0, 3).unwrap();
    let decay = ExponentialLR::new(o, 0.9).unwrap();
    assert!(format!("{warmup:?}").starts_with("Scheduler { base: SchedulerBase { base_lrs: [0.1], last_epoch: 0"));
    let mut s = SequentialLR::new(o, vec![Box::new(warmup), Box::new(decay)], vec![3]).unwrap();
    assert_eq!(s.last_epoch(), 0);
    for k in 1..=5 {
        s.step(o).unwrap();
        assert_eq!(s.last_epoch(), k);
    }
    assert!(
        format!("{s:?}").starts_with("SequentialLR { milestones: [3], last_epoch: 5, last_lr: ["),
        "{s:?}"
    );
}

/// `name()` is PyTorch's class name.
#[test]
fn optimizer_names_are_pytorchs_class_names() {
    let p = || vec![Parameter::new(Tensor::zeros([2]).unwrap()).unwrap()];
    assert_eq!(SGD::new(p(), SgdOptions::default()).unwrap().name(), "SGD");
    assert_eq!(Adam::new(p(), AdamOptions::default()).unwrap().name(), "Adam");
    assert_eq!(AdamW::new(p(), AdamWOptions::default()).unwrap().name(), "AdamW");
    assert_eq!(RMSprop::new(p(), RmsPropOptions::default()).unwrap().name(), "RMSprop");
    assert_eq!(Adagrad::new(p(), AdagradOptions::default()).unwrap().name(), "Adagrad");
}

/// A group's `params()`, `state(index)` numbered over all groups in order
/// (`None` for a parameter not stepped yet), and the index of a parameter
/// in a load error.
#[test]
fn group_params_state_indices_and_load_error_indices() {
    let ps: Vec<Parameter> = (0..4)
        .map(|k| Parameter::new(Tensor::from_vec(vec![k as f32, 1.0], [2]).unwrap()).unwrap())
        .collect();
    let mut opt = Adam::with_groups(
        vec![
            (vec![ps[0].clone()], AdamOptions::new().lr(0.1)),
            (vec![ps[1].clone(), ps[2].clone(), ps[3].clone()], AdamOptions::new()),
        ],
        AdamOptions::default(),
    )
    .unwrap();
    let groups = opt.param_groups();
    assert_eq!(groups[0].params().len(), 1);
    assert!(groups[0].params()[0].same_as(&ps[0]));
    assert_eq!(groups[1].params().len(), 3);
    for (q, p) in groups[1].params().iter().zip(&ps[1..]) {
        assert!(q.same_as(p));
    }
    for k in [0, 2] {
        ps[k]
            .tensor()
            .set_grad(Some(Tensor::from_vec(vec![0.5f32, -1.0], [2]).unwrap()))
            .unwrap();
    }
    opt.step().unwrap();
    let stepped: Vec<bool> = (0..5).map(|i| opt.state(i).is_some()).collect();
    assert_eq!(stepped, [true, false, true, false, false]);

    // The state of the second parameter of the second group is parameter 2.
    let mut sd = opt.state_dict();
    sd.state.get_mut(&2).unwrap().remove("step").unwrap();
    let e = opt.load_state_dict(&sd).unwrap_err().to_string();
    assert_eq!(e, "state of parameter 2 has no \"step\"");
}

/// Keys that are options of the optimizer but not hyperparameters
/// ferrotorch varies (`foreach`, `differentiable`, `fused`, `capturable`)
/// are taken as the optimizer's own, not kept as extra keys of the group;
/// other keys (`initial_lr`, what schedulers write) are extra keys, saved
/// after the options.
fn fixed_keys_are_options<A: Algorithm>(mut opt: Optim<A>) {
    let name = opt.name();
    let fixed: Vec<&str> = ["foreach", "differentiable", "fused", "capturable"]
        .into_iter()
        .filter(|k| opt.hyperparameter(0, k).is_some())
        .collect();
    assert!(fixed.len() >= 3, "{name}: {fixed:?}");
    for k in &fixed {
        let v = opt.hyperparameter(0, k).unwrap();
        opt.set_hyperparameter(0, k, v).unwrap();
    }
    assert!(
        opt.param_groups()[0].extra.is_empty(),
        "{name}: {:?}",
        opt.param_groups()[0].extra
    );
    opt.set_hyperparameter(0, "initial_lr", Value::Float(0.5)).unwrap();
    assert_eq!(
        opt.hyperparameter(0, "initial_lr").and_then(|v| v.as_f64()),
        Some(0.5),
        "{name}"
    );
    let sd = opt.state_dict();
    let n = sd.param_groups[0].options.len();
    assert_eq!(sd.param_groups[0].options.keys().last(), Some("initial_lr"), "{name}");
    // Loading a state dict sorts its keys the same way.
    opt.load_state_dict(&sd).unwrap();
    let extra: Vec<&str> = opt.param_groups()[0].extra.keys().collect();
    assert_eq!(extra, ["initial_lr"], "{name}");
    assert_eq!(opt.state_dict().param_groups[0].options.len(), n, "{name}");
}

#[test]
fn fixed_option_keys_are_not_extra_keys() {
    let p = || vec![Parameter::new(Tensor::zeros([2]).unwrap()).unwrap()];
    fixed_keys_are_options(SGD::new(p(), SgdOptions::default()).unwrap());
    fixed_keys_are_options(Adam::new(p(), AdamOptions::default()).unwrap());
    fixed_keys_are_options(AdamW::new(p(), AdamWOptions::default()).unwrap());
    fixed_keys_are_options(RMSprop::new(p(), RmsPropOptions::default()).unwrap());
    fixed_keys_are_options(Adagrad::new(p(), AdagradOptions::default()).unwrap());
}

/// One scaler for two optimizers (PyTorch's multi-optimizer AMP recipe):
/// each is unscaled and stepped once per iteration, an inf in one skips
/// only its step and backs the scale off; a disabled scaler passes every
/// call through.
#[test]
fn one_grad_scaler_for_two_optimizers() {
    let one = |g: &[f32]| {
        let p = Parameter::new(Tensor::zeros([g.len()]).unwrap()).unwrap();
        p.tensor().set_grad(Some(Tensor::new(g.to_vec()).unwrap())).unwrap();
        let opt = SGD::new(vec![p.clone()], SgdOptions::new().lr(0.5)).unwrap();
        (p, opt)
    };
    let mut scaler = GradScaler::new(GradScalerOptions::new().init_scale(4.0)).unwrap();
    let (p1, mut o1) = one(&[4.0, 8.0]);
    let (p2, mut o2) = one(&[8.0, -4.0]);
    scaler.unscale_(&mut o1).unwrap();
    assert_eq!(p1.grad().unwrap().to_vec::<f32>().unwrap(), [1.0, 2.0]);
    assert!(scaler.step(&mut o1).unwrap());
    assert!(scaler.step(&mut o2).unwrap());
    assert_eq!(p1.tensor().to_vec::<f32>().unwrap(), [-0.5, -1.0]);
    assert_eq!(p2.tensor().to_vec::<f32>().unwrap(), [-1.0, 0.5]);
    scaler.update().unwrap();
    assert_eq!((scaler.get_scale(), scaler.growth_tracker()), (4.0, 1));

    let (p3, mut o3) = one(&[4.0, f32::INFINITY]);
    let (p4, mut o4) = one(&[4.0, 4.0]);
    assert!(!scaler.step(&mut o3).unwrap());
    assert!(scaler.step(&mut o4).unwrap());
    assert_eq!(p3.tensor().to_vec::<f32>().unwrap(), [0.0, 0.0]);
    assert_eq!(p4.tensor().to_vec::<f32>().unwrap(), [-0.5, -0.5]);
    scaler.update().unwrap();
    assert_eq!((scaler.get_scale(), scaler.growth_tracker()), (2.0, 0));

    let mut off = GradScaler::new(GradScalerOptions::new().enabled(false)).unwrap();
    let (p5, mut o5) = one(&[4.0, 8.0]);
    off.unscale_(&mut o5).unwrap();
    assert_eq!(p5.grad().unwrap().to_vec::<f32>().unwrap(), [4.0, 8.0]);
    off.update().unwrap();
    off.load_state_dict(&ferrotorch::optim::Dict::new()).unwrap();
    assert_eq!(off.get_scale(), 1.0);
}

/// A step error names the parameter by its index over all groups (the
/// fourth parameter, second of the second group, is parameter 3), and
/// `defaults()` are the options the optimizer was built with.
#[test]
fn step_errors_index_parameters_over_all_groups() {
    let ok = || Parameter::new(Tensor::zeros([2]).unwrap()).unwrap();
    let half = Parameter::new(Tensor::zeros([2]).unwrap().to_dtype(ferrotorch::DType::F16).unwrap()).unwrap();
    let ps = [ok(), ok(), ok(), half];
    for p in &ps {
        p.tensor().set_grad(Some(p.tensor().ones_like().unwrap())).unwrap();
    }
    let d = SgdOptions::new().lr(0.25).momentum(0.5);
    let mut opt = SGD::with_groups(
        vec![
            (vec![ps[0].clone(), ps[1].clone()], d.clone()),
            (vec![ps[2].clone(), ps[3].clone()], d.clone().lr(0.5)),
        ],
        d,
    )
    .unwrap();
    assert_eq!((opt.defaults().lr, opt.defaults().momentum), (0.25, 0.5));
    let e = opt.step().unwrap_err().to_string();
    assert!(e.starts_with("SGD: parameter 3: "), "{e}");
    assert!(e.contains("float16"), "{e}");
}

/// Loading checks that the state a group's options need is there
/// (`max_exp_avg_sq` with amsgrad, RMSprop's `momentum_buffer` with a
/// momentum and `grad_avg` when centered), and keeps optional state that
/// is there although the options do not need it (PyTorch's state dict
/// keeps every key).
#[test]
fn loading_checks_the_optional_state_the_options_need() {
    let p = || vec![Parameter::new(Tensor::from_vec(vec![0.5f32, -1.0], [2]).unwrap()).unwrap()];
    let stepped = |opt: &mut dyn Optimizer, ps: &[Parameter]| {
        ps[0]
            .tensor()
            .set_grad(Some(Tensor::from_vec(vec![0.25f32, 2.0], [2]).unwrap()))
            .unwrap();
        opt.step().unwrap();
        opt.state_dict()
    };

    let ps = p();
    let mut a = Adam::new(ps.clone(), AdamOptions::new().amsgrad(true)).unwrap();
    let sd = stepped(&mut a, &ps);
    let mut missing = sd.clone();
    missing.state.get_mut(&0).unwrap().remove("max_exp_avg_sq").unwrap();
    let mut b = Adam::new(p(), AdamOptions::default()).unwrap();
    assert_eq!(
        b.load_state_dict(&missing).unwrap_err().to_string(),
        "state of parameter 0 has no \"max_exp_avg_sq\""
    );
    let mut off = sd.clone();
    off.param_groups[0].options.insert("amsgrad", false);
    b.load_state_dict(&off).unwrap();
    let keys: Vec<String> = b.state_dict().state[&0].keys().map(String::from).collect();
    assert_eq!(keys, ["step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"]);

    for (o, key) in [
        (RmsPropOptions::new().momentum(0.5), "momentum_buffer"),
        (RmsPropOptions::new().centered(true), "grad_avg"),
    ] {
        let ps = p();
        let mut a = RMSprop::new(ps.clone(), o).unwrap();
        let sd = stepped(&mut a, &ps);
        assert!(sd.state[&0].contains_key(key));
        let mut missing = sd.clone();
        missing.state.get_mut(&0).unwrap().remove(key).unwrap();
        let mut b = RMSprop::new(p(), RmsPropOptions::default()).unwrap();
        assert_eq!(
            b.load_state_dict(&missing).unwrap_err().to_string(),
            format!("state of parameter 0 has no \"{key}\"")
        );
        b.load_state_dict(&sd).unwrap();
        assert!(b.state_dict().state[&0].contains_key(key), "{key}");
    }
    // Without a momentum, no momentum buffer is needed nor saved.
    let ps = p();
    let mut a = RMSprop::new(ps.clone(), RmsPropOptions::default()).unwrap();
    let sd = stepped(&mut a, &ps);
    let keys: Vec<&str> = sd.state[&0].keys().collect();
    assert_eq!(keys, ["step", "square_avg"]);
    let mut b = RMSprop::new(p(), RmsPropOptions::new().momentum(0.5).centered(true)).unwrap();
    b.load_state_dict(&sd).unwrap();
    let again = b.state_dict();
    assert_eq!(again.state[&0].keys().collect::<Vec<_>>(), ["step", "square_avg"]);
}
