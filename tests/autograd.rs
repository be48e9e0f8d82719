//! Autograd behaviour: leaves and grad_fn, backward and grad, graph freeing,
//! higher-order gradients, grad modes, version counters, in-place ops on
//! views, hooks, custom functions, checkpointing, anomaly mode.

use ferrotorch::backend::TensorExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ferrotorch::autograd::{
    self, BackwardOptions, Function, FunctionCtx, GradOptions, GradcheckOptions, apply_function, checkpoint, gradcheck,
    gradgradcheck, no_grad_guard,
};
use ferrotorch::{DType, Device, Error, Result, Tensor, TensorIndex as I, TensorOptions};

fn vec(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn leaf(v: &[f32]) -> Tensor {
    Tensor::from_slice(v).requires_grad_(true).unwrap()
}

#[test]
fn leaves_and_grad_fn_names() -> Result<()> {
    let x = leaf(&[1.0, 2.0]);
    assert!(x.is_leaf() && x.requires_grad() && x.grad_fn().is_none());
    let y = x.mul(&x)?;
    assert!(!y.is_leaf() && y.requires_grad());
    assert_eq!(y.grad_fn().unwrap().name(), "MulBackward0");
    assert_eq!(x.add(1.0)?.grad_fn().unwrap().name(), "AddBackward0");
    assert_eq!(x.exp()?.grad_fn().unwrap().name(), "ExpBackward0");
    assert_eq!(x.sum()?.grad_fn().unwrap().name(), "SumBackward0");
    assert_eq!(x.sum_dim(0, false)?.grad_fn().unwrap().name(), "SumBackward1");
    assert_eq!(x.view([2, 1])?.grad_fn().unwrap().name(), "ViewBackward0");
    assert_eq!(x.pow(2)?.grad_fn().unwrap().name(), "PowBackward0");
    assert_eq!(x.relu()?.grad_fn().unwrap().name(), "ReluBackward0");
    assert_eq!(
        x.unsqueeze(0)?.matmul(&x.unsqueeze(1)?)?.grad_fn().unwrap().name(),
        "MmBackward0"
    );
    // Integer tensors cannot require grad; non-leaves cannot change the flag.
    assert!(Tensor::arange(3)?.requires_grad_(true).is_err());
    assert!(y.requires_grad_(false).is_err());
    // Comparisons produce tensors outside the graph.
    assert!(!x.gt(1.0)?.requires_grad());
    // detach shares data and version counter but leaves the graph.
    let d = y.detach();
    assert!(!d.requires_grad() && d.is_leaf() && d.storage().same(y.storage()));
    assert!(d.version_counter().same(&y.version_counter()));
    let e = x.mul(2.0)?;
    e.detach_()?;
    assert!(!e.requires_grad() && e.is_leaf());
    Ok(())
}

#[test]
fn backward_accumulates_and_checks_its_arguments() -> Result<()> {
    let x = leaf(&[1.0, 2.0, 3.0]);
    let y = x.mul(&x)?;
    let e = y.backward().unwrap_err().to_string();
    assert!(e.contains("scalar outputs"), "{e}");
    y.backward_with(&Tensor::ones([3])?)?;
    assert_eq!(vec(&x.grad().unwrap()), vec![2.0, 4.0, 6.0]);
    x.mul(3.0)?.sum()?.backward()?;
    assert_eq!(vec(&x.grad().unwrap()), vec![5.0, 7.0, 9.0]);
    x.grad().unwrap().zero_()?;
    assert_eq!(vec(&x.grad().unwrap()), vec![0.0; 3]);
    x.set_grad(None)?;
    assert!(x.grad_opt().is_none());
    let e = Tensor::ones([1])?.sum()?.backward().unwrap_err().to_string();
    assert!(e.contains("does not require grad"), "{e}");
    let e = x.sum()?.backward_with(&Tensor::ones([2])?).unwrap_err().to_string();
    assert!(e.contains("shape"), "{e}");
    Ok(())
}

#[test]
fn graph_is_freed_unless_retained() -> Result<()> {
    let x = leaf(&[1.0, 2.0]);
    let y = x.exp()?;
    let saved = y.storage().downgrade();
    let z = y.sum()?;
    drop(y);
    assert!(saved.is_alive(), "exp saved its output");
    z.backward_opts(BackwardOptions {
        retain_graph: true,
        ..Default::default()
    })?;
    assert!(saved.is_alive(), "retain_graph keeps saved tensors");
    z.backward()?;
    assert!(!saved.is_alive(), "saved tensors are freed after backward");
    let e = z.backward().unwrap_err().to_string();
    assert!(e.contains("retain_graph"), "{e}");
    let e1 = 1f32.exp();
    assert!((vec(&x.grad().unwrap())[0] - 2.0 * e1).abs() < 1e-5);
    Ok(())
}

/// Dropping a graph without running backward frees what its nodes saved
/// (node functions are kept for reuse, emptied), and the next graphs, built
/// from those reused nodes, differentiate as fresh ones.
#[test]
fn dropped_graphs_free_saved_tensors() -> Result<()> {
    let x = leaf(&[1.0, 2.0]);
    for _ in 0..3 {
        let y = x.exp()?;
        let saved = y.storage().downgrade();
        let z = y.mul(&y)?.sum()?;
        drop(y);
        assert!(saved.is_alive(), "exp and mul saved y");
        drop(z);
        assert!(!saved.is_alive(), "dropping the graph frees saved tensors");
    }
    x.mul(&x)?.sum()?.backward()?;
    assert_eq!(vec(&x.grad().unwrap()), [2.0, 4.0]);
    Ok(())
}

#[test]
fn higher_order_gradients() -> Result<()> {
    // d^n/dx^n of x^4 at x = 1.5: 4x^3, 12x^2, 24x.
    let x = Tensor::scalar(1.5f64).requires_grad_(true)?;
    let mut cur = x.pow(4)?;
    let mut derivs = Vec::new();
    for _ in 0..3 {
        cur = autograd::grad(&[&cur], &[&x], GradOptions::create_graph())?[0].clone();
        derivs.push(cur.item::<f64>()?);
    }
    assert_eq!(derivs, vec![4.0 * 1.5f64.powi(3), 12.0 * 2.25, 36.0]);
    // Hessian-vector product of f(w) = sum(tanh(A w)).
    let a = Tensor::new([[1.0f64, 2.0], [0.5, -1.0], [0.3, 0.7]])?;
    let w = Tensor::new([0.2f64, -0.4])?.requires_grad_(true)?;
    let v = Tensor::new([1.0f64, 0.5])?;
    let f = a.matmul(&w)?.tanh()?.sum()?;
    let g = autograd::grad(&[&f], &[&w], GradOptions::create_graph())?[0].clone();
    let hv = autograd::grad(&[&g.mul(&v)?.sum()?], &[&w], Default::default())?[0].clone();
    // Exact: H = A^T diag(-2 tanh(u) sech^2(u)) A with u = A w.
    let u = a.matmul(&w.detach())?;
    let t = u.tanh()?;
    let d = t.mul(&t.mul(&t)?.neg()?.add(1.0)?)?.mul(-2.0)?;
    let h = a.t()?.matmul(&a.mul(&d.unsqueeze(1)?)?)?;
    let want = h.matmul(&v)?.to_vec::<f64>()?;
    for (x, y) in hv.to_vec::<f64>()?.iter().zip(&want) {
        assert!((x - y).abs() < 1e-12);
    }
    // Gradient penalty: the gradient of ||df/dw||^2.
    let f = a.matmul(&w)?.tanh()?.sum()?;
    let g = autograd::grad(&[&f], &[&w], GradOptions::create_graph())?[0].clone();
    g.pow(2)?.sum()?.backward()?;
    let gp = w.grad().unwrap().to_vec::<f64>()?;
    let want = h.matmul(&g.detach())?.mul(2.0)?.to_vec::<f64>()?;
    for (x, y) in gp.iter().zip(&want) {
        assert!((x - y).abs() < 1e-12);
    }
    Ok(())
}

#[test]
fn grad_checks_unused_inputs() -> Result<()> {
    let x = leaf(&[1.0]);
    let y = leaf(&[2.0]);
    let z = x.mul(2.0)?;
    let e = autograd::grad(&[&z], &[&x, &y], GradOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("allow_unused"), "{e}");
    let g = autograd::grad(
        &[&z],
        &[&x, &y],
        GradOptions {
            allow_unused: true,
            ..Default::default()
        },
    )?;
    assert_eq!(vec(&g[0]), vec![2.0]);
    assert!(g.get(1).is_none());
    // grad() leaves .grad alone.
    assert!(x.grad_opt().is_none());
    Ok(())
}

#[test]
fn grad_modes_are_thread_local_and_nest() -> Result<()> {
    let x = leaf(&[1.0]);
    {
        let _a = no_grad_guard();
        assert!(!x.mul(2.0)?.requires_grad());
        {
            let _b = autograd::enable_grad_guard();
            assert!(x.mul(2.0)?.requires_grad());
        }
        assert!(!x.mul(2.0)?.requires_grad());
        // Another thread has its own mode.
        let x2 = x.clone();
        let other = std::thread::spawn(move || x2.mul(2.0).unwrap().requires_grad())
            .join()
            .unwrap();
        assert!(other);
    }
    assert!(x.mul(2.0)?.requires_grad());
    {
        let _i = autograd::inference_mode_guard();
        assert!(autograd::is_inference_mode_enabled() && !x.exp()?.requires_grad());
    }
    assert!(!autograd::is_inference_mode_enabled());
    Ok(())
}

#[test]
fn inplace_changes_to_saved_tensors_are_detected() -> Result<()> {
    let x = leaf(&[1.0, 2.0]);
    let y = x.exp()?;
    let z = y.mul(&y)?; // saves y
    y.add_(1.0)?;
    let e = z.sum()?.backward().unwrap_err().to_string();
    assert!(
        e.contains("modified by an inplace operation") && e.contains("is at version 1; expected version 0"),
        "{e}"
    );
    // Views share the counter, so a write through a view is seen too.
    let y = x.mul(2.0)?;
    let v = y.narrow(0, 0, 1)?;
    let z = y.pow(2)?;
    v.mul_(3.0)?;
    assert_eq!(y.version(), 1);
    assert!(z.sum()?.backward().is_err());
    Ok(())
}

#[test]
fn inplace_on_leaves_is_refused_outside_no_grad() -> Result<()> {
    let x = leaf(&[1.0, 2.0]);
    let e = x.add_(1.0).unwrap_err().to_string();
    assert!(e.contains("leaf Variable that requires grad"), "{e}");
    let e = x.narrow(0, 0, 1)?.mul_(2.0).unwrap_err().to_string();
    assert!(e.contains("view of a leaf Variable"), "{e}");
    {
        let _g = no_grad_guard();
        x.add_(1.0)?;
    }
    assert_eq!(vec(&x), vec![2.0, 3.0]);
    Ok(())
}

#[test]
fn inplace_on_views_rebases_history() -> Result<()> {
    // y = x * 1; y[0:2] *= 2  =>  d sum(y) / dx = [2, 2, 1, 1]
    let x = leaf(&[1.0, 2.0, 3.0, 4.0]);
    let y = x.mul(1.0)?;
    y.get(&[(0..2).into()])?.mul_(2.0)?;
    assert_eq!(vec(&y), vec![2.0, 4.0, 3.0, 4.0]);
    assert_eq!(y.grad_fn().unwrap().name(), "CopySlices");
    y.sum()?.backward()?;
    assert_eq!(vec(&x.grad().unwrap()), vec![2.0, 2.0, 1.0, 1.0]);
    // A view's value depends on the in-place op through its base.
    let x = leaf(&[1.0, 2.0, 3.0]);
    let y = x.mul(1.0)?;
    let v = y.narrow(0, 1, 2)?;
    y.mul_(&x)?; // y = x^2, v sees it
    v.sum()?.backward()?;
    assert_eq!(vec(&x.grad().unwrap()), vec![0.0, 4.0, 6.0]);
    // copy_ into a slice of a buffer that does not require grad.
    let buf = Tensor::zeros([4])?;
    let x = leaf(&[5.0, 6.0]);
    buf.narrow(0, 1, 2)?.copy_(&x.mul(3.0)?)?;
    assert!(buf.requires_grad());
    buf.mul(&Tensor::new([1.0f32, 2.0, 3.0, 4.0])?)?.sum()?.backward()?;
    assert_eq!(vec(&x.grad().unwrap()), vec![6.0, 9.0]);
    // zero_ cuts the history of a non-leaf.
    let x = leaf(&[1.0, 2.0]);
    let y = x.mul(2.0)?;
    y.zero_()?;
    y.add(&x)?.sum()?.backward()?;
    assert_eq!(vec(&x.grad().unwrap()), vec![1.0, 1.0]);
    Ok(())
}

#[test]
fn long_chains_do_not_overflow_the_stack() -> Result<()> {
    let run = || -> Result<()> {
        let x = Tensor::scalar(1.0f32).requires_grad_(true)?;
        let mut y = x.clone();
        for _ in 0..1_000_000 {
            y = y.mul(1.0)?;
        }
        y.backward()?;
        assert_eq!(x.grad().unwrap().item::<f32>()?, 1.0);
        // And a graph that is dropped without backward.
        let mut y = x.clone();
        for _ in 0..1_000_000 {
            y = y.add(0.0)?;
        }
        drop(y);
        Ok(())
    };
    // A small stack proves that nothing recurses per node.
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn hooks() -> Result<()> {
    let x = leaf(&[1.0, 2.0]);
    let h = x.register_hook(|g| Some(g.mul(10.0).unwrap()))?;
    x.mul(2.0)?.sum()?.backward()?;
    assert_eq!(vec(&x.grad().unwrap()), vec![20.0, 20.0]);
    h.remove();
    x.set_grad(None)?;
    x.mul(2.0)?.sum()?.backward()?;
    assert_eq!(vec(&x.grad().unwrap()), vec![2.0, 2.0]);
    // Hooks on non-leaves see (and may change) the gradient flowing through.
    let x = leaf(&[1.0, 2.0]);
    let y = x.mul(3.0)?;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    y.register_hook(move |g| {
        s.lock().unwrap().extend(g.to_vec::<f32>().unwrap());
        None
    })?;
    y.retain_grad()?;
    y.pow(2)?.sum()?.backward()?;
    assert_eq!(*seen.lock().unwrap(), vec![6.0, 12.0]);
    assert_eq!(vec(&y.grad().unwrap()), vec![6.0, 12.0]);
    assert_eq!(vec(&x.grad().unwrap()), vec![18.0, 36.0]);
    // Post-accumulate hooks run after .grad is updated, once per backward.
    let x = leaf(&[1.0]);
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let h = x.register_post_accumulate_grad_hook(move |t| {
        assert!(t.grad_opt().is_some());
        c.fetch_add(1, Ordering::Relaxed);
    })?;
    x.mul(2.0)?.add(&x)?.sum()?.backward()?;
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    h.remove();
    x.mul(2.0)?.sum()?.backward()?;
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    Ok(())
}

#[test]
fn a_failing_hook_ends_backward_with_its_error() -> Result<()> {
    let refuse = |_: &Tensor| -> Result<Option<Tensor>> { Err(Error::invalid("test_hook", "refused")) };
    // On a leaf: its .grad is left untouched.
    let x = leaf(&[1.0, 2.0]);
    let h = x.register_fallible_hook(refuse)?;
    let e = x.mul(2.0)?.sum()?.backward().unwrap_err();
    assert_eq!(e.to_string(), "test_hook: refused");
    assert!(x.grad_opt().is_none());
    h.remove();
    x.mul(2.0)?.sum()?.backward()?;
    assert_eq!(vec(&x.grad().unwrap()), vec![2.0, 2.0]);
    // On a non-leaf, through autograd::grad too.
    let x = leaf(&[1.0, 2.0]);
    let y = x.mul(3.0)?;
    y.register_fallible_hook(refuse)?;
    let e = autograd::grad(&[&y.sum()?], &[&x], GradOptions::default()).unwrap_err();
    assert_eq!(e.to_string(), "test_hook: refused");
    // A fallible hook's replacement is used like an infallible one's.
    let x = leaf(&[1.0, 2.0]);
    x.register_fallible_hook(|g| Ok(Some(g.mul(10.0)?)))?;
    x.mul(2.0)?.sum()?.backward()?;
    assert_eq!(vec(&x.grad().unwrap()), vec![20.0, 20.0]);
    Ok(())
}

/// `set_grad` checks what PyTorch's `x.grad = g` checks: shape, dtype and
/// device (a failing retain_grad accumulation, which such a `.grad` used to
/// provoke, is tested inside the core).
#[test]
fn set_grad_checks_shape_dtype_and_device() -> Result<()> {
    let x = leaf(&[1.0, 2.0]);
    let msg = |r: Result<()>| r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(msg(x.set_grad(Some(Tensor::zeros([3])?))).contains("different shape"));
    let e = msg(x.set_grad(Some(Tensor::zeros_dtype([2], DType::F64)?)));
    assert!(
        e.contains("gradient with dtype float64 to a tensor of dtype float32"),
        "{e}"
    );
    let e = msg(x.set_grad(Some(TensorOptions::new().device(Device::Meta).zeros([2])?)));
    assert!(e.contains("same device"), "{e}");
    assert!(x.grad_opt().is_none());
    x.set_grad(Some(Tensor::ones([2])?))?;
    assert_eq!(vec(&x.grad().unwrap()), vec![1.0, 1.0]);
    Ok(())
}

#[test]
fn a_graph_held_by_a_thread_local_is_freed_at_thread_exit() {
    thread_local! {
        static KEPT: std::cell::RefCell<Vec<Tensor>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let run = || -> Result<()> {
        // Touched first, so destroyed last: after the thread-locals the
        // autograd graph is freed with (destroyed in reverse order of first use).
        KEPT.with(|k| k.borrow_mut().clear());
        let x = leaf(&[1.0, 2.0]);
        // A dropped graph brings the queue of dropped nodes to life.
        drop(x.mul(2.0)?.add(1.0)?);
        let mut y = x.clone();
        for _ in 0..100_000 {
            y = y.add(0.0)?;
        }
        let z = y.mul(&y)?;
        KEPT.with(|k| k.borrow_mut().extend([y, z]));
        Ok(())
    };
    // A small stack: the graph is still freed without recursion per node.
    let h = std::thread::Builder::new().stack_size(256 * 1024).spawn(run).unwrap();
    assert!(matches!(h.join(), Ok(Ok(()))));
}

/// y = x^2 computed by hand, plus an integer output without gradient.
struct SquareAndArgmax;

impl Function for SquareAndArgmax {
    fn forward(&self, ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let x = &inputs[0];
        ctx.save_for_backward(&[x]);
        let idx = x.argmax(None, false)?;
        ctx.mark_non_differentiable(&[&idx]);
        Ok(vec![x.mul(x)?, idx])
    }

    fn backward(&self, ctx: &FunctionCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
        let x = &ctx.saved_tensors()?[0];
        Ok(vec![Some(grads[0].as_ref().unwrap().mul(x)?.mul(2.0)?)])
    }
}

#[test]
fn custom_functions() -> Result<()> {
    let x = leaf(&[1.0, 3.0, 2.0]);
    let out = apply_function(SquareAndArgmax, &[&x])?;
    assert_eq!(out[0].grad_fn().unwrap().name(), "SquareAndArgmaxBackward");
    assert!(!out[1].requires_grad());
    assert_eq!(out[1].item::<i64>()?, 1);
    out[0].sum()?.backward()?;
    assert_eq!(vec(&x.grad().unwrap()), vec![2.0, 6.0, 4.0]);
    // And it composes with gradcheck.
    let x64 = Tensor::new([0.5f64, -1.5])?.requires_grad_(true)?;
    autograd::gradcheck(
        &|xs: &[Tensor]| Ok(apply_function(SquareAndArgmax, &[&xs[0]])?.remove(0)),
        &[x64],
        Default::default(),
    )?;
    Ok(())
}

#[test]
fn gradcheck_catches_a_wrong_formula() -> Result<()> {
    struct Wrong;
    impl Function for Wrong {
        fn forward(&self, _ctx: &mut FunctionCtx, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
            Ok(vec![inputs[0].exp()?])
        }
        fn backward(&self, _ctx: &FunctionCtx, grads: &[Option<Tensor>]) -> Result<Vec<Option<Tensor>>> {
            Ok(vec![grads[0].clone()])
        }
    }
    let x = Tensor::new([0.5f64])?.requires_grad_(true)?;
    let r = autograd::gradcheck(
        &|xs: &[Tensor]| Ok(apply_function(Wrong, &[&xs[0]])?.remove(0)),
        &[x],
        Default::default(),
    );
    assert!(r.unwrap_err().to_string().contains("Jacobian mismatch"));
    Ok(())
}

#[test]
fn checkpoint_matches_and_saves_memory() -> Result<()> {
    // Activations dominate (a wide batch through narrow layers), as in training.
    let depth = 16;
    let width = 128;
    let batch = 4096;
    let g = ferrotorch::Generator::new(7);
    let o = TensorOptions::new().generator(&g);
    let weights: Vec<Tensor> = (0..depth)
        .map(|_| o.randn([width, width]).and_then(|w| w.mul(0.05)?.requires_grad_(true)))
        .collect::<Result<_>>()?;
    let x = o.randn([batch, width])?.requires_grad_(true)?;
    let block = |w: Tensor| move |xs: &[Tensor]| Ok(vec![xs[0].matmul(&w)?.tanh()?.mul(1.5)?.sigmoid()?]);
    let run = |ckpt: bool| -> Result<(Vec<Vec<f32>>, usize)> {
        for w in &weights {
            w.set_grad(None)?;
        }
        x.set_grad(None)?;
        ferrotorch::reset_peak_memory_stats();
        let base = ferrotorch::memory_stats().allocated;
        let mut h = x.clone();
        for w in &weights {
            h = if ckpt {
                checkpoint(block(w.clone()), &[&h])?.remove(0)
            } else {
                block(w.clone())(&[h])?.remove(0)
            };
        }
        h.sum()?.backward()?;
        let peak = ferrotorch::memory_stats().peak_allocated - base;
        let mut grads: Vec<Vec<f32>> = weights.iter().map(|w| vec(&w.grad().unwrap())).collect();
        grads.push(vec(&x.grad().unwrap()));
        Ok((grads, peak))
    };
    let (plain, plain_peak) = run(false)?;
    let (ckpt, ckpt_peak) = run(true)?;
    assert_eq!(plain, ckpt, "checkpointing must not change the gradients");
    println!("peak memory of forward + backward: plain {plain_peak} bytes, checkpointed {ckpt_peak} bytes");
    assert!(
        ckpt_peak * 4 < plain_peak * 3,
        "checkpointed {ckpt_peak} vs plain {plain_peak}"
    );
    Ok(())
}

#[test]
fn checkpoint_replays_random_numbers() -> Result<()> {
    let x = Tensor::ones([64])?.requires_grad_(true)?;
    // A "dropout" drawn inside the segment: backward must see the same mask.
    let seg = |xs: &[Tensor]| {
        let keep = Tensor::rand(xs[0].shape())?.gt(0.5)?.to_dtype(DType::F32)?;
        Ok(vec![xs[0].mul(&keep)?])
    };
    ferrotorch::manual_seed(3);
    let y = checkpoint(seg, &[&x])?.remove(0);
    let kept = y.to_vec::<f32>()?;
    y.sum()?.backward()?;
    assert_eq!(x.grad().unwrap().to_vec::<f32>()?, kept);
    Ok(())
}

#[test]
fn anomaly_mode_names_the_forward_op() -> Result<()> {
    let x = Tensor::new([0.0f32, 1.0])?.requires_grad_(true)?;
    // sqrt'(0) = inf, times the 0 from mul's backward gives NaN in SqrtBackward0.
    let y = x.sqrt()?.mul(0.0)?.sum()?;
    {
        let _a = autograd::detect_anomaly();
        let e = y.backward_opts(BackwardOptions {
            retain_graph: true,
            ..Default::default()
        });
        let e = e.unwrap_err().to_string();
        assert!(
            e.contains("SqrtBackward0") && e.contains("'sqrt'") && e.contains("nan"),
            "{e}"
        );
    }
    // Without anomaly mode the NaN simply propagates.
    y.backward()?;
    assert!(x.grad().unwrap().to_vec::<f32>()?[0].is_nan());
    Ok(())
}

#[test]
fn display_shows_grad_fn() -> Result<()> {
    let x = leaf(&[1.0]);
    assert_eq!(x.exp()?.to_string(), "tensor([2.7183], grad_fn=<ExpBackward0>)");
    let _ = x.get(&[I::Int(0)])?; // select on a leaf is a tracked view
    Ok(())
}

/// Seed 003's manual gradient descent (as in `examples/autograd_tour.rs`):
/// PyTorch 2.15 ends at w = 2.072226047515869, b = 0.7876465916633606 with a
/// last loss of 0.007576559670269489.
#[test]
fn seed_gradient_descent_matches_pytorch() -> Result<()> {
    let w = leaf(&[0.0]);
    let b = leaf(&[0.0]);
    let x_train = Tensor::new([1.0f32, 2.0, 3.0, 4.0])?;
    let y_train = Tensor::new([3.0f32, 5.0, 7.0, 9.0])?;
    let mut last = 0.0f32;
    for _ in 0..100 {
        let loss = w.mul(&x_train)?.add(&b)?.sub(&y_train)?.pow(2)?.mean()?;
        loss.backward()?;
        {
            let _g = autograd::no_grad_guard();
            w.sub_(&w.grad().unwrap().mul(0.01)?)?;
            b.sub_(&b.grad().unwrap().mul(0.01)?)?;
        }
        w.grad().unwrap().zero_()?;
        b.grad().unwrap().zero_()?;
        last = loss.item::<f32>()?;
    }
    let close = |a: f32, e: f64| (a as f64 - e).abs() <= 1e-5 * (1.0 + e.abs());
    assert!(close(w.item::<f32>()?, 2.072226047515869), "w = {}", w.item::<f32>()?);
    assert!(close(b.item::<f32>()?, 0.7876465916633606), "b = {}", b.item::<f32>()?);
    assert!(close(last, 0.007576559670269489), "loss = {last}");
    Ok(())
}

/// cumprod's gradient where the input has zeros (one and two per line),
/// against PyTorch 2.15's first and second derivatives, and by finite
/// differences.
#[test]
fn cumprod_backward_with_zeros() -> Result<()> {
    let x = Tensor::new([[2.0f64, 0.0, 3.0, 0.0, 5.0], [1.5, -2.0, 0.0, 4.0, 0.5]])?.requires_grad_(true)?;
    let g = Tensor::new([[1.0f64, -1.0, 2.0, 0.5, 3.0], [0.25, 1.0, -2.0, 1.5, 2.0]])?;
    let y = x.cumprod(1)?;
    let gx = autograd::grad(
        &[&y],
        &[&x],
        GradOptions {
            grad_outputs: Some(std::slice::from_ref(&g)),
            create_graph: true,
            ..Default::default()
        },
    )?[0]
        .clone();
    let want_gx = [[1.0, 10.0, 0.0, 0.0, 0.0], [-1.75, 1.5, -24.0, 0.0, 0.0]];
    let ggx = autograd::grad(&[&gx.sum()?], &[&x], Default::default())?[0].clone();
    let want_ggx = [[5.0, 102.0, 4.0, 93.0, 0.0], [-15.0, 13.0, -35.5, -7.5, -24.0]];
    for (got, want) in [(gx, want_gx), (ggx, want_ggx)] {
        let got: Vec<f64> = got.to_vec()?;
        let want: Vec<f64> = want.iter().flatten().copied().collect();
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() <= 1e-12 * (1.0 + b.abs()), "{got:?} vs {want:?}");
        }
    }
    let xs = [x.detach().requires_grad_(true)?];
    let f = |t: &[Tensor]| t[0].cumprod(1);
    gradcheck(&f, &xs, GradcheckOptions::default())?;
    gradgradcheck(&f, &xs, GradcheckOptions::default())?;
    Ok(())
}

/// `x * x` computes its one product once and hands it to both inputs; the
/// gradients must stay those of two separate products (PyTorch's values:
/// `2x`, second derivative 2), with the same bits as `x * y` at `y == x`.
#[test]
fn square_by_self_multiplication() -> Result<()> {
    let xs = [0.3f32, -1.7, 2.5, 1e-3];
    let x = leaf(&xs);
    let y = x.mul(&x)?;
    assert_eq!(y.grad_fn().unwrap().name(), "MulBackward0");
    let g = autograd::grad(&[&y.sum()?], &[&x], GradOptions::create_graph())?[0].clone();
    assert_eq!(vec(&g), xs.iter().map(|v| 2.0 * v).collect::<Vec<_>>());
    let gg = autograd::grad(&[&g.sum()?], &[&x], GradOptions::default())?[0].clone();
    assert_eq!(vec(&gg), vec![2.0; 4]);
    // A distinct tensor with the same values gives the same bits.
    let (a, b) = (leaf(&xs), leaf(&xs));
    a.mul(&b)?.mul(1.7)?.sum()?.backward()?;
    let x2 = leaf(&xs);
    x2.mul(&x2)?.mul(1.7)?.sum()?.backward()?;
    let both: Vec<f32> = vec(&a.grad().unwrap())
        .iter()
        .zip(vec(&b.grad().unwrap()))
        .map(|(p, q)| p + q)
        .collect();
    assert_eq!(vec(&x2.grad().unwrap()), both);
    // Two views of the same elements are two tensors (two graph edges).
    let x3 = leaf(&xs);
    let (v1, v2) = (x3.narrow(0, 0, 2)?, x3.narrow(0, 0, 2)?);
    v1.mul(&v2)?.sum()?.backward()?;
    assert_eq!(vec(&x3.grad().unwrap()), [0.6, -3.4, 0.0, 0.0]);
    let x64 = Tensor::new([0.5f64, -1.5, 2.0])?.requires_grad_(true)?;
    let sq = |v: &[Tensor]| v[0].mul(&v[0]);
    gradcheck(&sq, std::slice::from_ref(&x64), GradcheckOptions::default())?;
    gradgradcheck(&sq, &[x64], GradcheckOptions::default())?;
    Ok(())
}

/// `as_strided` of a tensor that is itself a view with a storage offset, and
/// an in-place op on a view of a base that is not contiguous: the gradients
/// must follow the storage geometry (PyTorch's values).
#[test]
fn as_strided_and_inplace_views_follow_storage_geometry() -> Result<()> {
    // as_strided's offset counts from the storage, not from the view's start.
    let b = Tensor::arange(8)?
        .to_dtype(ferrotorch::DType::F32)?
        .requires_grad_(true)?;
    let y = b.narrow(0, 2, 6)?.as_strided([2, 2], [1, 2], 3)?;
    assert_eq!(vec(&y), vec![3.0, 5.0, 4.0, 6.0]);
    y.mul(&Tensor::new([[1.0f32, 2.0], [3.0, 4.0]])?)?.sum()?.backward()?;
    assert_eq!(vec(&b.grad().unwrap()), vec![0.0, 0.0, 0.0, 1.0, 3.0, 2.0, 4.0, 0.0]);

    // An in-place op on a row of a transposed (non-contiguous) base.
    let x = Tensor::new([[0.5f32, -1.0, 2.0], [1.5, 0.25, -0.75]])?.requires_grad_(true)?;
    let base = x.t()?.add(1.0)?;
    assert!(!base.is_contiguous());
    let s = leaf(&[2.0, 3.0]);
    base.select(0, 1)?.mul_(&s)?;
    assert_eq!(base.grad_fn().unwrap().name(), "CopySlices");
    let w = Tensor::new([[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]])?;
    base.mul(&w)?.sum()?.backward()?;
    assert_eq!(vec(&x.grad().unwrap()), vec![1.0, 6.0, 5.0, 2.0, 12.0, 6.0]);
    assert_eq!(vec(&s.grad().unwrap()), vec![0.0, 5.0]);

    // Result elements sharing storage slots: their gradients add up.
    let x = leaf(&[1.0, 2.0, 3.0, 4.0, 5.0]);
    let y = x.as_strided([3, 2], [1, 1], 1)?;
    y.mul(&Tensor::new([[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]])?)?
        .sum()?
        .backward()?;
    assert_eq!(vec(&x.grad().unwrap()), vec![0.0, 1.0, 5.0, 9.0, 6.0]);

    // An input whose elements share memory (expanded) is refused, not summed wrongly.
    let x = leaf(&[1.0, 2.0]);
    let e = x.expand([3, 2])?.as_strided([2], [1], 0)?.sum()?.backward();
    assert!(format!("{}", e.unwrap_err()).contains("overlap in memory"));

    // First and second derivatives by finite differences, offset and strides included.
    let x64 = Tensor::new([0.3f64, -1.2, 0.7, 2.0, -0.4, 1.1, 0.9, -2.2])?.requires_grad_(true)?;
    let f = |v: &[Tensor]| {
        let y = v[0].narrow(0, 1, 6)?.as_strided([2, 3], [1, 2], 1)?;
        y.mul(&y)?.mul(&v[0].narrow(0, 0, 6)?.reshape([2, 3])?)
    };
    gradcheck(&f, std::slice::from_ref(&x64), GradcheckOptions::default())?;
    gradgradcheck(&f, std::slice::from_ref(&x64), GradcheckOptions::default())?;
    let overlapping = |v: &[Tensor]| v[0].as_strided([3, 4], [2, 1], 0)?.exp();
    gradcheck(&overlapping, std::slice::from_ref(&x64), GradcheckOptions::default())?;
    gradgradcheck(&overlapping, &[x64], GradcheckOptions::default())?;
    Ok(())
}

/// The fused backward kernels of sin, cos and `x * x` give the bits of the
/// composite formulas PyTorch evaluates (`grad * x.cos()`, `grad * -x.sin()`,
/// `grad * x + grad * x`) in every float dtype.
#[test]
fn fused_backward_kernels_match_the_composite_formulas() -> Result<()> {
    use ferrotorch::backend::dispatch::call1;
    use ferrotorch::ops::activation_backward::{ActivationBackward, ActivationKind};
    ferrotorch::manual_seed(7);
    let x0 = Tensor::randn([257])?.mul(4.0)?;
    let g0 = Tensor::randn([257])?;
    for dt in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        let (x, g) = (x0.to_dtype(dt)?, g0.to_dtype(dt)?);
        let sin_b = call1(&ActivationBackward(ActivationKind::Sin), &[&g, &x])?;
        let cos_b = call1(&ActivationBackward(ActivationKind::Cos), &[&g, &x])?;
        let bits = |t: &Tensor| {
            t.to_dtype(DType::F64)
                .and_then(|t| t.to_vec::<f64>())
                .map(|v| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>())
        };
        assert_eq!(bits(&sin_b)?, bits(&g.mul(&x.cos()?)?)?, "sin_backward {dt}");
        assert_eq!(bits(&cos_b)?, bits(&g.mul(&x.sin()?.neg()?)?)?, "cos_backward {dt}");
        let sq_b = call1(&ActivationBackward(ActivationKind::Square), &[&g, &x])?;
        let gx = g.mul(&x)?;
        assert_eq!(bits(&sq_b)?, bits(&gx.add(&gx)?)?, "square_backward {dt}");
    }
    // Through autograd: d/dx sin(x) = cos(x).
    let x = leaf(&[0.5, -1.25, 3.0]);
    let gx = ferrotorch::autograd::grad(&[&x.sin()?.sum()?], &[&x], Default::default())?;
    assert_eq!(vec(&gx[0]), vec(&x.detach().cos()?));
    Ok(())
}

/// Node functions are reused from dropped graphs: one that saved tensors
/// must not make a later node that saves nothing (a view's replay node)
/// claim its saved tensors were freed.
#[test]
fn reused_node_functions_start_empty() -> Result<()> {
    let x = leaf(&[1.0, 2.0, 3.0, 4.0]);
    for _ in 0..3 {
        // Nodes that saved tensors, dropped without backward.
        drop(x.exp()?.exp()?.exp()?.exp()?.sum()?);
        let y = x.mul(1.0)?;
        let v = y.narrow(0, 0, 2)?;
        v.mul_(2.0)?; // the view's history is replayed by a fresh node
        v.sum()?.backward()?;
    }
    assert_eq!(vec(&x.grad().unwrap()), [6.0, 6.0, 0.0, 0.0]);
    Ok(())
}

/// `torch.autograd.backward([z, y])` where `y` also feeds `z`: `y`'s node
/// must wait for `z`'s contribution before it runs (one pass, both terms),
/// and a root given twice adds its gradient twice.
#[test]
fn backward_with_several_roots() -> Result<()> {
    let x = leaf(&[3.0, -1.0]);
    let y = x.mul(2.0)?;
    let z = y.mul(&y)?;
    // d/dx sum(z) + sum(y) = 2 * 2y + 2 = 8x + 2
    autograd::backward(&[&z.sum()?, &y.sum()?], GradOptions::default())?;
    assert_eq!(vec(&x.grad().unwrap()), [26.0, -6.0]);

    // Same through explicit gradients, roots in the other order.
    let x = leaf(&[3.0, -1.0]);
    let y = x.mul(2.0)?;
    let z = y.mul(&y)?;
    let g = [Tensor::from_slice(&[1.0f32, 10.0]), Tensor::from_slice(&[0.5f32, 1.0])];
    autograd::backward(
        &[&y, &z],
        GradOptions {
            grad_outputs: Some(&g),
            ..Default::default()
        },
    )?;
    // dy/dx * gy + dz/dx * gz = 2 gy + 8x gz
    assert_eq!(vec(&x.grad().unwrap()), [2.0 + 12.0, 20.0 - 8.0]);

    // A root given twice counts twice; a chain of three roots.
    let x = leaf(&[1.5]);
    let y = x.mul(3.0)?;
    autograd::backward(&[&y, &y], GradOptions::default())?;
    assert_eq!(vec(&x.grad().unwrap()), [6.0]);
    let x = leaf(&[2.0]);
    let a = x.exp()?;
    let b = a.mul(&x)?;
    let c = b.add(&a)?;
    autograd::backward(&[&a, &c, &b], GradOptions::default())?;
    // d(a + b + c)/dx = e^x + 2 (x e^x + e^x) + e^x = e^x (2x + 4)
    let want = 2.0f32.exp() * 8.0;
    assert!((vec(&x.grad().unwrap())[0] - want).abs() < 1e-4 * want);

    // The same through grad(), which captures instead of accumulating.
    let x = leaf(&[3.0]);
    let y = x.mul(2.0)?;
    let z = y.mul(&y)?;
    let g = autograd::grad(&[&z, &y, &z], &[&x, &y], GradOptions::default())?;
    assert_eq!(vec(&g[0]), [2.0 * 24.0 + 2.0]);
    assert_eq!(vec(&g[1]), [2.0 * 12.0 + 1.0]);

    // Errors: counts and requires_grad.
    let n = Tensor::from_slice(&[1.0f32]);
    assert!(autograd::backward(&[&y.sum()?, &n], GradOptions::default()).is_err());
    let one = [Tensor::from_slice(&[1.0f32])];
    let e = autograd::backward(
        &[&y, &z],
        GradOptions {
            grad_outputs: Some(&one),
            ..Default::default()
        },
    );
    assert!(
        e.unwrap_err()
            .to_string()
            .contains("grad_tensors has 1 tensors, tensors has 2")
    );
    Ok(())
}

/// An in-place write into a view from another view of the same base
/// (`out` shares the input's storage, not its layout): the input is not
/// the written tensor's old value, and gradients reach both regions.
#[test]
fn inplace_from_a_sibling_view() -> Result<()> {
    let x = leaf(&[1.0, 2.0, 3.0, 4.0]);
    let base = x.mul(1.0)?;
    base.narrow(0, 0, 2)?.copy_(&base.narrow(0, 2, 2)?)?;
    assert_eq!(vec(&base), [3.0, 4.0, 3.0, 4.0]);
    base.mul(&Tensor::from_slice(&[1.0f32, 10.0, 100.0, 1000.0]))?
        .sum()?
        .backward()?;
    // base = [x2, x3, x2, x3]: x0 and x1 were overwritten.
    assert_eq!(vec(&x.grad().unwrap()), [0.0, 0.0, 101.0, 1010.0]);

    let x = leaf(&[1.0, 2.0, 3.0, 4.0]);
    let base = x.mul(1.0)?;
    base.narrow(0, 2, 2)?.mul_(&base.narrow(0, 0, 2)?)?;
    assert_eq!(vec(&base), [1.0, 2.0, 3.0, 8.0]);
    base.sum()?.backward()?;
    // base = [x0, x1, x2 x0, x3 x1]
    assert_eq!(vec(&x.grad().unwrap()), [1.0 + 3.0, 1.0 + 4.0, 1.0, 2.0]);
    Ok(())
}
