//! The safe API used as a hostile caller would: sizes that overflow,
//! allocations no system can serve, layouts that reach past their storage,
//! bool tensors over arbitrary bytes. Each is an error naming the operator
//! (PyTorch's behaviour in 2.15 noted beside it), never a panic, an abort or
//! memory read out of bounds.

use ferrotorch_core::backend::Layout;
use ferrotorch_core::backend::TensorExt;
use ferrotorch_core::backend::storage::{Buffer, CpuBuffer, Storage};
use ferrotorch_core::{DType, Device, Error, Tensor, TensorOptions};

fn overflow_op(r: ferrotorch_core::Result<Tensor>) -> &'static str {
    match r {
        Err(Error::SizeOverflow { op, .. }) => op,
        Err(e) => panic!("expected a size overflow, got {e}"),
        Ok(t) => panic!("expected a size overflow, got a tensor of shape {:?}", t.shape()),
    }
}

fn invalid(r: ferrotorch_core::Result<Tensor>) -> String {
    match r {
        Err(e @ Error::InvalidArgument { .. }) => e.to_string(),
        Err(e) => panic!("expected an invalid-argument error, got {e}"),
        Ok(t) => panic!("expected an error, got a tensor of shape {:?}", t.shape()),
    }
}

/// PyTorch: "Storage size calculation overflowed with sizes=[...]".
#[test]
fn sizes_that_overflow_are_errors() {
    assert_eq!(overflow_op(Tensor::arange(1 << 62)), "arange");
    assert_eq!(overflow_op(Tensor::zeros([1usize << 62, 4])), "full");
    assert_eq!(overflow_op(Tensor::zeros([1usize << 32, 1usize << 32])), "full");
    assert_eq!(overflow_op(Tensor::ones([usize::MAX, 2])), "full");
    assert_eq!(
        overflow_op(TensorOptions::new().device(Device::Meta).zeros([1usize << 62, 4])),
        "full"
    );
    assert_eq!(overflow_op(Tensor::linspace(0.0, 1.0, 1 << 62)), "linspace");
    assert_eq!(overflow_op(Tensor::randn([1usize << 62, 4])), "normal_");
    // "invalid size, possible overflow?"
    assert_eq!(overflow_op(Tensor::arange_step(0.0, 1.0, 1e-300)), "arange");
    assert_eq!(overflow_op(Tensor::arange_step(0.0, f64::MAX, 1e-300)), "arange");
    // "Stride calculation overflowed", whether or not a recycled tensor is at hand.
    assert_eq!(overflow_op(Tensor::zeros([0, 1usize << 40, 1usize << 40])), "full");
    drop(Tensor::ones([3]).unwrap().add(1.0).unwrap());
    let x = Tensor::ones([2]).unwrap();
    assert_eq!(
        overflow_op(x.sum().unwrap().expand([0, 1usize << 40, 1usize << 40]).unwrap().neg()),
        "neg"
    );
    // "numel: integer multiplication overflow"
    let row = Tensor::zeros([1, 4]).unwrap();
    assert_eq!(overflow_op(row.expand([1usize << 62, 4])), "expand");
    assert_eq!(overflow_op(row.expand([1usize << 61, 4])), "expand");
    // The largest count PyTorch allows is still a valid (expanded) view.
    let big = Tensor::zeros([1]).unwrap().expand([i64::MAX]).unwrap();
    assert_eq!(big.numel(), i64::MAX as usize);
    assert_eq!(
        overflow_op(Tensor::from_vec(Vec::<f32>::new(), [1usize << 32, 1usize << 32])),
        "from_vec"
    );
    let one = Tensor::zeros([1]).unwrap().expand([1usize << 62]).unwrap();
    // PyTorch wraps to an empty tensor here; the sum of the sizes overflows.
    assert_eq!(overflow_op(Tensor::cat(&[&one, &one, &one, &one], 0)), "cat");
    assert_eq!(overflow_op(one.contiguous()), "_to_copy");
}

/// Exact lengths where f64 or i64 arithmetic would go wrong.
#[test]
fn arange_lengths_are_exact() {
    // PyTorch gives 0 elements (its length computation overflows i64).
    let t = Tensor::arange_step(i64::MIN, i64::MAX, 1i64 << 62).unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![i64::MIN, -(1 << 62), 0, 1 << 62]);
    let t = Tensor::arange_step(i64::MAX - 2, i64::MAX, 1).unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![i64::MAX - 2, i64::MAX - 1]);
    assert_eq!(Tensor::arange_step(5, 5, 1).unwrap().numel(), 0);
}

/// PyTorch: "DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes".
#[test]
fn allocation_failure_is_an_error_with_the_byte_count() {
    match Tensor::zeros([1usize << 45]) {
        Err(Error::OutOfMemory { op, nbytes, device }) => {
            assert_eq!((op, nbytes, device), ("full", 1 << 47, Device::Cpu));
        }
        other => panic!("expected out of memory, got {:?}", other.map(|t| t.numel())),
    }
    let e = Tensor::zeros([1usize << 45]).err().unwrap();
    assert_eq!(
        e.to_string(),
        "full: not enough memory: tried to allocate 140737488355328 bytes on cpu"
    );
    assert!(matches!(
        Tensor::zeros([1]).unwrap().expand([1usize << 45]).unwrap().contiguous(),
        Err(Error::OutOfMemory { nbytes, .. }) if nbytes == 1 << 47
    ));
    assert!(matches!(CpuBuffer::zeroed(1 << 50), Err(Error::OutOfMemory { .. })));
    // The process is still healthy afterwards.
    assert_eq!(Tensor::ones([3]).unwrap().sum().unwrap().item::<f32>().unwrap(), 3.0);
}

#[test]
fn layouts_must_fit_their_storage() {
    let s = Storage::cpu_from_bytes(&[0u8; 4]).unwrap();
    let msg = invalid(Tensor::from_parts(
        s.clone(),
        Layout::contiguous(&[1 << 20]),
        DType::F32,
    ));
    assert!(msg.starts_with("from_parts: the layout (shape [1048576]"), "{msg}");
    assert!(msg.contains("storage of 4 bytes"), "{msg}");
    // Elements of 8 bytes over 4 bytes, an offset past the end, a huge stride.
    invalid(Tensor::from_parts(s.clone(), Layout::contiguous(&[1]), DType::F64));
    let at = |shape: &[usize], strides: &[usize], offset| Layout {
        shape: shape.into(),
        strides: strides.into(),
        offset,
    };
    invalid(Tensor::from_parts(s.clone(), at(&[1], &[1], 1), DType::F32));
    invalid(Tensor::from_parts(s.clone(), at(&[2], &[1 << 62], 0), DType::F32));
    invalid(Tensor::from_parts(s.clone(), at(&[2], &[usize::MAX], 0), DType::F32));
    invalid(Tensor::from_parts(s.clone(), at(&[1], &[1], usize::MAX), DType::F32));
    invalid(Tensor::from_parts(s.clone(), at(&[2, 2], &[1], 0), DType::U8));
    // Empty tensors address nothing; a fitting layout works.
    assert_eq!(
        Tensor::from_parts(s.clone(), at(&[0, 5], &[1 << 40, 1], 99), DType::F32)
            .unwrap()
            .numel(),
        0
    );
    let t = Tensor::from_parts(s, at(&[2, 2], &[2, 1], 0), DType::U8).unwrap();
    assert_eq!(t.sum().unwrap().item::<i64>().unwrap(), 0);

    let x = Tensor::arange(6).unwrap();
    let msg = invalid(x.view_with_layout(at(&[2], &[1 << 40], 0)));
    assert!(msg.starts_with("view_with_layout: the layout"), "{msg}");
    invalid(x.view_with_layout(at(&[7], &[1], 0)));
    invalid(x.view_with_layout(at(&[3], &[1], 4)));
    assert_eq!(
        x.view_with_layout(at(&[3], &[2], 1)).unwrap().to_vec::<i64>().unwrap(),
        [1, 3, 5]
    );
    // as_strided: "Storage size calculation overflowed with sizes=[2] and strides=[...]".
    assert!(x.as_strided([2], [1usize << 62], 0).is_err());
    assert!(x.as_strided([2], [usize::MAX], 0).is_err());
    assert!(x.as_strided([1usize << 62, 1usize << 62], [0, 0], 0).is_err());
}

#[test]
fn storages_hold_what_they_claim() {
    let buf = CpuBuffer::zeroed(4).unwrap();
    let e = Storage::new(Device::Cpu, 1 << 40, Buffer::Cpu(buf)).err().unwrap();
    assert!(e.to_string().contains("the buffer holds 4 bytes"), "{e}");
    let buf = CpuBuffer::zeroed(4).unwrap();
    assert!(Storage::new(Device::Meta, 4, Buffer::Cpu(buf)).is_err());
    let s = Storage::new(
        Device::Cpu,
        4,
        Buffer::Cpu(CpuBuffer::from_bytes(&[1, 0, 0, 0]).unwrap()),
    )
    .unwrap();
    let t = Tensor::from_parts(s, Layout::contiguous(&[]), DType::I32).unwrap();
    assert_eq!(t.item::<i32>().unwrap(), 1);
}

/// Any byte but 0 and 1 in a Rust `bool` is undefined behaviour, so no bool
/// tensor may see one: not at construction, and not later through a tensor
/// of another dtype sharing its storage.
#[test]
fn bool_tensors_never_see_bytes_other_than_0_and_1() {
    let bad = Storage::cpu_from_bytes(&[0, 1, 2]).unwrap();
    let msg = invalid(Tensor::from_parts(bad, Layout::contiguous(&[3]), DType::Bool));
    assert!(msg.contains("byte 2 of its storage"), "{msg}");

    // Valid bytes in a storage no one else holds: accepted.
    let good = Storage::cpu_from_bytes(&[0, 1, 1]).unwrap();
    let b = Tensor::from_parts(good, Layout::contiguous(&[3]), DType::Bool).unwrap();
    assert_eq!(b.to_vec::<bool>().unwrap(), [false, true, true]);
    // Its storage cannot be reinterpreted as bytes that could be written to 2.
    invalid(Tensor::from_parts(
        b.storage().clone(),
        Layout::contiguous(&[3]),
        DType::U8,
    ));

    // A u8 tensor's storage, shared with the u8 tensor, cannot become bool...
    let u = Tensor::from_slice(&[0u8, 1, 0]);
    let msg = invalid(Tensor::from_parts(
        u.storage().clone(),
        Layout::contiguous(&[3]),
        DType::Bool,
    ));
    assert!(msg.contains("cannot share a storage"), "{msg}");
    // ...which is what would otherwise let this write reach a bool tensor.
    u.fill_(2).unwrap();

    // Op outputs and from_slice are bool-typed, and their views stay usable.
    let m = Tensor::from_slice(&[1.0f32, -1.0, 2.0]).gt(0.0).unwrap();
    assert!(m.storage().is_bool_typed());
    let again = Tensor::from_parts(m.storage().clone(), Layout::contiguous(&[2]), DType::Bool).unwrap();
    assert_eq!(again.to_vec::<bool>().unwrap(), [true, false]);
    assert!(Tensor::from_slice(&[true]).storage().is_bool_typed());
    assert!(!Tensor::from_slice(&[1u8]).storage().is_bool_typed());
}

/// Writing into an output whose elements share addresses (`fill_` of an
/// expanded tensor, an overlapping `as_strided` view) runs on one thread:
/// no two threads write one address, whatever the size.
#[test]
fn outputs_with_overlapping_elements_are_written_by_one_thread() -> ferrotorch_core::Result<()> {
    let base = Tensor::zeros([3])?;
    let wide = base.expand([1 << 18, 3])?;
    wide.fill_(2.5)?;
    assert_eq!(base.to_vec::<f32>()?, [2.5, 2.5, 2.5]);
    // Rows that overlap by all but one element: 300,000 elements over 300,003 slots.
    let flat = Tensor::zeros([300_003])?;
    let over = flat.as_strided([300_000, 4], [1, 1], 0)?;
    over.fill_(1.0)?;
    assert!(flat.to_vec::<f32>()?.iter().all(|&v| v == 1.0));
    // An in-place op into an overlapping view is refused, as in PyTorch.
    assert!(wide.add_(1.0).is_err());
    Ok(())
}

/// Factory calls and ops on the meta device stay there (shapes and dtypes
/// only), also next to 0-d CPU tensors, which join calls on any device.
#[test]
fn meta_tensors_stay_on_meta() -> ferrotorch_core::Result<()> {
    let m = TensorOptions::new().device(Device::Meta).zeros([2, 3])?;
    assert_eq!(m.device(), Device::Meta);
    let a = TensorOptions::new().device(Device::Meta).arange(0.0, 6.0, 1.0)?;
    assert_eq!(a.device(), Device::Meta);
    assert_eq!(a.shape(), [6]);
    let s = m.add(&Tensor::scalar(2.0f32))?;
    assert_eq!(s.device(), Device::Meta);
    assert_eq!(s.shape(), [2, 3]);
    let c = Tensor::zeros([2, 3])?;
    assert!(
        m.add(&c).is_err(),
        "a meta tensor with a CPU tensor of more than 0 dims"
    );
    Ok(())
}

/// `as_strided` checks that the view stays inside the storage, as PyTorch
/// ("setting a view with size [3], stride [5] ... needs 11 elements"); an
/// empty view may have any strides.
#[test]
fn as_strided_stays_inside_its_storage() -> ferrotorch_core::Result<()> {
    let x = Tensor::zeros([4])?;
    let e = x.as_strided([3], [5], 0).unwrap_err().to_string();
    assert!(e.contains("needs 11 elements but the storage holds 4"), "{e}");
    assert!(x.as_strided([2], [1], 3).is_err());
    assert!(x.as_strided([2], [1], 2).is_ok());
    assert_eq!(x.as_strided([0, 3], [100, 100], 0)?.shape(), [0, 3]);
    Ok(())
}
