//! Autocast as a dispatcher layer: which operators run in which dtype,
//! gradients in the parameters' dtype, the cast cache, nesting, threads,
//! and errors at the guard.

use ferrotorch_core::amp::{self, AutocastOptions};
use ferrotorch_core::profiler::{self, ProfileOptions};
use ferrotorch_core::{ConvOptions, DType, Device, Error, Result, Tensor, TensorOptions};

fn bf16_region() -> Result<amp::AutocastGuard> {
    amp::autocast(Device::Cpu, DType::BF16)
}

fn bits(t: &Tensor) -> Result<Vec<u32>> {
    Ok(t.to_dtype(DType::F32)?
        .contiguous()?
        .to_vec::<f32>()?
        .iter()
        .map(|v| v.to_bits())
        .collect())
}

#[test]
fn products_run_in_bf16_and_range_sensitive_ops_in_f32() -> Result<()> {
    let x = Tensor::randn([4, 8])?;
    let w = Tensor::randn([8, 6])?;
    let b = Tensor::randn([6])?;
    let img = Tensor::randn([2, 3, 8, 8])?;
    let k = Tensor::randn([4, 3, 3, 3])?;
    let _ac = bf16_region()?;
    let y = x.matmul(&w)?;
    assert_eq!(y.dtype(), DType::BF16);
    assert_eq!(b.addmm(&x, &w, 1.0, 1.0)?.dtype(), DType::BF16);
    assert_eq!(x.unsqueeze(0)?.matmul(&w.unsqueeze(0)?)?.dtype(), DType::BF16, "bmm");
    assert_eq!(img.conv2d(&k, None, ConvOptions::default())?.dtype(), DType::BF16);
    // Pointwise ops not in the lists keep their input's dtype.
    assert_eq!(y.relu()?.dtype(), DType::BF16);
    // The f32 list.
    for (name, t) in [
        ("softmax", y.softmax(-1)?),
        ("log_softmax", y.log_softmax(-1)?),
        ("layer_norm", y.layer_norm([6], None, None, 1e-5)?),
        ("exp", y.exp()?),
        ("log", y.abs()?.log()?),
        ("sum", y.sum_dim(1, false)?),
        ("mean", y.mean_dim(1, false)?),
    ] {
        assert_eq!(t.dtype(), DType::F32, "{name}");
    }
    // Losses.
    let target = Tensor::new(vec![0i64, 1, 2, 3])?;
    let loss = y.cross_entropy(&target, None, ferrotorch_core::Reduction::Mean, -100, 0.0)?;
    assert_eq!(loss.dtype(), DType::F32);
    // f64 inputs are not lowered.
    let x64 = x.to_dtype(DType::F64)?;
    assert_eq!(x64.matmul(&x64.t()?)?.dtype(), DType::F64);
    Ok(())
}

#[test]
fn results_are_the_products_of_the_rounded_inputs() -> Result<()> {
    let x = Tensor::randn([5, 7])?;
    let w = Tensor::randn([7, 3])?;
    let want = x.to_dtype(DType::BF16)?.matmul(&w.to_dtype(DType::BF16)?)?;
    let got = {
        let _ac = bf16_region()?;
        x.matmul(&w)?
    };
    assert_eq!(bits(&got)?, bits(&want)?);
    // Close to the f32 product (bf16 has 8 bits of mantissa).
    let f32 = x.matmul(&w)?.to_vec::<f32>()?;
    for (a, b) in got.to_dtype(DType::F32)?.to_vec::<f32>()?.iter().zip(&f32) {
        assert!((a - b).abs() <= 0.05 * b.abs().max(1.0), "{a} vs {b}");
    }
    Ok(())
}

#[test]
fn gradients_arrive_in_the_parameters_dtype() -> Result<()> {
    let x = Tensor::randn([4, 8])?;
    let w = Tensor::randn([8, 6])?.requires_grad_(true)?;
    let b = Tensor::randn([6])?.requires_grad_(true)?;
    // Forward in the region, backward outside it (as PyTorch recommends:
    // a backward inside would run its formulas' listed ops under autocast).
    let loss = {
        let _ac = bf16_region()?;
        let y = b.addmm(&x, &w, 1.0, 1.0)?;
        y.log_softmax(-1)?.sum()?
    };
    loss.backward()?;
    assert_eq!(w.grad()?.dtype(), DType::F32);
    assert_eq!(b.grad()?.dtype(), DType::F32);
    // The same graph written by hand: casts, bf16 addmm, f32 log_softmax.
    let w2 = w.detach().requires_grad_(true)?;
    let b2 = b.detach().requires_grad_(true)?;
    let y = b2
        .to_dtype(DType::BF16)?
        .addmm(&x.to_dtype(DType::BF16)?, &w2.to_dtype(DType::BF16)?, 1.0, 1.0)?;
    y.to_dtype(DType::F32)?.log_softmax(-1)?.sum()?.backward()?;
    assert_eq!(bits(&w.grad()?)?, bits(&w2.grad()?)?);
    assert_eq!(bits(&b.grad()?)?, bits(&b2.grad()?)?);
    Ok(())
}

/// The number of casts of f32 tensors (`aten::_to_copy` of a float32
/// input) `f` makes: autocast's, not the bf16 kernels' own conversions.
fn casts(f: impl FnOnce() -> Result<()>) -> Result<usize> {
    let opts = ProfileOptions {
        record_shapes: true,
        ..Default::default()
    };
    let ((), prof) = profiler::profile(opts, f)?;
    Ok(prof
        .events()
        .iter()
        .filter(|e| e.name == "aten::_to_copy" && e.input_dtypes == ["float32"])
        .count())
}

#[test]
fn a_weight_is_cast_once_per_region() -> Result<()> {
    let x = Tensor::randn([4, 8])?;
    let w = Tensor::randn([8, 8])?.requires_grad_(true)?;
    let region = || -> Result<()> {
        let _ac = bf16_region()?;
        // x is not a weight: cast each time; w once.
        let _ = x.matmul(&w)?;
        let _ = x.matmul(&w)?;
        Ok(())
    };
    assert_eq!(casts(region)?, 3);
    // A new region casts again (the cache is dropped when a region ends).
    assert_eq!(casts(region)?, 3);
    // Without the cache, every use casts.
    let uncached = || -> Result<()> {
        let _ac = amp::autocast_with(
            Device::Cpu,
            AutocastOptions {
                dtype: Some(DType::BF16),
                cache_enabled: false,
                ..Default::default()
            },
        )?;
        let _ = x.matmul(&w)?;
        let _ = x.matmul(&w)?;
        Ok(())
    };
    assert_eq!(casts(uncached)?, 4);
    // After an in-place update between regions the new values are cast.
    let _ = casts(region)?;
    ferrotorch_core::autograd::no_grad(|| w.fill_(1.0))?;
    let y = {
        let _ac = bf16_region()?;
        x.matmul(&w)?
    };
    let want = x
        .to_dtype(DType::BF16)?
        .matmul(&Tensor::ones([8, 8])?.to_dtype(DType::BF16)?)?;
    assert_eq!(bits(&y)?, bits(&want)?);
    Ok(())
}

#[test]
fn regions_nest_and_stay_on_their_thread() -> Result<()> {
    let x = Tensor::randn([2, 2])?;
    assert!(!amp::is_autocast_enabled(Device::Cpu));
    {
        let _outer = bf16_region()?;
        assert!(amp::is_autocast_enabled(Device::Cpu));
        {
            let _off = amp::autocast_with(
                Device::Cpu,
                AutocastOptions {
                    enabled: false,
                    ..Default::default()
                },
            )?;
            assert!(!amp::is_autocast_enabled(Device::Cpu));
            assert_eq!(x.matmul(&x)?.dtype(), DType::F32);
            {
                let _f16 = amp::autocast(Device::Cpu, DType::F16)?;
                assert_eq!(amp::get_autocast_dtype(Device::Cpu), DType::F16);
                assert_eq!(x.matmul(&x)?.dtype(), DType::F16);
            }
            assert_eq!(x.matmul(&x)?.dtype(), DType::F32);
        }
        assert_eq!(x.matmul(&x)?.dtype(), DType::BF16);
        let other = std::thread::spawn(|| {
            let x = Tensor::randn([2, 2]).unwrap();
            (amp::is_autocast_enabled(Device::Cpu), x.matmul(&x).unwrap().dtype())
        })
        .join()
        .unwrap();
        assert_eq!(other, (false, DType::F32));
    }
    assert!(!amp::is_autocast_enabled(Device::Cpu));
    assert_eq!(x.matmul(&x)?.dtype(), DType::F32);
    Ok(())
}

#[test]
fn in_place_and_out_calls_keep_their_dtypes_and_meta_follows_the_cpu() -> Result<()> {
    let a = Tensor::randn([3, 3])?;
    let _ac = bf16_region()?;
    let acc = Tensor::zeros([3, 3])?;
    acc.add_(&a.matmul(&a)?)?;
    assert_eq!(acc.dtype(), DType::F32);
    let m = TensorOptions::new().device(Device::Meta).empty([16, 32])?;
    let mw = TensorOptions::new().device(Device::Meta).empty([32, 8])?;
    let y = m.matmul(&mw)?;
    assert_eq!(
        (y.device(), y.dtype(), y.shape()),
        (Device::Meta, DType::BF16, &[16usize, 8][..])
    );
    assert_eq!(y.softmax(-1)?.dtype(), DType::F32);
    Ok(())
}

#[test]
fn unsupported_devices_and_dtypes_fail_at_the_guard() {
    assert!(matches!(
        amp::autocast(Device::Cuda(0), DType::BF16),
        Err(Error::DeviceUnavailable { .. })
    ));
    for dt in [DType::F32, DType::F64, DType::I64, DType::Bool] {
        let e = amp::autocast(Device::Cpu, dt).err().expect("refused");
        assert!(e.to_string().starts_with("autocast:"), "{e}");
    }
    assert!(amp::autocast(Device::Meta, DType::BF16).is_err());
    assert!(!amp::is_autocast_enabled(Device::Cpu));
}
