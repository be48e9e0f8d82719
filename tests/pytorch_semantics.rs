//! Edge cases where ferrotorch once disagreed with PyTorch 2.15, each with
//! PyTorch's result (computed with the bench venv's torch 2.15.0, CPU):
//! version-counter checks on tensors a gradient does not read, grad_fn
//! names of composite reductions, gradients at singular points, and
//! half-precision reductions that accumulate in f32.

use ferrotorch::backend::TensorExt;
use ferrotorch::{DType, Result, Tensor};

fn leaf(v: &[f32], shape: &[usize]) -> Result<Tensor> {
    Tensor::from_vec(v.to_vec(), shape)?.requires_grad_(true)
}

fn grad_of(t: &Tensor) -> Vec<f32> {
    t.grad().expect("a gradient").to_vec::<f32>().unwrap()
}

/// `y = a * c; a.mul_(0); y.sum().backward()` works in PyTorch when `c`
/// does not require grad: a's gradient reads only `c`, so `a` is not saved.
#[test]
fn in_place_change_of_an_unread_input_does_not_fail_backward() -> Result<()> {
    let x = leaf(&[1.0, 2.0], &[2])?;
    let a = x.mul(1.0)?;
    let c = Tensor::from_slice(&[3.0f32, 4.0]);
    let y = a.mul(&c)?;
    a.mul_(0.0)?;
    y.sum()?.backward()?;
    // PyTorch: tensor([3., 4.]) (y's graph holds a's history before the write).
    assert_eq!(grad_of(&x), [3.0, 4.0]);

    // The other way round: a requires grad, c is modified (c is read).
    let a = leaf(&[1.0, 2.0], &[2])?;
    let c = Tensor::from_slice(&[3.0f32, 4.0]);
    let y = a.mul(&c)?;
    c.mul_(0.0)?;
    let e = y.sum()?.backward().unwrap_err().to_string();
    assert!(e.contains("modified by an inplace operation"), "{e}");

    // a * scalar, a / c with only a requiring grad, matmul with one side.
    let a = leaf(&[1.0, 2.0], &[2])?;
    let y = a.mul(2.0)?;
    a.detach().add_(1.0)?;
    y.sum()?.backward()?;
    assert_eq!(grad_of(&a), [2.0, 2.0]);

    let a = leaf(&[1.0, 2.0], &[2])?;
    let c = Tensor::from_slice(&[4.0f32, 8.0]);
    let y = a.div(&c)?;
    a.detach().mul_(3.0)?;
    y.sum()?.backward()?;
    assert_eq!(grad_of(&a), [0.25, 0.125]);

    let w = leaf(&[1.0, 2.0, 3.0, 4.0], &[2, 2])?;
    let x = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], [2, 2])?;
    let y = x.matmul(&w)?;
    w.detach().zero_()?;
    y.sum()?.backward()?;
    assert_eq!(grad_of(&w), [1.0, 1.0, 1.0, 1.0]);
    Ok(())
}

#[test]
fn composite_reductions_have_pytorch_node_names() -> Result<()> {
    let x = leaf(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
    let name = |t: Tensor| t.grad_fn().unwrap().name().to_string();
    assert_eq!(name(x.mean()?), "MeanBackward0");
    assert_eq!(name(x.mean_dim(1, false)?), "MeanBackward1");
    assert_eq!(name(x.var(1.0)?), "VarBackward0");
    assert_eq!(name(x.var_dim(vec![1], 1.0, false)?), "VarBackward0");
    assert_eq!(name(x.std(1.0)?), "StdBackward0");
    assert_eq!(name(x.std_dim(vec![1], 1.0, false)?), "StdBackward0");
    assert_eq!(name(x.norm(2.0)?), "LinalgVectorNormBackward0");
    assert_eq!(name(x.norm_dim(3.0, vec![1], false)?), "LinalgVectorNormBackward0");
    assert_eq!(name(x.logsumexp(1, false)?), "LogsumexpBackward0");
    assert_eq!(name(x.to_dtype(DType::F16)?.mean()?), "MeanBackward0");
    Ok(())
}

#[test]
fn gradients_at_singular_points_follow_pytorch() -> Result<()> {
    // torch.zeros(3).norm().backward() -> [0, 0, 0] (not NaN).
    let x = leaf(&[0.0, 0.0, 0.0], &[3])?;
    x.norm(2.0)?.backward()?;
    assert_eq!(grad_of(&x), [0.0, 0.0, 0.0]);
    let x = leaf(&[0.0, 0.0, 0.0, 1.0, 2.0, 2.0], &[2, 3])?;
    x.norm_dim(3.0, vec![1], false)?.sum()?.backward()?;
    let g = grad_of(&x);
    assert_eq!(&g[..3], &[0.0, 0.0, 0.0]);
    // Row 2: x * |x| / norm^2 with norm = 17^(1/3).
    let n2 = 17f32.powf(2.0 / 3.0);
    for (got, want) in g[3..].iter().zip([1.0 / n2, 4.0 / n2, 4.0 / n2]) {
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }
    // ones(2, 3).std(1).sum().backward() -> zeros; var likewise.
    let x = leaf(&[1.0; 6], &[2, 3])?;
    x.std_dim(vec![1], 1.0, false)?.sum()?.backward()?;
    assert_eq!(grad_of(&x), [0.0; 6]);
    let x = leaf(&[1.0; 6], &[2, 3])?;
    x.std(1.0)?.backward()?;
    assert_eq!(grad_of(&x), [0.0; 6]);
    // ones(1).var() (no degrees of freedom) -> NaN, as PyTorch's var_backward.
    let x = leaf(&[1.0], &[1])?;
    x.var(1.0)?.backward()?;
    assert!(grad_of(&x)[0].is_nan());
    // inf-norm: the gradient goes to the maximum.
    let x = leaf(&[0.0, 1.0, 2.0, 3.0], &[4])?;
    x.norm(f64::INFINITY)?.backward()?;
    assert_eq!(grad_of(&x), [0.0, 0.0, 0.0, 1.0]);
    Ok(())
}

/// PyTorch 2.15's clamp passes the gradient strictly inside the bounds.
#[test]
fn clamp_gradient_at_the_bounds() -> Result<()> {
    let x = leaf(&[0.0, 1.0, 2.0, 3.0], &[4])?;
    x.clamp(Some(1.0), Some(2.0))?.sum()?.backward()?;
    assert_eq!(grad_of(&x), [0.0, 0.0, 0.0, 0.0]);
    let x = leaf(&[0.0, 1.0, 2.0, 3.0], &[4])?;
    x.clamp_min(1.0)?.sum()?.backward()?;
    assert_eq!(grad_of(&x), [0.0, 0.0, 1.0, 1.0]);
    let x = leaf(&[0.0, 1.0, 2.0, 3.0], &[4])?;
    x.clamp(Some(2.0), Some(1.0))?.sum()?.backward()?;
    assert_eq!(grad_of(&x), [0.0, 0.0, 0.0, 0.0]);
    Ok(())
}

/// Half-precision mean and norm accumulate in f32 (PyTorch: cast to f32,
/// sum, divide, cast back), so a sum that overflows f16 does not matter.
#[test]
fn half_reductions_accumulate_in_f32() -> Result<()> {
    for dt in [DType::F16, DType::BF16] {
        let x = Tensor::full([300, 300], 60000.0)?.to_dtype(dt)?;
        assert_eq!(x.mean()?.dtype(), dt);
        let m = x.mean()?.to_dtype(DType::F32)?.item::<f32>()?;
        let want = Tensor::scalar(60000.0f32).to_dtype(dt)?.item::<f32>()?;
        assert_eq!(m, want, "{dt}");
        // 70000 ones: the sum of squares overflows f16, the norm (264.575) does not.
        let ones = Tensor::ones([70000])?.to_dtype(dt)?;
        let n = ones.norm(2.0)?.to_dtype(DType::F32)?.item::<f32>()?;
        let want = Tensor::scalar(70000f32.sqrt()).to_dtype(dt)?.item::<f32>()?;
        assert_eq!(n, want, "{dt}");
        let v = x.var(1.0)?.to_dtype(DType::F32)?.item::<f32>()?;
        assert_eq!(v, 0.0, "{dt}");
    }
    Ok(())
}

/// Validation PyTorch does: scalars that do not fit a fill's dtype, scatter
/// with a source of another dtype, index_select of a 0-d tensor with two
/// indices.
#[test]
fn validation_as_pytorch() -> Result<()> {
    let msg = |r: Result<Tensor>| r.err().map(|e| e.to_string()).unwrap_or_else(|| "no error".into());
    let u8s = Tensor::zeros_dtype([3], DType::U8)?;
    assert_eq!(
        msg(u8s.fill_(256)),
        "fill_: value cannot be converted to type uint8_t without overflow"
    );
    assert_eq!(u8s.fill_(-1)?.to_vec::<u8>()?, [255, 255, 255]);
    assert_eq!(u8s.fill_(255.9)?.to_vec::<u8>()?, [255, 255, 255]);
    assert!(msg(u8s.fill_(-256)).contains("uint8_t"));
    // A negative float never fits uint8 (a negative int does): -0.5 fails,
    // -0.0 fits.
    assert!(msg(u8s.fill_(-0.5)).contains("uint8_t"));
    assert!(msg(u8s.masked_fill(&Tensor::from_slice(&[true, false, true]), -1.5)).contains("uint8_t"));
    assert_eq!(u8s.fill_(-0.0)?.to_vec::<u8>()?, [0, 0, 0]);
    assert_eq!(
        Tensor::zeros_dtype([1], DType::I32)?.fill_(-1.5)?.to_vec::<i32>()?,
        [-1]
    );
    let i32s = Tensor::zeros_dtype([3], DType::I32)?;
    assert!(msg(i32s.fill_(1i64 << 31)).ends_with("type int without overflow"));
    assert_eq!(i32s.fill_(2147483647.9)?.to_vec::<i32>()?, [i32::MAX; 3]);
    assert!(msg(i32s.fill_(2147483648.0)).contains("overflow"));
    let i64s = Tensor::zeros_dtype([3], DType::I64)?;
    assert!(msg(i64s.fill_(f64::NAN)).contains("int64_t"));
    assert!(msg(i64s.fill_(9.3e18)).contains("int64_t"));
    assert_eq!(i64s.fill_(1.5)?.to_vec::<i64>()?, [1, 1, 1]);
    let halves = Tensor::zeros_dtype([3], DType::F16)?;
    assert!(msg(halves.fill_(65519.0)).contains("c10::Half"));
    assert!(halves.fill_(f64::INFINITY).is_ok() && halves.fill_(f64::NAN).is_ok());
    let bf = Tensor::zeros_dtype([3], DType::BF16)?;
    assert!(msg(bf.fill_(3.39e38)).contains("c10::BFloat16"));
    let f32s = Tensor::zeros([3])?;
    assert!(msg(f32s.fill_(3.5e38)).ends_with("type float without overflow"));
    assert!(f32s.fill_(3.4e38).is_ok());
    assert_eq!(
        Tensor::zeros_dtype([2], DType::Bool)?.fill_(5)?.to_vec::<bool>()?,
        [true, true]
    );
    let m = Tensor::from_slice(&[true, false, true]);
    assert!(msg(u8s.masked_fill(&m, 300)).starts_with("masked_fill: value cannot be converted"));
    assert!(msg(halves.masked_fill(&m, 1e5)).contains("c10::Half"));
    assert!(msg(ferrotorch::TensorOptions::new().dtype(DType::U8).full([2], 300)).contains("uint8_t"));

    let idx = Tensor::from_slice(&[0i64]);
    let e = msg(Tensor::zeros([3])?.scatter(0, &idx, &Tensor::ones_like(&Tensor::zeros_dtype([1], DType::F64)?)?));
    assert!(e.contains("expected self.dtype to be equal to src.dtype"), "{e}");
    let e = msg(Tensor::zeros([3])?.scatter_add(0, &idx, &Tensor::zeros_dtype([1], DType::F64)?));
    assert!(e.contains("expected self.dtype to be equal to src.dtype"), "{e}");

    let s = Tensor::scalar(5.0f32);
    let e = msg(s.index_select(0, &Tensor::from_slice(&[0i64, 0])));
    assert!(e.contains("index to scalar can have only 1 value, got 2"), "{e}");
    assert_eq!(s.index_select(0, &idx)?.item::<f32>()?, 5.0);
    Ok(())
}

/// `type(t.grad_fn).__name__` in PyTorch 2.15 for the same expressions.
#[test]
fn node_names_match_pytorch() -> Result<()> {
    let x = Tensor::randn([3, 4])?.requires_grad_(true)?;
    let r0 = x.select(0, 0)?;
    let idx = Tensor::zeros_dtype([3, 1], DType::I64)?;
    let cases: Vec<(&str, Tensor, &str)> = vec![
        (
            "x.masked_fill(x > 0, 0)",
            x.masked_fill(&x.gt(0.0)?, 0.0)?,
            "MaskedFillBackward0",
        ),
        ("x.tril()", x.tril(0)?, "TrilBackward0"),
        ("x.triu(1)", x.triu(1)?, "TriuBackward0"),
        ("x.t()", x.t()?, "TBackward0"),
        ("x[1:]", x.slice(0, Some(1), None, 1)?, "SliceBackward0"),
        ("x[:, 1]", x.select(1, 1)?, "SelectBackward0"),
        ("x.narrow(1, 0, 2)", x.narrow(1, 0, 2)?, "SliceBackward0"),
        ("x[0].dot(x[1])", r0.dot(&x.select(0, 1)?)?, "DotBackward0"),
        ("x.log1p()", x.log1p()?, "Log1PBackward0"),
        ("x.mv(x[0])", x.t()?.mv(&x.select(1, 0)?)?, "MvBackward0"),
        ("torch.stack([x, x])", Tensor::stack(&[&x, &x], 0)?, "StackBackward0"),
        ("torch.cat([x, x])", Tensor::cat(&[&x, &x], 0)?, "CatBackward0"),
        ("x.reshape(-1)", x.reshape([-1])?, "ViewBackward0"),
        ("x.max(1)[0]", x.max_dim(1, false)?.0, "MaxBackward0"),
        ("x.clamp(-1, 1)", x.clamp(Some(-1.0), Some(1.0))?, "ClampBackward1"),
        ("x.gather(1, idx)", x.gather(1, &idx)?, "GatherBackward0"),
        ("x.pow(2)", x.pow(2.0)?, "PowBackward0"),
        ("x ** x", x.pow(&x)?, "PowBackward1"),
        ("x @ x.t()", x.matmul(&x.t()?)?, "MmBackward0"),
        ("x.t() @ x[:, 0]", x.t()?.matmul(&x.select(1, 0)?)?, "MvBackward0"),
        ("x[0] @ x[0]", r0.matmul(&r0)?, "DotBackward0"),
        ("x.to(torch.float64)", x.to_dtype(DType::F64)?, "ToCopyBackward0"),
        ("x.sum(1)", x.sum_dim(1, false)?, "SumBackward1"),
        ("x.amax(1)", x.amax(1, false)?, "AmaxBackward0"),
        ("x.amax(())", x.amax(Vec::<i64>::new(), false)?, "AmaxBackward0"),
        ("x.max()", x.max()?, "MaxBackward1"),
        ("x.min()", x.min()?, "MinBackward1"),
        ("x.clone()", x.clone_tensor()?, "CloneBackward0"),
    ];
    for (expr, t, want) in cases {
        assert_eq!(t.grad_fn().expect(expr).name(), want, "{expr}");
    }
    Ok(())
}

/// `torch.topk(torch.tensor(0.24, dtype=torch.float64), 0)` gives the element
/// and index 0 (the output was once left unwritten here).
#[test]
fn topk_of_a_scalar() -> Result<()> {
    for k in [0, 1] {
        let (v, i) = Tensor::scalar(0.24f64).topk(k, 0, true)?;
        assert_eq!((v.shape(), i.shape()), (&[][..], &[][..]));
        assert_eq!((v.item::<f64>()?, i.item::<i64>()?), (0.24, 0));
    }
    assert!(Tensor::scalar(0.24f64).topk(2, 0, true).is_err());
    Ok(())
}

/// f32 variances accumulate in f64 and f32 norms in f32, as PyTorch's CPU
/// kernels do: a norm whose sum of powers overflows f32 is inf, as in
/// PyTorch, except a norm of one element, which is its absolute value.
#[test]
fn f32_variances_accumulate_in_f64_and_norms_overflow_as_pytorch() -> Result<()> {
    let x = Tensor::from_slice(&[3e38f32, 0.0]);
    assert_eq!(x.norm_dim(3.0, (), false)?.item::<f32>()?, f32::INFINITY);
    assert_eq!(x.norm(2.0)?.item::<f32>()?, f32::INFINITY);
    assert_eq!(x.norm(1.0)?.item::<f32>()?, 3e38);
    let one = Tensor::from_slice(&[-3e38f32]);
    for p in [2.0, 3.0, 0.5, -1.0] {
        assert_eq!(one.norm(p)?.item::<f32>()?, 3e38, "p = {p}");
    }
    let col = Tensor::new([[3e38f32], [1e38]])?;
    assert_eq!(col.norm_dim(2.0, [1], false)?.to_vec::<f32>()?, [3e38, 1e38]);
    let s = Tensor::from_slice(&[-3e38f32, 0.0]).std(1.0)?.item::<f32>()?;
    assert!((s - 2.1213203e38).abs() < 1e32, "{s}");
    Ok(())
}

/// A gradient computed in another dtype arrives in the input's dtype
/// (PyTorch's validate_outputs): `a = f16; b = f32 leaf; a.mul_(b)` gives
/// `b.grad` in float32.
#[test]
fn gradients_arrive_in_the_inputs_dtype() -> Result<()> {
    let a = Tensor::from_slice(&[1.5f32, 2.0]).to_dtype(DType::F16)?;
    let b = leaf(&[3.0, 4.0], &[2])?;
    a.mul_(&b)?;
    assert_eq!(a.dtype(), DType::F16);
    a.sum()?.backward()?;
    let g = b.grad().expect("b's gradient");
    assert_eq!(g.dtype(), DType::F32);
    assert_eq!(g.to_vec::<f32>()?, [1.5, 2.0]);
    Ok(())
}

/// The 0-d tensors that wrap Python-style scalars are cached per thread and
/// shared by every `x * 2.0`: nothing may write into them, or every later
/// product would change. Gradients of `x * 2.0` reach them as broadcast
/// views; accumulating into those must copy.
#[test]
fn cached_scalars_cannot_be_written() -> Result<()> {
    let x = leaf(&[1.0, 2.0], &[2])?;
    for _ in 0..3 {
        let y = x.mul(2.0)?;
        let z = x.mul(2.0)?.mul(2.0)?;
        y.add(&z)?.sum()?.backward()?;
    }
    assert_eq!(grad_of(&x), [18.0, 18.0]);
    assert_eq!(x.detach().mul(2.0)?.to_vec::<f32>()?, [2.0, 4.0]);
    Ok(())
}

/// Integer division at the edge of i64: PyTorch returns i64::MIN for
/// `tensor([-2**63]) // -1` (its trunc division and `%` of these operands
/// crash with SIGFPE; here they wrap). Once a panic here.
#[test]
fn integer_division_of_the_minimum_by_minus_one() -> Result<()> {
    use ferrotorch::Rounding;
    let x = Tensor::from_slice(&[i64::MIN, 1, -5]);
    assert_eq!(
        x.div_rounding(-1i64, Rounding::Floor)?.to_vec::<i64>()?,
        [i64::MIN, -1, 5]
    );
    assert_eq!(
        x.div_rounding(-1i64, Rounding::Trunc)?.to_vec::<i64>()?,
        [i64::MIN, -1, 5]
    );
    let y = Tensor::from_slice(&[i64::MIN, 7, -7]);
    assert_eq!(
        y.div_rounding(2i64, Rounding::Floor)?.to_vec::<i64>()?,
        [i64::MIN / 2, 3, -4]
    );
    let z = Tensor::from_slice(&[i32::MIN]);
    assert_eq!(z.div_rounding(-1i64, Rounding::Floor)?.to_vec::<i32>()?, [i32::MIN]);
    Ok(())
}

/// `torch.all(x, dim=())` reduces nothing: `x != 0` elementwise (uint8 for
/// uint8 input), unlike `sum(x, dim=())`, which reduces everything.
#[test]
fn all_and_any_over_no_dims() -> Result<()> {
    let x = Tensor::from_vec(vec![0u8, 2, 3, 4], [2, 2])?;
    let a = x.all_dim(Vec::<i64>::new(), false)?;
    assert_eq!((a.dtype(), a.shape()), (DType::U8, &[2usize, 2][..]));
    assert_eq!(a.to_vec::<u8>()?, [0, 1, 1, 1]);
    let y = Tensor::from_vec(vec![0.0f32, 2.0, 3.0, 4.0], [2, 2])?;
    let b = y.any_dim(Vec::<i64>::new(), true)?;
    assert_eq!(b.to_vec::<bool>()?, [false, true, true, true]);
    assert_eq!(y.sum_dim(Vec::<i64>::new(), false)?.item::<f32>()?, 9.0);
    Ok(())
}

/// `F.gelu` / `F.silu` / `F.softplus` of an integer tensor are errors in
/// PyTorch ("not implemented for 'Long'"), unlike `exp`, which promotes.
#[test]
fn activations_refuse_integer_inputs() -> Result<()> {
    let i = Tensor::from_slice(&[1i64, -2]);
    assert!(i.gelu().is_err() && i.gelu_tanh().is_err() && i.silu().is_err());
    assert!(i.softplus(1.0, 20.0).is_err());
    assert!(Tensor::from_slice(&[true]).silu().is_err());
    assert_eq!(i.exp()?.dtype(), DType::F32);
    Ok(())
}

fn node(t: &Tensor) -> String {
    t.grad_fn().map(|n| n.name().to_string()).unwrap_or_default()
}

/// Node names of the overloads a PyTorch user calls, as PyTorch 2.15
/// prints them.
#[test]
fn overload_node_names() -> Result<()> {
    let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0]).requires_grad_(true)?;
    assert_eq!(node(&x.clamp_min(0.0)?), "ClampMinBackward0");
    assert_eq!(node(&x.clamp_max(0.0)?), "ClampMaxBackward0");
    assert_eq!(node(&x.clamp(Some(0.0), None::<f64>)?), "ClampBackward1");
    let y = x.mul(1.0)?;
    assert_eq!(node(&y.clamp_min_(0.0)?), "ClampMinBackward0");
    assert_eq!(y.to_vec::<f32>()?, [1.0, 0.0, 3.0]);
    assert_eq!(node(&(2.0 - &x)), "RsubBackward1");
    assert_eq!(node(&Tensor::scalar_pow(2.0, &x)?), "PowBackward2");
    assert_eq!(node(&x.pow(2.0)?), "PowBackward0");
    // `2 / x` is `x.reciprocal() * 2`, its node and its rounding.
    let r = 2.0 / &x;
    assert_eq!(node(&r), "MulBackward0");
    let third = Tensor::from_slice(&[3.0f32]);
    assert_eq!((1.0 / &third).item::<f32>()?, (1.0f32 / 3.0) * 1.0);
    let m = x.reshape([3, 1])?;
    assert_eq!(node(&m.squeeze()?), "SqueezeBackward0");
    assert_eq!(node(&m.squeeze_dim(1)?), "SqueezeBackward1");
    assert_eq!(node(&m.squeeze_dims([1])?), "SqueezeBackward2");
    assert_eq!(node(&x.sum()?), "SumBackward0");
    let all = x.sum_dim([0i64; 0], false)?;
    assert_eq!(node(&all), "SumBackward1");
    assert_eq!(all.item::<f32>()?, 2.0);
    assert_eq!(node(&m.t()?.contiguous()?), "TBackward0"); // [1, 3] is contiguous
    let sq = x.narrow(0, 0, 2)?.unsqueeze(0)?.expand([2, 2])?;
    assert_eq!(node(&sq.t()?.contiguous()?), "CloneBackward0");
    assert_eq!(node(&x.sort(0, false)?.0), "SortBackward0");
    let (v, i) = x.sort_stable(0, true)?;
    assert_eq!(node(&v), "SortBackward1");
    assert_eq!(i.to_vec::<i64>()?, [2, 0, 1]);
    let idx = Tensor::from_slice(&[0i64]);
    assert_eq!(node(&x.scatter_value(0, &idx, 5.0)?), "ScatterBackward1");
    assert_eq!(node(&x.scatter(0, &idx, &x)?), "ScatterBackward0");
    assert_eq!(node(&x.scatter_add(0, &idx, &x)?), "ScatterAddBackward0");
    Ok(())
}

/// gather and scatter count a 0-d tensor as 1-d of one element, skip the
/// shape checks for an empty index, and a src gradient of the index's
/// shape is summed back to a src that broadcasts to it (all as PyTorch).
#[test]
fn gather_and_scatter_edge_shapes() -> Result<()> {
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
    let i0 = Tensor::scalar(2i64);
    let g = x.gather(0, &i0)?;
    assert_eq!(g.shape(), [0usize; 0]);
    assert_eq!(g.item::<f32>()?, 3.0);
    let src = Tensor::scalar(9.0f32).requires_grad_(true)?;
    let s = x.scatter(0, &i0, &src)?;
    assert_eq!(s.to_vec::<f32>()?, [1.0, 2.0, 9.0]);
    assert_eq!(node(&s), "ScatterBackward0");
    s.sum()?.backward()?;
    assert_eq!(src.grad().unwrap().item::<f32>()?, 1.0);
    // A 0-d self with a one-element index.
    let z = Tensor::scalar(0.5f32).requires_grad_(true)?;
    let w = z.scatter(0, &Tensor::from_slice(&[0i64]), &Tensor::from_slice(&[4.0f32]))?;
    assert_eq!(w.shape(), [0usize; 0]);
    assert_eq!(w.item::<f32>()?, 4.0);
    // An empty index is not checked against the other shapes.
    let empty = Tensor::zeros_dtype([3, 0, 3, 4], DType::I64)?;
    let s = x.scatter_add(0, &empty, &Tensor::from_slice(&[1.0f32]))?;
    assert_eq!(s.to_vec::<f32>()?, [1.0, 2.0, 3.0]);
    // src [1, 3] with index [1, 2]: the src gradient is the index's shape,
    // which src does not broadcast to: an error naming the node, as PyTorch.
    let base = Tensor::zeros([2, 3])?;
    let src = Tensor::ones([1, 3])?.requires_grad_(true)?;
    let idx = Tensor::from_slice(&[0i64, 1]).reshape([1, 2])?;
    let e = base.scatter(1, &idx, &src)?.sum()?.backward().unwrap_err().to_string();
    // (PyTorch numbers the gradient among the differentiable inputs, 1.)
    assert!(
        e.contains("ScatterBackward0 returned an invalid gradient at index"),
        "{e}"
    );
    Ok(())
}

/// `fill_` and `zero_` keep an edge to the old history (a zero gradient),
/// as PyTorch's FillBackward2 (`fill_.Scalar`) / ZeroBackward0: leaves get zero gradients
/// instead of none, and a saved output they overwrite is still detected.
#[test]
fn fill_and_zero_keep_the_graph() -> Result<()> {
    let x = leaf(&[1.0, 2.0], &[2])?;
    let z = x.mul(2.0)?;
    z.zero_()?;
    assert_eq!(node(&z), "ZeroBackward0");
    z.sum()?.backward()?;
    assert_eq!(grad_of(&x), [0.0, 0.0]);
    let x = leaf(&[1.0, 2.0], &[2])?;
    let z = x.mul(2.0)?;
    z.narrow(0, 0, 1)?.fill_(7.0)?;
    z.sum()?.backward()?;
    assert_eq!(grad_of(&x), [0.0, 2.0]);
    // exp saves its output; overwriting it breaks exp's backward.
    let x = leaf(&[1.0, 2.0], &[2])?;
    let y = x.exp()?;
    y.fill_(1.0)?;
    assert_eq!(node(&y), "FillBackward2");
    let e = y.sum()?.backward().unwrap_err().to_string();
    assert!(e.contains("modified by an inplace operation"), "{e}");
    // Overflowing values are refused before anything is written...
    let h = Tensor::from_slice(&[1.0f32, 2.0]).to_dtype(DType::F16)?;
    assert!(h.fill_(1e6).is_err());
    assert_eq!(h.to_dtype(DType::F32)?.to_vec::<f32>()?, [1.0, 2.0]);
    // ...except in a one-element f16 tensor, which PyTorch's one-element
    // fill writes without its check: inf.
    let h1 = Tensor::from_slice(&[1.0f32]).to_dtype(DType::F16)?;
    h1.fill_(1e6)?;
    assert_eq!(h1.to_dtype(DType::F32)?.item::<f32>()?, f32::INFINITY);
    Ok(())
}

/// `copy_` keeps `self`'s old history with a zero gradient and sends the
/// gradient to `src` (PyTorch's CopyBackwards); an integer destination
/// stays outside the graph.
#[test]
fn copy_keeps_the_graph() -> Result<()> {
    let x = leaf(&[1.0, 2.0, 3.0], &[3])?;
    let s = leaf(&[5.0], &[1])?;
    let y = x.mul(3.0)?;
    y.narrow(0, 1, 2)?.copy_(&s)?;
    assert_eq!(y.to_vec::<f32>()?, [3.0, 5.0, 5.0]);
    y.mul(&Tensor::from_slice(&[1.0f32, 10.0, 100.0]))?.sum()?.backward()?;
    assert_eq!(grad_of(&x), [3.0, 0.0, 0.0]);
    assert_eq!(grad_of(&s), [110.0]);
    let x = leaf(&[1.0, 2.0], &[2])?;
    let y = x.exp()?;
    y.copy_(&Tensor::from_slice(&[0.5f32, 0.5]))?;
    assert_eq!(node(&y), "CopyBackwards");
    let e = y.sum()?.backward().unwrap_err().to_string();
    assert!(e.contains("modified by an inplace operation"), "{e}");
    let i = Tensor::from_slice(&[0i64, 0]);
    i.copy_(&leaf(&[1.5, -2.5], &[2])?)?;
    assert!(!i.requires_grad());
    assert_eq!(i.to_vec::<i64>()?, [1, -2]);
    Ok(())
}

/// In-place comparisons on a float tensor in the graph record a node with
/// zero gradients (`gt_.Scalar` GtBackward0, `gt_.Tensor` GtBackward1), as
/// PyTorch; out-of-place ones give bool tensors outside the graph.
#[test]
fn inplace_comparisons_have_zero_gradients() -> Result<()> {
    let x = leaf(&[1.0, 2.0, 3.0], &[3])?;
    let y = x.mul(2.0)?;
    y.gt_(3.0)?;
    assert_eq!(y.to_vec::<f32>()?, [0.0, 1.0, 1.0]);
    assert!(y.requires_grad());
    assert_eq!(node(&y), "GtBackward0");
    y.sum()?.backward()?;
    assert_eq!(grad_of(&x), [0.0, 0.0, 0.0]);
    let x = leaf(&[1.0, 2.0], &[2])?;
    let z = x.exp()?;
    z.eq_(&Tensor::from_slice(&[1.0f32, 7.0]))?;
    assert_eq!(node(&z), "EqBackward1");
    assert!(!x.gt(1.0)?.requires_grad());
    // On a leaf that requires grad: PyTorch's in-place error.
    assert!(x.lt_(1.0).unwrap_err().to_string().contains("leaf"));
    Ok(())
}

/// cumsum / cumprod of a 0-d tensor are the scans themselves (nodes
/// `CumsumBackward0` / `CumprodBackward0`, not a clone), in every float
/// dtype; integers accumulate in int64. PyTorch: d(cumprod(a) * cumsum(a))/da
/// at 2.5 is 5.
#[test]
fn scans_of_a_scalar() -> Result<()> {
    for dt in [DType::F32, DType::BF16, DType::F64] {
        let a = Tensor::scalar_tensor(ferrotorch::Scalar::Float(2.5), dt).requires_grad_(true)?;
        let (c, s) = (a.cumprod(0)?, a.cumsum(-1)?);
        assert_eq!(
            (node(&c), node(&s)),
            ("CumprodBackward0".into(), "CumsumBackward0".into())
        );
        assert_eq!((c.shape(), c.dtype()), (&[][..], dt));
        c.mul(&s)?.backward()?;
        assert_eq!(a.grad().unwrap().to_dtype(DType::F64)?.item::<f64>()?, 5.0);
    }
    let i = Tensor::scalar_tensor(ferrotorch::Scalar::Int(3), DType::I32).cumsum(0)?;
    assert_eq!((i.dtype(), i.item::<i64>()?), (DType::I64, 3));
    Ok(())
}

/// add/sub's alpha is checked against the computation's dtype (PyTorch's
/// alpha_check): a float alpha is fine for int - float, a bool alpha only
/// for bool results; bool add applies a bool alpha.
#[test]
fn alpha_checks_use_the_result_dtype() -> Result<()> {
    let msg = |r: Result<Tensor>| r.err().map(|e| e.to_string()).unwrap_or_else(|| "no error".into());
    let ints = Tensor::from_slice(&[4i32, 6]);
    let floats = Tensor::from_slice(&[0.5f32, 1.0]);
    assert_eq!(ints.sub_scaled(&floats, 2.5)?.to_vec::<f32>()?, [2.75, 3.5]);
    assert!(msg(ints.sub_scaled(&ints, 2.5)).contains("alpha must not be a floating point number"));
    assert!(msg(floats.add_scaled(&floats, true)).contains("Boolean alpha only supported for Boolean results"));
    assert!(msg(ints.add_scaled_(&ints, false)).contains("Boolean alpha"));
    let a = Tensor::from_slice(&[false, true, false]);
    let b = Tensor::from_slice(&[true, true, false]);
    assert_eq!(a.add_scaled(&b, false)?.to_vec::<bool>()?, [false, true, false]);
    assert_eq!(a.add_scaled(&b, 0)?.to_vec::<bool>()?, [false, true, false]);
    assert_eq!(a.add_scaled(&b, true)?.to_vec::<bool>()?, [true, true, false]);
    Ok(())
}

/// Out-of-place masked_fill broadcasts x and the mask (PyTorch's
/// expand_outplace); x's gradient is summed back. In place, the mask must
/// broadcast to x.
#[test]
fn masked_fill_broadcasts_out_of_place() -> Result<()> {
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).requires_grad_(true)?;
    let m = Tensor::from_vec(vec![true, false], [2, 1])?;
    let r = x.masked_fill(&m, 0.5)?;
    assert_eq!(r.shape(), [2, 3]);
    assert_eq!(r.to_vec::<f32>()?, [0.5, 0.5, 0.5, 1.0, 2.0, 3.0]);
    r.sum()?.backward()?;
    assert_eq!(x.grad().unwrap().to_vec::<f32>()?, [1.0, 1.0, 1.0]);
    let e = x
        .detach()
        .masked_fill_(&m, 0.5)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("mask must broadcast to the input"), "{e}");
    Ok(())
}

/// matmul, reshape and flatten record PyTorch 2.15's nodes (its folding
/// rules: `_unsafe_view` of a folded or batched product, `squeeze_` after a
/// vector times a matrix, `_reshape_alias` for a non-contiguous view, a copy
/// then `_unsafe_view` when no view exists), with PyTorch's shapes.
#[test]
fn matmul_and_reshape_nodes() -> Result<()> {
    let x = Tensor::randn([3, 4])?.requires_grad_(true)?;
    let b3 = Tensor::randn([2, 3, 4])?.requires_grad_(true)?;
    let w = Tensor::randn([4, 5])?.requires_grad_(true)?;
    let v = Tensor::randn([4])?.requires_grad_(true)?;
    let s = Tensor::scalar_tensor(ferrotorch::Scalar::Float(1.5), DType::F32).requires_grad_(true)?;
    let b3t = b3.transpose(1, 2)?;
    let cases: Vec<(&str, Tensor, &str, Vec<usize>)> = vec![
        ("b3 @ w", b3.matmul(&w)?, "UnsafeViewBackward0", vec![2, 3, 5]),
        ("b3 @ v", b3.matmul(&v)?, "UnsafeViewBackward0", vec![2, 3]),
        ("v @ w", v.matmul(&w)?, "SqueezeBackward4", vec![5]),
        (
            "x @ b3.transpose(1,2)",
            x.matmul(&b3t)?,
            "CloneBackward0",
            vec![2, 3, 3],
        ),
        (
            "v @ b3.transpose(1,2)",
            v.matmul(&b3t)?,
            "UnsafeViewBackward0",
            vec![2, 3],
        ),
        (
            "b3 @ b3.transpose(1,2)",
            b3.matmul(&b3t)?,
            "UnsafeViewBackward0",
            vec![2, 3, 3],
        ),
        (
            "b3.transpose(1,2) @ x",
            b3t.matmul(&x)?,
            "UnsafeViewBackward0",
            vec![2, 4, 4],
        ),
        (
            "x[:, :2].reshape(6)",
            x.narrow(1, 0, 2)?.reshape([6])?,
            "UnsafeViewBackward0",
            vec![6],
        ),
        (
            "x[:, :2].reshape(3, 1, 2)",
            x.narrow(1, 0, 2)?.reshape([3, 1, 2])?,
            "ReshapeAliasBackward0",
            vec![3, 1, 2],
        ),
        (
            "x[1:].reshape(8)",
            x.narrow(0, 1, 2)?.reshape([8])?,
            "ViewBackward0",
            vec![8],
        ),
        (
            "x.t().flatten()",
            x.t()?.flatten((0, -1))?,
            "UnsafeViewBackward0",
            vec![12],
        ),
        ("s.max(0)[0]", s.max_dim(0, false)?.0, "MaxBackward0", vec![]),
        ("s.min(-1)[0]", s.min_dim(-1, false)?.0, "MinBackward0", vec![]),
    ];
    for (expr, t, want, shape) in cases {
        assert_eq!((node(&t).as_str(), t.shape()), (want, &shape[..]), "{expr}");
    }
    // A vector times a 5-d tensor: folded into one mv when the batch dims
    // of its last-two-transposed form are contiguous (PyTorch's
    // `should_fold`), a bmm otherwise; both end in `_unsafe_view`.
    let c5 = Tensor::randn([2, 3, 2, 5, 4])?.requires_grad_(true)?;
    let d5 = Tensor::randn([2, 3, 2, 4, 5])?.requires_grad_(true)?;
    let v5 = Tensor::randn([4])?;
    let below = |t: &Tensor| -> Vec<String> {
        let n = t.grad_fn().unwrap();
        n.next_edges().iter().flatten().map(|e| e.node.name()).collect()
    };
    for (expr, t, want) in [
        ("v @ c5.transpose(3,4)", v5.matmul(&c5.transpose(3, 4)?)?, "MvBackward0"),
        ("v @ d5", v5.matmul(&d5)?, "BmmBackward0"),
    ] {
        assert_eq!(node(&t), "UnsafeViewBackward0", "{expr}");
        assert_eq!(t.shape(), [2, 3, 2, 5], "{expr}");
        assert_eq!(below(&t), [want], "{expr}");
    }
    // flatten over one dim returns the tensor itself.
    let f = x.flatten((1, 1))?;
    assert!(f.is_leaf() && f.storage().same(x.storage()));
    // A reshape that copied is not a view: an in-place op on it records its own node.
    let y = x.t()?.reshape([-1])?;
    y.mul_(2.0)?;
    assert_eq!(node(&y), "MulBackward0");
    // The gradient of a 0-d max flows through.
    s.max_dim(0, false)?.0.mul(3.0)?.backward()?;
    assert_eq!(s.grad().unwrap().item::<f32>()?, 3.0);
    Ok(())
}

/// PyTorch computes an empty batched product before checking dtypes: zeros
/// in the second operand's dtype. mm, mv and dot always check.
#[test]
fn empty_products_and_dtypes() -> Result<()> {
    let r = Tensor::zeros([1, 2, 0])?.bmm(&Tensor::zeros_dtype([1, 0, 3], DType::F16)?)?;
    assert_eq!((r.dtype(), r.shape()), (DType::F16, &[1, 2, 3][..]));
    assert_eq!(r.to_dtype(DType::F32)?.to_vec::<f32>()?, [0.0; 6]);
    let bools = Tensor::zeros_dtype([0, 2], DType::Bool)?.mm(&Tensor::zeros_dtype([2, 3], DType::Bool)?)?;
    assert_eq!(bools.shape(), [0, 3]);
    assert!(
        Tensor::zeros([3, 0])?
            .mm(&Tensor::zeros_dtype([0, 2], DType::F64)?)
            .is_err()
    );
    assert!(
        Tensor::zeros_dtype([2, 2], DType::Bool)?
            .mm(&Tensor::zeros_dtype([2, 2], DType::Bool)?)
            .is_err()
    );
    // sum(dtype=int) of a tensor that requires grad (PyTorch's message).
    let x = Tensor::randn([3])?.requires_grad_(true)?;
    let e = x
        .sum_dim_dtype(0, false, DType::I64)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("Autograd not support dtype: Long"), "{e}");
    Ok(())
}

/// An integer clamp bound outside the dtype's range: a no-op on its own side,
/// PyTorch's error on the other; for uint8 the range is 0..=255 (-1 as a
/// max is an error, though -1 fills a uint8 tensor with 255).
#[test]
fn clamp_bounds_outside_the_integer_range() -> Result<()> {
    let u = Tensor::from_slice(&[1u8, 200]);
    let msg = |r: Result<Tensor>| r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(msg(u.clamp_max(-1)).contains("Clamp max value -1 is outside the representable range"));
    assert!(msg(u.clamp(None::<i64>, Some(-1))).contains("Clamp max value -1"));
    assert!(msg(u.clamp_min(300)).contains("Clamp min value 300"));
    assert_eq!(u.clamp_max(300)?.to_vec::<u8>()?, [1, 200]);
    assert_eq!(u.clamp_min(-1)?.to_vec::<u8>()?, [1, 200]);
    assert_eq!(u.clamp(Some(-1), Some(300))?.to_vec::<u8>()?, [1, 200]);
    Ok(())
}

/// The 0-norm (a count of nonzeros) has no gradient in PyTorch: the input's
/// `.grad` stays None; other orders at a nonzero point have one.
#[test]
fn zero_norm_has_no_gradient() -> Result<()> {
    let x = leaf(&[2.0, 0.0, -1.0], &[3])?;
    let n = x.norm(0.0)?;
    assert_eq!(
        (n.item::<f32>()?, node(&n).as_str()),
        (2.0, "LinalgVectorNormBackward0")
    );
    n.backward()?;
    assert!(x.grad_opt().is_none());
    let y = leaf(&[3.0, 4.0], &[2])?;
    y.norm(2.0)?.backward()?;
    assert_eq!(grad_of(&y), [0.6, 0.8]);
    Ok(())
}

/// Checks PyTorch does or skips around empty operands: scatter's value is
/// not checked for an empty index; dot refuses bool even when empty; an
/// empty bmm in an integer dtype with an operand that requires grad is
/// PyTorch's autograd error; a node that receives no gradient (below a
/// 0-norm) is not run.
#[test]
fn checks_around_empty_operands() -> Result<()> {
    let msg = |r: Result<Tensor>| r.err().map(|e| e.to_string()).unwrap_or_default();
    let u = Tensor::zeros_dtype([3, 4], DType::U8)?;
    let empty_idx = Tensor::zeros_dtype([0, 4], DType::I64)?;
    assert_eq!(u.scatter_value(1, &empty_idx, -3.25)?.shape(), [3, 4]);
    assert!(msg(u.scatter_value(1, &Tensor::zeros_dtype([1, 1], DType::I64)?, -3.25)).contains("uint8_t"));
    let eb = Tensor::zeros_dtype([0], DType::Bool)?;
    assert!(msg(eb.dot(&eb)).contains("not implemented for 'Bool'"));
    let a = Tensor::zeros([0, 1, 4])?.requires_grad_(true)?;
    let e = msg(a.bmm(&Tensor::zeros_dtype([0, 4, 1], DType::U8)?));
    assert!(e.contains("Autograd not support dtype: Byte"), "{e}");
    let x = Tensor::zeros([1, 0, 2])?.requires_grad_(true)?;
    x.squeeze_dims([0])?
        .norm_dim(0.0, vec![-1, 0], false)?
        .sum()?
        .backward()?;
    assert!(x.grad_opt().is_none());
    Ok(())
}

/// pow's gradients and checks as PyTorch 2.15 computes them: a boolean
/// `False` is not a zero base or exponent for the formulas (NaN and -inf
/// where a numeric 0 gives 0), the exponent's gradient takes the log in the
/// result's dtype (f64 here), the saved result is checked even when the
/// exponent needs no gradient, a gradient through an in-place pow on a view
/// arrives in the exponent's dtype, and f32 exponents are not range-checked.
#[test]
fn pow_gradients_and_checks_follow_pytorch() -> Result<()> {
    let e = leaf(&[0.0, 1.5, -2.0], &[3])?;
    Tensor::scalar_pow(false, &e)?.sum()?.backward()?;
    let g = grad_of(&e);
    assert!(
        g[0] == f32::NEG_INFINITY && g[1].is_nan() && g[2] == f32::NEG_INFINITY,
        "{g:?}"
    );
    let e = leaf(&[0.0, 1.5, -2.0], &[3])?;
    Tensor::scalar_pow(0, &e)?.sum()?.backward()?;
    assert_eq!(grad_of(&e), [0.0, 0.0, f32::NEG_INFINITY]);
    let e = leaf(&[0.0, 1.5, -2.0], &[3])?;
    Tensor::scalar_pow(0.1, &e)?.sum()?.backward()?;
    assert_eq!(grad_of(&e), [-std::f32::consts::LN_10, -0.072_814_14, -230.258_51]);
    let x = leaf(&[0.0, 2.0], &[2])?;
    x.pow(false)?.sum()?.backward()?;
    let g = grad_of(&x);
    assert!(g[0].is_nan() && g[1] == 0.0, "{g:?}");

    // f32 ** 1e300 is inf (a double exponent); f16 checks the range.
    assert_eq!(
        Tensor::from_slice(&[2.0f32]).pow(1e300)?.to_vec::<f32>()?,
        [f32::INFINITY]
    );
    let u = Tensor::from_slice(&[2u8]).pow(1e300)?;
    assert_eq!((u.dtype(), u.to_vec::<f32>()?), (DType::F32, vec![f32::INFINITY]));
    let e = Tensor::from_slice(&[2.0f32])
        .to_dtype(DType::F16)?
        .pow(1e300)
        .unwrap_err();
    assert!(e.to_string().contains("without overflow"), "{e}");

    // The result is saved whatever needs a gradient.
    let a = leaf(&[1.5, 2.0], &[2])?;
    let y = a.pow(&Tensor::from_slice(&[2.0f32, 3.0]))?;
    y.mul_(2.0)?;
    let e = y.sum()?.backward().unwrap_err().to_string();
    assert!(e.contains("modified by an inplace operation"), "{e}");

    // f32 base, f64 exponent: the log is taken in f64.
    let b = leaf(&[1.7], &[1])?;
    let p = Tensor::from_slice(&[1.3f64]).requires_grad_(true)?;
    b.pow(&p)?.sum()?.backward()?;
    assert_eq!(p.grad().expect("a gradient").to_vec::<f64>()?, [1.0577280096129118]);
    assert_eq!(grad_of(&b), [1.524_326_6]);

    // pow_ into a bf16 view: the f32 exponent's gradient is f32.
    let base = Tensor::from_slice(&[1.5f32, 2.0])
        .to_dtype(DType::BF16)?
        .reshape([1, 2])?;
    let ee = leaf(&[0.5, 2.0], &[2, 1])?;
    base.t()?.pow_(&ee)?;
    base.sum()?.backward()?;
    let g = ee.grad().expect("a gradient");
    assert_eq!(g.dtype(), DType::F32);
    let g = g.to_vec::<f32>()?;
    assert!((g[0] - 0.4973).abs() < 1e-3 && (g[1] - 2.7726).abs() < 1e-3, "{g:?}");
    Ok(())
}

/// Empty operands PyTorch takes without its usual checks: softmax of an
/// empty integer or bool tensor (an empty result of its dtype), gather
/// with an empty index of any dtype and dims; and `where` with a uint8
/// condition (nonzero is true).
#[test]
fn empty_softmax_gather_and_uint8_where() -> Result<()> {
    for dt in [DType::Bool, DType::I64, DType::U8] {
        let x = Tensor::zeros_dtype([2, 0, 3], dt)?;
        for r in [x.softmax(-1)?, x.log_softmax(-1)?] {
            assert_eq!((r.dtype(), r.shape()), (dt, &[2, 0, 3][..]));
        }
        assert!(Tensor::zeros_dtype([2], dt)?.softmax(0).is_err());
    }
    let x = Tensor::from_slice(&[1.0f32]).requires_grad_(true)?;
    let r = x.gather(-1, &Tensor::zeros_dtype([1, 0], DType::I32)?)?;
    assert_eq!((r.shape(), r.dtype()), (&[1, 0][..], DType::F32));
    r.sum()?.backward()?;
    assert_eq!(grad_of(&x), [0.0]);
    let c = Tensor::from_vec(vec![1u8, 0, 2], [1, 3])?;
    let w = Tensor::full([1, 3], 1.0f32)?.where_cond(&c, 2.0f32)?;
    assert_eq!(w.to_vec::<f32>()?, [1.0, 2.0, 1.0]);
    let e = Tensor::full([1, 3], 1.0f32)?
        .where_cond(&c.to_dtype(DType::I64)?, 2.0f32)
        .unwrap_err();
    assert!(
        e.to_string().contains("expected condition to be a boolean tensor"),
        "{e}"
    );
    Ok(())
}

/// A view of a tensor that does not require grad, made before an in-place
/// write through another view gives the base a history (`CopySlices`),
/// takes its part of it, as PyTorch regenerates a view's `grad_fn`:
/// `v = root.view(1, 2); v.t().mul_(w)` leaves `v` requiring grad, with
/// `AsStridedBackward0`.
#[test]
fn a_view_takes_its_part_of_a_history_its_base_gained() -> Result<()> {
    let w = leaf(&[0.5, 2.0], &[2, 1])?;
    let root = Tensor::from_slice(&[1.5f32, 2.0]);
    let v = root.reshape([1, 2])?;
    let untouched = root.reshape([2])?;
    assert!(!v.requires_grad());
    v.t()?.mul_(&w)?;
    assert!(v.requires_grad() && !v.is_leaf() && untouched.requires_grad());
    assert_eq!(node(&v), "AsStridedBackward0");
    assert_eq!(node(&root), "CopySlices");
    v.mul(&v)?.sum()?.backward()?;
    // d/dw sum((root*w)^2) = 2 * root^2 * w.
    assert_eq!(grad_of(&w), [2.0 * 1.5 * 1.5 * 0.5, 2.0 * 2.0 * 2.0 * 2.0]);
    // PyTorch: [2.25, 16.0].
    assert_eq!(grad_of(&w), [2.25, 16.0]);
    Ok(())
}

/// cat skips 1-D empty inputs whatever the others' shapes, but they stay in
/// the graph as in PyTorch: they make the result require grad and get an
/// empty gradient; with only such inputs any dim goes.
#[test]
fn cat_keeps_skipped_empties_in_the_graph() -> Result<()> {
    let a = leaf(&[1.0, 2.0], &[1, 2])?;
    let e = leaf(&[], &[0])?;
    let r = Tensor::cat(&[&a, &e], 1)?;
    assert_eq!(r.shape(), [1, 2]);
    r.sum()?.backward()?;
    assert_eq!(e.grad().expect("an empty gradient").shape(), [0]);
    let f = leaf(&[], &[0])?;
    let r = Tensor::cat(&[&f, &Tensor::zeros_dtype([0], DType::U8)?], 5)?;
    assert_eq!(
        (r.requires_grad(), r.dtype(), node(&r).as_str()),
        (true, DType::F32, "CatBackward0")
    );
    r.sum()?.backward()?;
    assert_eq!(f.grad().expect("an empty gradient").shape(), [0]);
    Ok(())
}

/// A node that receives no gradient (the norm of order 0 gives none) still
/// checks its saved tensors, as PyTorch's engine runs it and it unpacks
/// them first: amax's saved output written in place fails the backward.
#[test]
fn a_node_without_gradient_still_checks_its_saved_tensors() -> Result<()> {
    let a = Tensor::scalar(1.137_790_7_f32).requires_grad_(true)?;
    let m = a.mul(-1e-30)?.amax([-1i64], true)?;
    m.ne_(&Tensor::scalar(4i64))?;
    let e = m.norm(0.0)?.backward().unwrap_err().to_string();
    assert!(e.contains("modified by an inplace operation"), "{e}");
    assert!(e.contains("which is output 0 of AmaxBackward0"), "{e}");
    Ok(())
}

/// PyTorch's kernels for these ops write contiguous results or fill through
/// an expanded view, whatever the input's strides.
#[test]
fn layouts_of_tril_and_of_masked_fill_on_an_expanded_tensor() -> Result<()> {
    let x = Tensor::arange(6)?.to_dtype(DType::F32)?.reshape([2, 3])?.t()?;
    assert_eq!(x.tril(0)?.strides(), [2, 1]);
    assert!(x.triu(1)?.is_contiguous());
    // Every element one of whose positions the mask selects is filled.
    let base = Tensor::zeros([1, 3])?;
    let z = base.expand([4, 3])?;
    let m = Tensor::new([
        [true, false, false],
        [false, false, false],
        [false, false, true],
        [false, false, false],
    ])?;
    z.masked_fill_(&m, 5.0)?;
    assert_eq!(base.to_vec::<f32>()?, [5.0, 0.0, 5.0]);
    // aten::index with no index tensor: a copy, node IndexBackward0.
    let l = leaf(&[1.0, 2.0], &[2])?;
    let c = l.index(&[None])?;
    assert_eq!(node(&c), "IndexBackward0");
    c.sum()?.backward()?;
    assert_eq!(grad_of(&l), [1.0, 1.0]);
    Ok(())
}

/// Half-precision variances accumulate in f64 (PyTorch's Welford in
/// double): bf16 values near 3e38 give PyTorch's finite std.
#[test]
fn half_precision_variances_accumulate_in_f64() -> Result<()> {
    let b = Tensor::from_slice(&[-3.5f32, -2.0, -3.004_055_3e38, -1.6171875, 0.8984375, 6.5]).to_dtype(DType::BF16)?;
    assert_eq!(b.std(1.0)?.to_dtype(DType::F64)?.item::<f64>()?, 1.2295358961010472e38);
    assert_eq!(b.var(1.0)?.to_dtype(DType::F32)?.item::<f32>()?, f32::INFINITY);
    Ok(())
}

/// Gradient accumulation as PyTorch's AccumulateGrad: with create_graph the
/// first `.grad` is a recorded copy (CopyBackwards) and later ones `old +
/// g` (AddBackward0); without, the sum is written in place into the
/// existing `.grad`, even one an earlier create_graph pass left (a handle
/// to it sees the sum). PyTorch 2.15 prints, for
/// `x = tensor([1., 2.], requires_grad=True)`:
/// `(x*x).sum().backward(create_graph=True); g1 = x.grad` ->
/// `tensor([2., 4.], grad_fn=<CopyBackwards>)`, then
/// `(x*3).sum().backward()` -> `g1 = tensor([5., 7.], grad_fn=<CopyBackwards>)`.
#[test]
fn gradient_accumulation_follows_pytorchs_accumulate_grad() -> Result<()> {
    use ferrotorch::autograd::{self, GradOptions};
    let x = leaf(&[1.0, 2.0], &[2])?;
    autograd::backward(&[&x.mul(&x)?.sum()?], GradOptions::create_graph())?;
    let g1 = x.grad()?;
    assert_eq!((node(&g1), g1.requires_grad()), ("CopyBackwards".to_string(), true));
    x.mul(3.0)?.sum()?.backward()?;
    assert_eq!(g1.to_vec::<f32>()?, [5.0, 7.0]);
    assert_eq!(grad_of(&x), [5.0, 7.0]);
    assert!(x.grad()?.requires_grad());
    // Two create_graph passes: the sum keeps its graph.
    let w = leaf(&[1.0, 2.0], &[2])?;
    for _ in 0..2 {
        autograd::backward(&[&w.mul(&w)?.mul(&w)?.sum()?], GradOptions::create_graph())?;
    }
    let gw = w.grad()?;
    assert_eq!(node(&gw), "AddBackward0");
    assert_eq!(gw.to_vec::<f32>()?, [6.0, 24.0]);
    // d(sum(6 w^2))/dw = 12 w.
    let h = autograd::grad(&[&gw.sum()?], &[&w], GradOptions::default())?;
    assert_eq!(h[0].to_vec::<f32>()?, [12.0, 24.0]);
    // x * x with create_graph: PyTorch's AddBackward0 of the two products.
    let y = leaf(&[1.0, 2.0, 3.0], &[3])?;
    let g = autograd::grad(&[&y.mul(&y)?.sum()?], &[&y], GradOptions::create_graph())?;
    assert_eq!(node(&g[0]), "AddBackward0");
    assert_eq!(g[0].to_vec::<f32>()?, [2.0, 4.0, 6.0]);
    Ok(())
}

/// In-place forms PyTorch has (docs/signatures.md listed them missing):
/// activations, tril_/triu_, softmax(dtype=), *_like(dtype=). Gradients as
/// PyTorch 2.15 prints them for `x = tensor([[-1., .5], [2., -3.]],
/// requires_grad=True); y = x * 1; f(y); y.sum().backward()`.
#[test]
fn in_place_activations_and_triangles_match_pytorch() -> Result<()> {
    type Case = (&'static str, fn(&Tensor) -> Result<Tensor>, [f32; 4]);
    let cases: [Case; 8] = [
        ("leaky_relu_", |y| y.leaky_relu_(0.1), [0.1, 1.0, 1.0, 0.1]),
        (
            "elu_",
            |y| y.elu_(1.0, 1.0, 1.0),
            [0.367_879_45, 1.0, 1.0, 0.049_787_04],
        ),
        ("celu_", |y| y.celu_(1.0), [0.367_879_45, 1.0, 1.0, 0.049_787_04]),
        ("hardtanh_", |y| y.hardtanh_(-1.0, 1.0), [0.0, 1.0, 0.0, 0.0]),
        ("relu6_", |y| y.relu6_(), [0.0, 1.0, 1.0, 0.0]),
        (
            "hardswish_",
            |y| y.hardswish_(),
            [0.166_666_66, 0.666_666_7, 1.166_666_7, 0.0],
        ),
        ("tril_", |y| y.tril_(0), [1.0, 0.0, 1.0, 1.0]),
        ("triu_", |y| y.triu_(1), [0.0, 1.0, 0.0, 0.0]),
    ];
    for (name, f, want) in cases {
        let x = leaf(&[-1.0, 0.5, 2.0, -3.0], &[2, 2])?;
        let y = x.mul(1.0)?;
        let r = f(&y)?;
        assert!(r.is_same(&y), "{name} returns self");
        r.sum()?.backward()?;
        let g = grad_of(&x);
        for (a, b) in g.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{name}: {g:?} vs {want:?}");
        }
    }
    let m = Tensor::ones([3, 3])?;
    m.triu_(1)?;
    assert_eq!(m.to_vec::<f32>()?, [0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
    assert!(Tensor::ones([3])?.tril_(0).is_err());
    // softmax(x, 0, dtype=torch.float32) of an f16 input: the cast first.
    let h = leaf(&[1.0, 2.0], &[2])?.to_dtype(DType::F16)?;
    let p = h.softmax_dtype(0, DType::F32)?;
    assert_eq!((p.dtype(), node(&p)), (DType::F32, "SoftmaxBackward0".to_string()));
    assert!((p.to_vec::<f32>()?[1] - 0.731_058_6).abs() < 1e-6);
    assert!(Tensor::new([1i64, 2])?.softmax_dtype(0, DType::I64).is_err());
    let z = Tensor::new([1i64, 2])?;
    assert_eq!(z.ones_like_dtype(DType::F32)?.to_vec::<f32>()?, [1.0, 1.0]);
    assert_eq!(z.full_like_dtype(2.5, DType::F64)?.to_vec::<f64>()?, [2.5, 2.5]);
    assert_eq!(z.zeros_like_dtype(DType::Bool)?.to_vec::<bool>()?, [false, false]);
    assert!(z.rand_like_dtype(DType::I64).is_err());
    Ok(())
}

/// The activations' derivatives at their corners, in f64, as PyTorch 2.15
/// gives them (`x = tensor([-3, -1, -.5, 0, .5, 1, 3, 6], dtype=float64)`;
/// `f(x).sum().backward()`): which side each corner takes, and PyTorch's
/// f32 `1/6` in hardsigmoid's derivative.
#[test]
fn activation_derivatives_at_their_corners_match_pytorch() -> Result<()> {
    type Act = (&'static str, fn(&Tensor) -> Result<Tensor>, [f64; 8]);
    let sixth = f64::from(1.0f32 / 6.0);
    let cases: [Act; 9] = [
        (
            "leaky_relu",
            |x| x.leaky_relu(0.1),
            [0.1, 0.1, 0.1, 0.1, 1.0, 1.0, 1.0, 1.0],
        ),
        (
            "elu",
            |x| x.elu(1.0, 1.0, 1.0),
            [
                0.049787068367863944,
                0.36787944117144233,
                0.6065306597126334,
                1.0,
                1.0,
                1.0,
                1.0,
                1.0,
            ],
        ),
        (
            "hardtanh",
            |x| x.hardtanh(-1.0, 1.0),
            [0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0],
        ),
        ("relu6", |x| x.relu6(), [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0]),
        (
            "hardswish",
            |x| x.hardswish(),
            [
                0.0,
                0.16666666666666669,
                0.33333333333333337,
                0.5,
                0.6666666666666666,
                0.8333333333333333,
                1.0,
                1.0,
            ],
        ),
        (
            "hardsigmoid",
            |x| x.hardsigmoid(),
            [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0],
        ),
        (
            "softshrink",
            |x| x.softshrink(0.5),
            [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
        ),
        (
            "hardshrink",
            |x| x.hardshrink(0.5),
            [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
        ),
        ("relu", |x| x.relu(), [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]),
    ];
    // f64, and f32 (its own kernels): the same corners, values rounded.
    for (dtype, tol) in [(DType::F64, 1e-16), (DType::F32, 1e-7)] {
        for (name, f, want) in cases {
            let x = Tensor::new([-3.0f64, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0])?
                .to_dtype(dtype)?
                .requires_grad_(true)?;
            f(&x)?.sum()?.backward()?;
            let g = x.grad()?.to_dtype(DType::F64)?.to_vec::<f64>()?;
            for (i, (a, b)) in g.iter().zip(want).enumerate() {
                let b = if name == "hardsigmoid" { b * sixth } else { b };
                assert!((a - b).abs() <= tol, "{name} ({dtype:?}) at {i}: {g:?}");
            }
        }
    }
    Ok(())
}
