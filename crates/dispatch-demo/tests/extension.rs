//! The core is extended from outside: a custom op and a toy device backend
//! are registered by this crate and called through the normal API.

use std::sync::atomic::Ordering;

use ferrotorch_core::backend::dispatch::{DispatchKey, Slot, registered_ops};
use ferrotorch_core::{Device, Error, Tensor, TensorOptions};
use ferrotorch_dispatch_demo::{SCALED_SQUARE, TOY_KERNEL_CALLS, register, scaled_square};

#[test]
fn custom_op_runs_on_cpu_and_meta() {
    register().unwrap();
    let x = Tensor::new([1.0f32, -2.0, 3.0]).unwrap();
    let y = scaled_square(&x, 2.0).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0, 8.0, 18.0]);
    // The meta device runs the op's shape rule without a kernel.
    let m = TensorOptions::new().device(Device::Meta).zeros([4, 5]).unwrap();
    let ym = scaled_square(&m, 2.0).unwrap();
    assert_eq!((ym.shape(), ym.device()), (&[4usize, 5][..], Device::Meta));
    // Its shape rule rejects bad input with the op's name.
    let e = scaled_square(&Tensor::arange(3).unwrap(), 1.0).unwrap_err();
    assert!(e.to_string().contains("demo::scaled_square"), "{e}");
    assert!(registered_ops().iter().any(|e| e.name() == "demo::scaled_square"));
    assert!(SCALED_SQUARE.has_kernel(Slot::Key(DispatchKey::Cpu)));
}

#[test]
fn toy_device_backend() {
    register().unwrap();
    let dev = Device::PrivateUse1(0);
    assert_eq!(dev.to_string(), "toydev:0");
    assert_eq!("toydev:0".parse::<Device>().unwrap(), dev);
    let before = TOY_KERNEL_CALLS.load(Ordering::Relaxed);
    let a = Tensor::new([1.0f32, 2.0, 3.0]).unwrap().to(dev).unwrap();
    let b = Tensor::new([10.0f32, 20.0, 30.0]).unwrap().to(dev).unwrap();
    assert_eq!(a.device(), dev);
    let c = a.add_scaled(&b, 2.0).unwrap();
    assert_eq!(c.device(), dev);
    assert_eq!(
        c.to(Device::Cpu).unwrap().to_vec::<f32>().unwrap(),
        vec![21.0, 42.0, 63.0]
    );
    // A CPU scalar joins a toy-device call, as 0-d CPU tensors do in PyTorch.
    let d = c.add(1.0).unwrap();
    assert_eq!(d.to_vec::<f32>().unwrap(), vec![22.0, 43.0, 64.0]);
    let z = TensorOptions::new().device(dev).zeros([2]).unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0, 0.0]);
    let s = scaled_square(&a, 3.0).unwrap();
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![3.0, 12.0, 27.0]);
    assert!(TOY_KERNEL_CALLS.load(Ordering::Relaxed) >= before + 4);
    // Views work on any backend.
    assert_eq!(a.narrow(0, 1, 2).unwrap().shape(), &[2]);
    // An op the toy backend lacks is a clear error, not a crash.
    let e = a.exp().unwrap_err();
    assert!(matches!(e, Error::NoKernel { .. }), "{e}");
    assert!(
        e.to_string().contains("exp") && e.to_string().contains("PrivateUse1"),
        "{e}"
    );
    // Mixing devices names both.
    let e = a.add(&Tensor::ones([3]).unwrap()).unwrap_err();
    assert!(
        e.to_string().contains("toydev:0") && e.to_string().contains("cpu"),
        "{e}"
    );
    // The device index is checked by the backend.
    assert!(Tensor::ones([1]).unwrap().to(Device::PrivateUse1(3)).is_err());
}

#[test]
fn cuda_without_feature_is_a_clear_error() {
    let e = Tensor::ones([2]).unwrap().to(Device::Cuda(0)).unwrap_err();
    assert!(
        e.to_string().contains("cuda:0") && e.to_string().contains("`cuda` feature"),
        "{e}"
    );
    let e = TensorOptions::new().device(Device::Cuda(0)).zeros([2]).unwrap_err();
    assert!(matches!(e, Error::DeviceUnavailable { .. }), "{e}");
}

#[test]
fn custom_op_has_a_backward_formula() {
    use ferrotorch_core::DType;
    use ferrotorch_core::autograd::{GradcheckOptions, gradcheck, gradgradcheck};
    register().unwrap();
    let x = Tensor::new([1.0f64, -2.0, 0.5]).unwrap().requires_grad_(true).unwrap();
    let y = scaled_square(&x, 1.5).unwrap();
    assert_eq!(y.grad_fn().unwrap().name(), "ScaledSquareBackward0");
    y.sum().unwrap().backward().unwrap();
    // d(1.5 x^2)/dx = 3x.
    assert_eq!(x.grad().unwrap().to_vec::<f64>().unwrap(), vec![3.0, -6.0, 1.5]);
    let xs = [TensorOptions::new()
        .dtype(DType::F64)
        .randn([2, 3])
        .unwrap()
        .requires_grad_(true)
        .unwrap()];
    let f = |t: &[Tensor]| scaled_square(&t[0], 0.7);
    gradcheck(&f, &xs, GradcheckOptions::default()).unwrap();
    gradgradcheck(&f, &xs, GradcheckOptions::default()).unwrap();
}

/// The toy backend's pointwise kernels are add, mul, neg, sin and cos (plus
/// fill and copy), none for the CPU's fused backward operators; autograd
/// through sin, cos and `x * x` still works on it, through the composite
/// formulas of those operators.
#[test]
fn toy_device_autograd_uses_composite_backward_formulas() {
    register().unwrap();
    let dev = Device::PrivateUse1(0);
    let xs = [0.5f32, -1.25, 2.0];
    let cpu = Tensor::new(xs).unwrap();
    let x = cpu.to(dev).unwrap().requires_grad_(true).unwrap();
    let ones = TensorOptions::new().device(dev).ones([3]).unwrap();
    let y = x
        .sin()
        .unwrap()
        .add(&x.cos().unwrap())
        .unwrap()
        .add(&x.mul(&x).unwrap())
        .unwrap();
    assert_eq!(y.device(), dev);
    y.backward_with(&ones).unwrap();
    let grad = x.grad().unwrap();
    assert_eq!(grad.device(), dev);
    // d/dx (sin x + cos x + x^2) = cos x - sin x + 2x, in the composite's
    // rounding: cos x, then + (-sin x), then + (x + x) (the x * x backward).
    let want: Vec<f32> = xs.iter().map(|&v| v.cos() + -v.sin() + (v + v)).collect();
    let got = grad.to(Device::Cpu).unwrap().to_vec::<f32>().unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-6 * (1.0 + w.abs()), "{got:?} vs {want:?}");
    }
}
