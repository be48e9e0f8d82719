//! Mixed-dtype pointwise ops convert their operands inside the kernel loop,
//! as PyTorch's TensorIterator does: one node per op (no `ToCopyBackward0`
//! in the graph), the same bits as converting first, on every iteration
//! path of the engine (small calls, strided, broadcast, transposed, in place,
//! several threads). Expected values are PyTorch 2.15's (CPU).

use ferrotorch::{DType, Result, Tensor};

fn node(t: &Tensor) -> String {
    t.grad_fn().map(|n| n.name().to_string()).unwrap_or_default()
}

/// Names of the nodes a node's edges lead to ("" for an input without one).
fn next_names(t: &Tensor) -> Vec<String> {
    let f = t.grad_fn().expect("a grad_fn");
    f.next_edges()
        .iter()
        .map(|e| e.as_ref().map(|e| e.node.name().to_string()).unwrap_or_default())
        .collect()
}

fn bits(t: &Tensor) -> Vec<u64> {
    t.to_dtype(DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// `a_bf16 * -1.5` keeps bf16, computes in f32 with the scalar unrounded,
/// and records one `MulBackward0` (PyTorch: `[2.46875, -4.9375, -0.150390625]`).
#[test]
fn half_times_a_python_scalar_is_one_node() -> Result<()> {
    let a = Tensor::from_slice(&[-1.640625f32, 3.3, 0.1])
        .to_dtype(DType::BF16)?
        .requires_grad_(true)?;
    let r = a.mul(-1.5)?;
    assert_eq!(r.dtype(), DType::BF16);
    assert_eq!(node(&r), "MulBackward0");
    assert_eq!(next_names(&r), ["AccumulateGrad", ""]);
    assert_eq!(
        r.to_dtype(DType::F32)?.to_vec::<f32>()?,
        [2.46875, -4.9375, -0.150_390_63]
    );
    r.sum()?.backward()?;
    let g = a.grad().expect("a gradient");
    assert_eq!(g.dtype(), DType::BF16);
    assert_eq!(g.to_dtype(DType::F32)?.to_vec::<f32>()?, [-1.5; 3]);
    Ok(())
}

/// `h_f16 * f_f32`: an f32 result whose node leads straight to both leaves;
/// h's gradient arrives as f16 (PyTorch: f's values).
#[test]
fn mixed_tensors_record_one_node() -> Result<()> {
    let h = Tensor::from_slice(&[1.5f32, 2.25, -3.0])
        .to_dtype(DType::F16)?
        .requires_grad_(true)?;
    let f = Tensor::from_slice(&[0.1f32, 0.2, 0.3]).requires_grad_(true)?;
    let r = h.mul(&f)?;
    assert_eq!(r.dtype(), DType::F32);
    assert_eq!(node(&r), "MulBackward0");
    assert_eq!(next_names(&r), ["AccumulateGrad", "AccumulateGrad"]);
    r.sum()?.backward()?;
    let gh = h.grad().expect("h's gradient");
    assert_eq!(gh.dtype(), DType::F16);
    assert_eq!(bits(&gh), bits(&f.to_dtype(DType::F16)?));
    assert_eq!(f.grad().expect("f's gradient").to_vec::<f32>()?, [1.5, 2.25, -3.0]);

    let c = Tensor::from_slice(&[true, false, true]);
    let w = h.where_cond(&c, &f)?;
    assert_eq!((w.dtype(), node(&w).as_str()), (DType::F32, "WhereBackward0"));
    assert_eq!(next_names(&w), ["", "AccumulateGrad", "AccumulateGrad"]);
    Ok(())
}

/// Every operand layout the engine handles, with operands of other dtypes,
/// gives the bits of converting first: contiguous, transposed, strided,
/// broadcast, large enough for blocks of whole rows, the tiled transposed
/// path and several threads.
#[test]
fn in_loop_casts_match_converting_first() -> Result<()> {
    ferrotorch::manual_seed(5);
    for &(m, n) in &[(3usize, 5usize), (7, 300), (129, 1000), (700, 700)] {
        let a = Tensor::randn([m, n])?.to_dtype(DType::F16)?;
        let b = Tensor::randn([n, m])?.t()?; // transposed f32
        let c = Tensor::randn([n])?.to_dtype(DType::F64)?; // broadcast row
        let i = Tensor::randn([m, 1])?.mul(10.0)?.to_dtype(DType::I32)?; // broadcast column
        let s = Tensor::randn([m, 2 * n])?
            .to_dtype(DType::BF16)?
            .slice(1, Some(0), None, 2)?;
        for (x, y) in [(&a, &b), (&b, &c), (&a, &i), (&s, &a), (&i, &s), (&c, &i)] {
            let dt = x.mul(y)?.dtype();
            let (xc, yc) = (x.to_dtype(dt)?, y.to_dtype(dt)?);
            assert_eq!(bits(&x.mul(y)?), bits(&xc.mul(&yc)?), "mul {m}x{n}");
            assert_eq!(bits(&x.sub(y)?), bits(&xc.sub(&yc)?), "sub {m}x{n}");
            assert_eq!(bits(&x.maximum(y)?), bits(&xc.maximum(&yc)?), "maximum {m}x{n}");
            assert_eq!(bits(&x.lt(y)?), bits(&xc.lt(&yc)?), "lt {m}x{n}");
            assert_eq!(bits(&x.div(y)?), bits(&xc.div(&yc)?), "div {m}x{n}");
        }
        // In place: the result is cast to the written tensor's dtype.
        let w = a.clone_tensor()?;
        w.add_(&b)?;
        let want = a.to_dtype(DType::F32)?.add(&b)?.to_dtype(DType::F16)?;
        assert_eq!(bits(&w), bits(&want), "add_ {m}x{n}");
        // bf16 times a scalar: computed in f32, stored as bf16.
        let want = s.to_dtype(DType::F32)?.mul(0.1)?.to_dtype(DType::BF16)?;
        assert_eq!(bits(&s.mul(0.1)?), bits(&want), "bf16 * 0.1 {m}x{n}");
    }
    Ok(())
}

/// Logical ops judge truth after converting to the common dtype (1e-8 is
/// 0 as f16), also for a tensor operand of another dtype.
#[test]
fn logical_ops_convert_before_truth() -> Result<()> {
    let h = Tensor::from_slice(&[1e-8f32, 1.0]).to_dtype(DType::F16)?;
    let tiny = Tensor::from_slice(&[1e-8f32, 1e-8]);
    assert_eq!(h.logical_and(1e-8)?.to_vec::<bool>()?, [false, false]);
    assert_eq!(h.logical_or(&tiny)?.to_vec::<bool>()?, [true, true]);
    let u = Tensor::from_slice(&[0u8, 1]);
    assert_eq!(
        u.logical_xor(&Tensor::scalar_tensor(ferrotorch::Scalar::Int(256), DType::I64))?
            .to_vec::<bool>()?,
        [false, true]
    );
    Ok(())
}

/// `masked_fill_` records `MaskedFillBackward0` on the written tensor (not a
/// copy node), and its gradient is zero where the mask is set.
#[test]
fn masked_fill_in_place_is_its_own_node() -> Result<()> {
    let leaf = Tensor::from_slice(&[1.0f32, 2.0])
        .to_dtype(DType::BF16)?
        .requires_grad_(true)?;
    let x = leaf.clone_tensor()?;
    x.masked_fill_(&Tensor::from_slice(&[true, false]), -4)?;
    assert_eq!(node(&x), "MaskedFillBackward0");
    assert_eq!(x.to_dtype(DType::F32)?.to_vec::<f32>()?, [-4.0, 2.0]);
    x.sum()?.backward()?;
    assert_eq!(
        leaf.grad().expect("a gradient").to_dtype(DType::F32)?.to_vec::<f32>()?,
        [0.0, 1.0]
    );
    Ok(())
}
