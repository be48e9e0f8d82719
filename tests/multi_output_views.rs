//! `split`, `chunk`, `split_with_sizes` and `unbind` as PyTorch's
//! multi-output views: one node for all outputs (`SplitBackward0`, ...),
//! gradients concatenated with zeros for unused outputs, and PyTorch 2.15's
//! refusals of in-place writes into such views and into views made in
//! no-grad mode (messages as PyTorch's).

use ferrotorch::autograd::no_grad_guard;
use ferrotorch::{Result, Tensor};

fn node(t: &Tensor) -> String {
    t.grad_fn().map(|n| n.name().to_string()).unwrap_or_default()
}

fn leaf(n: usize) -> Result<Tensor> {
    Tensor::arange(n as i64)?
        .to_dtype(ferrotorch::DType::F32)?
        .requires_grad_(true)
}

fn err(r: Result<Tensor>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn one_node_per_call_with_pytorch_names() -> Result<()> {
    let x = leaf(12)?.reshape([3, 4])?;
    let p = x.split(3, 1)?;
    assert_eq!(
        (node(&p[0]), node(&p[1])),
        ("SplitBackward0".into(), "SplitBackward0".into())
    );
    assert!(std::sync::Arc::ptr_eq(
        &p[0].grad_fn().unwrap(),
        &p[1].grad_fn().unwrap()
    ));
    assert_eq!(p[1].shape(), [3, 1]);
    assert_eq!(node(&x.chunk(2, 0)?[1]), "SplitBackward0");
    assert_eq!(node(&x.split_sizes([1, 3], 1)?[0]), "SplitWithSizesBackward0");
    let u = x.unbind(1)?;
    assert_eq!(
        (u.len(), node(&u[3]), u[3].shape()),
        (4, "UnbindBackward0".into(), &[3][..])
    );
    // chunk of an empty dim is split_with_sizes into `chunks` empty pieces.
    let e = Tensor::zeros([0, 2])?.requires_grad_(true)?.chunk(3, 0)?;
    assert_eq!((e.len(), node(&e[2])), (3, "SplitWithSizesBackward0".into()));
    // split of an empty dim: one empty piece.
    assert_eq!(Tensor::zeros([0])?.split(2, 0)?.len(), 1);
    Ok(())
}

/// Gradients of the outputs used, zeros for the others (also after the last
/// output with a gradient).
#[test]
fn gradients_concatenate_with_zeros() -> Result<()> {
    let x = leaf(6)?;
    let p = x.split(2, 0)?;
    p[1].mul(3.0)?.sum()?.backward()?;
    assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [0.0, 0.0, 3.0, 3.0, 0.0, 0.0]);
    let y = leaf(6)?;
    let m = y.reshape([2, 3])?;
    let u = m.unbind(1)?;
    u[0].mul(&u[1])?.sum()?.backward()?;
    // d/dm[:,0] = m[:,1], d/dm[:,1] = m[:,0], column 2 unused.
    assert_eq!(y.grad().unwrap().to_vec::<f32>()?, [1.0, 0.0, 0.0, 4.0, 3.0, 0.0]);
    Ok(())
}

#[test]
fn in_place_writes_into_split_outputs_are_refused() -> Result<()> {
    let x = leaf(4)?.clone_tensor()?;
    let e = err(x.split(2, 0)?[1].mul_(2.0));
    assert!(
        e.contains("Output 1 of Split is a view and is being modified inplace"),
        "{e}"
    );
    let e = err(x.unbind(0)?[1].mul_(2.0));
    assert!(e.contains("Output 1 of Unbind is a view"), "{e}");
    let e = err(x.split_sizes([1, 3], 0)?[1].mul_(2.0));
    assert!(e.contains("Output 1 of SplitWithSizes is a view"), "{e}");
    // A view of such a view inherits the refusal.
    let e = err(x.chunk(2, 0)?[1].select(0, 0)?.mul_(2.0));
    assert!(e.contains("Output 0 of Select is a view"), "{e}");
    // Nothing requires grad: allowed.
    let plain = Tensor::ones([4])?;
    plain.split(2, 0)?[0].mul_(2.0)?;
    assert_eq!(plain.to_vec::<f32>()?, [2.0, 2.0, 1.0, 1.0]);
    // A plain tensor's split, written with an operand that requires grad.
    let w = leaf(2)?;
    let e = err(Tensor::ones([4])?.split(2, 0)?[0].mul_(&w));
    assert!(e.contains("A view was created in no_grad mode"), "{e}");
    assert!(e.contains("returns multiple views"), "{e}");
    // In no-grad mode: allowed, and nothing recorded.
    let v = x.split(2, 0)?;
    {
        let _g = no_grad_guard();
        v[0].mul_(2.0)?;
    }
    assert_eq!(node(&x), "CloneBackward0");
    Ok(())
}

/// After its base is written in place, an output of a multi-output view
/// cannot be used in the graph any more (PyTorch cannot rebuild its history).
#[test]
fn split_outputs_are_stale_after_their_base_changes() -> Result<()> {
    let x = leaf(4)?.clone_tensor()?;
    let v = x.split(2, 0)?;
    x.mul_(2.0)?;
    let e = err(v[1].sum());
    assert!(
        e.contains("its base or another view of its base has been modified inplace"),
        "{e}"
    );
    Ok(())
}

/// A single-output view made in no-grad mode cannot be written in place
/// with grad mode on when the write would be recorded.
#[test]
fn no_grad_views_refuse_recorded_in_place_writes() -> Result<()> {
    let a = leaf(3)?;
    let v = {
        let _g = no_grad_guard();
        a.narrow(0, 0, 2)?
    };
    let e = err(v.mul_(2.0));
    assert!(
        e.contains("A view was created in no_grad mode and is being modified inplace"),
        "{e}"
    );
    let b = Tensor::ones([3])?;
    let vb = {
        let _g = no_grad_guard();
        b.narrow(0, 0, 2)?
    };
    vb.mul_(2.0)?; // nothing requires grad
    let e = err(vb.mul_(&leaf(2)?));
    assert!(e.contains("ambiguous and error-prone"), "{e}");
    Ok(())
}

/// Logical ops' outputs are not differentiable: their in-place forms write
/// into tensors that require grad, leaf or not, without a node (PyTorch).
#[test]
fn logical_ops_write_in_place_without_a_node() -> Result<()> {
    let l = leaf(3)?;
    l.logical_or_(&Tensor::ones([3])?)?;
    assert_eq!((l.to_vec::<f32>()?, l.requires_grad()), (vec![1.0; 3], true));
    let y = leaf(3)?.clone_tensor()?;
    let version = y.version();
    y.logical_and_(&Tensor::ones([3])?)?;
    assert_eq!((node(&y), y.version()), ("CloneBackward0".into(), version + 1));
    assert_eq!(y.to_vec::<f32>()?, [0.0, 1.0, 1.0]);
    Ok(())
}

/// Reading a stale split output's `grad_fn` does not heal it: the use is
/// still refused, as in PyTorch (here after a logical op wrote it in place).
#[test]
fn stale_split_outputs_stay_stale() -> Result<()> {
    let x = leaf(4)?.clone_tensor()?;
    let v = x.chunk(2, 0)?;
    v[1].logical_and_(&Tensor::ones([2])?)?;
    let _ = v[1].grad_fn();
    let e = err(v[1].abs());
    assert!(
        e.contains("its base or another view of its base has been modified inplace"),
        "{e}"
    );
    Ok(())
}
