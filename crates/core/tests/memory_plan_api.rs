//! `predict_peak_memory` and `default_device_scope`: what runs on the meta
//! device, what is charged, and the errors.

use ferrotorch_core::memory::predict_peak_memory;
use ferrotorch_core::{DType, Device, Error, Result, Tensor, default_device, default_device_scope};

#[test]
fn tensors_made_inside_are_meta_and_charged_in_allocator_blocks() -> Result<()> {
    let (dev, p) = predict_peak_memory(|| {
        let a = Tensor::zeros([1000])?; // 4000 bytes: a 4000-byte block
        let b = Tensor::zeros([100_000])?; // 400000 bytes: whole pages (401408)
        let small = Tensor::zeros_dtype([3], DType::F64)?; // 24 bytes: a 32-byte block
        let d = a.device();
        drop((a, b, small));
        Ok(d)
    })?;
    assert_eq!(dev, Device::Meta);
    assert_eq!(p.peak_bytes, 4000 + 401_408 + 32);
    assert_eq!(p.final_bytes, 0);
    let live: Vec<usize> = p.timeline.iter().map(|e| e.live_bytes).collect();
    assert_eq!(live, [4000, 405_408, 405_440, 401_440, 32, 0]);
    assert_eq!(p.timeline[0].op, "full");
    assert_eq!(p.timeline[3].op, "free");
    // The default device is back to the CPU.
    assert_eq!(default_device(), Device::Cpu);
    assert_eq!(Tensor::zeros([1])?.device(), Device::Cpu);
    Ok(())
}

#[test]
fn kept_tensors_count_at_the_end_and_errors_end_the_prediction() -> Result<()> {
    let (kept, p) = predict_peak_memory(|| Tensor::randn([256, 256]))?;
    assert_eq!(p.final_bytes, 256 * 256 * 4);
    drop(kept);
    // Nested predictions are refused; an error inside is returned and
    // leaves no prediction or meta default behind.
    let e = predict_peak_memory(|| predict_peak_memory(|| Ok(())).map(|_| ())).unwrap_err();
    assert!(e.to_string().contains("already running"), "{e}");
    let e = predict_peak_memory(|| Tensor::zeros([1])?.item::<f32>()).unwrap_err();
    assert!(matches!(e, Error::NoData { .. }), "{e}");
    assert_eq!(default_device(), Device::Cpu);
    assert!(predict_peak_memory(|| Ok(())).is_ok());
    // Scopes nest and restore.
    {
        let _m = default_device_scope(Device::Meta);
        {
            let _c = default_device_scope(Device::Cpu);
            assert_eq!(Tensor::ones([1])?.device(), Device::Cpu);
        }
        assert_eq!(Tensor::ones([1])?.device(), Device::Meta);
    }
    assert_eq!(default_device(), Device::Cpu);
    Ok(())
}
