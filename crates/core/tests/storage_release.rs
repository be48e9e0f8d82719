//! Releasing a storage's memory while tensors stay on it (FSDP's gathered
//! parameters): every use errors instead of reading freed memory, the
//! memory is returned, and restoring it keeps the version, so a backward
//! that saved the tensor before the release still runs.

use ferrotorch_core::backend::TensorExt;
use ferrotorch_core::memory::memory_allocated;
use ferrotorch_core::{Error, Tensor};

#[test]
fn released_storage_errors_frees_and_restores() {
    let w = Tensor::randn((256, 256)).unwrap().requires_grad_(true).unwrap();
    let x = Tensor::randn((4, 256)).unwrap();
    let sq = w.mul(&w).unwrap().sum().unwrap(); // saves w for its backward
    let kept: Vec<u8> = w
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let version = w.version();
    let before = memory_allocated();
    w.storage().release_cpu().unwrap();
    assert!(w.storage().is_released());
    assert!(
        before - memory_allocated() >= 256 * 256 * 4,
        "the memory is returned: {before} -> {}",
        memory_allocated()
    );
    w.storage().release_cpu().unwrap(); // twice is fine
    // Every use is an error, not a read of freed memory.
    let view = w.t().unwrap();
    for r in [
        w.to_vec::<f32>().map(drop),
        w.add(1.0).map(drop),
        view.contiguous().map(drop),
        x.matmul(&view).map(drop),
        w.sum().map(drop),
        w.detach().copy_(&Tensor::zeros((256, 256)).unwrap()).map(drop),
        Tensor::zeros((256, 256)).unwrap().copy_(&w).map(drop),
        w.to_dtype(ferrotorch_core::DType::F64).map(drop),
    ] {
        assert!(matches!(r, Err(Error::Released { .. })), "{r:?}");
    }
    // Backward through the saved tensor fails with that error too.
    let e = sq.backward().unwrap_err();
    assert!(matches!(e, Error::Released { .. }), "{e}");
    assert!(e.to_string().contains("memory was released"), "{e}");
    // Restored: the same bytes, the same version, backward runs.
    let y = x.matmul(&w.t().unwrap());
    assert!(y.is_err());
    w.storage().restore_cpu(|b| b.copy_from_slice(&kept)).unwrap();
    assert_eq!(w.version(), version);
    let e = w.storage().restore_cpu(|_| ()).unwrap_err().to_string();
    assert!(e.contains("holds memory"), "{e}");
    // Saved, released, restored: the version check passes and backward
    // reads the restored bytes.
    let sq = w.mul(&w).unwrap().sum().unwrap();
    w.storage().release_cpu().unwrap();
    w.storage().restore_cpu(|b| b.copy_from_slice(&kept)).unwrap();
    sq.backward().unwrap();
    let twice: Vec<f32> = w.to_vec::<f32>().unwrap().iter().map(|v| 2.0 * v).collect();
    assert_eq!(w.grad().unwrap().to_vec::<f32>().unwrap(), twice);
    // Meta and read-only storage cannot be released.
    let meta = Tensor::zeros((2,))
        .unwrap()
        .to_device(ferrotorch_core::Device::Meta)
        .unwrap();
    assert!(meta.storage().release_cpu().is_err());
}
