//! Property tests of views: random chains of permute / transpose / narrow /
//! slice / `get` / select / expand / unsqueeze / squeeze / view / reshape /
//! flatten over random shapes and dtypes, checked against a naive reference
//! that tracks, for every element of the view, its position in the base
//! tensor's storage order.
//!
//! Checked after every step: the op succeeds exactly when PyTorch's rules
//! say (failures name the op), values match, views share storage and version
//! counter with their base, `reshape`/`flatten` copy exactly when PyTorch's
//! view rule (`computeStride`, re-derived here independently) says `view`
//! would fail, and writes through a non-overlapping view land in the base.

mod common;

use common::*;
use ferrotorch_core::backend::TensorExt;
use ferrotorch_core::{DType, Tensor, TensorIndex};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Step {
    Permute(u64),
    Transpose(u64),
    Narrow(u64),
    Slice(u64),
    Get(u64),
    Select(u64),
    Expand(u64),
    Unsqueeze(u64),
    Squeeze(u64),
    View(u64),
    Reshape(u64),
    Flatten(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => any::<u64>().prop_map(Step::Permute),
        1 => any::<u64>().prop_map(Step::Transpose),
        1 => any::<u64>().prop_map(Step::Narrow),
        1 => any::<u64>().prop_map(Step::Slice),
        1 => any::<u64>().prop_map(Step::Get),
        1 => any::<u64>().prop_map(Step::Select),
        1 => any::<u64>().prop_map(Step::Expand),
        1 => any::<u64>().prop_map(Step::Unsqueeze),
        1 => any::<u64>().prop_map(Step::Squeeze),
        2 => any::<u64>().prop_map(Step::View),
        2 => any::<u64>().prop_map(Step::Reshape),
        1 => any::<u64>().prop_map(Step::Flatten),
    ]
}

/// PyTorch's dim wrapping: a 0-d tensor accepts -1 and 0.
fn wrap(d: i64, ndim: usize) -> Option<usize> {
    let n = ndim.max(1) as i64;
    let w = if d < 0 { d + n } else { d };
    (0..n).contains(&w).then_some(w as usize)
}

/// A dim for a tensor of `ndim` dims: usually valid (half the time written
/// negatively), one time in twelve out of range.
fn pick_dim(rng: &mut Prng, ndim: usize) -> i64 {
    let n = ndim.max(1) as i64;
    if rng.below(12) == 0 {
        return if rng.below(2) == 0 {
            n + rng.range(0, 1)
        } else {
            -n - 1 - rng.range(0, 1)
        };
    }
    let d = rng.range(0, n - 1);
    if rng.below(2) == 0 { d } else { d - n }
}

/// `infer_size`: resolves one -1; `None` where PyTorch raises.
fn infer_shape(shape: &[i64], numel: usize) -> Option<Vec<usize>> {
    let minus = shape.iter().filter(|&&s| s == -1).count();
    if minus > 1 || shape.iter().any(|&s| s < -1) {
        return None;
    }
    let known: usize = shape.iter().filter(|&&s| s >= 0).map(|&s| s as usize).product();
    if minus == 1 {
        if known == 0 || !numel.is_multiple_of(known) {
            return None;
        }
        Some(
            shape
                .iter()
                .map(|&s| if s == -1 { numel / known } else { s as usize })
                .collect(),
        )
    } else if known == numel {
        Some(shape.iter().map(|&s| s as usize).collect())
    } else {
        None
    }
}

/// Whether a tensor with `shape`/`strides` can be viewed as `new` without a
/// copy. Derived from the definition rather than transcribed: drop size-1
/// dims; the remaining dims fall into maximal chunks that are contiguous
/// among themselves (`stride[i] == stride[i+1] * size[i+1]`); a view exists
/// iff every chunk boundary is also a boundary of the new shape (same
/// number of elements to its right). Empty tensors and 0-d tensors can
/// always be viewed.
fn viewable(shape: &[usize], strides: &[usize], new: &[usize]) -> bool {
    if shape.is_empty() || numel(shape) == 0 {
        return true;
    }
    let dims: Vec<(usize, usize)> = shape
        .iter()
        .zip(strides)
        .filter(|(s, _)| **s != 1)
        .map(|(&s, &st)| (s, st))
        .collect();
    // Element counts to the right of each chunk boundary.
    let mut boundaries = Vec::new();
    let mut right = 1usize;
    for i in (0..dims.len()).rev() {
        right *= dims[i].0;
        if i > 0 && dims[i - 1].1 != dims[i].0 * dims[i].1 {
            boundaries.push(right);
        }
    }
    let mut suffixes = Vec::new();
    let mut right = 1usize;
    for &s in new.iter().rev() {
        right *= s;
        suffixes.push(right);
    }
    boundaries.iter().all(|b| suffixes.contains(b))
}

/// PyTorch's `is_contiguous`.
fn contiguous(shape: &[usize], strides: &[usize]) -> bool {
    if numel(shape) == 0 {
        return true;
    }
    let mut expected = 1;
    for d in (0..shape.len()).rev() {
        if shape[d] != 1 {
            if strides[d] != expected {
                return false;
            }
            expected *= shape[d];
        }
    }
    true
}

/// A new shape for `numel` elements of a tensor of `shape`: a merge of
/// adjacent dims, a split of one dim, a random factorisation, or added /
/// removed 1s; sometimes with a -1, sometimes deliberately invalid.
fn new_shape(rng: &mut Prng, shape: &[usize]) -> Vec<i64> {
    let n = numel(shape);
    let mut out: Vec<usize> = match rng.below(5) {
        0 if !shape.is_empty() => {
            let a = rng.below(shape.len() as u64) as usize;
            let b = a + rng.below((shape.len() - a) as u64) as usize;
            let mut s = shape[..a].to_vec();
            s.push(shape[a..=b].iter().product());
            s.extend_from_slice(&shape[b + 1..]);
            s
        }
        1 if !shape.is_empty() => {
            let a = rng.below(shape.len() as u64) as usize;
            let size = shape[a];
            let divs: Vec<usize> = (1..=size.max(1)).filter(|&d| size.is_multiple_of(d)).collect();
            let f = divs[rng.below(divs.len() as u64) as usize];
            let mut s = shape[..a].to_vec();
            s.push(f);
            s.push(size.checked_div(f).unwrap_or(0));
            s.extend_from_slice(&shape[a + 1..]);
            s
        }
        2 => {
            if n == 0 {
                let mut s: Vec<usize> = (0..rng.range(1, 3)).map(|_| rng.range(0, 3) as usize).collect();
                let z = rng.below(s.len() as u64) as usize;
                s[z] = 0;
                s
            } else {
                // Random factorisation of n into up to 4 factors.
                let mut rest = n;
                let mut s = Vec::new();
                for _ in 0..rng.range(0, 3) {
                    let divs: Vec<usize> = (1..=rest).filter(|&d| rest.is_multiple_of(d)).collect();
                    let f = divs[rng.below(divs.len() as u64) as usize];
                    s.push(f);
                    rest /= f;
                }
                s.push(rest);
                s
            }
        }
        _ => {
            let mut s: Vec<usize> = shape.iter().copied().filter(|&x| x != 1 || rng.below(2) == 0).collect();
            for _ in 0..rng.range(0, 2) {
                let at = rng.below(s.len() as u64 + 1) as usize;
                s.insert(at, 1);
            }
            s
        }
    };
    if out.len() > 6 {
        out.truncate(6);
    }
    let mut r = to_i64(&out);
    if !r.is_empty() && rng.below(3) == 0 {
        let i = rng.below(r.len() as u64) as usize;
        r[i] = -1;
    }
    match rng.below(16) {
        0 => r.push(2),
        1 if !r.is_empty() => r[0] = -2,
        2 if r.len() >= 2 => {
            r[0] = -1;
            r[1] = -1;
        }
        _ => {}
    }
    r
}

/// Whether the reference step is a view (must share storage), a reshape
/// (shares exactly when viewable), or a copy of indices.
enum Share {
    View,
    Reshape(bool),
}

struct Outcome {
    got: ferrotorch_core::Result<Tensor>,
    want: Option<Nd<usize>>,
    names: &'static [&'static str],
    share: Share,
    what: String,
}

fn view(
    got: ferrotorch_core::Result<Tensor>,
    want: Option<Nd<usize>>,
    names: &'static [&'static str],
    what: String,
) -> Outcome {
    Outcome {
        got,
        want,
        names,
        share: Share::View,
        what,
    }
}

fn apply(step: &Step, t: &Tensor, pos: &Nd<usize>) -> Outcome {
    let shape = pos.shape.clone();
    let nd = shape.len();
    match *step {
        Step::Permute(seed) => {
            let mut rng = Prng(seed);
            let mut perm: Vec<i64> = (0..nd as i64).collect();
            for i in (1..nd).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                perm.swap(i, j);
            }
            for p in perm.iter_mut() {
                if rng.below(2) == 0 {
                    *p -= nd as i64;
                }
            }
            match rng.below(16) {
                0 => perm.push(0),
                1 if nd >= 2 => perm[1] = perm[0],
                _ => {}
            }
            let norm: Option<Vec<usize>> = perm.iter().map(|&p| wrap(p, nd)).collect();
            let want = match norm {
                Some(n) if n.len() == nd && (0..nd).all(|d| n.contains(&d)) => Some(pos.permute(&n)),
                _ => None,
            };
            view(t.permute(&perm), want, &["permute"], format!("permute({perm:?})"))
        }
        Step::Transpose(seed) => {
            let mut rng = Prng(seed);
            let (a, b) = (pick_dim(&mut rng, nd), pick_dim(&mut rng, nd));
            let want = match (wrap(a, nd), wrap(b, nd)) {
                (Some(x), Some(y)) if nd > 0 => Some(pos.transpose(x, y)),
                (Some(_), Some(_)) => Some(pos.clone()),
                _ => None,
            };
            view(t.transpose(a, b), want, &["transpose"], format!("transpose({a}, {b})"))
        }
        Step::Narrow(seed) => {
            let mut rng = Prng(seed);
            let dim = pick_dim(&mut rng, nd);
            let size = wrap(dim, nd).filter(|_| nd > 0).map_or(1, |d| shape[d]) as i64;
            let start = rng.range(-size - 1, size + 1);
            let length = rng.range(0, size + 1) as usize;
            let want = match wrap(dim, nd) {
                Some(d) if nd > 0 => {
                    let s = if start < 0 { start + size } else { start };
                    ((0..=size).contains(&s) && s + length as i64 <= size).then(|| pos.slice(d, s as usize, length, 1))
                }
                _ => None,
            };
            view(
                t.narrow(dim, start, length as i64),
                want,
                &["narrow"],
                format!("narrow({dim}, {start}, {length})"),
            )
        }
        Step::Slice(seed) => {
            let mut rng = Prng(seed);
            let dim = pick_dim(&mut rng, nd);
            let size = wrap(dim, nd).filter(|_| nd > 0).map_or(1, |d| shape[d]) as i64;
            let bound = |rng: &mut Prng| (rng.below(4) != 0).then(|| rng.range(-size - 2, size + 2));
            let (start, end) = (bound(&mut rng), bound(&mut rng));
            let step = if rng.below(16) == 0 {
                rng.range(-1, 0)
            } else {
                rng.range(1, 3)
            };
            let want = match wrap(dim, nd) {
                Some(d) if nd > 0 && step > 0 => {
                    let (s, e) = python_slice(start, end, size);
                    let len = if e > s { (e - s + step - 1) / step } else { 0 };
                    Some(pos.slice(d, s as usize, len as usize, step as usize))
                }
                _ => None,
            };
            view(
                t.slice(dim, start, end, step),
                want,
                &["slice"],
                format!("slice({dim}, {start:?}, {end:?}, {step})"),
            )
        }
        Step::Get(seed) => {
            let (items, want) = get_items(&mut Prng(seed), pos);
            let what = format!("get({items:?})");
            view(t.get(&items), want, &["index", "select", "slice", "unsqueeze"], what)
        }
        Step::Select(seed) => {
            let mut rng = Prng(seed);
            let dim = pick_dim(&mut rng, nd);
            let size = wrap(dim, nd).filter(|_| nd > 0).map_or(1, |d| shape[d]) as i64;
            let index = rng.range(-size - 1, size);
            let want = match wrap(dim, nd) {
                Some(d) if nd > 0 && (-size..size).contains(&index) => {
                    Some(pos.select(d, if index < 0 { index + size } else { index } as usize))
                }
                _ => None,
            };
            view(
                t.select(dim, index),
                want,
                &["select"],
                format!("select({dim}, {index})"),
            )
        }
        Step::Expand(seed) => {
            let mut rng = Prng(seed);
            let lead = if nd < 5 { rng.range(0, 1) as usize } else { 0 };
            let mut target: Vec<i64> = (0..lead).map(|_| rng.range(0, 3)).collect();
            for &s in &shape {
                target.push(match rng.below(3) {
                    0 => -1,
                    _ if s == 1 => rng.range(0, 3),
                    _ => s as i64,
                });
            }
            match rng.below(16) {
                0 if !target.is_empty() => target[0] = rng.range(-2, 3),
                1 => {
                    target.pop();
                }
                _ => {}
            }
            let want = expand_shape(&shape, &target).map(|s| pos.broadcast_to(&s));
            view(t.expand(&target), want, &["expand"], format!("expand({target:?})"))
        }
        Step::Unsqueeze(seed) => {
            let mut rng = Prng(seed);
            if nd >= 6 {
                return view(t.alias(), Some(pos.clone()), &["alias"], "alias".into());
            }
            let dim = pick_dim(&mut rng, nd + 1);
            let want = wrap(dim, nd + 1).map(|d| pos.unsqueeze(d));
            view(t.unsqueeze(dim), want, &["unsqueeze"], format!("unsqueeze({dim})"))
        }
        Step::Squeeze(seed) => {
            let mut rng = Prng(seed);
            if rng.below(3) == 0 {
                let ones: Vec<usize> = (0..nd).filter(|&d| shape[d] == 1).collect();
                return view(
                    t.squeeze(),
                    Some(pos.squeeze_dims(&ones)),
                    &["squeeze"],
                    "squeeze()".into(),
                );
            }
            let dim = pick_dim(&mut rng, nd);
            let want = wrap(dim, nd).map(|d| {
                if nd > 0 && shape[d] == 1 {
                    pos.squeeze_dims(&[d])
                } else {
                    pos.clone()
                }
            });
            view(t.squeeze_dim(dim), want, &["squeeze"], format!("squeeze_dim({dim})"))
        }
        Step::View(seed) | Step::Reshape(seed) => {
            let is_view = matches!(step, Step::View(_));
            let target = new_shape(&mut Prng(seed), &shape);
            let inferred = infer_shape(&target, pos.numel());
            let can_view = inferred.as_ref().is_some_and(|s| viewable(&shape, t.strides(), s));
            if is_view {
                let want = inferred.filter(|_| can_view).map(|s| pos.reshape(&s));
                view(t.view(&target), want, &["view"], format!("view({target:?})"))
            } else {
                Outcome {
                    got: t.reshape(&target),
                    want: inferred.map(|s| pos.reshape(&s)),
                    names: &["reshape", "view"],
                    share: Share::Reshape(can_view),
                    what: format!("reshape({target:?})"),
                }
            }
        }
        Step::Flatten(seed) => {
            let mut rng = Prng(seed);
            let (s, e) = (pick_dim(&mut rng, nd), pick_dim(&mut rng, nd));
            let (ws, we) = (wrap(s, nd), wrap(e, nd));
            let (want, can_view) = match (ws, we) {
                (Some(_), Some(_)) if nd == 0 => (Some(pos.reshape(&[1])), true),
                (Some(a), Some(b)) if a <= b => {
                    let mut ns = shape[..a].to_vec();
                    ns.push(shape[a..=b].iter().product());
                    ns.extend_from_slice(&shape[b + 1..]);
                    let v = viewable(&shape, t.strides(), &ns);
                    (Some(pos.reshape(&ns)), v)
                }
                _ => (None, true),
            };
            Outcome {
                got: t.flatten((s, e)),
                want,
                names: &["flatten"],
                share: Share::Reshape(can_view),
                what: format!("flatten({s}, {e})"),
            }
        }
    }
}

/// Python's slice bounds for a dim of `size` (positive step).
fn python_slice(start: Option<i64>, end: Option<i64>, size: i64) -> (i64, i64) {
    let c = |v: i64| (if v < 0 { v + size } else { v }).clamp(0, size);
    (start.map_or(0, c), end.map_or(size, c))
}

/// `expand`'s output shape, `None` where PyTorch raises.
fn expand_shape(shape: &[usize], target: &[i64]) -> Option<Vec<usize>> {
    if target.len() < shape.len() {
        return None;
    }
    let lead = target.len() - shape.len();
    let mut out = Vec::new();
    for (i, &s) in target.iter().enumerate() {
        if i < lead {
            if s < 0 {
                return None;
            }
            out.push(s as usize);
        } else {
            let cur = shape[i - lead];
            if s == -1 || s == cur as i64 {
                out.push(cur);
            } else if cur == 1 && s >= 0 {
                out.push(s as usize);
            } else {
                return None;
            }
        }
    }
    Some(out)
}

/// Random basic-indexing items (ints, slices, None, ...) and the reference
/// result of `x[items]`.
fn get_items(rng: &mut Prng, pos: &Nd<usize>) -> (Vec<TensorIndex>, Option<Nd<usize>>) {
    let nd = pos.ndim();
    let count = rng.range(0, nd as i64 + 1) as usize;
    let mut items = Vec::new();
    let mut ellipsis = false;
    for k in 0..count {
        let size = pos.shape.get(k).copied().unwrap_or(1) as i64;
        items.push(match rng.below(8) {
            0 | 1 => TensorIndex::Int(rng.range(-size - 1, size)),
            2 => TensorIndex::NewAxis,
            3 if !ellipsis || rng.below(8) == 0 => {
                ellipsis = true;
                TensorIndex::Ellipsis
            }
            _ => {
                let bound = |rng: &mut Prng| (rng.below(3) != 0).then(|| rng.range(-size - 1, size + 1));
                let (s, e) = (bound(rng), bound(rng));
                TensorIndex::slice(s, e, if rng.below(20) == 0 { 0 } else { rng.range(1, 3) })
            }
        });
    }
    // Reference: Python's rules, item by item.
    let consumed = items
        .iter()
        .filter(|i| matches!(i, TensorIndex::Int(_) | TensorIndex::Slice { .. }))
        .count();
    let ellipses = items.iter().filter(|i| matches!(i, TensorIndex::Ellipsis)).count();
    if consumed > nd || ellipses > 1 {
        return (items, None);
    }
    let mut r = pos.clone();
    let mut d = 0usize;
    for it in &items {
        match *it {
            TensorIndex::Int(i) => {
                let size = r.shape[d] as i64;
                if !(-size..size).contains(&i) {
                    return (items, None);
                }
                r = r.select(d, if i < 0 { i + size } else { i } as usize);
            }
            TensorIndex::Slice { start, end, step } => {
                if step <= 0 {
                    return (items, None);
                }
                let size = r.shape[d] as i64;
                let (s, e) = python_slice(start, end, size);
                let len = if e > s { (e - s + step - 1) / step } else { 0 };
                r = r.slice(d, s as usize, len as usize, step as usize);
                d += 1;
            }
            TensorIndex::NewAxis => {
                r = r.unsqueeze(d);
                d += 1;
            }
            TensorIndex::Ellipsis => d += nd - consumed,
            TensorIndex::Tensor(_) => unreachable!(),
        }
    }
    (items, Some(r))
}

/// The base tensor a chain of views looks into, its values in storage
/// order, and for each element of the current view its position there.
struct State {
    base: Tensor,
    base_vals: Vec<V>,
    pos: Nd<usize>,
    t: Tensor,
}

fn values_at(vals: &[V], pos: &Nd<usize>) -> Nd<V> {
    pos.map(|p| vals[p])
}

fn view_dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(DTYPES.to_vec())
}

fn base_values(dt: DType, n: usize) -> Vec<V> {
    // Distinct where the dtype allows, so a wrong element is visible.
    (0..n)
        .map(|i| match dt {
            DType::Bool => V::I((i % 2) as i64),
            DType::U8 => V::I((i % 251) as i64),
            DType::BF16 => V::F((i % 256) as f64 - 128.0),
            _ => V::F(i as f64 - 300.0),
        })
        .map(|v| cast(v, dt))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random chains of view ops agree with the reference, share storage as
    /// PyTorch's views do, and fail (naming the op) exactly when PyTorch does.
    #[test]
    fn view_chains(shape in shape(4, 5), dt in view_dtype(), steps in prop::collection::vec(step(), 1..8)) {
        let n = numel(&shape);
        let vals = base_values(dt, n);
        let base = make(dt, &Nd::new(&shape, vals.clone()));
        let mut st = State {
            base: base.clone(),
            base_vals: vals,
            pos: Nd::new(&shape, (0..n).collect()),
            t: base,
        };
        for (k, s) in steps.iter().enumerate() {
            let out = no_panic("view step", || apply(s, &st.t, &st.pos))?;
            let what = format!("step {k}: {} on shape {:?} strides {:?}", out.what, st.t.shape(), st.t.strides());
            let Some(want) = out.want else {
                expect_err(&what, out.got, out.names)?;
                continue;
            };
            let got = match out.got {
                Ok(g) => g,
                Err(e) => return Err(TestCaseError::fail(format!("{what}: unexpected error {e}"))),
            };
            prop_assert_eq!(got.shape(), want.shape.as_slice(), "{}", what);
            prop_assert_eq!(got.dtype(), dt, "{}", what);
            prop_assert_eq!(got.is_contiguous(), contiguous(got.shape(), got.strides()), "{}: is_contiguous", what);
            let shares = got.storage().same(st.base.storage());
            match out.share {
                Share::View => prop_assert!(shares, "{}: a view must share its base's storage", what),
                Share::Reshape(v) => prop_assert_eq!(shares, v, "{}: reshape must copy exactly when view is impossible", what),
            }
            if shares {
                prop_assert!(got.version_counter().same(&st.base.version_counter()), "{}: version counter", what);
                st.pos = want;
            } else {
                // A copy: it becomes the new base.
                st.base_vals = values_at(&st.base_vals, &want).data;
                st.pos = Nd::new(&want.shape, (0..want.numel()).collect());
                st.base = got.clone();
            }
            st.t = got;
            check_exact(&what, &read(&st.t), &values_at(&st.base_vals, &st.pos))?;
        }
        // contiguous() gives the same values in a contiguous layout.
        let c = st.t.contiguous().unwrap();
        prop_assert!(c.is_contiguous());
        check_exact("contiguous()", &read(&c), &values_at(&st.base_vals, &st.pos))?;

        // Writing through a non-overlapping view lands in the right base slots.
        let mut seen = vec![false; st.base_vals.len()];
        let overlapping = st.pos.data.iter().any(|&p| std::mem::replace(&mut seen[p], true));
        if !overlapping && st.pos.numel() > 0 {
            let new: Vec<V> = (0..st.pos.numel()).map(|i| cast(V::I(7 + i as i64 % 5), dt)).collect();
            let src = make(dt, &Nd::new(&st.pos.shape, new.clone()));
            let v0 = st.base.version();
            st.t.copy_(&src).unwrap();
            prop_assert_eq!(st.base.version(), v0 + 1, "copy_ through a view bumps the base's version once");
            let mut want = st.base_vals.clone();
            for (i, &p) in st.pos.data.iter().enumerate() {
                want[p] = new[i];
            }
            let base_shape = st.base.shape().to_vec();
            check_exact("base after copy_ through view", &read(&st.base), &Nd::new(&base_shape, want))?;
        }
    }

    /// `view` succeeds exactly when the view rule allows it; `reshape`
    /// always succeeds with the reference values, as a view exactly then.
    #[test]
    fn view_vs_reshape(shape in shape(4, 4), recipe in recipe(), seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let (t, r) = strided(DType::I64, &shape, &recipe, &mut rng, Vals::Small);
        let target = new_shape(&mut rng, &shape);
        let inferred = infer_shape(&target, numel(&shape));
        let what = format!("shape {shape:?} strides {:?} -> {target:?}", t.strides());
        let v = no_panic("view", || t.view(&target))?;
        let rs = no_panic("reshape", || t.reshape(&target))?;
        match inferred {
            None => {
                expect_err(&what, v, &["view"])?;
                expect_err(&what, rs, &["reshape"])?;
            }
            Some(ns) => {
                let can = viewable(&shape, t.strides(), &ns);
                let rs = rs.map_err(|e| TestCaseError::fail(format!("{what}: reshape failed: {e}")))?;
                check_exact(&what, &read(&rs), &r.reshape(&ns))?;
                prop_assert_eq!(rs.storage().same(t.storage()), can, "{}: reshape shares storage iff viewable", what);
                if can {
                    let v = v.map_err(|e| TestCaseError::fail(format!("{what}: view failed: {e}")))?;
                    check_exact(&what, &read(&v), &r.reshape(&ns))?;
                    prop_assert!(v.storage().same(t.storage()));
                } else {
                    expect_err(&what, v, &["view"])?;
                }
            }
        }
    }

    /// split / chunk / unbind give views whose concatenation is the input.
    #[test]
    fn split_chunk_unbind(shape in shape(3, 5), recipe in recipe(), seed in any::<u64>(), dim in -3i64..3, size in 0usize..6) {
        let mut rng = Prng(seed);
        let (t, r) = strided(DType::F32, &shape, &recipe, &mut rng, Vals::Small);
        let nd = shape.len();
        let Some(d) = wrap(dim, nd) else {
            expect_err("split", no_panic("split", || t.split(size.max(1) as i64, dim))?, &["split"])?;
            expect_err("chunk", no_panic("chunk", || t.chunk(size.max(1) as i64, dim))?, &["chunk"])?;
            return Ok(());
        };
        if nd == 0 {
            // PyTorch: split/chunk/unbind of a 0-d tensor raise.
            expect_err("split 0-d", no_panic("split", || t.split(size.max(1) as i64, dim))?, &["split"])?;
            expect_err("unbind 0-d", no_panic("unbind", || t.unbind(dim))?, &["unbind"])?;
            return Ok(());
        }
        let n = shape[d];
        // split(size): pieces of `size`, the last one shorter.
        let pieces = no_panic("split", || t.split(size as i64, dim))?;
        if size == 0 && n != 0 {
            expect_err("split(0)", pieces, &["split"])?;
        } else {
            let pieces = pieces.unwrap();
            let want_sizes: Vec<usize> = if n == 0 {
                vec![0]
            } else {
                (0..n.div_ceil(size)).map(|i| size.min(n - i * size)).collect()
            };
            let got_sizes: Vec<usize> = pieces.iter().map(|p| p.shape()[d]).collect();
            prop_assert_eq!(&got_sizes, &want_sizes, "split sizes");
            let mut start = 0;
            for p in &pieces {
                prop_assert!(p.storage().same(t.storage()), "split pieces are views");
                let len = p.shape()[d];
                check_exact("split piece", &read(p), &r.slice(d, start, len, 1))?;
                start += len;
            }
        }
        // chunk(c): torch.chunk's sizes: ceil(n / c) each, as many as needed.
        let c = size;
        let chunks = no_panic("chunk", || t.chunk(c as i64, dim))?;
        if c == 0 {
            expect_err("chunk(0)", chunks, &["chunk"])?;
        } else {
            let chunks = chunks.unwrap();
            let each = n.div_ceil(c).max(1);
            let want_sizes: Vec<usize> = if n == 0 {
                // torch.chunk of an empty dim gives `c` empty pieces.
                vec![0; c]
            } else {
                (0..n.div_ceil(each)).map(|i| each.min(n - i * each)).collect()
            };
            let got_sizes: Vec<usize> = chunks.iter().map(|p| p.shape()[d]).collect();
            prop_assert_eq!(&got_sizes, &want_sizes, "chunk sizes");
            prop_assert!(chunks.len() <= c);
        }
        // unbind: n slices without the dim.
        let parts = t.unbind(dim).unwrap();
        prop_assert_eq!(parts.len(), n);
        for (i, p) in parts.iter().enumerate() {
            check_exact("unbind", &read(p), &r.select(d, i))?;
        }
    }
}

/// Permuted copies and binary ops whose rows are contiguous runs of 16 or
/// more (run row by row in place, the rows' offsets carried from row to
/// row): every element lands where its index says, across several wrapping
/// outer dims, serial and parallel.
#[test]
fn permuted_rows_of_contiguous_runs_land_in_place() {
    let shape = [6usize, 10, 8, 8, 17];
    let n: usize = shape.iter().product();
    let x = Tensor::arange(n as i64)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap()
        .reshape([6, 10, 8, 8, 17])
        .unwrap();
    let perm = [2usize, 0, 3, 1, 4];
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| {
            let p = x.permute([2, 0, 3, 1, 4]).unwrap();
            let c = p.contiguous().unwrap();
            let s = p.add(&p).unwrap();
            let (cv, sv) = (c.to_vec::<f32>().unwrap(), s.to_vec::<f32>().unwrap());
            let ps: Vec<usize> = perm.iter().map(|&d| shape[d]).collect();
            let mut k = 0;
            for i0 in 0..ps[0] {
                for i1 in 0..ps[1] {
                    for i2 in 0..ps[2] {
                        for i3 in 0..ps[3] {
                            for i4 in 0..ps[4] {
                                // Source index: position perm[j] holds i_j.
                                let mut src = [0usize; 5];
                                for (j, &i) in [i0, i1, i2, i3, i4].iter().enumerate() {
                                    src[perm[j]] = i;
                                }
                                let lin = src.iter().zip(&shape).fold(0, |acc, (&i, &d)| acc * d + i);
                                assert_eq!(cv[k], lin as f32, "copy at {k}, threads {threads}");
                                assert_eq!(sv[k], 2.0 * lin as f32, "add at {k}, threads {threads}");
                                k += 1;
                            }
                        }
                    }
                }
            }
            assert_eq!(k, n);
        });
    }
}
