//! Branch-free f32 math that the compiler vectorises (Cephes-style range
//! reduction and minimax polynomials, about 1 ulp), for the hot unary ops.
//! f64 uses the standard library.

/// e^x for f32, handling overflow, underflow (with subnormals), ±inf and NaN.
#[inline(always)]
pub(crate) fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    // NaN is replaced here (and restored at the end) so the conversion below is exact.
    let xc = if x.is_nan() { 0.0 } else { x.clamp(-104.0, 89.0) };
    let n = (xc * LOG2E).round_ties_even();
    let r = xc - n * C1 - n * C2;
    let z = r * r;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 1.666_666_5e-1)
        * r
        + 0.5;
    let y = p * z + r + 1.0;
    // 2^n split in two factors so that n in [-150, 129] stays representable.
    // SAFETY: n is an integer in [-151, 129] (x was clamped and is not NaN).
    let ni: i32 = unsafe { n.to_int_unchecked() };
    let n1 = ni >> 1;
    let n2 = ni - n1;
    let s1 = f32::from_bits(((n1 + 127) as u32) << 23);
    let s2 = f32::from_bits(((n2 + 127) as u32) << 23);
    let res = y * s1 * s2;
    if x.is_nan() { x } else { res }
}

/// ln(x) for f32: -inf at 0, NaN below 0, inf at inf.
#[inline(always)]
pub(crate) fn log_f32(x: f32) -> f32 {
    const SQRTHF: f32 = std::f32::consts::FRAC_1_SQRT_2;
    // Normalise subnormals.
    let sub = x < f32::MIN_POSITIVE;
    let xs = if sub { x * 8_388_608.0 } else { x };
    let bits = xs.to_bits();
    let mut e = ((bits >> 23) & 0xff) as i32 - 126;
    if sub {
        e -= 23;
    }
    let mut m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000); // in [0.5, 1)
    let small = m < SQRTHF;
    e -= small as i32;
    m = if small { m + m - 1.0 } else { m - 1.0 };
    let z = m * m;
    let mut y = (((((((7.037_683_6e-2 * m - 1.151_461e-1) * m + 1.167_699_9e-1) * m - 1.242_014_1e-1) * m
        + 1.424_932_3e-1)
        * m
        - 1.666_805_8e-1)
        * m
        + 2.000_071_4e-1)
        * m
        - 2.499_999_4e-1)
        * m
        + 3.333_333e-1;
    y *= m * z;
    let ef = e as f32;
    y += -2.121_944_4e-4 * ef;
    y += -0.5 * z;
    let r = m + y + 0.693_359_4 * ef;
    if x.is_nan() || x < 0.0 {
        f32::NAN
    } else if x == 0.0 {
        f32::NEG_INFINITY
    } else if x == f32::INFINITY {
        x
    } else {
        r
    }
}

/// tanh(x) for f32.
#[inline(always)]
pub(crate) fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    // Small |x|: odd polynomial (Cephes tanhf), accurate where 1 - 2/(e^2x+1) cancels.
    let z = x * x;
    let small = ((((-5.704_988_7e-3 * z + 2.063_909e-2) * z - 5.373_971_6e-2) * z + 1.333_144_2e-1) * z
        - 3.333_332_8e-1)
        * z
        * x
        + x;
    // tanh(±0) is ±0: the polynomial's `(-c * 0) * -0 + -0` would be +0.
    let small = if x == 0.0 { x } else { small };
    let e = exp_f32(2.0 * a.min(20.0));
    let large = 1.0 - 2.0 / (e + 1.0);
    let large = if x < 0.0 { -large } else { large };
    if a < 0.625 || x.is_nan() { small } else { large }
}

/// The logistic function 1 / (1 + e^-x).
#[inline(always)]
pub(crate) fn sigmoid_f32(x: f32) -> f32 {
    1.0 / (1.0 + exp_f32(-x))
}

/// ln(1 + x), accurate near 0.
#[inline(always)]
pub(crate) fn log1p_f32(x: f32) -> f32 {
    // log(u) * x / (u - 1) with u = 1 + x corrects the rounding of 1 + x.
    let u = 1.0 + x;
    let d = u - 1.0;
    let l = log_f32(u);
    if d == 0.0 {
        x
    } else if u == f32::INFINITY {
        u
    } else {
        l * (x / d)
    }
}

/// e^x - 1, accurate near 0.
#[inline(always)]
pub(crate) fn expm1_f32(x: f32) -> f32 {
    // Kahan's trick: (u - 1) * x / ln(u) with u = e^x.
    let u = exp_f32(x);
    let um1 = u - 1.0;
    if u == 1.0 {
        x
    } else if um1 == -1.0 {
        -1.0
    } else if u == f32::INFINITY {
        u
    } else {
        um1 * (x / log_f32(u))
    }
}

/// `e^(x - n·ln 2)` for the integer `n` nearest `x·log2 e`, in [0.7, 1.42]:
/// Cody-Waite reduction `r = x - n·ln 2` (ln 2 in two parts) and the
/// minimax polynomial of [`exp_f32`], in fused multiply-adds; the exps
/// below scale it by `2^n`.
#[inline(always)]
fn exp_reduced_fma(x: f32, n: f32) -> f32 {
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    let r = n.mul_add(-C2, n.mul_add(-C1, x));
    let z = r * r;
    let p = 1.987_569_1e-4f32
        .mul_add(r, 1.398_199_9e-3)
        .mul_add(r, 8.333_452e-3)
        .mul_add(r, 4.166_579_6e-2)
        .mul_add(r, 1.666_666_5e-1)
        .mul_add(r, 0.5);
    p.mul_add(z, r) + 1.0
}

/// e^x for f32 as [`exp_f32`] (same range reduction, polynomial and
/// handling of overflow, underflow, ±inf and NaN) evaluated with fused
/// multiply-adds: fewer instructions, and one rounding less per step.
/// `mul_add` rounds once on every instruction set (a hardware FMA under
/// AVX2 / AVX-512, the C library's `fmaf` in the baseline build, which is
/// slow but exact), so the bits do not depend on the machine. Used by the
/// kernels of softmax, log_softmax, their derivatives and GELU.
#[inline(always)]
pub(crate) fn exp_f32_fma(x: f32) -> f32 {
    let xc = if x.is_nan() { 0.0 } else { x.clamp(-104.0, 89.0) };
    let n = (xc * std::f32::consts::LOG2_E).round_ties_even();
    let y = exp_reduced_fma(xc, n);
    // SAFETY: n is an integer in [-151, 129] (x was clamped and is not NaN).
    let ni: i32 = unsafe { n.to_int_unchecked() };
    let n1 = ni >> 1;
    let n2 = ni - n1;
    let s1 = f32::from_bits(((n1 + 127) as u32) << 23);
    let s2 = f32::from_bits(((n2 + 127) as u32) << 23);
    let res = y * s1 * s2;
    if x.is_nan() { x } else { res }
}

/// `exp(h)` for GELU's `h = -x²/2`: the range reduction and polynomial of
/// [`exp_f32_fma`] (about 1 ulp), with `n = round(h·log2 e)` read from the
/// bits of `h·log2 e + 1.5·2^23` (one fused multiply-add, no rounding or
/// conversion instructions) and `2^n` added into the exponent bits. Exact
/// 0 below -86.5, where `exp(h) < 2^-124` (so the exponent never leaves
/// the normal range) and vanishes next to the 1 that GELU adds it to. A
/// NaN argument gives some number: GELU carries the NaN in its other
/// factors.
#[inline(always)]
fn exp_gelu(h: f32) -> f32 {
    const SHIFT: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer.
    let nf = h.mul_add(std::f32::consts::LOG2_E, SHIFT);
    let y = exp_reduced_fma(h, nf - SHIFT);
    // For h in [-86.5, 0], n = nf - SHIFT is an integer in [-125, 0] and
    // the low bits of nf hold it; y is in [0.7, 1.42], so adding n to its
    // exponent field stays a normal number.
    let n_bits = nf.to_bits().wrapping_sub(SHIFT.to_bits());
    let e = f32::from_bits(y.to_bits().wrapping_add(n_bits << 23));
    if h < -86.5 { 0.0 } else { e }
}

/// The lower normal tail of GELU's erf form, `q = Φ(-|x|) = erfc(|x|/√2)/2`
/// by the Abramowitz-Stegun 7.1.26 formula (the erf of PyTorch's
/// vectorised CPU kernels; absolute error 7.5e-8 here), with
/// `e = exp(-x²/2)`, which the derivative reuses. `q = e·t·r/2` with
/// `t = 1/(1 + p|x|/√2)`; the 1/√2 and the 1/2 are folded into the
/// constants (the halving is exact). q is 0 for |x| = ∞.
#[inline(always)]
fn gelu_tail(x: f32) -> (f32, f32) {
    const P: f32 = (0.327_591_1f64 * std::f64::consts::FRAC_1_SQRT_2) as f32;
    let t = 1.0 / P.mul_add(x.abs(), 1.0);
    let r = (1.061_405_4f32 * 0.5)
        .mul_add(t, -1.453_152 * 0.5)
        .mul_add(t, 1.421_413_8 * 0.5)
        .mul_add(t, -0.284_496_74 * 0.5)
        .mul_add(t, 0.254_829_6 * 0.5);
    let e = exp_gelu((x * x) * -0.5);
    ((e * t) * r, e)
}

/// GELU (erf form) in f32: `x·Φ(x)`, computed as `x·q` for x ≤ 0 (so
/// `gelu(-0) = -0`) and `x - x·q` for the others, with `q = Φ(-|x|)` from [`gelu_tail`]
/// (within 1.5e-7·|x|/2 of the exact value, as PyTorch's vectorised
/// kernel). `gelu(±inf)` is NaN (`inf·0`), as in PyTorch's AVX-512 kernel.
#[inline(always)]
pub(crate) fn gelu_f32(x: f32) -> f32 {
    let (q, _) = gelu_tail(x);
    let xq = x * q;
    if x <= 0.0 { xq } else { x - xq }
}

/// `g·gelu'(x) = g·(Φ(x) + x·φ(x))` in f32 (erf form), with `Φ` from
/// [`gelu_tail`] and the density `φ(x) = exp(-x²/2)/√(2π)` from its
/// exponential. NaN at ±inf, as [`gelu_f32`].
#[inline(always)]
pub(crate) fn gelu_grad_f32(g: f32, x: f32) -> f32 {
    const INV_SQRT_2PI: f32 = (std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2 * 0.5) as f32;
    let (q, e) = gelu_tail(x);
    let cdf = if x <= 0.0 { q } else { 1.0 - q };
    g * (x * INV_SQRT_2PI).mul_add(e, cdf)
}

/// The error function (scalar; not on a hot path yet).
#[inline]
pub(crate) fn erf_f32(x: f32) -> f32 {
    libm::erff(x)
}

/// The error function in f64.
#[inline]
pub(crate) fn erf_f64(x: f64) -> f64 {
    libm::erf(x)
}

macro_rules! erfinv_impl {
    ($name:ident, $t:ty, $erf:path, $exp:path, $ln:path) => {
        /// PyTorch's `calc_erfinv`: a rational first guess (central range
        /// |y| <= 0.7, tail otherwise) refined by two Newton steps, in the
        /// same operation order; NaN outside [-1, 1], ±inf at ±1.
        pub(crate) fn $name(y: $t) -> $t {
            // PyTorch's coefficients are double literals cast to T.
            const A64: [f64; 4] = [0.886226899, -1.645349621, 0.914624893, -0.140543331];
            const B64: [f64; 4] = [-2.118377725, 1.442710462, -0.329097515, 0.012229801];
            const C64: [f64; 4] = [-1.970840454, -1.624906493, 3.429567803, 1.641345311];
            const D64: [f64; 2] = [3.543889200, 1.637067800];
            let (a, b, c, d) = (
                A64.map(|v| v as $t),
                B64.map(|v| v as $t),
                C64.map(|v| v as $t),
                D64.map(|v| v as $t),
            );
            let y_abs = y.abs();
            if y_abs > 1.0 {
                return <$t>::NAN;
            }
            if y_abs == 1.0 {
                return <$t>::INFINITY.copysign(y);
            }
            let mut x = if y_abs <= 0.7 {
                let z = y * y;
                let num = ((a[3] * z + a[2]) * z + a[1]) * z + a[0];
                let dem = (((b[3] * z + b[2]) * z + b[1]) * z + b[0]) * z + 1.0;
                y * num / dem
            } else {
                let z = (-$ln((1.0 - y_abs) / 2.0)).sqrt();
                let num = ((c[3] * z + c[2]) * z + c[1]) * z + c[0];
                let dem = (d[1] * z + d[0]) * z + 1.0;
                num.copysign(y) / dem
            };
            let two_over_sqrt_pi: $t = 2.0 / (std::f64::consts::PI.sqrt() as $t);
            for _ in 0..2 {
                x -= ($erf(x) - y) / (two_over_sqrt_pi * $exp(-x * x));
            }
            x
        }
    };
}

erfinv_impl!(erfinv_f32, f32, libm::erff, libm::expf, libm::logf);
erfinv_impl!(erfinv_f64, f64, libm::erf, libm::exp, libm::log);

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f32) -> u32 {
        if a == b {
            return 0;
        }
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
    }

    #[test]
    fn exp_log_tanh_accuracy() {
        let mut worst = [0u32; 3];
        let mut x = -87.0f32;
        while x < 88.0 {
            worst[0] = worst[0].max(ulps(exp_f32(x), (x as f64).exp() as f32));
            worst[2] = worst[2].max(ulps(tanh_f32(x), (x as f64).tanh() as f32));
            x += 0.0137;
        }
        let mut x = 1e-30f32;
        while x < 1e30 {
            worst[1] = worst[1].max(ulps(log_f32(x), (x as f64).ln() as f32));
            x *= 1.0173;
        }
        assert!(
            worst[0] <= 2 && worst[1] <= 2 && worst[2] <= 4,
            "worst ulps exp/log/tanh: {worst:?}"
        );
        let mut x = -103.0f32;
        let mut worst_fma = 0;
        while x < 88.0 {
            worst_fma = worst_fma.max(ulps(exp_f32_fma(x), (x as f64).exp() as f32));
            x += 0.0137;
        }
        assert!(worst_fma <= 2, "worst ulps of exp_f32_fma: {worst_fma}");
        assert_eq!(exp_f32_fma(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32_fma(f32::INFINITY), f32::INFINITY);
        assert!(exp_f32_fma(f32::NAN).is_nan());
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert!(exp_f32(f32::NAN).is_nan());
        assert_eq!(exp_f32(-100.0), (-100.0f64).exp() as f32);
        assert_eq!(log_f32(0.0), f32::NEG_INFINITY);
        assert!(log_f32(-1.0).is_nan());
        assert_eq!(log_f32(1e-40), (1e-40f32 as f64).ln() as f32);
        assert_eq!(tanh_f32(f32::INFINITY), 1.0);
        assert!((log1p_f32(1e-7) - 1e-7).abs() < 1e-13);
        assert!((expm1_f32(1e-7) - 1e-7).abs() < 1e-13);
    }

    /// GELU and its derivative against the exact values (f64, from erfc):
    /// within 1.5e-7·max(1, |x|) (the Abramowitz-Stegun bound, 1.5e-7 on
    /// erf, so 7.5e-8·|x| on GELU, plus rounding; twice that for the
    /// derivative) on a fine grid of [-20, 20]; special values as PyTorch's.
    #[test]
    fn gelu_accuracy_and_special_values() {
        let (mut worst_y, mut worst_d) = (0.0f64, 0.0f64);
        let mut x = -20.0f32;
        while x < 20.0 {
            let xd = x as f64;
            let cdf = 0.5 * libm::erfc(-xd * std::f64::consts::FRAC_1_SQRT_2);
            let pdf = (-xd * xd / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
            let bound = 1.5e-7 * xd.abs().max(1.0);
            worst_y = worst_y.max((gelu_f32(x) as f64 - xd * cdf).abs() / bound);
            worst_d = worst_d.max((gelu_grad_f32(1.0, x) as f64 - (cdf + xd * pdf)).abs() / bound);
            x += 0.000_731;
        }
        assert!(
            worst_y <= 1.0 && worst_d <= 2.0,
            "gelu error / bound: {worst_y}, derivative: {worst_d}"
        );
        assert_eq!(gelu_f32(0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(gelu_f32(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(gelu_f32(-100.0), 0.0);
        assert_eq!(gelu_f32(100.0), 100.0);
        assert_eq!(gelu_grad_f32(1.0, 0.0), 0.5);
        assert_eq!(gelu_grad_f32(1.0, -100.0), 0.0);
        assert_eq!(gelu_grad_f32(1.0, 100.0), 1.0);
        for v in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
            assert!(gelu_f32(v).is_nan() && gelu_grad_f32(1.0, v).is_nan(), "{v}");
        }
    }
}
