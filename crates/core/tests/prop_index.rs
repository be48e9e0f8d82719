//! Property tests of index-driven ops with random valid indices over
//! strided inputs: gather, scatter / scatter_ / scatter_add(_),
//! index_select, advanced indexing (`index` and `get` with integer and bool
//! tensors, adjacent or not), and cat / stack round trips with promotion.

mod common;

use common::*;
use ferrotorch_core::{DType, Tensor, TensorIndex};
use proptest::prelude::*;

fn dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(DTYPES.to_vec())
}

fn wrap(d: i64, ndim: usize) -> usize {
    let n = ndim.max(1) as i64;
    (if d < 0 { d + n } else { d }) as usize
}

/// A dim of a tensor with `ndim >= 1` dims, written positively or negatively.
fn signed_dim(rng: &mut Prng, ndim: usize) -> i64 {
    let d = rng.below(ndim as u64) as i64;
    if rng.below(2) == 0 { d } else { d - ndim as i64 }
}

/// Applies the 0-d (non-mask) index tensors of `items` as selects, as
/// PyTorch's `x[...]` does, returning the remaining array and items.
fn select_scalars(
    x: &Nd<V>,
    items: &[Option<Nd<V>>],
    mask_at: Option<usize>,
) -> (Nd<V>, Vec<Option<Nd<V>>>, Option<usize>) {
    let mut x = x.clone();
    let mut rest = Vec::new();
    let mut mask = None;
    let mut d = 0;
    for (k, it) in items.iter().enumerate() {
        match it {
            Some(t) if t.ndim() == 0 && mask_at != Some(k) => {
                let i = t.data[0].i();
                let size = x.shape[d] as i64;
                x = x.select(d, if i < 0 { i + size } else { i } as usize);
            }
            other => {
                if mask_at == Some(k) {
                    mask = Some(rest.len());
                }
                rest.push(other.clone());
                d += 1;
            }
        }
    }
    (x, rest, mask)
}

/// `aten::index(x, items)`: bool masks (at `mask_at`) become their nonzero
/// positions; the index tensors broadcast together; their result dims
/// replace the indexed dims when those are adjacent, else come first.
/// `None` when the index shapes do not broadcast.
fn index_ref(xv: &Nd<V>, items: &[Option<Nd<V>>], mask_at: Option<usize>) -> Option<Nd<V>> {
    let xs = &xv.shape;
    let nd = xs.len();
    let long: Vec<Option<Nd<V>>> = items
        .iter()
        .enumerate()
        .map(|(k, it)| match it {
            Some(m) if mask_at == Some(k) => {
                let nz: Vec<V> = m
                    .data
                    .iter()
                    .enumerate()
                    .filter(|(_, v)| v.nonzero())
                    .map(|(i, _)| V::I(i as i64))
                    .collect();
                Some(Nd::new(&[nz.len()], nz))
            }
            other => other.clone(),
        })
        .collect();
    let positions: Vec<usize> = (0..long.len()).filter(|&p| long[p].is_some()).collect();
    if positions.is_empty() {
        return Some(xv.clone());
    }
    let mut b = Vec::new();
    for p in &positions {
        b = broadcast_shapes(&b, &long[*p].as_ref().unwrap().shape)?;
    }
    let adjacent = positions.windows(2).all(|w| w[1] == w[0] + 1);
    let rest: Vec<usize> = (0..nd).filter(|d| !positions.contains(d)).collect();
    let first = positions[0];
    let out_shape: Vec<usize> = if adjacent {
        [&xs[..first], &b[..], &xs[positions[positions.len() - 1] + 1..]].concat()
    } else {
        [b.clone(), rest.iter().map(|&d| xs[d]).collect()].concat()
    };
    let idx_b: Vec<Nd<V>> = positions
        .iter()
        .map(|p| long[*p].as_ref().unwrap().broadcast_to(&b))
        .collect();
    Some(Nd::from_fn(&out_shape, |o| {
        let (bi, others): (Vec<usize>, Vec<usize>) = if adjacent {
            let nb = b.len();
            (o[first..first + nb].to_vec(), [&o[..first], &o[first + nb..]].concat())
        } else {
            (o[..b.len()].to_vec(), o[b.len()..].to_vec())
        };
        let mut j = vec![0usize; nd];
        for (q, &p) in positions.iter().enumerate() {
            let v = idx_b[q].at(&bi).i();
            j[p] = if v < 0 { (v + xs[p] as i64) as usize } else { v as usize };
        }
        for (q, &d) in rest.iter().enumerate() {
            j[d] = others[q];
        }
        xv.at(&j)
    }))
}

fn index_vals(shape: &[usize], rng: &mut Prng, lo: i64, hi: i64) -> Nd<V> {
    Nd::from_fn(shape, |_| V::I(rng.range(lo, hi)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `gather(dim, index)`: `out[i] = x[i with i[dim] = index[i]]`.
    #[test]
    fn gather(dt in dtype(), xs in prop::collection::vec(0usize..=4, 1..=3), xr in recipe(), ir in recipe(), seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let nd = xs.len();
        let dim = signed_dim(&mut rng, nd);
        let d = wrap(dim, nd);
        let mut is: Vec<usize> = (0..nd).map(|k| if k == d { rng.range(0, 4) as usize } else { rng.range(0, xs[k] as i64) as usize }).collect();
        if xs[d] == 0 {
            is[d] = 0;
        }
        let (x, xv) = strided(dt, &xs, &xr, &mut rng, Vals::Wild);
        let iv = index_vals(&is, &mut rng, 0, xs[d] as i64 - 1);
        let index = build_from(DType::I64, &iv, &ir, &mut rng);
        let what = format!("gather({dt}{xs:?}, {dim}, index {is:?} strides {:?})", index.strides());
        let got = no_panic(&what, || x.gather(dim, &index))?.map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
        let want = Nd::from_fn(&is, |i| {
            let mut j = i.to_vec();
            j[d] = iv.at(i).i() as usize;
            xv.at(&j)
        });
        prop_assert_eq!(got.dtype(), dt);
        check_exact(&what, &read(&got), &want)?;
    }

    /// `scatter` with indices unique along `dim` (PyTorch leaves duplicates
    /// unspecified) and `scatter_add` with any indices, out of place and in
    /// place on a strided target.
    #[test]
    fn scatter(dt in dtype(), xs in prop::collection::vec(0usize..=4, 1..=3), xr in recipe(), ir in recipe(), sr in recipe(),
               add in any::<bool>(), inplace in any::<bool>(), seed in any::<u64>()) {
        prop_assume!(!(add && dt == DType::Bool));
        let mut rng = Prng(seed);
        let nd = xs.len();
        let dim = signed_dim(&mut rng, nd);
        let d = wrap(dim, nd);
        let mut is: Vec<usize> = (0..nd).map(|k| rng.range(0, xs[k] as i64) as usize).collect();
        if xs[d] == 0 {
            is[d] = 0;
        }
        let ss: Vec<usize> = is.iter().map(|&s| s + rng.range(0, 1) as usize).collect();
        // Index values: for scatter, a random arrangement of distinct rows per column.
        let iv = if add {
            index_vals(&is, &mut rng, 0, xs[d] as i64 - 1)
        } else {
            let mut v = Nd::new(&is, vec![V::I(0); numel(&is)]);
            let mut col_shape = is.clone();
            col_shape[d] = 1;
            for c in indices(&col_shape) {
                let mut rows: Vec<i64> = (0..xs[d] as i64).collect();
                for i in (1..rows.len()).rev() {
                    let j = rng.below(i as u64 + 1) as usize;
                    rows.swap(i, j);
                }
                for (r, &row) in rows.iter().enumerate().take(is[d]) {
                    let mut at = c.clone();
                    at[d] = r;
                    v.set(&at, V::I(row));
                }
            }
            v
        };
        let target = build(dt, &xs, if inplace && matches!(xr, Recipe::Expanded(_)) { &Recipe::Contiguous } else { &xr }, &mut rng, Vals::Small);
        let xv = target.vals();
        let index = build_from(DType::I64, &iv, &ir, &mut rng);
        let (src, srcv) = strided(dt, &ss, &sr, &mut rng, Vals::Small);
        let mut want = xv.clone();
        for i in indices(&is) {
            let mut j = i.clone();
            j[d] = iv.at(&i).i() as usize;
            let s = srcv.at(&i);
            let v = if add {
                if is_float(dt) { cast(V::F(want.at(&j).f() + s.f()), dt) } else { cast(V::I(want.at(&j).i().wrapping_add(s.i())), dt) }
            } else {
                s
            };
            want.set(&j, v);
        }
        let x = &target.t;
        let what = format!("scatter{}{}({dt}{xs:?} strides {:?}, {dim}, index {is:?}, src {ss:?})",
                           if add { "_add" } else { "" }, if inplace { "_" } else { "" }, x.strides());
        let v0 = x.version();
        let got = no_panic(&what, || match (add, inplace) {
            (false, false) => x.scatter(dim, &index, &src),
            (false, true) => x.scatter_(dim, &index, &src),
            (true, false) => x.scatter_add(dim, &index, &src),
            (true, true) => x.scatter_add_(dim, &index, &src),
        })?.map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
        prop_assert_eq!(got.dtype(), dt);
        check_exact(&what, &read(&got), &want)?;
        if inplace {
            prop_assert_eq!(x.version(), v0 + 1, "{}: version", what);
            check_exact(&format!("{what}: self"), &read(x), &want)?;
        } else {
            prop_assert_eq!(x.version(), v0, "{}: out of place must not write", what);
            check_exact(&format!("{what}: self untouched"), &read(x), &xv)?;
        }
    }

    /// `index_select(dim, index)` with a 1-D (possibly strided) index.
    #[test]
    fn index_select(dt in dtype(), xs in prop::collection::vec(0usize..=4, 1..=3), xr in recipe(), ir in recipe(), n in 0usize..=6, seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let nd = xs.len();
        let dim = signed_dim(&mut rng, nd);
        let d = wrap(dim, nd);
        let n = if xs[d] == 0 { 0 } else { n };
        let (x, xv) = strided(dt, &xs, &xr, &mut rng, Vals::Wild);
        let iv = index_vals(&[n], &mut rng, 0, xs[d] as i64 - 1);
        let index = build_from(DType::I64, &iv, &ir, &mut rng);
        let what = format!("index_select({dt}{xs:?}, {dim}, {:?})", iv.data);
        let got = no_panic(&what, || x.index_select(dim, &index))?.map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
        let mut os = xs.clone();
        os[d] = n;
        let want = Nd::from_fn(&os, |i| {
            let mut j = i.to_vec();
            j[d] = iv.data[i[d]].i() as usize;
            xv.at(&j)
        });
        check_exact(&what, &read(&got), &want)?;
    }

    /// Advanced indexing (`aten::index`): integer index tensors (negative
    /// values wrap) broadcasting against each other at random positions,
    /// adjacent or not, and bool masks; via `index` and via `get`.
    #[test]
    fn advanced_index(dt in dtype(), xs in prop::collection::vec(0usize..=4, 1..=4), xr in recipe(), seed in any::<u64>(),
                      via_get in any::<bool>()) {
        let mut rng = Prng(seed);
        let nd = xs.len();
        let (x, xv) = strided(dt, &xs, &xr, &mut rng, Vals::Wild);
        // Which leading dims get an index (None = `:`), at least one.
        let count = rng.range(1, nd as i64) as usize;
        let bshape: Vec<usize> = (0..rng.range(0, 2)).map(|_| rng.range(0, 3) as usize).collect();
        let mut items: Vec<Option<Nd<V>>> = Vec::new();
        let mut mask_at: Option<usize> = None;
        let mut k = 0;
        while k < count {
            let size = xs[k];
            if rng.below(3) == 0 {
                items.push(None);
            } else if rng.below(6) == 0 && mask_at.is_none() {
                // A 1-D bool mask over dim k.
                mask_at = Some(k);
                items.push(Some(Nd::from_fn(&[size], |_| V::I(rng.range(0, 1)))));
            } else if size == 0 {
                items.push(None);
            } else {
                let s = broadcastable_to(&bshape, rng.range(0, 2) as usize, rng.next() as u32);
                items.push(Some(index_vals(&s, &mut rng, -(size as i64), size as i64 - 1)));
            }
            k += 1;
        }
        prop_assume!(items.iter().any(|i| i.is_some()));
        // In `x[...]` (get) a 0-d integer index tensor selects like an int.
        let (xv2, items2, mask2) = if via_get { select_scalars(&xv, &items, mask_at) } else { (xv.clone(), items.clone(), mask_at) };
        let want = index_ref(&xv2, &items2, mask2);
        let tensors: Vec<Option<Tensor>> = items.iter().enumerate().map(|(k, it)| it.as_ref().map(|v| {
            if mask_at == Some(k) { make(DType::Bool, v) } else { make(DType::I64, v) }
        })).collect();
        let what = format!("index({dt}{xs:?}, {:?}) via_get {via_get}", items.iter().map(|i| i.as_ref().map(|n| (n.shape.clone(), n.data.clone()))).collect::<Vec<_>>());
        let got = if via_get {
            let gi: Vec<TensorIndex> = tensors.iter().map(|t| match t {
                Some(t) => TensorIndex::Tensor(t.clone()),
                None => TensorIndex::full(),
            }).collect();
            no_panic(&what, || x.get(&gi))?
        } else {
            no_panic(&what, || x.index(&tensors))?
        };
        let Some(want) = want else {
            return expect_err(&what, got, &["index"]);
        };
        let got = got.map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
        prop_assert_eq!(got.dtype(), dt);
        check_exact(&what, &read(&got), &want)?;
    }

    /// `cat` of tensors of different dtypes (promoted) and strides along a
    /// random dim; legacy empty 1-D tensors are skipped; splitting the result
    /// back with `split_sizes` gives the inputs.
    #[test]
    fn cat_split_round_trip(shape in prop::collection::vec(0usize..=4, 1..=3), parts in prop::collection::vec((dtype(), 0usize..=3, recipe()), 1..=4),
                            dim_seed in any::<u64>(), with_empty in any::<bool>(), seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let nd = shape.len();
        let dim = signed_dim(&mut Prng(dim_seed), nd);
        let d = wrap(dim, nd);
        let mut ts = Vec::new();
        let mut vs = Vec::new();
        let mut args = Vec::new();
        for (dt, len, r) in &parts {
            let mut s = shape.clone();
            s[d] = *len;
            let (t, v) = strided(*dt, &s, r, &mut rng, Vals::Wild);
            ts.push(t);
            vs.push(v);
            args.push(Arg::Dim(*dt));
        }
        let ct = result_type(&args);
        let mut refs: Vec<&Tensor> = ts.iter().collect();
        let empty = Tensor::zeros_dtype([0], DType::F64).unwrap();
        if with_empty && ct == DType::F64 {
            refs.insert(rng.below(refs.len() as u64 + 1) as usize, &empty);
        }
        let what = format!("cat({:?}, {dim})", parts.iter().map(|(dt, l, _)| (dt, l)).collect::<Vec<_>>());
        let got = no_panic(&what, || Tensor::cat(&refs, dim))?.map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
        prop_assert_eq!(got.dtype(), ct, "{}: dtype", what);
        let cast_parts: Vec<Nd<V>> = vs.iter().zip(&parts).map(|(v, (dt, _, _))| v.map(|x| cast(cast(x, *dt), ct))).collect();
        let want = Nd::cat(&cast_parts, d);
        check_exact(&what, &read(&got), &want)?;
        let sizes: Vec<usize> = parts.iter().map(|p| p.1).collect();
        let pieces = got.split_sizes(&sizes, dim).unwrap();
        prop_assert_eq!(pieces.len(), parts.len());
        for (p, w) in pieces.iter().zip(&cast_parts) {
            check_exact("split_sizes piece", &read(p), w)?;
        }
    }

    /// `stack` inserts a new dim anywhere in `[-(n+1), n]`; `unbind` along it
    /// gives the inputs back.
    #[test]
    fn stack_unbind_round_trip(shape in shape(3, 4), n in 1usize..4, dts in prop::collection::vec(dtype(), 4), recipes in prop::collection::vec(recipe(), 4),
                               dim_seed in any::<u64>(), seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let nd = shape.len() + 1;
        let dim = signed_dim(&mut Prng(dim_seed), nd);
        let d = wrap(dim, nd);
        let mut ts = Vec::new();
        let mut vs = Vec::new();
        for k in 0..n {
            let (t, v) = strided(dts[k], &shape, &recipes[k], &mut rng, Vals::Wild);
            ts.push(t);
            vs.push(v);
        }
        let ct = result_type(&ts.iter().map(|t| if t.ndim() == 0 { Arg::Zero(t.dtype()) } else { Arg::Dim(t.dtype()) }).collect::<Vec<_>>());
        let refs: Vec<&Tensor> = ts.iter().collect();
        let what = format!("stack({n} x {shape:?}, {dim})");
        let got = no_panic(&what, || Tensor::stack(&refs, dim))?.map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
        prop_assert_eq!(got.dtype(), ct, "{}: dtype", what);
        let parts: Vec<Nd<V>> = vs.iter().enumerate().map(|(k, v)| v.map(|x| cast(cast(x, dts[k]), ct)).unsqueeze(d)).collect();
        check_exact(&what, &read(&got), &Nd::cat(&parts, d))?;
        let back = got.unbind(dim).unwrap();
        prop_assert_eq!(back.len(), n);
        for (b, p) in back.iter().zip(&parts) {
            check_exact("unbind", &read(b), &p.squeeze_dims(&[d]))?;
        }
    }
}
