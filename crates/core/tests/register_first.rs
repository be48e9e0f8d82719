//! Registration before the first operator runs (a fresh process: this file
//! is its own test binary, and its one test runs first thing). The built-in
//! kernels are registered first whenever registration is asked for, so an
//! out-of-tree kernel replaces a built-in one instead of making start-up
//! registration fail (which once made every later op panic).

use ferrotorch_core::backend::dispatch::{DispatchKey, Kernel, Op, Slot, register_backend};
use ferrotorch_core::ops::UnaryKind;
use ferrotorch_core::{Error, Result, Tensor};

/// A replacement CPU kernel for `neg`: writes 42 everywhere.
fn forty_two(_op: &dyn Op, _inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<()> {
    outputs[0].fill_(42.0).map(|_| ())
}

#[test]
fn a_kernel_registered_before_any_op_replaces_the_builtin_one() {
    let neg = UnaryKind::Neg.entry();
    neg.register(Slot::Key(DispatchKey::Cpu), Kernel::Structured(forty_two))
        .expect("replacing a built-in kernel is allowed");
    // Every other op still works, and neg runs the replacement.
    let x = Tensor::from_slice(&[1.0f32, 2.0]);
    assert_eq!(x.add(&x).unwrap().to_vec::<f32>().unwrap(), [2.0, 4.0]);
    assert_eq!(x.neg().unwrap().to_vec::<f32>().unwrap(), [42.0, 42.0]);
    // A second replacement of the same slot is refused, not a panic.
    let again = neg.register(Slot::Key(DispatchKey::Cpu), Kernel::Structured(forty_two));
    assert!(matches!(again, Err(Error::Registration { .. })), "{again:?}");
    // So is a second CPU backend.
    struct Fake;
    impl ferrotorch_core::backend::dispatch::Backend for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn allocate(
            &self,
            _: ferrotorch_core::Device,
            _: usize,
            _: bool,
        ) -> Result<ferrotorch_core::backend::storage::Buffer> {
            Ok(ferrotorch_core::backend::storage::Buffer::Meta)
        }
        fn copy_from_host(
            &self,
            _: ferrotorch_core::Device,
            _: &[u8],
        ) -> Result<ferrotorch_core::backend::storage::Buffer> {
            Ok(ferrotorch_core::backend::storage::Buffer::Meta)
        }
        fn copy_to_host(&self, _: &ferrotorch_core::backend::storage::Buffer, _: usize, _: &mut [u8]) -> Result<()> {
            Ok(())
        }
    }
    static FAKE: Fake = Fake;
    assert!(matches!(
        register_backend(DispatchKey::Cpu, &FAKE),
        Err(Error::Registration { .. })
    ));
    assert_eq!(x.mul(3.0).unwrap().to_vec::<f32>().unwrap(), [3.0, 6.0]);
}
