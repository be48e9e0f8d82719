//! PyTorch snippets ported line by line (the seeds' included), each
//! checked against what PyTorch 2.15 prints for the Python original (the
//! Python is in the comments; outputs from the bench venv's torch 2.15.0).

use ferrotorch::autograd::{self, GradOptions};
use ferrotorch::{Ellipsis, Error, NewAxis, Result, Step, Tensor, no_grad};

/// Seed: requires_grad and backward.
#[test]
fn seed_requires_grad_and_backward() -> Result<()> {
    // x = torch.tensor([2.0, 3.0], requires_grad=True)
    let x = Tensor::new([2.0f32, 3.0])?.requires_grad_(true)?;
    // y = x * 3; z = y.sum(); z.backward()
    let y = &x * 3;
    let z = y.sum()?;
    z.backward()?;
    // print(x.grad)
    assert_eq!(x.grad()?.to_string(), "tensor([3., 3.])");
    Ok(())
}

/// Seed: gradients accumulate until zeroed.
#[test]
fn seed_gradient_accumulation_and_zeroing() -> Result<()> {
    // x = torch.tensor([1.0], requires_grad=True)
    let x = Tensor::new([1.0f32])?.requires_grad_(true)?;
    // (x * 2).sum().backward(); print(x.grad)
    (&x * 2).sum()?.backward()?;
    assert_eq!(x.grad()?.to_string(), "tensor([2.])");
    // (x * 3).sum().backward(); print(x.grad)
    (&x * 3).sum()?.backward()?;
    assert_eq!(x.grad()?.to_string(), "tensor([5.])");
    // x.grad.zero_()
    x.grad()?.zero_()?;
    // (x * 4).sum().backward(); print(x.grad)
    (&x * 4).sum()?.backward()?;
    assert_eq!(x.grad()?.to_string(), "tensor([4.])");
    Ok(())
}

/// Seed: manual gradient descent learning y = 2x + 1.
#[test]
fn seed_manual_gradient_descent() -> Result<()> {
    // w = torch.tensor([0.0], requires_grad=True); b = ...
    let mut w = Tensor::new([0.0f32])?.requires_grad_(true)?;
    let mut b = Tensor::new([0.0f32])?.requires_grad_(true)?;
    let x_train = Tensor::new([1.0f32, 2.0, 3.0, 4.0])?;
    let y_train = Tensor::new([3.0f32, 5.0, 7.0, 9.0])?;
    for _epoch in 0..100 {
        // loss = ((w * x_train + b - y_train) ** 2).mean()
        let loss = (&w * &x_train + &b - &y_train).pow(2)?.mean()?;
        loss.backward()?;
        // with torch.no_grad(): w -= 0.01 * w.grad; b -= 0.01 * b.grad
        no_grad! {
            w -= 0.01 * w.grad()?;
            b -= 0.01 * b.grad()?;
        }
        // w.grad.zero_(); b.grad.zero_()
        w.grad()?.zero_()?;
        b.grad()?.zero_()?;
    }
    // print(f"y = {w.item():.2f} x + {b.item():.2f}")
    let line = format!("y = {:.2} x + {:.2}", w.item::<f32>()?, b.item::<f32>()?);
    assert_eq!(line, "y = 2.07 x + 0.79");
    assert!(w.is_leaf() && w.requires_grad());
    Ok(())
}

/// The autograd tutorial's first example.
#[test]
fn tutorial_mean_of_squares() -> Result<()> {
    // x = torch.ones(2, 2, requires_grad=True); y = x + 2; z = y * y * 3; out = z.mean()
    let x = Tensor::ones([2, 2])?.requires_grad_(true)?;
    let y = &x + 2;
    let z = &y * &y * 3;
    let out = z.mean()?;
    out.backward()?;
    let names: Vec<String> = [&y, &z, &out]
        .iter()
        .map(|t| t.grad_fn().map(|n| n.name()).unwrap_or_default())
        .collect();
    assert_eq!(names, ["AddBackward0", "MulBackward0", "MeanBackward0"]);
    assert_eq!(
        x.grad()?.to_string(),
        "tensor([[4.5000, 4.5000],\n        [4.5000, 4.5000]])"
    );
    Ok(())
}

/// Indexing: `x[:, 1]`, `x[1, 1:3]`, `x[-1]`, `x[..., ::2]`, `x[None, 0]`,
/// `x[x > 8]`, `x[torch.tensor([2, 0])]`.
#[test]
fn indexing() -> Result<()> {
    // x = torch.arange(12).reshape(3, 4)
    let x = Tensor::arange(12)?.reshape([3, 4])?;
    assert_eq!(x.i((.., 1))?.to_string(), "tensor([1, 5, 9])");
    assert_eq!(x.i((1, 1..3))?.to_string(), "tensor([5, 6])");
    assert_eq!(x.i(-1)?.to_string(), "tensor([ 8,  9, 10, 11])");
    assert_eq!(
        x.i((Ellipsis, (..).step(2)))?.to_string(),
        "tensor([[ 0,  2],\n        [ 4,  6],\n        [ 8, 10]])"
    );
    assert_eq!(x.i((NewAxis, 0))?.shape(), [1, 4]);
    assert_eq!(x.i(&x.gt(8)?)?.to_string(), "tensor([ 9, 10, 11])");
    assert_eq!(
        x.i(&Tensor::new([2i64, 0])?)?.to_string(),
        "tensor([[ 8,  9, 10, 11],\n        [ 0,  1,  2,  3]])"
    );
    let e = x.i((0, 7)).unwrap_err().to_string();
    assert_eq!(e, "index: index 7 is out of bounds for dimension 1 with size 4");
    Ok(())
}

/// Index assignment, recorded by autograd: `x[:, 0] = v; x[1, 1:] = 5.0`.
#[test]
fn index_assignment() -> Result<()> {
    // x = torch.zeros(2, 3); v = torch.tensor([1.0, 2.0], requires_grad=True)
    let x = Tensor::zeros([2, 3])?;
    let v = Tensor::new([1.0f32, 2.0])?.requires_grad_(true)?;
    // x[:, 0] = v; x[1, 1:] = 5.0
    x.i_set((.., 0), &v)?;
    x.i_set((1, 1..), 5.0)?;
    assert_eq!(x.grad_fn().map(|n| n.name()).as_deref(), Some("CopySlices"));
    // (x * x).sum().backward(); print(v.grad)
    (&x * &x).sum()?.backward()?;
    assert_eq!(v.grad()?.to_string(), "tensor([2., 4.])");

    // x = torch.tensor([1.0, -2.0, 3.0, -4.0]); x[x < 0] = 0
    let x = Tensor::new([1.0f32, -2.0, 3.0, -4.0])?;
    x.i_set(&x.lt(0)?, 0)?;
    assert_eq!(x.to_string(), "tensor([1., 0., 3., 0.])");
    Ok(())
}

/// Scalars on both sides and unary minus.
#[test]
fn scalar_operands() -> Result<()> {
    // x = torch.tensor([1.0, 2.0])
    let x = Tensor::new([1.0f32, 2.0])?;
    assert_eq!((2 * &x + 1).to_string(), "tensor([3., 5.])");
    assert_eq!((1 - &x).to_string(), "tensor([ 0., -1.])");
    assert_eq!((&x / 2).to_string(), "tensor([0.5000, 1.0000])");
    assert_eq!((-&x).to_string(), "tensor([-1., -2.])");
    assert_eq!((&x * 2.5).to_string(), "tensor([2.5000, 5.0000])");
    // Every Rust numeric type on the right.
    let lr = 0.5f32;
    let n = 2usize;
    assert_eq!((&x * lr + n).to_string(), "tensor([2.5000, 3.0000])");
    assert_eq!((&x * 2u64 - 1isize).to_string(), "tensor([1., 3.])");
    // An integer tensor times a u64 beyond i64: a float scalar, never a wrapped negative one.
    let i = Tensor::new([1i64])?;
    assert_eq!((&i * 2i8).to_string(), "tensor([2])");
    assert!((&i * u64::MAX).dtype().is_floating_point());
    Ok(())
}

/// Compound assignment is in place: `x += 1; x *= t; x -= 0.5`.
#[test]
fn compound_assignment() -> Result<()> {
    let mut x = Tensor::ones([3])?;
    let alias = x.clone();
    x += 1;
    x *= &Tensor::new([1.0f32, 2.0, 3.0])?;
    x -= 0.5;
    // print(x, x._version)
    assert_eq!(
        (x.to_string(), x.version()),
        ("tensor([1.5000, 3.5000, 5.5000])".into(), 3)
    );
    assert_eq!(alias.to_vec::<f32>()?, [1.5, 3.5, 5.5]);
    Ok(())
}

/// `torch.autograd.grad` with create_graph, then a second order.
#[test]
fn higher_order_gradients() -> Result<()> {
    // x = torch.tensor(3.0, requires_grad=True); y = x ** 3
    let x = Tensor::new(3.0f32)?.requires_grad_(true)?;
    let y = x.pow(3)?;
    // (g,) = torch.autograd.grad(y, x, create_graph=True)
    let g = autograd::grad(&[&y], &[&x], GradOptions::create_graph())?;
    // (g2,) = torch.autograd.grad(g, x)
    let g2 = autograd::grad(&[&g[0]], &[&x], GradOptions::default())?;
    assert_eq!((g[0].item::<f32>()?, g2[0].item::<f32>()?), (27.0, 18.0));
    // print(g[0]): the first derivative carries its graph
    assert_eq!(g[0].to_string(), "tensor(27., grad_fn=<MulBackward0>)");
    // An unused input is an error unless allow_unused...
    let unused = Tensor::new(1.0f32)?.requires_grad_(true)?;
    let e = autograd::grad(&[&x.mul(2)?], &[&x, &unused], GradOptions::default()).unwrap_err();
    assert!(matches!(e, Error::UnusedInput { index: 1, .. }), "{e}");
    assert!(
        e.to_string()
            .contains("The differentiated Tensor at index 1 appears to not have been used in the graph.")
    );
    // ...which gives None for it, aligned with the inputs.
    let opts = GradOptions {
        allow_unused: true,
        ..Default::default()
    };
    let g = autograd::grad(&[&x.mul(2)?], &[&x, &unused], opts)?;
    assert_eq!((g.len(), g[0].item::<f32>()?, g.get(1).is_none()), (2, 2.0, true));
    Ok(())
}

/// Autograd errors are variants to match on, with PyTorch's messages.
#[test]
fn autograd_errors_can_be_matched() -> Result<()> {
    // a = torch.tensor([1.0, 2.0], requires_grad=True); y = a.sigmoid(); y.mul_(2)
    let a = Tensor::new([1.0f32, 2.0])?.requires_grad_(true)?;
    let y = a.sigmoid()?;
    y.mul_(2)?;
    let e = y.sum()?.backward().unwrap_err();
    assert!(matches!(e, Error::SavedTensorModified { .. }), "{e}");
    // PyTorch 2.15: "... [torch.FloatTensor [2]], which is output 0 of
    // Sigmoid, is at version 1; expected version 0 instead."
    assert!(e.to_string().contains(
        "[torch.FloatTensor [2]], which is output 0 of SigmoidBackward0, is at version 1; expected version 0"
    ));
    // Backward twice without retain_graph.
    let l = a.exp()?.sum()?;
    l.backward()?;
    assert!(matches!(l.backward(), Err(Error::GraphFreed { .. })));
    // Backward of a tensor that does not require grad.
    let c = Tensor::new([1.0f32])?.sum()?;
    assert!(matches!(c.backward(), Err(Error::NoGradFn { .. })));
    // .grad of a non-leaf.
    assert!(matches!(y.grad(), Err(Error::NoGrad { .. })));
    Ok(())
}

/// matmul's errors name matmul and both shapes.
#[test]
fn matmul_errors_name_matmul() -> Result<()> {
    let e = Tensor::zeros([2, 3])?
        .matmul(&Tensor::zeros([4, 5])?)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("matmul: shape mismatch: [2, 3] and [4, 5]"), "{e}");
    assert!(
        e.contains("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
        "{e}"
    );
    let e = Tensor::zeros([7, 2, 3])?
        .matmul(&Tensor::zeros([4])?)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("matmul: shape mismatch: [7, 2, 3] and [4]"), "{e}");
    Ok(())
}

/// A classification head: softmax, argmax, max over a dim.
#[test]
fn classification_head() -> Result<()> {
    let logits = Tensor::new([[1.0f32, 2.0, 0.5], [0.1, 0.2, 3.0]])?;
    // logits.softmax(dim=1).argmax(dim=1)
    assert_eq!(logits.softmax(1)?.argmax(Some(1), false)?.to_string(), "tensor([1, 2])");
    // logits.max(dim=1).values
    assert_eq!(logits.max_dim(1, false)?.0.to_string(), "tensor([2., 3.])");
    Ok(())
}

/// Grad-mode closures and scopes restore the previous mode.
#[test]
fn grad_mode_closures_and_scopes() -> Result<()> {
    let w = Tensor::ones([2])?.requires_grad_(true)?;
    let y = autograd::no_grad(|| &w * 2);
    assert!(!y.requires_grad());
    let z = autograd::no_grad(|| autograd::enable_grad(|| &w * 2));
    assert!(z.requires_grad());
    let i = autograd::inference_mode(|| {
        assert!(autograd::is_inference_mode_enabled());
        &w * 2
    });
    assert!(!i.requires_grad() && !autograd::is_inference_mode_enabled());
    {
        no_grad!();
        assert!(!(&w * 2).requires_grad());
    }
    assert!((&w * 2).requires_grad());
    Ok(())
}

/// `x[idx] = v` with a tensor index writes through autograd too; the value
/// broadcasts.
#[test]
fn advanced_index_assignment() -> Result<()> {
    // x = torch.zeros(3, 2); v = torch.tensor([1.0, 2.0], requires_grad=True)
    let x = Tensor::zeros([3, 2])?;
    let v = Tensor::new([1.0f32, 2.0])?.requires_grad_(true)?;
    // x[torch.tensor([2, 0])] = v
    x.i_set(&Tensor::new([2i64, 0])?, &v)?;
    assert_eq!(x.to_vec::<f32>()?, [1.0, 2.0, 0.0, 0.0, 1.0, 2.0]);
    // (x * x).sum().backward(); print(v.grad) -> tensor([4., 8.])
    (&x * &x).sum()?.backward()?;
    assert_eq!(v.grad()?.to_string(), "tensor([4., 8.])");
    // A transposed (non-contiguous) target.
    let t = Tensor::zeros([2, 3])?.t()?;
    t.i_set((&Tensor::new([1i64])?, 1), 7.0)?;
    assert_eq!(t.contiguous()?.to_vec::<f32>()?, [0.0, 0.0, 0.0, 7.0, 0.0, 0.0]);
    Ok(())
}

/// The nodes PyTorch records for index assignment: `index_put_` for tensor
/// indices (`IndexPutBackward0`, inside `CopySlices` when basic items made
/// a view first), `masked_fill_` for `x[mask] = scalar`.
#[test]
fn index_assignment_nodes() -> Result<()> {
    let name = |t: &Tensor| t.grad_fn().map(|n| n.name()).unwrap_or_default();
    // x = torch.zeros(3, 4); v = torch.tensor([1., 2.], requires_grad=True)
    let x = Tensor::zeros((3, 4))?;
    let v = Tensor::new([1.0f32, 2.0])?.requires_grad_(true)?;
    // x[torch.tensor([0, 2]), 1] = v; print(x.grad_fn.name(), x._version)
    x.i_set((&Tensor::new([0i64, 2])?, 1), &v)?;
    assert_eq!((name(&x), x.version()), ("CopySlices".to_string(), 1));
    // (x * x).sum().backward(); print(v.grad)
    (&x * &x).sum()?.backward()?;
    assert_eq!(v.grad()?.to_string(), "tensor([2., 4.])");

    // w = torch.arange(6.).reshape(2, 3).requires_grad_(); y = w * 1; y[y > 2] = 0
    let w = Tensor::arange_step(0.0, 6.0, 1.0)?
        .reshape((2, 3))?
        .requires_grad_(true)?;
    let y = &w * 1;
    y.i_set(&y.gt(2)?, 0)?;
    assert_eq!(
        (y.to_string(), y.version()),
        (
            "tensor([[0., 1., 2.],\n        [0., 0., 0.]], grad_fn=<MaskedFillBackward0>)".to_string(),
            1
        )
    );
    y.sum()?.backward()?;
    assert_eq!(w.grad()?.to_string(), "tensor([[1., 1., 1.],\n        [0., 0., 0.]])");
    // A mask over the leading dims selects rows: x = torch.zeros(3, 3); x[torch.tensor([True, False, True])] = 1
    let m = Tensor::zeros((3, 3))?;
    m.i_set(&Tensor::new([true, false, true])?, 1)?;
    assert_eq!(m.to_vec2::<f32>()?, [[1.0; 3], [0.0; 3], [1.0; 3]]);

    // z = torch.zeros(5); z.index_put_((torch.tensor([0, 2, 2]),), torch.tensor([1., 2., 3.]), accumulate=True)
    let z = Tensor::zeros(5)?;
    z.index_put_(
        &[Some(Tensor::new([0i64, 2, 2])?)],
        &Tensor::new([1.0f32, 2.0, 3.0])?,
        true,
    )?;
    assert_eq!(z.to_string(), "tensor([1., 0., 5., 0., 0.])");

    // a = torch.zeros(2, 3, requires_grad=True); b = torch.ones(2, requires_grad=True)
    // c = a.index_put((torch.tensor([1, 0]), torch.tensor([2, 2])), b * 3)
    let a = Tensor::zeros((2, 3))?.requires_grad_(true)?;
    let b = Tensor::ones(2)?.requires_grad_(true)?;
    let idx = [Some(Tensor::new([1i64, 0])?), Some(Tensor::new([2i64, 2])?)];
    let c = a.index_put(&idx, &(&b * 3), false)?;
    assert_eq!(
        c.to_string(),
        "tensor([[0., 0., 3.],\n        [0., 0., 3.]], grad_fn=<IndexPutBackward0>)"
    );
    // c.pow(2).sum().backward(); print(a.grad, b.grad)
    c.pow(2)?.sum()?.backward()?;
    assert_eq!(a.grad()?.to_vec::<f32>()?, [0.0; 6]);
    assert_eq!(b.grad()?.to_string(), "tensor([18., 18.])");

    // q = torch.zeros(3); q[torch.tensor([0, 1])] = torch.ones(3)
    let q = Tensor::zeros(3)?;
    let e = q
        .i_set(&Tensor::new([0i64, 1])?, &Tensor::ones(3)?)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of shape [2]"),
        "{e}"
    );
    // z.index_put_((torch.tensor([0]),), torch.tensor([1]))
    let e = z
        .index_put_(&[Some(Tensor::new([0i64])?)], &Tensor::new([1i64])?, false)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("Index put requires the source and destination dtypes match, got Float for the destination and Long for the source."),
        "{e}"
    );
    Ok(())
}

/// A panicking operator points at the line that used it.
#[test]
fn operator_panics_point_at_the_callers_line() {
    let a = Tensor::zeros([2]).unwrap();
    let b = Tensor::zeros([3]).unwrap();
    std::panic::set_hook(Box::new(|info| {
        let loc = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let msg = info.payload().downcast_ref::<String>().cloned().unwrap_or_default();
        LAST_PANIC.with(|p| *p.borrow_mut() = Some((loc, msg)));
    }));
    let here = line!() + 1;
    let caught = std::panic::catch_unwind(|| &a + &b);
    let _ = std::panic::take_hook();
    let (loc, msg) = LAST_PANIC.with(|p| p.borrow().clone()).expect("a panic");
    assert!(caught.is_err());
    assert_eq!(loc, format!("{}:{here}", file!()));
    assert!(msg.contains("add: shape mismatch: [2] and [3]"), "{msg}");
}

thread_local! {
    static LAST_PANIC: std::cell::RefCell<Option<(String, String)>> = const { std::cell::RefCell::new(None) };
}

/// Sizes and dims in every form PyTorch takes them: varargs-like tuples,
/// lists, another tensor's shape, one int, `-1` inferred.
#[test]
fn shape_arguments() -> Result<()> {
    // x = torch.arange(24)
    let x = Tensor::arange(24)?;
    // y = x.view(2, 3, 4); z = x.reshape(4, -1)
    let y = x.view((2, 3, 4))?;
    let z = x.reshape([4, -1])?;
    assert_eq!((y.shape(), z.shape()), (&[2, 3, 4][..], &[4, 6][..]));
    // torch.zeros(z.shape).shape; torch.ones(5).shape
    assert_eq!(Tensor::zeros(z.shape())?.shape(), [4, 6]);
    assert_eq!(Tensor::ones(5)?.shape(), [5]);
    // y.permute(2, 0, 1).shape; y.permute([-1, 0, 1]).shape
    assert_eq!(y.permute((2, 0, 1))?.shape(), [4, 2, 3]);
    assert_eq!(y.permute(vec![-1, 0, 1])?.shape(), [4, 2, 3]);
    // print(y.sum(dim=(0, 2))); print(y.sum(-1).shape)
    assert_eq!(y.sum_dim((0, 2), false)?.to_string(), "tensor([ 60,  92, 124])");
    assert_eq!(y.sum_dim(-1, false)?.shape(), [2, 3]);
    // z[0].expand(2, -1).shape; z.mean(dtype) needs floats: z.float().mean([0, 1])
    assert_eq!(z.i(0)?.expand((2, -1))?.shape(), [2, 6]);
    assert_eq!(
        z.to_dtype(ferrotorch::DType::F32)?.mean_dim([0, 1], false)?.to_string(),
        "tensor(11.5000)"
    );
    // x.narrow(0, 2, 3)
    assert_eq!(x.narrow(0, 2, 3)?.to_string(), "tensor([2, 3, 4])");
    // x.view(5, -1) -> RuntimeError: shape '[5, -1]' is invalid for input of size 24
    let e = x.view((5, -1)).unwrap_err().to_string();
    assert!(e.contains("shape '[5, -1]' is invalid for input of size 24"), "{e}");
    // torch.ones(2, -1) -> RuntimeError: Trying to create tensor with negative dimension -1: [2, -1]
    let e = Tensor::ones((2, -1)).unwrap_err().to_string();
    assert!(
        e.contains("Trying to create tensor with negative dimension -1: [2, -1]"),
        "{e}"
    );
    // torch.zeros(2, -1) -> RuntimeError: zeros: Dimension size must be non-negative.
    let e = Tensor::zeros((2, -1)).unwrap_err().to_string();
    assert!(e.contains("zeros: Dimension size must be non-negative."), "{e}");
    // x.narrow(0, 2, -1) -> RuntimeError: narrow(): length must be non-negative.
    let e = x.narrow(0, 2, -1).unwrap_err().to_string();
    assert!(e.contains("narrow(): length must be non-negative."), "{e}");
    // torch.zeros(()) is 0-d
    assert_eq!(Tensor::zeros(())?.ndim(), 0);
    Ok(())
}

/// Everyday conveniences: `repeat`, `flip`, dtype shortcuts, `new_*`.
#[test]
fn conveniences() -> Result<()> {
    // x = torch.tensor([[1., 2.], [3., 4.]], requires_grad=True)
    let x = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]])?.requires_grad_(true)?;
    // y = x.repeat(2, 1, 2); (y * torch.arange(16.).reshape(2, 2, 4)).sum().backward()
    let y = x.repeat((2, 1, 2))?;
    assert_eq!(y.shape(), [2, 2, 4]);
    let w = Tensor::arange_step(0.0, 16.0, 1.0)?.reshape((2, 2, 4))?;
    (&y * &w).sum()?.backward()?;
    assert_eq!(x.grad()?.to_string(), "tensor([[20., 24.],\n        [36., 40.]])");
    // x.grad = None; f = x.flip(0, 1); (f * [[1, 2], [3, 4]]).sum().backward()
    x.set_grad(None)?;
    let f = x.flip((0, 1))?;
    assert_eq!(f.to_vec2::<f32>()?, [[4.0, 3.0], [2.0, 1.0]]);
    (&f * Tensor::new([[1.0f32, 2.0], [3.0, 4.0]])?).sum()?.backward()?;
    assert_eq!(x.grad()?.to_string(), "tensor([[4., 3.],\n        [2., 1.]])");
    // x.new_full((2,), 7).dtype; torch.tensor([1, 2]).new_full((2,), 7)
    assert_eq!(x.new_full(2, 7)?.dtype(), ferrotorch::DType::F32);
    assert_eq!(Tensor::new([1i64, 2])?.new_full(2, 7)?.to_string(), "tensor([7, 7])");
    // torch.tensor([1.5, -2.7]).long(); torch.tensor([0., 2.]).bool()
    assert_eq!(Tensor::new([1.5f32, -2.7])?.long()?.to_string(), "tensor([ 1, -2])");
    assert_eq!(
        Tensor::new([0.0f32, 2.0])?.bool()?.to_string(),
        "tensor([False,  True])"
    );
    // x.repeat(2) -> RuntimeError
    let e = x.repeat(2).unwrap_err().to_string();
    assert!(e.contains("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"));
    Ok(())
}
