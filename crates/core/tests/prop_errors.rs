//! Property tests of failure modes: random invalid inputs (incompatible
//! shapes, out-of-range dims and indices, invalid view shapes, unsupported
//! dtypes, bad arguments, extreme integers) never panic (each call runs
//! under `catch_unwind`) and return an `Err` whose message names the op.
//! Every case below raises in PyTorch too.

mod common;

use common::*;
use ferrotorch_core::{DType, Error, Tensor, TensorIndex};
use proptest::prelude::*;

type Outcome = Result<String, Error>;

fn dbg<T: std::fmt::Debug>(r: ferrotorch_core::Result<T>) -> Outcome {
    r.map(|v| format!("{v:?}"))
}

fn rand_t(dt: DType, shape: &[usize], rng: &mut Prng) -> Tensor {
    make(dt, &random_nd(dt, shape, rng, Vals::Small))
}

/// A dim outside `[-n, n)` for `n = max(ndim, 1)` (PyTorch's range), extremes included.
fn bad_dim(rng: &mut Prng, ndim: usize) -> i64 {
    let n = ndim.max(1) as i64;
    match rng.below(6) {
        0 => n,
        1 => n + 1,
        2 => -n - 1,
        3 => -n - 2,
        4 => i64::MAX,
        _ => i64::MIN,
    }
}

/// A valid dim for a tensor with `ndim >= 1` dims.
fn good_dim(rng: &mut Prng, ndim: usize) -> i64 {
    rng.range(0, ndim as i64 - 1)
}

const DIM_OPS: &[&str] = &[
    "sum",
    "mean",
    "prod",
    "amax",
    "amin",
    "all",
    "any",
    "var",
    "std",
    "logsumexp",
    "norm",
    "argmax",
    "argmin",
    "max_dim",
    "min_dim",
    "cumsum",
    "cumprod",
    "softmax",
    "log_softmax",
    "sort",
    "argsort",
    "topk",
    "transpose",
    "select",
    "narrow",
    "slice",
    "squeeze",
    "unsqueeze",
    "flatten",
    "unflatten",
    "split",
    "chunk",
    "unbind",
    "gather",
    "scatter",
    "index_select",
    "cat",
    "stack",
    "size",
    "stride",
    "permute",
];

/// Calls op `name` with the out-of-range dim `d` on `x` (f32).
fn call_dim_op(name: &str, x: &Tensor, d: i64) -> Outcome {
    let idx = Tensor::zeros_dtype(vec![1; x.ndim()], DType::I64).unwrap();
    match name {
        "sum" => dbg(x.sum_dim(d, false)),
        "mean" => dbg(x.mean_dim(d, false)),
        "prod" => dbg(x.prod_dim(d, true)),
        "amax" => dbg(x.amax(d, false)),
        "amin" => dbg(x.amin(vec![0, d], false)),
        "all" => dbg(x.all_dim(d, false)),
        "any" => dbg(x.any_dim(d, true)),
        "var" => dbg(x.var_dim(vec![d], 1.0, false)),
        "std" => dbg(x.std_dim(vec![d], 0.0, false)),
        "logsumexp" => dbg(x.logsumexp(d, false)),
        "norm" => dbg(x.norm_dim(2.0, vec![d], false)),
        "argmax" => dbg(x.argmax(Some(d), false)),
        "argmin" => dbg(x.argmin(Some(d), true)),
        "max_dim" => dbg(x.max_dim(d, false)),
        "min_dim" => dbg(x.min_dim(d, false)),
        "cumsum" => dbg(x.cumsum(d)),
        "cumprod" => dbg(x.cumprod(d)),
        "softmax" => dbg(x.softmax(d)),
        "log_softmax" => dbg(x.log_softmax(d)),
        "sort" => dbg(x.sort(d, false)),
        "argsort" => dbg(x.argsort(d, true)),
        "topk" => dbg(x.topk(0, d, true)),
        "transpose" => dbg(x.transpose(0, d)),
        "select" => dbg(x.select(d, 0)),
        "narrow" => dbg(x.narrow(d, 0, 0)),
        "slice" => dbg(x.slice(d, None, None, 1)),
        "squeeze" => dbg(x.squeeze_dim(d)),
        "unsqueeze" => {
            // unsqueeze accepts [-(n+1), n].
            let n = x.ndim() as i64;
            let d = if d >= 0 { d.max(n + 1) } else { d.min(-n - 2) };
            dbg(x.unsqueeze(d))
        }
        "flatten" => dbg(x.flatten((d, -1))),
        "unflatten" => dbg(x.unflatten(d, [-1])),
        "split" => dbg(x.split(1, d)),
        "chunk" => dbg(x.chunk(1, d)),
        "unbind" => dbg(x.unbind(d)),
        "gather" => dbg(x.gather(d, &idx)),
        "scatter" => dbg(x.scatter(d, &idx, x)),
        "index_select" => dbg(x.index_select(d, &Tensor::zeros_dtype([1], DType::I64).unwrap())),
        "cat" => dbg(Tensor::cat(&[x, x], d)),
        "stack" => {
            let n = x.ndim() as i64;
            let d = if d >= 0 { d.max(n + 1) } else { d.min(-n - 2) };
            dbg(Tensor::stack(&[x, x], d))
        }
        "size" => dbg(x.size(d)),
        "stride" => dbg(x.stride(d)),
        "permute" => {
            let mut p: Vec<i64> = (0..x.ndim() as i64).collect();
            if p.is_empty() {
                p.push(d);
            } else {
                p[0] = d;
            }
            dbg(x.permute(&p))
        }
        _ => unreachable!(),
    }
}

/// The names an error of `name` may carry.
fn names_of(name: &str) -> Vec<&'static str> {
    match name {
        "sum" => vec!["sum"],
        "mean" => vec!["mean"],
        "prod" => vec!["prod"],
        "amax" => vec!["amax"],
        "amin" => vec!["amin"],
        "all" => vec!["all"],
        "any" => vec!["any"],
        "var" => vec!["var"],
        "std" => vec!["std"],
        "logsumexp" => vec!["logsumexp"],
        "norm" => vec!["norm"],
        "argmax" => vec!["argmax"],
        "argmin" => vec!["argmin"],
        "max_dim" => vec!["max"],
        "min_dim" => vec!["min"],
        "cumsum" => vec!["cumsum"],
        "cumprod" => vec!["cumprod"],
        "softmax" => vec!["softmax"],
        "log_softmax" => vec!["log_softmax"],
        "sort" => vec!["sort"],
        "argsort" => vec!["argsort", "sort"],
        "topk" => vec!["topk"],
        "transpose" => vec!["transpose"],
        "select" => vec!["select"],
        "narrow" => vec!["narrow"],
        "slice" => vec!["slice"],
        "squeeze" => vec!["squeeze"],
        "unsqueeze" => vec!["unsqueeze"],
        "flatten" => vec!["flatten"],
        "unflatten" => vec!["unflatten"],
        "split" => vec!["split"],
        "chunk" => vec!["chunk"],
        "unbind" => vec!["unbind"],
        "gather" => vec!["gather"],
        "scatter" => vec!["scatter"],
        "index_select" => vec!["index_select"],
        "cat" => vec!["cat"],
        "stack" => vec!["stack"],
        "size" => vec!["size"],
        "stride" => vec!["stride"],
        "permute" => vec!["permute"],
        _ => unreachable!(),
    }
}

/// Two shapes that do not broadcast: at an aligned position both sizes
/// differ and neither is 1.
fn non_broadcastable() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    (shape(3, 3), shape(3, 3), 0usize..3, 2usize..5, 2usize..5).prop_map(|(mut a, mut b, at, x, y)| {
        let y = if x == y { y + 1 } else { y };
        let at_a = at.min(a.len());
        let at_b = at.min(b.len());
        // Insert the clash at the same distance from the end in both.
        let ka = a.len() - at_a;
        let kb = b.len() - at_b;
        let k = ka.min(kb);
        a.insert(a.len() - k, x);
        b.insert(b.len() - k, y);
        (a, b)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every op taking a dim rejects one out of range (extremes included).
    #[test]
    fn dims_out_of_range(op in prop::sample::select(DIM_OPS.to_vec()), shape in shape(4, 3), seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let x = rand_t(DType::F32, &shape, &mut rng);
        let d = bad_dim(&mut rng, shape.len());
        // PyTorch skips legacy empty 1-D tensors in cat, dim checks included.
        prop_assume!(!(op == "cat" && shape == [0]));
        let what = format!("{op}(f32{shape:?}, dim {d})");
        let r = no_panic(&what, || call_dim_op(op, &x, d))?;
        expect_err(&what, r, &names_of(op))?;
    }

    /// Binary pointwise ops, where, masked_fill and in-place ops reject
    /// operands that do not broadcast (or, in place, that would grow the target).
    #[test]
    fn shapes_do_not_broadcast((sa, sb) in non_broadcastable(), op in 0usize..12, seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let a = rand_t(DType::F32, &sa, &mut rng);
        let b = rand_t(DType::F32, &sb, &mut rng);
        let mask = make(DType::Bool, &random_nd(DType::Bool, &sb, &mut rng, Vals::Small));
        let what = format!("op {op} on {sa:?} and {sb:?}");
        let (r, names): (Outcome, &[&str]) = no_panic(&what, || match op {
            0 => (dbg(a.add(&b)), &["add"][..]),
            1 => (dbg(a.sub(&b)), &["sub"][..]),
            2 => (dbg(a.mul(&b)), &["mul"][..]),
            3 => (dbg(a.div(&b)), &["div"][..]),
            4 => (dbg(a.maximum(&b)), &["maximum"][..]),
            5 => (dbg(a.lt(&b)), &["lt"][..]),
            6 => (dbg(a.logical_and(&b)), &["logical_and"][..]),
            7 => (dbg(a.pow(&b)), &["pow"][..]),
            8 => (dbg(a.where_cond(&mask, &a)), &["where"][..]),
            9 => (dbg(a.masked_fill(&mask, 1.0)), &["masked_fill"][..]),
            10 => (dbg(a.add_(&b)), &["add"][..]),
            _ => (dbg(a.copy_(&b)), &["copy_"][..]),
        })?;
        expect_err(&what, r, names)?;
    }

    /// In place, the operand may broadcast to the target but not beyond it.
    #[test]
    fn inplace_cannot_grow(shape in shape(3, 3), extra in prop::collection::vec(2usize..4, 1..3), op in 0usize..5, seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let a = rand_t(DType::F32, &shape, &mut rng);
        let big: Vec<usize> = [extra, shape.clone()].concat();
        let b = rand_t(DType::F32, &big, &mut rng);
        let v0 = a.version();
        let before = read(&a);
        let what = format!("op {op}: {shape:?} in place with {big:?}");
        let (r, name) = no_panic(&what, || match op {
            0 => (dbg(a.add_(&b)), "add"),
            1 => (dbg(a.mul_(&b)), "mul"),
            2 => (dbg(a.sub_(&b)), "sub"),
            3 => (dbg(a.maximum_(&b)), "maximum"),
            _ => (dbg(a.copy_(&b)), "copy_"),
        })?;
        expect_err(&what, r, &[name])?;
        prop_assert_eq!(a.version(), v0);
        check_exact(&what, &read(&a), &before)?;
    }

    /// Indices out of range: select, narrow, get, gather, scatter,
    /// scatter_add, index_select, advanced indexing, one_hot, topk.
    #[test]
    fn indices_out_of_range(shape in prop::collection::vec(1usize..4, 1..4), op in 0usize..11, seed in any::<u64>(), big in any::<bool>()) {
        let mut rng = Prng(seed);
        let x = rand_t(DType::F32, &shape, &mut rng);
        let nd = shape.len();
        let d = good_dim(&mut rng, nd);
        let size = shape[d as usize] as i64;
        // An index >= size or < -size (negative indices are also invalid in
        // gather / scatter / index_select / one_hot).
        let bad = if big { [size, size + 3, i64::MAX][rng.below(3) as usize] } else { [-size - 1, i64::MIN][rng.below(2) as usize] };
        let neg = -1 - rng.range(0, size - 1);
        let mut idx_shape = vec![1; nd];
        idx_shape[d as usize] = 2;
        let idx = make(DType::I64, &Nd::new(&idx_shape, vec![V::I(0), V::I(if (3..=5).contains(&op) && !big { neg } else { bad })]));
        let flat = make(DType::I64, &Nd::new(&[2], vec![V::I(0), V::I(if op == 6 && !big { neg } else { bad })]));
        let what = format!("op {op} on {shape:?} dim {d} index {bad} / {neg}");
        let (r, names): (Outcome, &[&str]) = no_panic(&what, || match op {
            0 => (dbg(x.select(d, bad)), &["select"][..]),
            // (narrow accepts start == size with length 0.)
            1 => (dbg(x.narrow(d, if bad == size { size + 1 } else { bad }, 0)), &["narrow"][..]),
            2 => {
                let mut items: Vec<TensorIndex> = (0..d).map(|_| TensorIndex::full()).collect();
                items.push(TensorIndex::Int(bad));
                (dbg(x.get(&items)), &["index", "select"][..])
            }
            3 => (dbg(x.gather(d, &idx)), &["gather"][..]),
            4 => (dbg(x.scatter(d, &idx, &x)), &["scatter"][..]),
            5 => (dbg(x.scatter_add(d, &idx, &x)), &["scatter_add"][..]),
            6 => (dbg(x.index_select(d, &flat)), &["index_select"][..]),
            7 => {
                let mut items: Vec<Option<Tensor>> = (0..d).map(|_| None).collect();
                items.push(Some(flat.clone()));
                (dbg(x.index(&items)), &["index"][..])
            }
            8 => {
                let c = shape[0];
                let v = if big { c as i64 + rng.range(0, 2) } else { -1 - rng.range(0, 2) };
                let labels = make(DType::I64, &Nd::new(&[2], vec![V::I(0), V::I(v)]));
                (dbg(labels.one_hot(Some(c as i64))), &["one_hot"][..])
            }
            9 => (dbg(x.topk((shape[d as usize] + 1) as i64 + rng.range(0, 3), d, true)), &["topk"][..]),
            _ => (dbg(x.narrow(d, 0, shape[d as usize] as i64 + 1)), &["narrow"][..]),
        })?;
        expect_err(&what, r, names)?;
    }

    /// view / reshape / expand / unflatten / permute with invalid shapes.
    #[test]
    fn invalid_shapes(shape in shape(3, 4), op in 0usize..10, seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let x = rand_t(DType::F32, &shape, &mut rng);
        let n = numel(&shape) as i64;
        let nd = shape.len();
        let mut target: Vec<i64> = to_i64(&shape);
        let what = format!("op {op} on {shape:?}");
        let (r, names): (Outcome, &[&str]) = no_panic(&what, || match op {
            // A negative size other than -1.
            0 | 1 => {
                target.push(-2 - rng.range(0, 3));
                if op == 0 { (dbg(x.view(&target)), &["view"][..]) } else { (dbg(x.reshape(&target)), &["reshape"][..]) }
            }
            // Two -1s.
            2 => {
                target.extend([-1, -1]);
                (dbg(x.view(&target)), &["view"][..])
            }
            // Wrong number of elements.
            3 => (dbg(x.reshape([n + 1 + rng.range(0, 3)])), &["reshape"][..]),
            // -1 next to a 0 (cannot be inferred) or not dividing.
            4 => (dbg(x.view([0, -1])), &["view"][..]),
            5 => {
                let bad = if n > 0 { n + 1 } else { 2 };
                let r = if n == 0 { x.view([-1, 0]) } else { x.view([bad, -1]) };
                (dbg(r), &["view"][..])
            }
            // expand: fewer sizes than dims, a mismatched non-1 size, a negative leading size.
            6 => {
                let r = if nd > 0 && shape.iter().any(|&s| s != 1) {
                    let k = shape.iter().position(|&s| s != 1).unwrap();
                    target[k] = shape[k] as i64 + 1;
                    x.expand(&target)
                } else {
                    target.insert(0, -1);
                    x.expand(&target)
                };
                (dbg(r), &["expand"][..])
            }
            7 => {
                if nd == 0 { return (dbg(x.expand([-2])), &["expand"][..]); }
                target.pop();
                (dbg(x.expand(&target)), &["expand"][..])
            }
            // permute: wrong length or a repeated dim.
            8 => {
                let mut p: Vec<i64> = (0..nd as i64).collect();
                if nd >= 2 { p[1] = p[0]; } else { p.push(0); }
                (dbg(x.permute(&p)), &["permute"][..])
            }
            // unflatten into sizes that do not multiply up.
            _ => {
                if nd == 0 { return (dbg(x.unflatten(0, [2, 2])), &["unflatten"][..]); }
                let s = shape[0] as i64;
                (dbg(x.unflatten(0, [s + 1, 1])), &["unflatten"][..])
            }
        })?;
        expect_err(&what, r, names)?;
    }

    /// Unsupported dtypes: neg/abs/relu/floor of bool, one_hot of non-int64,
    /// mean/var/softmax of integers, sub of bools, matmul of bool, float
    /// index tensors, non-bool masks and conditions, argmax of bool, in-place
    /// results that cannot be cast back.
    #[test]
    fn bad_dtypes(shape in prop::collection::vec(1usize..4, 1..3), op in 0usize..20, int_dt in prop::sample::select(vec![DType::U8, DType::I32, DType::I64]),
                  float_dt in prop::sample::select(vec![DType::F16, DType::BF16, DType::F32, DType::F64]), seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let b = rand_t(DType::Bool, &shape, &mut rng);
        let i = rand_t(int_dt, &shape, &mut rng);
        let f = rand_t(float_dt, &shape, &mut rng);
        let fidx = make(float_dt, &Nd::new(&vec![1; shape.len()], vec![V::F(0.0)]));
        let what = format!("op {op} ({int_dt}, {float_dt}) on {shape:?}");
        let v0 = (i.version(), b.version());
        let (r, names): (Outcome, &[&str]) = no_panic(&what, || match op {
            0 => (dbg(b.neg()), &["neg"][..]),
            1 => (dbg(b.abs()), &["abs"][..]),
            2 => (dbg(b.relu()), &["relu"][..]),
            3 => (dbg(b.floor()), &["floor"][..]),
            4 => (dbg(f.one_hot(None)), &["one_hot"][..]),
            5 => (dbg(if int_dt == DType::I64 { b.one_hot(Some(2)) } else { i.one_hot(None) }), &["one_hot"][..]),
            6 => (dbg(i.mean()), &["mean"][..]),
            7 => (dbg(i.var_dim((), 1.0, false)), &["var"][..]),
            8 => (dbg(b.sub(&b)), &["sub"][..]),
            9 => (dbg(b.reshape([-1, 1]).unwrap().matmul(&b.reshape([1, -1]).unwrap())), &["matmul", "mm"][..]),
            10 => (dbg(f.gather(0, &fidx)), &["gather"][..]),
            11 => (dbg(f.index_select(0, &make(float_dt, &Nd::new(&[1], vec![V::F(0.0)])))), &["index_select"][..]),
            12 => (dbg(f.masked_fill(&f, 0.0)), &["masked_fill"][..]),
            13 => (dbg(f.where_cond(&f, &f)), &["where"][..]),
            14 => (dbg(b.argmax(None, false)), &["argmax"][..]),
            15 => (dbg(i.div_(&i)), &["div"][..]),
            16 => (dbg(i.add_(1.5)), &["add"][..]),
            17 => (dbg(b.mul_(&i)), &["mul"][..]),
            18 => (dbg(i.clamp_(Some(0.5), None::<f64>)), &["clamp"][..]),
            _ => (dbg(i.softmax(-1)), &["softmax"][..]),
        })?;
        expect_err(&what, r, names)?;
        prop_assert_eq!((i.version(), b.version()), v0, "{}: a failed in-place call must not bump the version", what);
    }

    /// Other invalid arguments: cat / stack of mismatched shapes or 0-d
    /// tensors, split_sizes not summing up, chunk(0), mm / bmm / dot / mv /
    /// matmul with wrong ranks or sizes, t() of 3-d, clamp without bounds,
    /// item() of several elements, arange with step 0, split(0), slice step <= 0.
    #[test]
    fn bad_arguments(shape in prop::collection::vec(2usize..4, 1..4), op in 0usize..18, seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let x = rand_t(DType::F32, &shape, &mut rng);
        let nd = shape.len();
        let mut other = shape.clone();
        other[nd - 1] += 1;
        let y = rand_t(DType::F32, &other, &mut rng);
        let s0 = Tensor::scalar(1.0f32);
        let what = format!("op {op} on {shape:?}");
        let (r, names): (Outcome, &[&str]) = no_panic(&what, || match op {
            0 if nd >= 2 => (dbg(Tensor::cat(&[&x, &y], 0)), &["cat"][..]),
            0 => (dbg(Tensor::cat(&[&x, &x.unsqueeze(0).unwrap()], 0)), &["cat"][..]),
            1 => (dbg(Tensor::cat(&[&s0, &s0], 0)), &["cat"][..]),
            2 => (dbg(Tensor::stack(&[&x, &y], 0)), &["stack"][..]),
            3 => (dbg(x.split_sizes([shape[0] + 1], 0)), &["split"][..]),
            4 => (dbg(x.chunk(0, 0)), &["chunk"][..]),
            5 => (dbg(x.mm(&x.unsqueeze(0).unwrap())), &["mm"][..]),
            6 => (dbg(x.bmm(&x.unsqueeze(0).unwrap())), &["bmm"][..]),
            7 => (dbg(x.flatten((0, -1)).unwrap().dot(&y.flatten((0, -1)).unwrap())), &["dot"][..]),
            8 => (dbg(x.mv(&y)), &["mv"][..]),
            9 if nd >= 2 => (dbg(x.matmul(&y.transpose(-1, -2).unwrap())), &["matmul", "mm", "bmm", "dot", "mv"][..]),
            9 => (dbg(x.matmul(&y)), &["matmul", "mm", "bmm", "dot", "mv"][..]),
            10 => (dbg(x.matmul(&s0)), &["matmul"][..]),
            11 if nd >= 3 => (dbg(x.t()), &["t()", "t:"][..]),
            11 => (dbg(x.unsqueeze(0).unwrap().unsqueeze(0).unwrap().t()), &["t()", "t:"][..]),
            12 => (dbg(x.clamp(None::<f64>, None::<f64>)), &["clamp"][..]),
            13 => (dbg(x.item::<f32>()), &["item"][..]),
            14 => (dbg(Tensor::arange_step(0, 5, 0)), &["arange"][..]),
            15 => (dbg(x.split(0, 0)), &["split"][..]),
            16 => (dbg(x.slice(0, None, None, -rng.range(0, 2))), &["slice"][..]),
            _ => (dbg(x.get(&vec![TensorIndex::Int(0); nd + 1])), &["index"][..]),
        })?;
        expect_err(&what, r, names)?;
    }

    /// Extreme arguments to view ops never panic; when they succeed the
    /// result is the Python-slice reference (PyTorch accepts any bounds and
    /// any positive step in slicing).
    #[test]
    fn extreme_slice_arguments(len in 0usize..6, start in prop::option::of(prop_oneof![Just(i64::MIN), Just(i64::MAX), -8i64..8]),
                               end in prop::option::of(prop_oneof![Just(i64::MIN), Just(i64::MAX), -8i64..8]),
                               step in prop_oneof![Just(i64::MAX), Just(i64::MAX / 2 + 1), 1i64..4]) {
        let x = make(DType::I64, &Nd::new(&[len], (0..len as i64).map(V::I).collect()));
        let what = format!("slice([{len}], {start:?}, {end:?}, {step})");
        let n = len as i128;
        let c = |v: i64| { let v = v as i128; (if v < 0 { v + n } else { v }).clamp(0, n) };
        let (s, e) = (start.map_or(0, c), end.map_or(n, c));
        let got = no_panic(&what, || x.slice(0, start, end, step))?
            .map_err(|e| TestCaseError::fail(format!("{what}: unexpected error: {e}")))?;
        let want: Vec<V> = if e > s { (0..).map(|k| s + k * step as i128).take_while(|&p| p < e).map(|p| V::I(p as i64)).collect() } else { vec![] };
        let k = want.len();
        check_exact(&what, &read(&got), &Nd::new(&[k], want))?;
    }
}

/// In-place ops refuse to write tensors whose elements share memory
/// (expanded views), as PyTorch does ("unsupported operation: more than one
/// element of the written-to tensor refers to a single memory location");
/// `fill_` / `zero_` are allowed on such tensors, as in PyTorch.
#[test]
fn inplace_on_overlapping_target_is_an_error() {
    let target = || Tensor::zeros([2, 1]).unwrap().expand([2, 2]).unwrap();
    let other = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]]).unwrap();
    type InPlaceFn<'a> = Box<dyn Fn(&Tensor) -> ferrotorch_core::Result<Tensor> + 'a>;
    let cases: Vec<(&str, InPlaceFn)> = vec![
        ("add", Box::new(|t: &Tensor| t.add_(&other))),
        ("mul", Box::new(|t: &Tensor| t.mul_(2.0))),
        ("neg", Box::new(|t: &Tensor| t.neg_())),
        ("clamp", Box::new(|t: &Tensor| t.clamp_(Some(0.0), Some(1.0)))),
        ("copy_", Box::new(|t: &Tensor| t.copy_(&other))),
    ];
    for (name, f) in cases {
        let t = target();
        match f(&t) {
            Ok(_) => panic!("{name}_ on an expanded tensor must fail, got {:?}", t.to_vec::<f32>()),
            Err(e) => assert!(e.to_string().contains(name), "{e}"),
        }
    }
    // fill_ and zero_ are allowed.
    let t = target();
    t.fill_(1.0).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0; 4]);
}
