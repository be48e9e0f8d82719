//! Property tests of pointwise ops: random broadcastable shapes, strided /
//! permuted / expanded inputs, every dtype, tensor / 0-d / scalar operands.
//! Expected values come from a naive reference that applies PyTorch's
//! `result_type` promotion (re-implemented in `common`), converts operands
//! as C++ `static_cast` does, computes in f64 (floats) or exact wrapping i64
//! arithmetic (integers) and rounds to the result dtype.

mod common;

use common::*;
use ferrotorch_core::backend::TensorExt;
use ferrotorch_core::{DType, Operand, Scalar, Tensor};
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// Operands
// ---------------------------------------------------------------------------

/// The second operand of a binary op.
#[derive(Debug, Clone)]
enum Rhs {
    /// A tensor (0-d when its shape is empty).
    Tensor {
        dt: DType,
        shape: Vec<usize>,
        recipe: Recipe,
    },
    /// A Python scalar.
    Scalar(Scalar),
}

fn dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(DTYPES.to_vec())
}

fn scalar() -> impl Strategy<Value = Scalar> {
    prop_oneof![
        any::<bool>().prop_map(Scalar::Bool),
        (-20i64..=20).prop_map(Scalar::Int),
        prop_oneof![Just(i64::MAX), Just(i64::MIN), Just(300), Just(-300), Just(1 << 40)].prop_map(Scalar::Int),
        (-40i64..=40).prop_map(|k| Scalar::Float(k as f64 / 8.0)),
        prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(0.1)].prop_map(Scalar::Float),
    ]
}

/// An output shape, and the shapes of two operands broadcasting to it
/// (either may be the bigger one).
fn broadcast_pair() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<usize>)> {
    (shape(4, 4), 0usize..=4, any::<u32>(), 0usize..=4, any::<u32>()).prop_map(|(out, ka, ma, kb, mb)| {
        let a = broadcastable_to(&out, ka, ma);
        let b = broadcastable_to(&out, kb, mb);
        let full = broadcast_shapes(&a, &b).unwrap();
        (full, a, b)
    })
}

fn arg_of_tensor(dt: DType, shape: &[usize]) -> Arg {
    if shape.is_empty() { Arg::Zero(dt) } else { Arg::Dim(dt) }
}

fn scalar_v(s: Scalar) -> (V, DType) {
    match s {
        Scalar::Bool(b) => (V::I(b as i64), DType::Bool),
        Scalar::Int(i) => (V::I(i), DType::I64),
        Scalar::Float(f) => (V::F(f), DType::F64),
    }
}

// ---------------------------------------------------------------------------
// Binary ops
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
    Minimum,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Xor,
}

const BINS: [Bin; 15] = [
    Bin::Add,
    Bin::Sub,
    Bin::Mul,
    Bin::Div,
    Bin::Maximum,
    Bin::Minimum,
    Bin::Eq,
    Bin::Ne,
    Bin::Lt,
    Bin::Le,
    Bin::Gt,
    Bin::Ge,
    Bin::And,
    Bin::Or,
    Bin::Xor,
];

impl Bin {
    fn name(self) -> &'static str {
        match self {
            Bin::Add => "add",
            Bin::Sub => "sub",
            Bin::Mul => "mul",
            Bin::Div => "div",
            Bin::Maximum => "maximum",
            Bin::Minimum => "minimum",
            Bin::Eq => "eq",
            Bin::Ne => "ne",
            Bin::Lt => "lt",
            Bin::Le => "le",
            Bin::Gt => "gt",
            Bin::Ge => "ge",
            Bin::And => "logical_and",
            Bin::Or => "logical_or",
            Bin::Xor => "logical_xor",
        }
    }

    fn predicate(self) -> bool {
        !matches!(
            self,
            Bin::Add | Bin::Sub | Bin::Mul | Bin::Div | Bin::Maximum | Bin::Minimum
        )
    }

    fn logical(self) -> bool {
        matches!(self, Bin::And | Bin::Or | Bin::Xor)
    }

    fn call(self, a: &Tensor, b: Operand) -> ferrotorch_core::Result<Tensor> {
        match self {
            Bin::Add => a.add(b),
            Bin::Sub => a.sub(b),
            Bin::Mul => a.mul(b),
            Bin::Div => a.div(b),
            Bin::Maximum => a.maximum(b),
            Bin::Minimum => a.minimum(b),
            Bin::Eq => a.eq(b),
            Bin::Ne => a.ne(b),
            Bin::Lt => a.lt(b),
            Bin::Le => a.le(b),
            Bin::Gt => a.gt(b),
            Bin::Ge => a.ge(b),
            Bin::And => a.logical_and(b),
            Bin::Or => a.logical_or(b),
            Bin::Xor => a.logical_xor(b),
        }
    }

    fn call_(self, a: &Tensor, b: Operand) -> ferrotorch_core::Result<Tensor> {
        match self {
            Bin::Add => a.add_(b),
            Bin::Sub => a.sub_(b),
            Bin::Mul => a.mul_(b),
            Bin::Div => a.div_(b),
            Bin::Maximum => a.maximum_(b),
            Bin::Minimum => a.minimum_(b),
            _ => unreachable!("only arithmetic in place"),
        }
    }
}

/// The dtype `op` computes in for promoted dtype `ct`, its output dtype, or
/// `None` when PyTorch raises for these operand dtypes.
fn binary_types(op: Bin, operand_dtypes: &[DType], ct: DType) -> Option<(DType, DType)> {
    match op {
        // sub_check: no bool operand at all (tensor or scalar).
        Bin::Sub if operand_dtypes.contains(&DType::Bool) => None,
        Bin::Div if !is_float(ct) => Some((DType::F32, DType::F32)),
        // Truth values of the operands converted to the common dtype
        // (PyTorch: logical_xor(uint8 tensor, tensor(256)) reads 256 as 0).
        _ if op.logical() => Some((ct, DType::Bool)),
        _ if op.predicate() => Some((ct, DType::Bool)),
        _ => Some((ct, ct)),
    }
}

fn max_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}

fn min_nan(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }
}

/// Whether PyTorch computes `a op b` with `b` kept at float precision instead
/// of rounded to the compute dtype: its CPU `mul` and true `div` kernels
/// take a second operand that is a scalar in the iteration (a wrapped
/// number, a 0-d tensor, or any one-element tensor broadcast over the
/// output) via `original_scalar_value<opmath_t>` when the compute dtype is
/// f16 / bf16.
fn scalar_opmath(op: Bin, compute: DType, b: &Nd<V>) -> bool {
    matches!(op, Bin::Mul | Bin::Div) && matches!(compute, DType::F16 | DType::BF16) && b.numel() == 1
}

/// The reference of `a op b`: `a` has dtype `a_dt`, `b` (dtype `b_dt`)
/// broadcasts with it; operands are converted to `compute` (`b` to f32 where
/// [`scalar_opmath`] says), the result rounded to `out`.
fn binary_reference(op: Bin, a: &Nd<V>, b: &Nd<V>, b_dt: DType, compute: DType, out: DType) -> Nd<V> {
    let f32_b = scalar_opmath(op, compute, b);
    zip_broadcast(a, b, |x, y| {
        if f32_b {
            let (x, y) = (cast(x, compute).f() as f32, cast(cast(y, b_dt), DType::F32).f() as f32);
            cast(V::F((if op == Bin::Mul { x * y } else { x / y }) as f64), out)
        } else {
            ref_binary(op, compute, out, cast(x, compute), cast(cast(y, b_dt), compute))
        }
    })
}

/// `a op b` for operands already converted to the compute dtype `ct`.
fn ref_binary(op: Bin, ct: DType, out: DType, a: V, b: V) -> V {
    let r = match op {
        Bin::And => V::I((a.nonzero() && b.nonzero()) as i64),
        Bin::Or => V::I((a.nonzero() || b.nonzero()) as i64),
        Bin::Xor => V::I((a.nonzero() != b.nonzero()) as i64),
        Bin::Eq | Bin::Ne | Bin::Lt | Bin::Le | Bin::Gt | Bin::Ge => {
            let r = if is_float(ct) {
                let (x, y) = (a.f(), b.f());
                match op {
                    Bin::Eq => x == y,
                    Bin::Ne => x != y,
                    Bin::Lt => x < y,
                    Bin::Le => x <= y,
                    Bin::Gt => x > y,
                    _ => x >= y,
                }
            } else {
                let (x, y) = (a.i(), b.i());
                match op {
                    Bin::Eq => x == y,
                    Bin::Ne => x != y,
                    Bin::Lt => x < y,
                    Bin::Le => x <= y,
                    Bin::Gt => x > y,
                    _ => x >= y,
                }
            };
            V::I(r as i64)
        }
        _ if is_float(ct) => {
            let (x, y) = (a.f(), b.f());
            V::F(match op {
                Bin::Add => x + y,
                Bin::Sub => x - y,
                Bin::Mul => x * y,
                Bin::Div => x / y,
                Bin::Maximum => max_nan(x, y),
                _ => min_nan(x, y),
            })
        }
        _ if ct == DType::Bool => {
            let (x, y) = (a.nonzero(), b.nonzero());
            V::I(match op {
                Bin::Add | Bin::Maximum => x || y,
                _ => x && y,
            } as i64)
        }
        _ => {
            let (x, y) = (a.i(), b.i());
            V::I(match op {
                Bin::Add => x.wrapping_add(y),
                Bin::Sub => x.wrapping_sub(y),
                Bin::Mul => x.wrapping_mul(y),
                Bin::Maximum => x.max(y),
                _ => x.min(y),
            })
        }
    };
    cast(r, out)
}

/// Materialised second operand: the operand, its reference values and its
/// dtype as seen by promotion.
struct RhsBuilt {
    t: Option<Tensor>,
    scalar: Option<Scalar>,
    vals: Nd<V>,
    arg: Arg,
    dt: DType,
}

impl RhsBuilt {
    fn operand(&self) -> Operand<'_> {
        match (&self.t, self.scalar) {
            (Some(t), _) => Operand::Tensor(t),
            (None, Some(s)) => Operand::Scalar(s),
            _ => unreachable!(),
        }
    }
}

fn build_rhs(rhs: &Rhs, rng: &mut Prng, vals: Vals) -> RhsBuilt {
    match rhs {
        Rhs::Tensor { dt, shape, recipe } => {
            let (t, v) = strided(*dt, shape, recipe, rng, vals);
            RhsBuilt {
                t: Some(t),
                scalar: None,
                vals: v,
                arg: arg_of_tensor(*dt, shape),
                dt: *dt,
            }
        }
        Rhs::Scalar(s) => {
            let (v, dt) = scalar_v(*s);
            RhsBuilt {
                t: None,
                scalar: Some(*s),
                vals: Nd::scalar(v),
                arg: Arg::Wrapped(dt),
                dt,
            }
        }
    }
}

fn out_tolerance(_dt: DType) -> (f64, f64) {
    // +, -, *, /, max, min of representable values are correctly rounded:
    // PyTorch's results are exact roundings of the f64 reference.
    (0.0, 0.0)
}

fn rhs_strategy(b_shape: Vec<usize>) -> impl Strategy<Value = Rhs> {
    prop_oneof![
        4 => (dtype(), recipe()).prop_map(move |(dt, recipe)| Rhs::Tensor { dt, shape: b_shape.clone(), recipe }),
        1 => dtype().prop_map(|dt| Rhs::Tensor { dt, shape: vec![], recipe: Recipe::Contiguous }),
        2 => scalar().prop_map(Rhs::Scalar),
    ]
}

fn binary_case() -> impl Strategy<Value = (Bin, DType, Vec<usize>, Recipe, Rhs, u64, bool)> {
    broadcast_pair().prop_flat_map(|(_, a, b)| {
        (
            prop::sample::select(BINS.to_vec()),
            dtype(),
            Just(a),
            recipe(),
            rhs_strategy(b),
            any::<u64>(),
            any::<bool>(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `a op b` for broadcastable, strided operands of any dtypes matches
    /// the promoted reference (values, shape and dtype), or fails naming the
    /// op exactly when PyTorch raises.
    #[test]
    fn binary_ops((op, a_dt, a_shape, a_recipe, rhs, seed, wild) in binary_case()) {
        // maximum/minimum take tensors only in PyTorch.
        prop_assume!(!(matches!(op, Bin::Maximum | Bin::Minimum) && matches!(rhs, Rhs::Scalar(_))));
        let mut rng = Prng(seed);
        let vals = if wild { Vals::Wild } else { Vals::Small };
        let (a, av) = strided(a_dt, &a_shape, &a_recipe, &mut rng, vals);
        let b = build_rhs(&rhs, &mut rng, vals);
        let ct = result_type(&[arg_of_tensor(a_dt, &a_shape), b.arg]);
        let what = format!("{}({a_dt}{a_shape:?}, {:?}) [ct {ct}]", op.name(), rhs);
        let got = no_panic(&what, || op.call(&a, b.operand()))?;
        let Some((compute, out)) = binary_types(op, &[a_dt, b.dt], ct) else {
            return expect_err(&what, got, &[op.name()]);
        };
        let got = got.map_err(|e| TestCaseError::fail(format!("{what}: unexpected error: {e}")))?;
        prop_assert_eq!(got.dtype(), out, "{}: result dtype", what);
        let want = binary_reference(op, &av, &b.vals, b.dt, compute, out);
        let (atol, rtol) = out_tolerance(out);
        check_close(&what, &read(&got), &want, &|_| atol, rtol)?;
    }
}

// ---------------------------------------------------------------------------
// Unary ops and clamp
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq)]
enum Un {
    Neg,
    Abs,
    Relu,
    Floor,
    Round,
    Sign,
    Exp,
    Sqrt,
    Log,
    Tanh,
    Sigmoid,
}

const UNS: [Un; 11] = [
    Un::Neg,
    Un::Abs,
    Un::Relu,
    Un::Floor,
    Un::Round,
    Un::Sign,
    Un::Exp,
    Un::Sqrt,
    Un::Log,
    Un::Tanh,
    Un::Sigmoid,
];

impl Un {
    fn name(self) -> &'static str {
        match self {
            Un::Neg => "neg",
            Un::Abs => "abs",
            Un::Relu => "relu",
            Un::Floor => "floor",
            Un::Round => "round",
            Un::Sign => "sign",
            Un::Exp => "exp",
            Un::Sqrt => "sqrt",
            Un::Log => "log",
            Un::Tanh => "tanh",
            Un::Sigmoid => "sigmoid",
        }
    }

    fn float_only(self) -> bool {
        matches!(self, Un::Exp | Un::Sqrt | Un::Log | Un::Tanh | Un::Sigmoid)
    }

    fn call(self, x: &Tensor) -> ferrotorch_core::Result<Tensor> {
        match self {
            Un::Neg => x.neg(),
            Un::Abs => x.abs(),
            Un::Relu => x.relu(),
            Un::Floor => x.floor(),
            Un::Round => x.round(),
            Un::Sign => x.sign(),
            Un::Exp => x.exp(),
            Un::Sqrt => x.sqrt(),
            Un::Log => x.log(),
            Un::Tanh => x.tanh(),
            Un::Sigmoid => x.sigmoid(),
        }
    }

    /// The result in f64 (floats) or exact i64 (integers, before wrapping).
    fn eval(self, v: V) -> V {
        match v {
            V::I(i) => V::I(match self {
                Un::Neg => i.wrapping_neg(),
                Un::Abs => i.wrapping_abs(),
                Un::Relu => i.max(0),
                Un::Sign => i.signum(),
                Un::Floor | Un::Round => i,
                _ => unreachable!("float-only ops see floats"),
            }),
            V::F(x) => V::F(match self {
                Un::Neg => -x,
                Un::Abs => x.abs(),
                Un::Relu => {
                    if x > 0.0 || x.is_nan() {
                        x
                    } else {
                        0.0
                    }
                }
                Un::Floor => x.floor(),
                Un::Round => x.round_ties_even(),
                Un::Sign => {
                    if x > 0.0 {
                        1.0
                    } else if x < 0.0 {
                        -1.0
                    } else {
                        0.0
                    }
                }
                Un::Exp => x.exp(),
                Un::Sqrt => x.sqrt(),
                Un::Log => x.ln(),
                Un::Tanh => x.tanh(),
                Un::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            }),
        }
    }

    /// Relative tolerance: exact ops are compared exactly; transcendental
    /// ones within a few ulps of the output dtype.
    fn rtol(self, dt: DType) -> f64 {
        match self {
            Un::Exp | Un::Log | Un::Tanh | Un::Sigmoid => match dt {
                DType::F16 | DType::BF16 => eps(dt),
                _ => 4.0 * eps(dt),
            },
            _ => 0.0,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Unary ops over strided inputs of every dtype: float ops promote
    /// integers and bool to f32; the others keep the dtype, reject bool.
    #[test]
    fn unary_ops(op in prop::sample::select(UNS.to_vec()), dt in dtype(), shape in shape(4, 4), recipe in recipe(), seed in any::<u64>(), wild in any::<bool>()) {
        let mut rng = Prng(seed);
        let (x, xv) = strided(dt, &shape, &recipe, &mut rng, if wild { Vals::Wild } else { Vals::Small });
        let what = format!("{}({dt}{shape:?})", op.name());
        let got = no_panic(&what, || op.call(&x))?;
        if dt == DType::Bool && !op.float_only() && op != Un::Sign {
            return expect_err(&what, got, &[op.name()]);
        }
        let got = got.map_err(|e| TestCaseError::fail(format!("{what}: unexpected error: {e}")))?;
        let out = if op.float_only() && !is_float(dt) { DType::F32 } else { dt };
        prop_assert_eq!(got.dtype(), out, "{}: dtype", what);
        let want = xv.map(|v| {
            let v = cast(v, out);
            let v = if op == Un::Sign && dt == DType::Bool { v } else { op.eval(v) };
            cast(v, out)
        });
        let rtol = op.rtol(out);
        // Transcendentals near zero: an absolute floor of one ulp at 1.
        let atol = if rtol > 0.0 { eps(out) } else { 0.0 };
        check_close(&what, &read(&got), &want, &|_| atol, rtol)?;
    }

    /// `clamp(min, max)` with optional int / float bounds: the result dtype is
    /// `result_type(x, min, max)`; NaN propagates; `min > max` gives `max`.
    #[test]
    fn clamp(dt in dtype(), shape in shape(4, 4), recipe in recipe(), seed in any::<u64>(),
             lo in prop::option::of(bound()), hi in prop::option::of(bound()), wild in any::<bool>()) {
        let mut rng = Prng(seed);
        let (x, xv) = strided(dt, &shape, &recipe, &mut rng, if wild { Vals::Wild } else { Vals::Small });
        // Keep bounds representable in x's dtype (PyTorch range-checks them).
        let fits = |s: &Scalar| match (s, dt) {
            (Scalar::Int(i), DType::U8) => (0..=255).contains(i),
            _ => true,
        };
        prop_assume!(lo.iter().chain(hi.iter()).all(fits));
        let what = format!("clamp({dt}{shape:?}, {lo:?}, {hi:?})");
        let got = no_panic(&what, || x.clamp(lo, hi))?;
        let mut args = vec![arg_of_tensor(dt, &shape)];
        for s in lo.iter().chain(hi.iter()) {
            args.push(Arg::Wrapped(scalar_v(*s).1));
        }
        let ct = result_type(&args);
        if (lo.is_none() && hi.is_none()) || ct == DType::Bool {
            return expect_err(&what, got, &["clamp"]);
        }
        let got = got.map_err(|e| TestCaseError::fail(format!("{what}: unexpected error: {e}")))?;
        prop_assert_eq!(got.dtype(), ct, "{}: dtype", what);
        let lo_v = lo.map(|s| cast(scalar_v(s).0, ct));
        let hi_v = hi.map(|s| cast(scalar_v(s).0, ct));
        let want = xv.map(|v| cast(ref_clamp(cast(v, ct), lo_v, hi_v), ct));
        check_exact(&what, &read(&got), &want)?;
    }

    /// `where(cond, x, y)` broadcasts all three and promotes x and y.
    #[test]
    fn where_op(shapes in broadcast_pair(), ck in 0usize..=4, cm in any::<u32>(), xdt in dtype(), ydt in dtype(),
                xr in recipe(), yr in recipe(), y_scalar in prop::option::of(scalar()), seed in any::<u64>()) {
        let (out, xs, ys) = shapes;
        let cs = broadcastable_to(&out, ck, cm);
        let mut rng = Prng(seed);
        let (c, cv) = strided(DType::Bool, &cs, &Recipe::Contiguous, &mut rng, Vals::Small);
        let (x, xv) = strided(xdt, &xs, &xr, &mut rng, Vals::Wild);
        let y = match y_scalar {
            Some(s) => build_rhs(&Rhs::Scalar(s), &mut rng, Vals::Wild),
            None => build_rhs(&Rhs::Tensor { dt: ydt, shape: ys.clone(), recipe: yr }, &mut rng, Vals::Wild),
        };
        let what = format!("where(bool{cs:?}, {xdt}{xs:?}, {:?})", y_scalar.map_or(format!("{ydt}{ys:?}"), |s| format!("{s:?}")));
        let got = no_panic(&what, || x.where_cond(&c, y.operand()))?
            .map_err(|e| TestCaseError::fail(format!("{what}: unexpected error: {e}")))?;
        let ct = result_type(&[arg_of_tensor(xdt, &xs), y.arg]);
        prop_assert_eq!(got.dtype(), ct, "{}: dtype", what);
        let cx = zip_broadcast(&cv, &xv, |c, x| (c, x));
        let want = zip_broadcast(&cx, &y.vals, |(c, x), yv| {
            if c.nonzero() { cast(x, ct) } else { cast(cast(yv, y.dt), ct) }
        });
        check_exact(&what, &read(&got), &want)?;
    }
}

fn bound() -> impl Strategy<Value = Scalar> {
    prop_oneof![
        (-20i64..=20).prop_map(Scalar::Int),
        (-40i64..=40).prop_map(|k| Scalar::Float(k as f64 / 8.0)),
        Just(Scalar::Float(f64::NAN)),
    ]
}

fn ref_clamp(x: V, lo: Option<V>, hi: Option<V>) -> V {
    match x {
        V::F(_) => {
            let mut r = x.f();
            if let Some(l) = lo {
                r = max_nan(r, l.f());
            }
            if let Some(h) = hi {
                r = min_nan(r, h.f());
            }
            V::F(r)
        }
        V::I(_) => {
            let mut r = x.i();
            if let Some(l) = lo {
                r = r.max(l.i());
            }
            if let Some(h) = hi {
                r = r.min(h.i());
            }
            V::I(r)
        }
    }
}

// ---------------------------------------------------------------------------
// In-place ops
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum InPlace {
    Bin(Bin),
    Clamp(Option<Scalar>, Option<Scalar>),
    Copy,
    Fill(Scalar),
}

fn inplace_op() -> impl Strategy<Value = InPlace> {
    prop_oneof![
        prop::sample::select(vec![Bin::Add, Bin::Sub, Bin::Mul, Bin::Div, Bin::Maximum, Bin::Minimum])
            .prop_map(InPlace::Bin),
        (prop::option::of(bound()), prop::option::of(bound())).prop_map(|(a, b)| InPlace::Clamp(a, b)),
        Just(InPlace::Copy),
        prop_oneof![
            any::<bool>().prop_map(Scalar::Bool),
            (-20i64..=20).prop_map(Scalar::Int),
            (-40i64..=40).prop_map(|k| Scalar::Float(k as f64 / 8.0)),
        ]
        .prop_map(InPlace::Fill),
    ]
}

/// Target recipes that never overlap (PyTorch refuses in-place writes to
/// expanded tensors).
fn target_recipe() -> impl Strategy<Value = Recipe> {
    recipe().prop_filter("non-overlapping target", |r| !matches!(r, Recipe::Expanded(_)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// In-place ops on strided views: the view's elements become the
    /// out-of-place result cast to the target dtype, every other element of
    /// the base is untouched, the shared version counter goes up by exactly
    /// one; when the result dtype cannot be cast to the target's, the call
    /// fails naming the op and nothing changes.
    #[test]
    fn inplace_on_strided_targets(op in inplace_op(), dt in dtype(), (_, a_shape, b_shape) in broadcast_pair(),
                                  recipe in target_recipe(), rhs_dt in dtype(), rhs_recipe in recipe(),
                                  rhs_scalar in prop::option::of(scalar()), seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let target = build(dt, &a_shape, &recipe, &mut rng, Vals::Wild);
        // The operand must broadcast to the target's shape.
        let b_shape: Vec<usize> = b_shape.iter().rev().zip(a_shape.iter().rev())
            .map(|(&b, &a)| if b == a { b } else { 1 }).collect::<Vec<_>>().into_iter().rev().collect();
        let rhs = match rhs_scalar {
            Some(s) => Rhs::Scalar(s),
            None => Rhs::Tensor { dt: rhs_dt, shape: b_shape, recipe: rhs_recipe },
        };
        let b = build_rhs(&rhs, &mut rng, Vals::Wild);
        let t = &target.t;
        let v0 = t.version();
        let tv = target.vals();
        let targ = arg_of_tensor(dt, &a_shape);
        let (name, got, want): (&str, _, Option<Nd<V>>) = match &op {
            InPlace::Bin(k) => {
                prop_assume!(!(matches!(k, Bin::Maximum | Bin::Minimum) && rhs_scalar.is_some()));
                let ct = result_type(&[targ, b.arg]);
                let got = no_panic("in-place", || k.call_(t, b.operand()))?;
                let want = binary_types(*k, &[dt, b.dt], ct)
                    .filter(|&(_, out)| can_cast(out, dt))
                    .map(|(compute, out)| binary_reference(*k, &tv, &b.vals, b.dt, compute, out).map(|v| cast(v, dt)));
                (k.name(), got, want)
            }
            InPlace::Clamp(lo, hi) => {
                let fits = |s: &Scalar| !matches!((s, dt), (Scalar::Int(i), DType::U8) if !(0..=255).contains(i));
                prop_assume!(lo.iter().chain(hi.iter()).all(fits));
                let mut args = vec![targ];
                for s in lo.iter().chain(hi.iter()) {
                    args.push(Arg::Wrapped(scalar_v(*s).1));
                }
                let ct = result_type(&args);
                let got = no_panic("clamp_", || t.clamp_(*lo, *hi))?;
                let ok = (lo.is_some() || hi.is_some()) && ct != DType::Bool && can_cast(ct, dt);
                let want = ok.then(|| {
                    let lo_v = lo.map(|s| cast(scalar_v(s).0, ct));
                    let hi_v = hi.map(|s| cast(scalar_v(s).0, ct));
                    tv.map(|v| cast(cast(ref_clamp(cast(v, ct), lo_v, hi_v), ct), dt))
                });
                ("clamp", got, want)
            }
            InPlace::Copy => {
                let Some(src) = &b.t else { return Ok(()) };
                let got = no_panic("copy_", || t.copy_(src))?;
                let want = zip_broadcast(&tv, &b.vals, |_, y| cast(y, dt));
                ("copy_", got, Some(want))
            }
            InPlace::Fill(s) => {
                let got = no_panic("fill_", || t.fill_(*s))?;
                // PyTorch: a negative float never fits uint8 (-0.0 does).
                let fits = !matches!((s, dt), (Scalar::Float(f), DType::U8) if *f < 0.0);
                ("fill", got, fits.then(|| tv.map(|_| cast(scalar_v(*s).0, dt))))
            }
        };
        let what = format!("{op:?} on {dt}{a_shape:?} strides {:?} with {rhs:?}", t.strides());
        let mut base_want = target.base_vals.clone();
        match want {
            None => {
                expect_err(&what, got, &[name])?;
                prop_assert_eq!(t.version(), v0, "{}: a failed in-place call must not bump the version", what);
            }
            Some(w) => {
                let got = got.map_err(|e| TestCaseError::fail(format!("{what}: unexpected error: {e}")))?;
                prop_assert!(got.is_same(t) || got.storage().same(t.storage()), "{}: returns self", what);
                prop_assert_eq!(t.version(), v0 + 1, "{}: version must go up by one", what);
                for (i, &p) in target.pos.data.iter().enumerate() {
                    base_want.data[p] = w.data[i];
                }
            }
        }
        check_exact(&format!("{what}: base"), &read(&target.base), &base_want)?;
    }

    /// In-place ops whose operand aliases the target (`a.add_(&a)`,
    /// `a.add_(&a.t())`, `a.copy_(&a.t())`, a row of `a` broadcast over it):
    /// PyTorch raises for partial overlap; ferrotorch may instead compute the
    /// result from the values before the write. Either way nothing is half
    /// written, and the version goes up by one on success.
    #[test]
    fn inplace_aliasing(n in 1usize..6, dt in prop::sample::select(vec![DType::F32, DType::F64, DType::I64, DType::I32, DType::F16]),
                        kind in 0usize..6, transposed_target in any::<bool>(), seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let base_vals = random_nd(dt, &[n, n], &mut rng, Vals::Small);
        let base = make(dt, &base_vals);
        let (a, av) = if transposed_target {
            (base.t().unwrap(), base_vals.transpose(0, 1))
        } else {
            (base.clone(), base_vals.clone())
        };
        let at = a.t().unwrap();
        let atv = av.transpose(0, 1);
        let row = a.select(0, 0).unwrap();
        let rowv = av.select(0, 0);
        let v0 = a.version();
        let bin = |k: Bin, x: &Nd<V>, y: &Nd<V>| zip_broadcast(x, y, |p, q| ref_binary(k, dt, dt, p, q));
        let (name, got, want) = match kind {
            0 => ("add", no_panic("add_", || a.add_(&a))?, bin(Bin::Add, &av, &av)),
            1 => ("add", no_panic("add_", || a.add_(&at))?, bin(Bin::Add, &av, &atv)),
            2 => ("mul", no_panic("mul_", || a.mul_(&at))?, bin(Bin::Mul, &av, &atv)),
            3 => ("sub", no_panic("sub_", || a.sub_(&at))?, bin(Bin::Sub, &av, &atv)),
            4 => ("copy_", no_panic("copy_", || a.copy_(&at))?, atv.clone()),
            _ => ("add", no_panic("add_", || a.add_(&row))?, bin(Bin::Add, &av, &rowv)),
        };
        let what = format!("{name} kind {kind} on {dt}[{n}, {n}] (transposed target: {transposed_target})");
        match got {
            Err(e) => {
                prop_assert!(e.to_string().contains(name), "{}: error {} does not name the op", what, e);
                prop_assert_eq!(a.version(), v0);
                check_exact(&what, &read(&a), &av)?;
            }
            Ok(_) => {
                check_exact(&what, &read(&a), &want)?;
                prop_assert_eq!(a.version(), v0 + 1, "{}: version must go up by one", what);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Casts and the promotion rules themselves
// ---------------------------------------------------------------------------

/// Whether converting `v` to `to` is defined (float -> integer of NaN, inf
/// or out-of-range values is undefined behaviour in PyTorch's C++).
fn defined_cast(v: V, to: DType) -> bool {
    match (v, to) {
        (V::F(f), DType::U8 | DType::I32) => f.is_finite() && f.abs() < 2f64.powi(31),
        (V::F(f), DType::I64) => f.is_finite() && f.abs() < 2f64.powi(63),
        _ => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `to_dtype` between any two dtypes converts as C++ `static_cast` does
    /// (integers wrap, floats truncate, nonzero is true, int -> f16/bf16
    /// through float), keeping a dense input's memory order.
    #[test]
    fn casts(from in dtype(), to in dtype(), shape in shape(3, 4), recipe in recipe(), seed in any::<u64>()) {
        let mut rng = Prng(seed);
        let float_to_int = is_float(from) && !is_float(to) && to != DType::Bool;
        let (x, xv) = strided(from, &shape, &recipe, &mut rng, if float_to_int { Vals::Small } else { Vals::Wild });
        prop_assume!(xv.data.iter().all(|&v| defined_cast(v, to)));
        let what = format!("to_dtype({from}{shape:?} strides {:?} -> {to})", x.strides());
        let got = no_panic(&what, || x.to_dtype(to))?.map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
        prop_assert_eq!(got.dtype(), to);
        check_exact(&what, &read(&got), &xv.map(|v| cast(v, to)))?;
        let dense = !matches!(recipe, Recipe::Sliced { .. } | Recipe::SlicedPermuted { .. } | Recipe::Expanded(_));
        if from != to && dense && got.numel() > 1 {
            // preserve_format: a permuted dense input keeps its strides.
            let significant = |t: &Tensor| -> Vec<(usize, usize)> {
                t.shape().iter().zip(t.strides()).filter(|(s, _)| **s != 1).map(|(a, b)| (*a, *b)).collect()
            };
            prop_assert_eq!(significant(&got), significant(&x), "{}: strides", what);
        }
    }

    /// `ferrotorch_core::result_type` agrees with the independent model of
    /// `torch.result_type` over lists of dim tensors, 0-d tensors and scalars.
    #[test]
    fn promotion_rules(ops in prop::collection::vec((0u8..3, dtype(), scalar()), 1..5)) {
        let tensors: Vec<Tensor> = ops.iter().map(|(kind, dt, _)| {
            let shape: &[usize] = if *kind == 0 { &[2] } else { &[] };
            make(*dt, &Nd::new(shape, vec![V::I(0); numel(shape)]))
        }).collect();
        let operands: Vec<Operand> = ops.iter().zip(&tensors).map(|((kind, _, s), t)| {
            if *kind == 2 { Operand::Scalar(*s) } else { Operand::Tensor(t) }
        }).collect();
        let args: Vec<Arg> = ops.iter().map(|(kind, dt, s)| match kind {
            0 => Arg::Dim(*dt),
            1 => Arg::Zero(*dt),
            _ => Arg::Wrapped(scalar_v(*s).1),
        }).collect();
        prop_assert_eq!(ferrotorch_core::result_type(&operands), result_type(&args), "{:?}", args);
        for a in DTYPES {
            for b in DTYPES {
                prop_assert_eq!(a.promote(b), promote_types(a, b), "promote({}, {})", a, b);
            }
        }
    }
}

/// PyTorch's CPU mul for bf16 keeps a one-element *second* operand in f32
/// but rounds a first one to bf16: `int(257) * bf16(1.5)` is 384 (257 rounds
/// to 256), `bf16(1.5) * int(257)` is 386 (385.5 rounded once).
#[test]
fn mul_keeps_only_a_second_scalar_operand_wide() {
    let a = Tensor::new(257i32).unwrap();
    let b = Tensor::new([1.5f32]).unwrap().to_dtype(DType::BF16).unwrap();
    let f = |t: Tensor| t.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(f(a.mul(&b).unwrap()), vec![384.0]);
    assert_eq!(f(b.mul(&a).unwrap()), vec![386.0]);
}
