//! GradScaler: scaling, unscaling, skipped steps on inf/NaN, growth and
//! backoff of the scale (PyTorch's `_amp_update_scale_`), the order of
//! calls, and the state dict.

use ferrotorch::nn::{Forward, Linear, Module, Parameter};
use ferrotorch::optim::{Dict, GradScaler, GradScalerOptions, Optimizer, Sgd, SgdOptions, Value};
use ferrotorch::{DType, Tensor, manual_seed};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn sgd(params: Vec<Parameter>) -> Result<Sgd, ferrotorch::optim::Error> {
    Sgd::new(params, SgdOptions::new().lr(0.1))
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>().unwrap().iter().map(|v| v.to_bits()).collect()
}

#[test]
fn scaled_training_matches_unscaled_training_bit_for_bit() -> TestResult {
    // A power-of-two scale makes scaling and unscaling exact.
    manual_seed(3);
    let a = Linear::new(6, 3)?;
    let b = Linear::new(6, 3)?;
    b.load_state_dict(&a.state_dict(), true)?;
    let (mut oa, mut ob) = (sgd(a.parameters())?, sgd(b.parameters())?);
    let mut scaler = GradScaler::new(GradScalerOptions::default())?;
    for _ in 0..5 {
        let x = Tensor::randn([4, 6])?;
        oa.zero_grad()?;
        a.call(&x)?.pow(2.0)?.mean()?.backward()?;
        oa.step()?;
        ob.zero_grad()?;
        let loss = b.call(&x)?.pow(2.0)?.mean()?;
        let scaled = scaler.scale(&loss)?;
        assert_eq!(scaled.item::<f32>()?, loss.item::<f32>()? * 65536.0);
        scaled.backward()?;
        assert!(scaler.step(&mut ob)?);
        scaler.update()?;
    }
    for (pa, pb) in a.parameters().iter().zip(b.parameters()) {
        assert_eq!(bits(&pa.tensor()), bits(&pb.tensor()));
    }
    assert_eq!(scaler.get_scale(), 65536.0);
    assert_eq!(scaler.growth_tracker(), 5);
    Ok(())
}

/// One parameter whose gradient is set by hand.
fn one_param(grad: &[f32]) -> Result<(Parameter, Sgd), Box<dyn std::error::Error>> {
    let p = Parameter::new(Tensor::zeros([grad.len()])?)?;
    p.tensor().set_grad(Some(Tensor::new(grad.to_vec())?))?;
    let opt = sgd(vec![p.clone()])?;
    Ok((p, opt))
}

#[test]
fn an_inf_or_nan_skips_the_step_and_backs_off() -> TestResult {
    let mut scaler = GradScaler::new(GradScalerOptions::new().init_scale(1024.0).growth_interval(3))?;
    for bad in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
        let (p, mut opt) = one_param(&[1.0, bad])?;
        let before = scaler.get_scale();
        assert!(!scaler.step(&mut opt)?);
        scaler.update()?;
        assert_eq!(p.tensor().to_vec::<f32>()?, [0.0, 0.0], "the step was skipped");
        assert_eq!(scaler.get_scale(), before * 0.5);
        assert_eq!(scaler.growth_tracker(), 0);
    }
    // Three clean steps in a row grow the scale, and the count restarts.
    for i in 1..=3 {
        let (p, mut opt) = one_param(&[128.0, -256.0])?;
        assert!(scaler.step(&mut opt)?);
        // The gradient was divided by the scale (128) before the step.
        assert_eq!(p.grad().unwrap().to_vec::<f32>()?, [1.0, -2.0]);
        assert_eq!(p.tensor().to_vec::<f32>()?, [-0.1, 0.2]);
        scaler.update()?;
        assert_eq!(scaler.growth_tracker(), i % 3);
    }
    assert_eq!(scaler.get_scale(), 256.0);
    Ok(())
}

#[test]
fn unscale_then_clip_then_step_unscales_once() -> TestResult {
    let mut scaler = GradScaler::new(GradScalerOptions::new().init_scale(4.0))?;
    let (p, mut opt) = one_param(&[12.0, 16.0])?;
    scaler.unscale_(&mut opt)?;
    assert_eq!(p.grad().unwrap().to_vec::<f32>()?, [3.0, 4.0]);
    let norm = ferrotorch::optim::clip_grad_norm_([&p], 1.0, 2.0, false)?;
    assert_eq!(norm.item::<f32>()?, 5.0);
    let e = scaler.unscale_(&mut opt).unwrap_err();
    assert_eq!(
        e.to_string(),
        "unscale_() has already been called on this optimizer since the last update()."
    );
    assert!(scaler.step(&mut opt)?);
    let g = p.grad().unwrap().to_vec::<f32>()?;
    assert!((g[0] - 0.6).abs() < 1e-6 && (g[1] - 0.8).abs() < 1e-6, "{g:?}");
    let e = scaler.step(&mut opt).unwrap_err();
    assert_eq!(e.to_string(), "step() has already been called since the last update().");
    let e = scaler.unscale_(&mut opt).unwrap_err();
    assert_eq!(e.to_string(), "unscale_() is being called after step().");
    scaler.update()?;
    assert_eq!(
        scaler.update().unwrap_err().to_string(),
        "No inf checks were recorded prior to update."
    );
    Ok(())
}

#[test]
fn update_with_a_new_scale_sets_it_and_ends_the_iteration() -> TestResult {
    let mut scaler = GradScaler::new(GradScalerOptions::new().init_scale(8.0).growth_interval(2))?;
    let (_, mut opt) = one_param(&[1.0])?;
    assert!(scaler.step(&mut opt)?);
    scaler.update()?;
    assert_eq!(scaler.growth_tracker(), 1);
    assert!(scaler.step(&mut opt)?);
    // `scaler.update(64.0)`: the scale is set, the growth count kept.
    scaler.update_to(64.0)?;
    assert_eq!(scaler.get_scale(), 64.0);
    assert_eq!(scaler.growth_tracker(), 1);
    // The iteration ended: the same optimizer may step again.
    assert!(scaler.step(&mut opt)?);
    scaler.update()?;
    assert_eq!(
        scaler.get_scale(),
        128.0,
        "the second clean step in a row grows the new scale"
    );
    for bad in [0.0, -1.0, f64::INFINITY, f64::NAN, 1e300] {
        let e = scaler.update_to(bad).unwrap_err().to_string();
        assert!(e.starts_with("new_scale should be a positive finite float32"), "{e}");
    }
    assert_eq!(scaler.get_scale(), 128.0);
    // A disabled scaler ignores it, as PyTorch's.
    let mut off = GradScaler::new(GradScalerOptions::new().enabled(false))?;
    off.update_to(-1.0)?;
    assert_eq!(off.get_scale(), 1.0);
    Ok(())
}

#[test]
fn fp16_gradients_are_refused_and_bad_options_are_errors() -> TestResult {
    let p = Parameter::new(Tensor::zeros([2])?.to_dtype(DType::F16)?)?;
    p.tensor().set_grad(Some(Tensor::ones([2])?.to_dtype(DType::F16)?))?;
    let mut opt = sgd(vec![p])?;
    let mut scaler = GradScaler::new(GradScalerOptions::default())?;
    assert_eq!(
        scaler.unscale_(&mut opt).unwrap_err().to_string(),
        "Attempting to unscale FP16 gradients."
    );
    for o in [
        GradScalerOptions::new().growth_factor(1.0),
        GradScalerOptions::new().backoff_factor(1.0),
        GradScalerOptions::new().growth_interval(0),
        GradScalerOptions::new().init_scale(f64::INFINITY),
    ] {
        assert!(GradScaler::new(o).is_err(), "{o:?}");
    }
    Ok(())
}

#[test]
fn the_state_dict_has_pytorchs_keys_and_round_trips() -> TestResult {
    let mut scaler = GradScaler::new(GradScalerOptions::new().init_scale(8.0).growth_interval(10))?;
    let (_, mut opt) = one_param(&[1.0])?;
    scaler.step(&mut opt)?;
    scaler.update()?;
    let sd = scaler.state_dict();
    let keys: Vec<&str> = sd.iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        [
            "scale",
            "growth_factor",
            "backoff_factor",
            "growth_interval",
            "_growth_tracker"
        ]
    );
    assert!(matches!(sd.get("scale"), Some(Value::Float(8.0))));
    assert!(matches!(sd.get("_growth_tracker"), Some(Value::Int(1))));
    let mut other = GradScaler::new(GradScalerOptions::default())?;
    other.load_state_dict(&sd)?;
    assert_eq!((other.get_scale(), other.growth_tracker()), (8.0, 1));
    assert_eq!(format!("{:?}", other.state_dict()), format!("{sd:?}"));
    assert!(
        other
            .load_state_dict(&Dict::new())
            .unwrap_err()
            .to_string()
            .contains("empty")
    );
    // A disabled scaler passes through and saves nothing.
    let mut off = GradScaler::new(GradScalerOptions::new().enabled(false))?;
    assert!(!off.is_enabled() && scaler.is_enabled());
    let loss = Tensor::new(vec![2.0f32])?;
    assert!(off.scale(&loss)?.is_same(&loss));
    let (p, mut opt) = one_param(&[1.0])?;
    assert!(off.step(&mut opt)?);
    assert_eq!(p.tensor().to_vec::<f32>()?, [-0.1]);
    assert!(off.state_dict().is_empty());
    assert_eq!(off.get_scale(), 1.0);
    Ok(())
}
