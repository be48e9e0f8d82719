//! Property tests of `matmul` (and `mm` / `bmm` / `mv` / `dot` where the
//! shapes fit) with PyTorch's rules: 1-D operands gain and lose a dim, batch
//! dims broadcast; operands are strided (transposed, sliced, expanded);
//! dtypes f32 / f64 / f16 / bf16 / i64 / i32 / u8. Checked against a naive
//! triple loop (f64 for floats, wrapping i64 for integers).

mod common;

use common::*;
use ferrotorch_core::{DType, Tensor};
use proptest::prelude::*;

/// `matmul(a, b)` by PyTorch's rules, or `None` where PyTorch raises.
/// Each output element also gets `sum |a_ip * b_pj|` for the tolerance.
fn matmul_ref(a: &Nd<V>, b: &Nd<V>, dt: DType) -> Option<(Nd<V>, Vec<f64>)> {
    let (na, nb) = (a.ndim(), b.ndim());
    if na == 0 || nb == 0 {
        return None;
    }
    let a2 = if na == 1 { a.unsqueeze(0) } else { a.clone() };
    let b2 = if nb == 1 { b.unsqueeze(1) } else { b.clone() };
    let (ra, rb) = (a2.ndim(), b2.ndim());
    let (n, k) = (a2.shape[ra - 2], a2.shape[ra - 1]);
    let (k2, m) = (b2.shape[rb - 2], b2.shape[rb - 1]);
    if k != k2 {
        return None;
    }
    let batch = broadcast_shapes(&a2.shape[..ra - 2], &b2.shape[..rb - 2])?;
    let mut sa = batch.clone();
    sa.extend([n, k]);
    let mut sb = batch.clone();
    sb.extend([k, m]);
    let (a3, b3) = (a2.broadcast_to(&sa), b2.broadcast_to(&sb));
    let mut shape = batch.clone();
    shape.extend([n, m]);
    let mut mags = Vec::new();
    let out = Nd::from_fn(&shape, |i| {
        let nb_ = batch.len();
        let mut ia = i[..nb_].to_vec();
        ia.extend([i[nb_], 0]);
        let mut ib = i[..nb_].to_vec();
        ib.extend([0, i[nb_ + 1]]);
        if is_float(dt) {
            let (mut s, mut mag) = (0.0f64, 0.0f64);
            for p in 0..k {
                ia[nb_ + 1] = p;
                ib[nb_] = p;
                let t = a3.at(&ia).f() * b3.at(&ib).f();
                s += t;
                mag += t.abs();
            }
            mags.push(mag);
            cast(V::F(s), dt)
        } else {
            let mut s = 0i64;
            for p in 0..k {
                ia[nb_ + 1] = p;
                ib[nb_] = p;
                s = s.wrapping_add(a3.at(&ia).i().wrapping_mul(b3.at(&ib).i()));
            }
            mags.push(0.0);
            cast(V::I(s), dt)
        }
    });
    let mut out = out;
    if na == 1 {
        let d = out.ndim() - 2;
        out = out.squeeze_dims(&[d]);
    }
    if nb == 1 {
        let d = out.ndim() - 1;
        out = out.squeeze_dims(&[d]);
    }
    Some((out, mags))
}

/// Operand shapes: matrix sizes n, k, m, each operand 1-D, 2-D or batched
/// (batch dims that broadcast against each other), sometimes with a
/// mismatched inner size.
fn shapes() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    (
        0usize..=5,
        0usize..=5,
        0usize..=5,
        0usize..=3,
        0usize..=3,
        shape(2, 3),
        any::<u32>(),
        any::<u32>(),
        0usize..=2,
        0usize..=2,
        0u8..16,
    )
        .prop_map(|(n, k, m, ra, rb, batch, ma, mb, ka, kb, bad)| {
            let ba = broadcastable_to(&batch, ka, ma);
            let bb = broadcastable_to(&batch, kb, mb);
            let kb_ = if bad == 0 { k + 1 } else { k };
            let a = match ra {
                0 => vec![k],
                1 => vec![n, k],
                _ => [ba, vec![n, k]].concat(),
            };
            let b = match rb {
                0 => vec![kb_],
                1 => vec![kb_, m],
                _ => [bb, vec![kb_, m]].concat(),
            };
            (a, b)
        })
}

fn tolerance(dt: DType) -> (f64, f64) {
    // (relative, per unit of sum |a*b|): f16/bf16/f32 accumulate in f32.
    match dt {
        DType::F64 => (4.0 * eps(dt), 1e-13),
        DType::F32 | DType::F16 | DType::BF16 => (eps(dt), 1e-5),
        _ => (0.0, 0.0),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// matmul of strided operands agrees with the triple loop, or fails
    /// naming the op exactly when PyTorch raises.
    #[test]
    fn matmul((sa, sb) in shapes(), dt in prop::sample::select(vec![DType::F32, DType::F64, DType::I64, DType::F16, DType::BF16, DType::I32, DType::U8]),
              ra in recipe(), rb in recipe(), seed in any::<u64>(), wild in any::<bool>()) {
        let mut rng = Prng(seed);
        let vals = match (wild, is_float(dt)) {
            (true, false) => Vals::Wild,
            (true, true) => Vals::Dense,
            _ => Vals::Small,
        };
        let (a, av) = strided(dt, &sa, &ra, &mut rng, vals);
        let (b, bv) = strided(dt, &sb, &rb, &mut rng, vals);
        let what = format!("matmul({dt}{sa:?} strides {:?}, {sb:?} strides {:?})", a.strides(), b.strides());
        let got = no_panic(&what, || a.matmul(&b))?;
        let Some((want, mags)) = matmul_ref(&av, &bv, dt) else {
            return expect_err(&what, got, &["matmul", "mm", "bmm", "dot", "mv"]);
        };
        let got = got.map_err(|e| TestCaseError::fail(format!("{what}: unexpected error: {e}")))?;
        prop_assert_eq!(got.dtype(), dt);
        let (rtol, unit) = tolerance(dt);
        check_close(&what, &read(&got), &want, &|i| unit * mags[i], rtol)?;

        // The dedicated entry points agree where their shapes apply.
        let direct = match (sa.len(), sb.len()) {
            (2, 2) => Some(("mm", no_panic("mm", || a.mm(&b))?)),
            (3, 3) if sa[0] == sb[0] => Some(("bmm", no_panic("bmm", || a.bmm(&b))?)),
            (2, 1) => Some(("mv", no_panic("mv", || a.mv(&b))?)),
            (1, 1) => Some(("dot", no_panic("dot", || a.dot(&b))?)),
            _ => None,
        };
        if let Some((name, r)) = direct {
            let r = r.map_err(|e| TestCaseError::fail(format!("{name}: unexpected error: {e}")))?;
            check_close(&format!("{name}: {what}"), &read(&r), &want, &|i| unit * mags[i], rtol)?;
        }
    }

    /// Mixed dtypes and bool are errors naming the op.
    #[test]
    fn matmul_dtype_errors(n in 1usize..4, da in prop::sample::select(DTYPES.to_vec()), db in prop::sample::select(DTYPES.to_vec())) {
        prop_assume!(da != db || da == DType::Bool);
        let a = make(da, &Nd::new(&[n, n], vec![V::I(1); n * n]));
        let b = make(db, &Nd::new(&[n, n], vec![V::I(1); n * n]));
        expect_err("matmul", no_panic("matmul", || a.matmul(&b))?, &["matmul", "mm"])?;
        expect_err("mm", no_panic("mm", || a.mm(&b))?, &["mm"])?;
    }
}

#[test]
fn matmul_reference_sanity() {
    // [[1, 2], [3, 4]] @ [5, 6] = [17, 39]
    let a = Nd::new(&[2, 2], vec![V::F(1.0), V::F(2.0), V::F(3.0), V::F(4.0)]);
    let b = Nd::new(&[2], vec![V::F(5.0), V::F(6.0)]);
    let (r, _) = matmul_ref(&a, &b, DType::F64).unwrap();
    assert_eq!(r.data, vec![V::F(17.0), V::F(39.0)]);
    let t = make(DType::F64, &a).matmul(&make(DType::F64, &b)).unwrap();
    assert_eq!(read(&t).data, r.data);
    let _ = Tensor::zeros([1]);
}

/// The blocked f32 GEMM has separate packing paths for row-major,
/// column-major and general strides of both operands, and they only kick in
/// for products large enough to leave the serial small-matrix path. Every
/// transpose combination at such sizes (ragged edges included) must match a
/// naive f64 product. The later shapes have several column blocks of B
/// (packed one at a time in one loop order, 4080 columns at a time in the
/// other), split by rows and, with 5 rows, by columns, several depth blocks,
/// and (300 rows) several row blocks of A. Run on 1, 2 and 3 threads: the
/// threads split a block's tiles evenly, so a row panel may be shared by two
/// threads (e.g. 22 x 4 tiles of the 129-row product on 3 threads).
#[test]
fn sgemm_packing_paths_match_naive() {
    for threads in [1, 2, 3] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(sgemm_packing_paths_match_naive_here);
    }
}

fn sgemm_packing_paths_match_naive_here() {
    let g = ferrotorch_core::TensorOptions::new().generator(&ferrotorch_core::Generator::new(7));
    let shapes = [
        (70usize, 100usize, 96usize),
        (129, 257, 64),
        (33, 16, 131),
        (70, 300, 1000),
        (5, 300, 1000),
        (13, 300, 4200),
        (300, 70, 40),
    ];
    for &(n, k, m) in &shapes {
        let a0 = g.randn([n, k]).unwrap();
        let b0 = g.randn([k, m]).unwrap();
        let av: Vec<f32> = a0.to_vec().unwrap();
        let bv: Vec<f32> = b0.to_vec().unwrap();
        let mut want = vec![0f64; n * m];
        for i in 0..n {
            for j in 0..m {
                want[i * m + j] = (0..k).map(|p| av[i * k + p] as f64 * bv[p * m + j] as f64).sum();
            }
        }
        // Same logical matrices, stored transposed (column-major) or with a
        // step-2 column stride.
        let a_t = a0.t().unwrap().contiguous().unwrap().t().unwrap();
        let b_t = b0.t().unwrap().contiguous().unwrap().t().unwrap();
        let a_s = Tensor::stack(&[&a0, &a0], 2).unwrap().select(2, 0).unwrap();
        for (ai, a) in [&a0, &a_t, &a_s].into_iter().enumerate() {
            for (bi, b) in [&b0, &b_t].into_iter().enumerate() {
                let got: Vec<f32> = a.matmul(b).unwrap().to_vec().unwrap();
                for (idx, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (g as f64 - w).abs() <= 1e-4 * (1.0 + w.abs()),
                        "{n}x{k}x{m} a#{ai} b#{bi} on {} threads at {idx}: {g} vs {w}",
                        rayon::current_num_threads()
                    );
                }
            }
        }
    }
}
