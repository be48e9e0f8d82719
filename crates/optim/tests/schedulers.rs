//! LR schedulers against PyTorch (`tests/data/schedulers.json`, written by
//! `tests/gen_sched.py`): the learning rate of every group (and the
//! momentum / beta1) after construction and after each of 100 steps, bit
//! for bit; the final scheduler state dict and optimizer param groups; and
//! state-dict round trips.

mod common;

use common::{data, same_value, value};
use ferrotorch::Tensor;
use ferrotorch::nn::Parameter;
use ferrotorch::optim::lr_scheduler::{
    AnnealStrategy, CosineAnnealingLR, ExponentialLR, LambdaLR, LinearLR, LrLambda, LrScheduler, MultiStepLR,
    OneCycleLR, OneCycleLrOptions, PerGroup, PlateauMode, ReduceLROnPlateau, ReduceLrOnPlateauOptions, Rule, Scheduler,
    SchedulerBase, SequentialLR, StepLR, ThresholdMode,
};
use ferrotorch::optim::{Adam, AdamOptions, Dict, Optimizer, SGD, SgdOptions, Value};
use serde_json::Value as Json;

fn make_opt(kind: &str, lrs: &[f64]) -> Box<dyn Optimizer> {
    let params: Vec<Parameter> = lrs
        .iter()
        .map(|_| Parameter::new(Tensor::zeros([2]).unwrap()).unwrap())
        .collect();
    match kind {
        "SGD" => {
            let d = SgdOptions::new().lr(lrs[0]).momentum(0.9);
            let groups = params
                .iter()
                .zip(lrs)
                .map(|(p, &lr)| (vec![p.clone()], d.clone().lr(lr)));
            Box::new(SGD::with_groups(groups.collect::<Vec<_>>(), d).unwrap())
        }
        _ => {
            let d = AdamOptions::new().lr(lrs[0]);
            let groups = params
                .iter()
                .zip(lrs)
                .map(|(p, &lr)| (vec![p.clone()], d.clone().lr(lr)));
            Box::new(Adam::with_groups(groups.collect::<Vec<_>>(), d).unwrap())
        }
    }
}

fn f(c: &Json, k: &str) -> f64 {
    c[k].as_f64().unwrap()
}

fn i(c: &Json, k: &str) -> i64 {
    c[k].as_i64().unwrap()
}

fn lambda(name: &str) -> LrLambda {
    match name {
        "pow095" => Box::new(|e| 0.95f64.powf(e as f64)),
        "inverse" => Box::new(|e| 1.0 / (1 + e) as f64),
        other => panic!("lambda {other}"),
    }
}

/// `torch.optim.lr_scheduler.MultiplicativeLR`, which ferrotorch has no
/// type for, as a custom [`Rule`] (the user's way to a scheduler of their
/// own): each step multiplies each group's current learning rate by its
/// function of the epoch; the initial step keeps the rates.
struct MultiplicativeRule {
    lambdas: Vec<LrLambda>,
}

impl Rule for MultiplicativeRule {
    fn get_lr(&mut self, b: &SchedulerBase, opt: &mut dyn Optimizer) -> Result<Vec<f64>, ferrotorch::optim::Error> {
        if b.is_initial {
            return Ok(opt.lrs());
        }
        Ok(opt
            .lrs()
            .iter()
            .zip(&self.lambdas)
            .map(|(lr, f)| lr * f(b.last_epoch))
            .collect())
    }

    fn save(&self, _d: &mut Dict) {}

    fn save_after(&self, d: &mut Dict) {
        d.insert("lr_lambdas", Value::List(vec![Value::None; self.lambdas.len()]));
    }

    fn load(&mut self, _d: &Dict) -> Result<(), ferrotorch::optim::Error> {
        Ok(())
    }
}

fn multiplicative(opt: &mut dyn Optimizer, c: &Json) -> Scheduler<MultiplicativeRule> {
    let lambdas = c["lambda"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| lambda(s.as_str().unwrap()))
        .collect();
    Scheduler::with_rule(opt, MultiplicativeRule { lambdas }).unwrap()
}

fn per_group(v: &Json) -> PerGroup {
    match v {
        Json::Array(a) => PerGroup::Each(a.iter().map(|x| x.as_f64().unwrap()).collect()),
        x => PerGroup::All(x.as_f64().unwrap()),
    }
}

fn build(kind: &str, c: &Json, opt: &mut dyn Optimizer) -> Box<dyn LrScheduler> {
    match kind {
        "StepLR" => Box::new(StepLR::new(opt, i(c, "step_size"), f(c, "gamma")).unwrap()),
        "MultiStepLR" => {
            let m: Vec<i64> = c["milestones"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap())
                .collect();
            Box::new(MultiStepLR::new(opt, &m, f(c, "gamma")).unwrap())
        }
        "ExponentialLR" => Box::new(ExponentialLR::new(opt, f(c, "gamma")).unwrap()),
        "CosineAnnealingLR" => Box::new(CosineAnnealingLR::new(opt, i(c, "T_max"), f(c, "eta_min")).unwrap()),
        // `LinearLR(optimizer)`: PyTorch's defaults.
        "LinearLR" if c.as_object().unwrap().is_empty() => Box::new(LinearLR::default_for(opt).unwrap()),
        "LinearLR" => {
            Box::new(LinearLR::new(opt, f(c, "start_factor"), f(c, "end_factor"), i(c, "total_iters")).unwrap())
        }
        "MultiplicativeLR" => Box::new(multiplicative(opt, c)),
        "LambdaLR" => match &c["lambda"] {
            Json::String(s) => Box::new(LambdaLR::per_group(opt, vec![lambda(s)]).unwrap()),
            Json::Array(a) => {
                Box::new(LambdaLR::per_group(opt, a.iter().map(|s| lambda(s.as_str().unwrap())).collect()).unwrap())
            }
            _ => unreachable!(),
        },
        "OneCycleLR" => {
            let mut o = OneCycleLrOptions::new().max_lr(per_group(&c["max_lr"]));
            for (k, v) in c.as_object().unwrap() {
                match k.as_str() {
                    "max_lr" => {}
                    "total_steps" => o.total_steps = v.as_i64(),
                    "epochs" => o.epochs = v.as_i64(),
                    "steps_per_epoch" => o.steps_per_epoch = v.as_i64(),
                    "three_phase" => o.three_phase = v.as_bool().unwrap(),
                    "cycle_momentum" => o.cycle_momentum = v.as_bool().unwrap(),
                    "pct_start" => o.pct_start = v.as_f64().unwrap(),
                    "div_factor" => o.div_factor = v.as_f64().unwrap(),
                    "final_div_factor" => o.final_div_factor = v.as_f64().unwrap(),
                    "base_momentum" => o.base_momentum = per_group(v),
                    "max_momentum" => o.max_momentum = per_group(v),
                    "anneal_strategy" => {
                        o.anneal_strategy = if v == "linear" {
                            AnnealStrategy::Linear
                        } else {
                            AnnealStrategy::Cos
                        }
                    }
                    other => panic!("OneCycleLR option {other}"),
                }
            }
            Box::new(OneCycleLR::new(opt, o).unwrap())
        }
        "SequentialLR" => {
            let scheds = c["schedulers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| build(s[0].as_str().unwrap(), &s[1], opt))
                .collect();
            let m = c["milestones"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap())
                .collect();
            Box::new(SequentialLR::new(opt, scheds, m).unwrap())
        }
        other => panic!("scheduler {other}"),
    }
}

fn plateau(c: &Json, opt: &mut dyn Optimizer) -> ReduceLROnPlateau {
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
            "min_lr" => o.min_lr = per_group(v),
            other => panic!("plateau option {other}"),
        }
    }
    ReduceLROnPlateau::new(opt, o).unwrap()
}

fn momenta(opt: &dyn Optimizer) -> Vec<f64> {
    (0..opt.num_param_groups())
        .map(|g| match opt.hyperparameter(g, "betas") {
            Some(b) => b.as_seq().unwrap()[0].as_f64().unwrap(),
            None => opt.hyperparameter(g, "momentum").unwrap().as_f64().unwrap(),
        })
        .collect()
}

/// A JSON state-dict value against ours (MultiStepLR's Counter is a JSON
/// object with string keys there, an int-keyed dict here).
fn same_json(got: &Value, want: &Json) -> bool {
    match (got, want) {
        (Value::IntKeyDict(items), Json::Object(o)) => {
            items.len() == o.len()
                && items
                    .iter()
                    .all(|(k, v)| o.get(&k.to_string()).is_some_and(|w| same_value(v, &value(w))))
        }
        (Value::Dict(d), Json::Object(o)) => same_dict(d, o),
        (Value::List(items), Json::Array(a)) => {
            items.len() == a.len() && items.iter().zip(a).all(|(x, y)| same_json(x, y))
        }
        _ => same_value(got, &value(want)),
    }
}

fn same_dict(d: &Dict, o: &serde_json::Map<String, Json>) -> bool {
    // serde_json's map is sorted: compare the key sets.
    let mut keys: Vec<&str> = d.keys().collect();
    keys.sort_unstable();
    let want: Vec<&str> = o.keys().map(String::as_str).collect();
    if keys != want {
        eprintln!("keys {keys:?}, want {want:?}");
        return false;
    }
    d.iter().all(|(k, v)| {
        let ok = same_json(v, &o[k]);
        if !ok {
            eprintln!("{k}: {v:?}, want {}", o[k]);
        }
        ok
    })
}

fn check(case: &Json) -> Result<(), String> {
    let name = case["name"].as_str().unwrap();
    let kind = case["scheduler"].as_str().unwrap();
    let lrs: Vec<f64> = case["lrs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let mut opt = make_opt(case["optimizer"].as_str().unwrap(), &lrs);
    let opt = opt.as_mut();
    let want_lr = case["lr"].as_array().unwrap();
    let want_m = case["momentum"].as_array().unwrap();
    let cmp = |step: usize, got: &[f64], want: &Json, what: &str| -> Result<(), String> {
        let want: Vec<f64> = want.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        if got.iter().map(|x| x.to_bits()).ne(want.iter().map(|x| x.to_bits())) {
            return Err(format!("{name}: {what} after step {step}: {got:?}, want {want:?}"));
        }
        Ok(())
    };
    let sd = if kind == "ReduceLROnPlateau" {
        let metrics: Vec<f64> = case["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let mut s = plateau(&case["config"], opt);
        cmp(0, &opt.lrs(), &want_lr[0], "lr")?;
        for (step, m) in metrics.iter().enumerate() {
            s.step(opt, *m).map_err(|e| e.to_string())?;
            cmp(step + 1, &opt.lrs(), &want_lr[step + 1], "lr")?;
            cmp(step + 1, s.get_last_lr(), &want_lr[step + 1], "get_last_lr")?;
        }
        s.state_dict()
    } else {
        let mut s = build(kind, &case["config"], opt);
        cmp(0, &opt.lrs(), &want_lr[0], "lr")?;
        cmp(0, &momenta(opt), &want_m[0], "momentum")?;
        for step in 1..want_lr.len() {
            s.step(opt).map_err(|e| format!("{name}: step {step}: {e}"))?;
            cmp(step, &opt.lrs(), &want_lr[step], "lr")?;
            cmp(step, s.get_last_lr(), &want_lr[step], "get_last_lr")?;
            cmp(step, &momenta(opt), &want_m[step], "momentum")?;
        }
        s.state_dict()
    };
    if !same_dict(&sd, case["state_dict"].as_object().unwrap()) {
        return Err(format!("{name}: state_dict differs"));
    }
    let groups = opt.state_dict().param_groups;
    for (g, want) in groups.iter().zip(case["param_groups"].as_array().unwrap()) {
        if !same_dict(&g.options, want.as_object().unwrap()) {
            return Err(format!("{name}: param group {g:?} differs"));
        }
    }
    Ok(())
}

#[test]
fn schedules_match_pytorch_bitwise() {
    let file = data("schedulers.json");
    let cases = file["cases"].as_array().unwrap();
    let failures: Vec<String> = cases.iter().filter_map(|c| check(c).err()).collect();
    println!("schedulers: {} cases, {} failed", cases.len(), failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Saving a scheduler half way and loading it into a fresh one (with the
/// optimizer's state) continues with the same learning rates.
#[test]
fn state_dict_round_trip_continues_the_schedule() {
    let file = data("schedulers.json");
    for case in file["cases"].as_array().unwrap() {
        let kind = case["scheduler"].as_str().unwrap();
        if kind == "ReduceLROnPlateau" || kind == "LambdaLR" {
            continue;
        }
        let lrs: Vec<f64> = case["lrs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let okind = case["optimizer"].as_str().unwrap();
        let mut a = make_opt(okind, &lrs);
        let mut sa = build(kind, &case["config"], a.as_mut());
        for _ in 0..37 {
            sa.step(a.as_mut()).unwrap();
        }
        let (osd, ssd) = (a.state_dict(), sa.state_dict());
        let mut b = make_opt(okind, &lrs);
        let mut sb = build(kind, &case["config"], b.as_mut());
        b.load_state_dict(&osd).unwrap();
        sb.load_state_dict(&ssd).unwrap();
        for step in 0..50 {
            sa.step(a.as_mut()).unwrap();
            sb.step(b.as_mut()).unwrap();
            assert_eq!(a.lrs(), b.lrs(), "{} step {step}", case["name"]);
            assert_eq!(sa.get_last_lr(), sb.get_last_lr());
        }
    }
}

#[test]
fn plateau_round_trip() {
    let mut a = make_opt("SGD", &[0.1]);
    let o = ReduceLrOnPlateauOptions::new().patience(1);
    let mut sa = ReduceLROnPlateau::new(a.as_mut(), o.clone()).unwrap();
    for m in [1.0, 0.9, 0.95, 0.97] {
        sa.step(a.as_mut(), m).unwrap();
    }
    let mut b = make_opt("SGD", &[0.1]);
    let mut sb = ReduceLROnPlateau::new(b.as_mut(), o).unwrap();
    b.load_state_dict(&a.state_dict()).unwrap();
    sb.load_state_dict(&sa.state_dict()).unwrap();
    for m in [0.99, 0.99, 0.5, 0.6, 0.7, 0.8] {
        sa.step(a.as_mut(), m).unwrap();
        sb.step(b.as_mut(), m).unwrap();
        assert_eq!(a.lrs(), b.lrs());
    }
    assert!(a.lrs()[0] < 0.1);
}

#[test]
fn plateau_counts_bad_epochs_and_keeps_the_best() {
    let mut opt = make_opt("SGD", &[0.1]);
    let o = opt.as_mut();
    let mut s = ReduceLROnPlateau::new(o, ReduceLrOnPlateauOptions::new().patience(2).threshold(0.0)).unwrap();
    let mut seen = Vec::new();
    for m in [1.0, 0.5, 0.7, 0.6, 0.5, 0.4, 0.4] {
        s.step(o, m).unwrap();
        seen.push((s.num_bad_epochs(), s.best(), s.last_epoch()));
    }
    assert_eq!(
        seen,
        [
            (0, 1.0, 1),
            (0, 0.5, 2),
            (1, 0.5, 3),
            (2, 0.5, 4),
            (0, 0.5, 5),
            (0, 0.4, 6),
            (1, 0.4, 7)
        ]
    );
    // The third bad epoch in a row (more than `patience`) cut the rate and
    // reset the count (PyTorch's values, printed by its `ReduceLROnPlateau`).
    assert_eq!(o.lrs(), [0.1 * 0.1]);
}

#[test]
fn a_sequential_lr_after_a_milestone_is_refused_clearly() {
    // PyTorch's `SequentialLR` restarts the scheduler at a milestone with
    // `_update_lr(0)`, which a nested `SequentialLR` does not implement
    // (NotImplementedError): ferrotorch says so at that step.
    let mut opt = make_opt("SGD", &[0.1]);
    let o = opt.as_mut();
    let inner: Vec<Box<dyn LrScheduler>> = vec![
        Box::new(LinearLR::new(o, 0.5, 1.0, 5).unwrap()),
        Box::new(StepLR::new(o, 3, 0.5).unwrap()),
    ];
    let inner = SequentialLR::new(o, inner, vec![5]).unwrap();
    let first = ExponentialLR::new(o, 0.9).unwrap();
    let mut outer = SequentialLR::new(o, vec![Box::new(first), Box::new(inner)], vec![2]).unwrap();
    outer.step(o).unwrap();
    let e = outer.step(o).unwrap_err().to_string();
    assert!(e.contains("SequentialLR") && e.contains("milestone"), "{e}");
}

#[test]
fn scheduler_errors_are_pytorchs() {
    let mut opt = make_opt("SGD", &[0.1]);
    let o = opt.as_mut();
    let msg = |r: Result<(), ferrotorch::optim::Error>| r.unwrap_err().to_string();
    assert_eq!(
        msg(LinearLR::new(o, 0.0, 1.0, 5).map(drop)),
        "Starting multiplicative factor expected to be greater than 0 and less or equal to 1."
    );
    assert_eq!(
        msg(LinearLR::new(o, 0.5, 1.5, 5).map(drop)),
        "Ending multiplicative factor expected to be between 0 and 1."
    );
    assert_eq!(
        msg(ReduceLROnPlateau::new(o, ReduceLrOnPlateauOptions::new().factor(1.0)).map(drop)),
        "Factor should be < 1.0."
    );
    assert_eq!(
        msg(OneCycleLR::new(o, OneCycleLrOptions::default()).map(drop)),
        "You must define either total_steps OR (epochs AND steps_per_epoch)"
    );
    assert_eq!(
        msg(OneCycleLR::new(o, OneCycleLrOptions::new().total_steps(10).pct_start(1.5)).map(drop)),
        "Expected float between 0 and 1 pct_start, but got 1.5"
    );
    let mut s = OneCycleLR::new(o, OneCycleLrOptions::new().total_steps(3)).unwrap();
    for _ in 0..3 {
        s.step(o).unwrap();
    }
    assert_eq!(
        s.step(o).unwrap_err().to_string(),
        "Tried to step 4 times. The specified number of total steps is 3"
    );
    let mut ada = ferrotorch::optim::Adagrad::new(
        vec![Parameter::new(Tensor::zeros([1]).unwrap()).unwrap()],
        Default::default(),
    )
    .unwrap();
    assert_eq!(
        msg(OneCycleLR::new(&mut ada, OneCycleLrOptions::new().total_steps(10)).map(drop)),
        "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
    );
    let exp: Box<dyn LrScheduler> = Box::new(ExponentialLR::new(o, 0.9).unwrap());
    let seq = SequentialLR::new(o, vec![exp], vec![3]);
    assert!(msg(seq.map(drop)).starts_with("Sequential Schedulers expects number of schedulers provided"));
    assert_eq!(
        msg(LambdaLR::per_group(o, vec![]).map(drop)),
        "Expected 1 lr_lambdas, but got 0"
    );
}

/// `Scheduler::with_rule` does what PyTorch's `LRScheduler.__init__` does
/// for a scheduler of one's own (here `MultiplicativeLR`, built after an
/// `ExponentialLR` stepped twice): it keeps the groups' `initial_lr` (the
/// base rates), takes the initial step (epoch 0, step count 1) without
/// changing the current rates, and then each step applies the rule.
/// PyTorch 2.15's values.
#[test]
fn with_rule_keeps_initial_lr_and_takes_the_initial_step() {
    let mut opt = make_opt("SGD", &[0.1, 0.2]);
    let o = opt.as_mut();
    let mut first = ExponentialLR::new(o, 0.5).unwrap();
    first.step(o).unwrap();
    first.step(o).unwrap();
    assert_eq!(o.lrs(), [0.025, 0.05]);
    let lambdas: Vec<LrLambda> = vec![Box::new(|_| 0.9), Box::new(|e| 1.0 / (1 + e) as f64)];
    let mut s = Scheduler::with_rule(o, MultiplicativeRule { lambdas }).unwrap();
    assert_eq!(s.base().base_lrs, [0.1, 0.2]);
    assert_eq!(
        (s.last_epoch(), s.base().step_count, s.base().is_initial),
        (0, 1, false)
    );
    assert_eq!(s.get_last_lr(), [0.025, 0.05]);
    assert_eq!(o.lrs(), [0.025, 0.05]);
    assert_eq!(s.rule().lambdas.len(), 2);
    for g in 0..2 {
        assert_eq!(
            o.hyperparameter(g, "initial_lr").and_then(|v| v.as_f64()),
            Some([0.1, 0.2][g])
        );
    }
    let want = [
        [0.022500000000000003, 0.025],
        [0.020250000000000004, 0.008333333333333333],
        [0.018225000000000005, 0.0020833333333333333],
    ];
    for (k, w) in want.iter().enumerate() {
        s.step(o).unwrap();
        assert_eq!(s.get_last_lr(), w, "step {}", k + 1);
        assert_eq!(o.lrs(), w);
        assert_eq!(s.last_epoch(), k as i64 + 1);
    }
    let sd = s.state_dict();
    assert_eq!(
        sd.keys().collect::<Vec<_>>(),
        [
            "base_lrs",
            "last_epoch",
            "_step_count",
            "_is_initial",
            "_get_lr_called_within_step",
            "_last_lr",
            "lr_lambdas"
        ]
    );
    assert_eq!(sd.get("_step_count").and_then(Value::as_i64), Some(4));

    // A scheduler on a fresh optimizer records each group's `lr` as its
    // `initial_lr`.
    let mut fresh = make_opt("Adam", &[0.3, 0.01]);
    let s = Scheduler::with_rule(
        fresh.as_mut(),
        MultiplicativeRule {
            lambdas: vec![lambda("inverse"), lambda("inverse")],
        },
    )
    .unwrap();
    assert_eq!(s.base().base_lrs, [0.3, 0.01]);
    assert_eq!(
        fresh.hyperparameter(1, "initial_lr").and_then(|v| v.as_f64()),
        Some(0.01)
    );
}

/// `LinearLR::default_for` is `LinearLR(optimizer)`: PyTorch 2.15's
/// defaults `start_factor=1/3`, `end_factor=1.0`, `total_iters=5` (the
/// `linear_default` case of `schedulers.json` checks its schedule).
#[test]
fn linear_lr_default_for_has_pytorchs_defaults() {
    let mut opt = make_opt("SGD", &[0.1]);
    let s = LinearLR::default_for(opt.as_mut()).unwrap();
    let r = s.rule();
    assert_eq!(
        (r.start_factor, r.end_factor, r.total_iters),
        (0.3333333333333333, 1.0, 5)
    );
    assert_eq!(s.get_last_lr(), [0.03333333333333333]);
}

/// CosineAnnealingLR's first step after a state dict with `_step_count` 0
/// and a later epoch takes PyTorch's closed form from the base rate (the
/// `_step_count == 1 and last_epoch > 0` branch of its `get_lr`), then
/// goes on in the chainable form: PyTorch 2.15 gives these rates for
/// `CosineAnnealingLR(SGD(lr=0.1), 10, 0.01)` with `last_epoch` set to 5.
#[test]
fn cosine_annealing_restarted_from_a_state_dict_takes_the_closed_form_once() {
    let mut opt = make_opt("SGD", &[0.1]);
    let mut s = CosineAnnealingLR::new(opt.as_mut(), 10, 0.01).unwrap();
    let mut sd = s.state_dict();
    sd.insert("last_epoch", 5i64);
    sd.insert("_step_count", 0i64);
    s.load_state_dict(&sd).unwrap();
    s.step(opt.as_mut()).unwrap();
    assert_eq!(opt.lrs(), [0.04109423525312737]);
    s.step(opt.as_mut()).unwrap();
    assert_eq!(opt.lrs(), [0.028549663646838717]);
}
