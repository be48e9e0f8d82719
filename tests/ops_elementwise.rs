//! The elementwise ops PyTorch users reach for beyond arithmetic: math
//! (`atan2`, `hypot`, `logaddexp`, `copysign`, `remainder`, `fmod`),
//! bitwise ops and shifts with their operators, `clamp` with tensor
//! bounds, `lerp`, `nan_to_num` and float classification. Values are
//! checked against PyTorch in `oracle_extra/ops.json`; here: the API as a
//! PyTorch user writes it, node names, errors and the meta device.

use ferrotorch::{DType, Device, Result, Tensor, TensorOptions};

fn node(t: &Tensor) -> String {
    t.grad_fn().map(|n| n.name().to_string()).unwrap_or_default()
}

fn err(r: Result<Tensor>) -> String {
    match r {
        Ok(t) => panic!("expected an error, got {t}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn operators_translate_python_line_by_line() -> Result<()> {
    // a = torch.tensor([12, 10, -7]); b = torch.tensor([6, 3, 2])
    let a = Tensor::new([12i64, 10, -7])?;
    let b = Tensor::new([6i64, 3, 2])?;
    assert_eq!((&a & &b).to_vec::<i64>()?, [4, 2, 0]);
    assert_eq!((&a | &b).to_vec::<i64>()?, [14, 11, -5]);
    assert_eq!((&a ^ &b).to_vec::<i64>()?, [10, 9, -5]);
    assert_eq!((&a << 2).to_vec::<i64>()?, [48, 40, -28]);
    assert_eq!((&a >> &b).to_vec::<i64>()?, [0, 1, -2]);
    assert_eq!((!&a).to_vec::<i64>()?, [-13, -11, 6]);
    // Python's % is remainder: -7 % 2 == 1.
    assert_eq!((&a % 5).to_vec::<i64>()?, [2, 0, 3]);
    assert_eq!((&a % &b).to_vec::<i64>()?, [0, 1, 1]);
    let mask = Tensor::new([true, false, true])?;
    let other = Tensor::new([true, true, false])?;
    assert_eq!((!&mask).to_vec::<bool>()?, [false, true, false]);
    assert_eq!((&mask & &other).to_vec::<bool>()?, [true, false, false]);
    assert_eq!((mask.clone() | other.clone()).to_vec::<bool>()?, [true, true, true]);
    assert_eq!((&mask ^ other).to_vec::<bool>()?, [false, true, true]);
    // Compound assignment writes in place.
    let mut m = Tensor::new([0b1111u8, 0b1010])?;
    m &= 0b0110u8;
    m |= 1u8;
    m ^= &Tensor::new([2u8, 2])?;
    m <<= 1;
    m >>= 1u8;
    assert_eq!(m.to_vec::<u8>()?, [5, 1]);
    let mut f = Tensor::new([-3.5f32, 3.5])?;
    f %= 2.0;
    assert_eq!(f.to_vec::<f32>()?, [0.5, 1.5]);
    Ok(())
}

#[test]
#[should_panic(expected = "bitwise_and")]
fn a_bitwise_operator_on_floats_panics_naming_the_op() {
    let x = Tensor::new([1.0f32]).unwrap();
    let _ = &x & &x;
}

#[test]
fn methods_take_tensors_or_scalars_and_promote_as_pytorch() -> Result<()> {
    let x = Tensor::new([1i64, -2])?;
    // atan2 and copysign promote integers to the default float dtype.
    assert_eq!(x.atan2(&x)?.dtype(), DType::F32);
    assert_eq!(x.copysign(-1)?.to_vec::<f32>()?, [-1.0, -2.0]);
    // remainder and fmod keep integers; a float scalar promotes.
    assert_eq!(x.remainder(2.5)?.to_vec::<f32>()?, [1.0, 0.5]);
    assert_eq!(x.fmod(2.5)?.to_vec::<f32>()?, [1.0, -2.0]);
    assert_eq!(
        Tensor::scalar_remainder(5, &Tensor::new([3i64, -3])?)?.to_vec::<i64>()?,
        [2, -1]
    );
    // hypot / logaddexp have no integer kernels.
    assert!(err(x.hypot(&x)).contains("\"hypot_cpu\" not implemented for 'Long'"));
    assert!(err(x.logaddexp(&x)).contains("logaddexp"));
    // In-place results must fit self's dtype.
    assert!(err(x.atan2_(&Tensor::new([1.0f32, 1.0])?)).contains("can't be cast"));
    let y = Tensor::new([3.0f64, 4.0])?;
    assert_eq!(y.hypot(&Tensor::new([4.0f64, 3.0])?)?.to_vec::<f64>()?, [5.0, 5.0]);
    y.hypot_(0.0)?;
    assert_eq!(y.to_vec::<f64>()?, [3.0, 4.0]);
    // Integer division by zero is an error, not a crash.
    assert!(err(x.remainder(0)).contains("ZeroDivisionError"));
    assert!(err(x.fmod(&Tensor::new([1i64, 0])?)).contains("ZeroDivisionError"));
    // Shifts: integers only.
    let t = Tensor::new([true])?;
    assert!(err(t.bitwise_left_shift(&t)).contains("lshift_cpu"));
    // A bool tensor and an integer scalar promote to int64, as in PyTorch.
    assert_eq!(t.bitwise_left_shift(1)?.to_vec::<i64>()?, [2]);
    assert!(err(Tensor::new([1.5f32])?.bitwise_right_shift(1)).contains("rshift_cpu"));
    assert!(err(Tensor::new([1.5f32])?.bitwise_not()).contains("bitwise_not"));
    // Broadcasting errors name the op and both shapes.
    let e = err(Tensor::ones([2, 3])?.atan2(&Tensor::ones([4])?));
    assert!(e.contains("atan2") && e.contains("[2, 3]") && e.contains("[4]"), "{e}");
    Ok(())
}

#[test]
fn gradients_are_recorded_under_pytorch_node_names() -> Result<()> {
    let a = Tensor::new([1.0f32, -2.0])?.requires_grad_(true)?;
    let b = Tensor::new([0.5f32, 3.0])?.requires_grad_(true)?;
    let cases = [
        (a.atan2(&b)?, "Atan2Backward0"),
        (a.hypot(&b)?, "HypotBackward0"),
        (a.logaddexp(&b)?, "LogaddexpBackward0"),
        (a.logaddexp2(&b)?, "Logaddexp2Backward0"),
        (a.copysign(&b)?, "CopysignBackward0"),
        (a.copysign(-1.0)?, "CopysignBackward1"),
        (a.remainder(2.0)?, "RemainderBackward0"),
        (a.remainder(&b)?, "RemainderBackward1"),
        (a.fmod(2.0)?, "FmodBackward0"),
        (a.fmod(&b)?, "FmodBackward1"),
        (a.clamp(Some(&b), None::<f64>)?, "ClampBackward0"),
        (a.clamp(Some(&b), Some(&b))?, "ClampBackward0"),
        (a.clamp_min(&b)?, "ClampMinBackward1"),
        (a.clamp_max(&b)?, "ClampMaxBackward1"),
        (a.clamp(Some(0.0), None::<f64>)?, "ClampBackward1"),
        (a.lerp(&b, 0.25)?, "LerpBackward0"),
        (a.lerp(&b, &b)?, "LerpBackward1"),
        (a.nan_to_num(0.0, None, None)?, "NanToNumBackward0"),
    ];
    for (t, want) in cases {
        assert_eq!(node(&t), want);
    }
    // Bool results record nothing.
    assert!(a.isnan()?.grad_fn().is_none());
    assert!(!a.isfinite()?.requires_grad());
    // lerp's gradients: (1 - w) to start, w to end, end - start to weight.
    let w = Tensor::new([0.25f32, 0.75])?.requires_grad_(true)?;
    a.lerp(&b, &w)?.sum()?.backward()?;
    assert_eq!(a.grad()?.to_vec::<f32>()?, [0.75, 0.25]);
    assert_eq!(b.grad()?.to_vec::<f32>()?, [0.25, 0.75]);
    assert_eq!(w.grad()?.to_vec::<f32>()?, [-0.5, 5.0]);
    Ok(())
}

#[test]
fn clamp_lerp_and_nan_to_num_validate_like_pytorch() -> Result<()> {
    let x = Tensor::new([1.0f32, 2.0])?;
    assert!(err(x.clamp(None::<f64>, None::<f64>)).contains("min"));
    let e = err(x.clamp(Some(&Tensor::ones([3])?), None::<f64>));
    assert!(e.contains("clamp") && e.contains("[2]") && e.contains("[3]"), "{e}");
    // In place, the bounds must broadcast to self.
    let col = Tensor::new([[1.0f32], [2.0]])?;
    assert!(err(col.clamp_(Some(&Tensor::ones([3])?), None::<f64>)).contains("shape"));
    // Mixed dtypes promote: an int tensor clamped by float bounds is float.
    let i = Tensor::new([1i64, 5, 3])?;
    let r = i.clamp(Some(&Tensor::new([2.5f32])?), Some(&Tensor::new([4i64])?))?;
    assert_eq!((r.dtype(), r.to_vec::<f32>()?), (DType::F32, vec![2.5, 4.0, 3.0]));
    assert!(err(i.clamp_(Some(&Tensor::new([1.5f64])?), None::<f64>)).contains("can't be cast"));
    let e = err(x.lerp(&Tensor::new([1.0f64, 2.0])?, 0.5));
    assert!(
        e.contains("expected dtype float32 for `end` but got dtype float64"),
        "{e}"
    );
    assert!(err(i.lerp(&i, 0.5)).contains("lerp_kernel_scalar"));
    let h = Tensor::new([f32::NAN, f32::INFINITY, f32::NEG_INFINITY])?.to_dtype(DType::F16)?;
    let r = h
        .nan_to_num(1e10, Some(-1e6), None)?
        .to_dtype(DType::F32)?
        .to_vec::<f32>()?;
    assert_eq!(r, [f32::INFINITY, f32::NEG_INFINITY, -65504.0]);
    // In place.
    let y = Tensor::new([f64::NAN, 1.0])?;
    y.nan_to_num_(7.0, None, None)?;
    assert_eq!(y.to_vec::<f64>()?, [7.0, 1.0]);
    Ok(())
}

#[test]
fn the_meta_device_runs_the_shape_and_dtype_rules() -> Result<()> {
    let meta = TensorOptions::new().device(Device::Meta);
    let a = meta.clone().dtype(DType::I32).zeros([4, 1, 3])?;
    let b = meta.clone().dtype(DType::I64).zeros([5, 1])?;
    let r = a.bitwise_xor(&b)?;
    assert_eq!(
        (r.shape(), r.dtype(), r.device()),
        (&[4, 5, 3][..], DType::I64, Device::Meta)
    );
    assert_eq!(a.atan2(&b)?.dtype(), DType::F32);
    assert_eq!((!&a).shape(), &[4, 1, 3]);
    let f = meta.clone().zeros([2, 3])?;
    let w = meta.clone().zeros([3])?;
    assert_eq!(f.lerp(&f, &w)?.shape(), &[2, 3]);
    assert_eq!(f.clamp(Some(&w), Some(&meta.zeros([2, 1])?))?.shape(), &[2, 3]);
    assert_eq!(f.nan_to_num(0.0, None, None)?.shape(), &[2, 3]);
    assert!(a.hypot(&b).is_err());
    Ok(())
}
