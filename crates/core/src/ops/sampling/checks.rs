//! The argument checks of the random fills, with PyTorch's messages, and
//! the integer ranges `random_` draws from (PyTorch's `random_from_to_impl`
//! and `update_from` / `update_to`).

use crate::ops::Distribution;
use crate::{DType, Error, Result};

/// How C++'s `ostream << double` prints a number in PyTorch's messages
/// (`%g`: six significant digits, trailing zeros dropped; `nan`, `inf`).
pub(crate) fn fmt_g(v: f64) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // Round to six significant digits first; the exponent of the rounded
    // value picks the notation, as printf does.
    let sci = format!("{v:.5e}");
    let (mantissa, exp) = sci.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("an integer exponent");
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), exp.abs())
    } else {
        trim(&format!("{v:.*}", (5 - exp) as usize))
    }
}

/// PyTorch's "`\"kernel\" not implemented for 'Long'`" error.
pub(crate) fn not_implemented(op: &'static str, kernel: &str, dtype: DType) -> Error {
    Error::dtype(
        op,
        dtype,
        format!("\"{kernel}\" not implemented for '{}'", dtype.scalar_type_name()),
    )
}

/// The largest finite value of a float dtype.
fn float_max(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 65504.0,
        DType::BF16 => 3.389_531_389_251_535_5e38,
        DType::F32 => f32::MAX as f64,
        _ => f64::MAX,
    }
}

/// Significand bits of a float dtype (`std::numeric_limits<T>::digits`).
pub(crate) fn float_digits(dtype: DType) -> u32 {
    match dtype {
        DType::F16 => 11,
        DType::BF16 => 8,
        DType::F32 => 24,
        _ => 53,
    }
}

/// Checks a distribution's parameters against the output dtype, in
/// PyTorch's order and with its messages. As PyTorch, some kernels refuse
/// a dtype only when there is something to fill (`numel > 0`).
pub(crate) fn check_distribution(dist: &Distribution, dtype: DType, numel: usize) -> Result<()> {
    let float = dtype.is_floating_point();
    match *dist {
        Distribution::Uniform { low, high } => check_uniform(low, high, dtype),
        Distribution::Normal { std, .. } => {
            if std.is_nan() || std < 0.0 {
                return Err(Error::invalid(
                    "normal_",
                    format!("normal expects std >= 0.0, but found std {}", fmt_g(std)),
                ));
            }
            if !float && numel > 0 {
                return Err(not_implemented("normal_", "normal_kernel_cpu", dtype));
            }
            Ok(())
        }
        Distribution::RandInt { .. } | Distribution::RandIntFrom { .. } => int_draw(dist, dtype, numel).map(|_| ()),
        Distribution::RandomBits => Ok(()),
        Distribution::Bernoulli { p } => {
            if !(0.0..=1.0).contains(&p) {
                return Err(Error::invalid(
                    "bernoulli_",
                    format!("bernoulli_ expects p to be in [0, 1], but got p={}", fmt_g(p)),
                ));
            }
            Ok(())
        }
        Distribution::Exponential { lambd } => {
            if lambd.is_nan() || lambd <= 0.0 {
                return Err(Error::invalid(
                    "exponential_",
                    format!("exponential_ expects lambda > 0.0, but found lambda={}", fmt_g(lambd)),
                ));
            }
            if !float && numel > 0 {
                return Err(Error::dtype(
                    "exponential_",
                    dtype,
                    format!(
                        "Exponential distribution is a continuous probability distribution. dtype must be a \
                         floating point but you specified {}",
                        dtype.scalar_type_name()
                    ),
                ));
            }
            Ok(())
        }
        Distribution::Geometric { p } => {
            if !(p > 0.0 && p < 1.0) {
                return Err(Error::invalid(
                    "geometric_",
                    format!("geometric_ expects p to be in (0, 1), but got p={}", fmt_g(p)),
                ));
            }
            if dtype == DType::Bool && numel > 0 {
                return Err(not_implemented("geometric_", "geometric_cpu", dtype));
            }
            Ok(())
        }
        Distribution::Cauchy { sigma, .. } => {
            if sigma.is_nan() || sigma <= 0.0 {
                return Err(Error::invalid(
                    "cauchy_",
                    format!("cauchy_ expects sigma > 0.0, but found sigma={}", fmt_g(sigma)),
                ));
            }
            if !float {
                return Err(Error::dtype(
                    "cauchy_",
                    dtype,
                    format!(
                        "Cauchy distribution is a continuous probability distribution. dtype must be a floating \
                         point but you specified {}",
                        dtype.cpp_type_name()
                    ),
                ));
            }
            Ok(())
        }
        Distribution::LogNormal { std, .. } => {
            if std.is_nan() || std <= 0.0 {
                return Err(Error::invalid(
                    "log_normal_",
                    format!("log_normal_ expects std > 0.0, but found std={}", fmt_g(std)),
                ));
            }
            if !float && numel > 0 {
                return Err(not_implemented("log_normal_", "log_normal_cpu", dtype));
            }
            Ok(())
        }
    }
}

/// `uniform_impl_`'s checks: bounds within the dtype, `from <= to`, and a
/// span that fits the dtype.
fn check_uniform(from: f64, to: f64, dtype: DType) -> Result<()> {
    if !dtype.is_floating_point() {
        return Err(not_implemented("uniform_", "check_uniform_bounds", dtype));
    }
    let max = float_max(dtype);
    let name = dtype.cpp_type_name();
    if !(from >= -max && from <= max) {
        return Err(Error::invalid("uniform_", format!("from is out of bounds for {name}")));
    }
    if !(to >= -max && to <= max) {
        return Err(Error::invalid("uniform_", format!("to is out of bounds for {name}")));
    }
    if from > to {
        return Err(Error::invalid(
            "uniform_",
            format!(
                "uniform_ expects to return a [from, to) range, but found from={} > to={}",
                fmt_g(from),
                fmt_g(to)
            ),
        ));
    }
    if to - from > max {
        return Err(Error::invalid(
            "uniform_",
            format!(
                "uniform_ expects to-from <= std::numeric_limits<{}>::max(), but found to={} and from={} which \
                 result in to-from to exceed the limit",
                dtype.scalar_type_name(),
                fmt_g(to),
                fmt_g(from)
            ),
        ));
    }
    Ok(())
}

/// What one element of `random_(from, to)` draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IntDraw {
    /// `base + (r % range)`, `r` one 32-bit draw, or one 64-bit draw when
    /// `range >= 2^28` (wrapping, as PyTorch's `uint64_t` arithmetic).
    Range {
        /// Lowest value.
        base: i64,
        /// Number of values (never 0).
        range: u64,
    },
    /// Any 64-bit value (`random_(i64::MIN, None)`): one 64-bit draw.
    Full64,
}

/// `static_cast<int64_t>(static_cast<T>(v))` for a float dtype `T`, as
/// x86-64 computes it (out of range: `i64::MIN`).
fn through_float(dtype: DType, v: i64) -> i64 {
    let f = match dtype {
        DType::F16 => half::f16::from_f32(v as f32).to_f64(),
        DType::BF16 => half::bf16::from_f32(v as f32).to_f64(),
        DType::F32 => v as f32 as f64,
        _ => v as f64,
    };
    if f.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
        i64::MIN
    } else {
        f as i64
    }
}

/// `2^(floor(log2 |v|) - digits + 1)`, 0 when the exponent is negative.
fn ulp_step(v: i64, digits: u32) -> i64 {
    let a = v.unsigned_abs();
    if a == 0 {
        return 0;
    }
    let n = 63 - a.leading_zeros() as i64;
    let e = n - digits as i64 + 1;
    if (0..63).contains(&e) { 1i64 << e } else { 0 }
}

/// PyTorch's `update_from`: moves `from` up onto a value the float dtype holds.
fn update_from(dtype: DType, from: i64) -> i64 {
    let from_plus_1 = through_float(dtype, from.wrapping_add(1));
    if from_plus_1 < from {
        from_plus_1.wrapping_add(ulp_step(from.wrapping_add(1), float_digits(dtype)))
    } else {
        from
    }
}

/// PyTorch's `update_to`: moves `to` down onto a value the float dtype holds.
fn update_to(dtype: DType, to: i64) -> i64 {
    let to_minus_1 = through_float(dtype, to.wrapping_sub(1));
    if to_minus_1 >= to {
        to_minus_1.wrapping_sub(ulp_step(to.wrapping_sub(1), float_digits(dtype)))
    } else {
        to
    }
}

/// `check_from_to_in_range`: `from` and `to_inc` within the dtype.
fn check_in_range(from: i64, to_inc: i64, dtype: DType) -> Result<()> {
    let (lo, hi) = match dtype {
        DType::Bool => (0.0, 1.0),
        DType::U8 => (0.0, 255.0),
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        DType::I64 => (i64::MIN as f64, i64::MAX as f64),
        d => (-float_max(d), float_max(d)),
    };
    let name = dtype.cpp_type_name();
    // In f64 for float dtypes, as PyTorch compares; integers exactly.
    let inside = |v: i64| {
        if dtype.is_floating_point() {
            v as f64 >= lo && v as f64 <= hi
        } else {
            v as i128 >= lo as i128 && v as i128 <= hi as i128
        }
    };
    if !inside(from) {
        return Err(Error::invalid("random_", format!("from is out of bounds for {name}")));
    }
    if !inside(to_inc) {
        return Err(Error::invalid("random_", format!("to - 1 is out of bounds for {name}")));
    }
    Ok(())
}

/// The draws of `random_(from, to)` ([`Distribution::RandInt`]) and
/// `random_(from, None)` ([`Distribution::RandIntFrom`]) for `dtype`, or
/// PyTorch's error.
pub(crate) fn int_draw(dist: &Distribution, dtype: DType, numel: usize) -> Result<IntDraw> {
    let float = dtype.is_floating_point();
    match *dist {
        Distribution::RandInt { low, high } => {
            if low >= high {
                return Err(Error::invalid(
                    "random_",
                    format!("random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"),
                ));
            }
            let (mut from, mut to) = (low, high);
            if float {
                from = update_from(dtype, from);
                to = update_to(dtype, to);
                if from >= to {
                    return Err(Error::invalid(
                        "random_",
                        format!(
                            "random_ expects 'from' casted to dtype to be less than 'to' casted to dtype, but got \
                             from={from} >= to={to}"
                        ),
                    ));
                }
            }
            check_in_range(from, to.wrapping_sub(1), dtype)?;
            Ok(IntDraw::Range {
                base: from,
                range: (to as u64).wrapping_sub(from as u64),
            })
        }
        Distribution::RandIntFrom { low } if low != i64::MIN => {
            let mut from = low;
            let to_inc = if float {
                let to_inc = 1i64 << float_digits(dtype);
                from = update_from(dtype, from);
                if from >= to_inc {
                    return Err(Error::invalid(
                        "random_",
                        format!(
                            "random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted to \
                             dtype, but got from={from} > to_inc={to_inc}"
                        ),
                    ));
                }
                to_inc
            } else {
                match dtype {
                    DType::Bool => 1,
                    DType::U8 => u8::MAX as i64,
                    DType::I32 => i32::MAX as i64,
                    _ => i64::MAX,
                }
            };
            check_in_range(from, to_inc, dtype)?;
            Ok(IntDraw::Range {
                base: from,
                range: (to_inc as u64).wrapping_sub(from as u64).wrapping_add(1),
            })
        }
        Distribution::RandIntFrom { .. } => {
            if !matches!(dtype, DType::I64 | DType::F64 | DType::F32 | DType::BF16) && numel > 0 {
                return Err(Error::dtype(
                    "random_",
                    dtype,
                    "random_full_64_bits_range_kernel_cpu handles only int64, double, float and bfloat16",
                ));
            }
            Ok(IntDraw::Full64)
        }
        _ => Err(Error::invalid("random_", "not an integer distribution")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_cpp_streams_do() {
        for (v, s) in [
            (1.5, "1.5"),
            (-1.0, "-1"),
            (0.0, "0"),
            (2.0, "2"),
            (1e-3, "0.001"),
            (1e-5, "1e-05"),
            (3e38, "3e+38"),
            (123456789.0, "1.23457e+08"),
            (0.1, "0.1"),
            (1.0 / 3.0, "0.333333"),
            (100000.0, "100000"),
            (999999.5, "1e+06"),
            (f64::NAN, "nan"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(fmt_g(v), s, "{v}");
        }
    }

    #[test]
    fn float_bounds_move_onto_representable_values() {
        // 2^24 + 3 rounds up to 2^24 + 4 in f32: `to` moves down to 2^24 + 2.
        let d = int_draw(
            &Distribution::RandInt {
                low: 0,
                high: (1 << 24) + 4,
            },
            DType::F32,
            1,
        );
        assert_eq!(
            d.unwrap(),
            IntDraw::Range {
                base: 0,
                range: (1 << 24) + 2
            }
        );
        assert!(int_draw(&Distribution::RandInt { low: 0, high: 300 }, DType::U8, 1).is_err());
        assert_eq!(
            int_draw(&Distribution::RandIntFrom { low: i64::MIN }, DType::I64, 1).unwrap(),
            IntDraw::Full64
        );
    }
}
