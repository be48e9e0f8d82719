//! `normal_`: PyTorch's CPU `normal_kernel`.
//!
//! A contiguous output of 16 elements or more takes the block path
//! (`normal_fill`): uniforms are drawn first, then each block of 16 becomes
//! 16 normals by Box-Muller (the first 8 give radii, the last 8 angles),
//! and a partial last block is drawn again as a full block over the last 16
//! elements. f64 draws 53-bit uniforms and uses libm's `log`/`cos`/`sin`;
//! f32, f16 and bf16 draw 24-bit ones and compute in f32 with PyTorch's
//! AVX2 polynomials (`avx_mathfun.h`'s `log256_ps` and `sincos256_ps`, with
//! the fused multiply-adds GCC forms from them, reproduced here exactly).
//! Any other output (fewer elements, or not contiguous) takes the scalar
//! path: one `normal_distribution<double>` sample per element, in memory
//! order, with the generator's cached second Box-Muller value.

use super::{Sampled, fill_in_order};
use crate::backend::cpu::simd::multiversion;
use crate::random::GeneratorState;
use crate::{DType, Result, Tensor};

/// `avx_mathfun.h`'s constants, as f32 bits.
mod c {
    pub const SQRTHF: u32 = 0x3f35_04f3;
    pub const LOG_P: [u32; 9] = [
        0x3d90_21bb,
        0xbdeb_d1b8,
        0x3def_251a,
        0xbdfe_5d4f,
        0x3e11_e9bf,
        0xbe2a_ae50,
        0x3e4c_ceac,
        0xbe7f_fffc,
        0x3eaa_aaaa,
    ];
    pub const Q1: u32 = 0xb95e_8083;
    pub const Q2: u32 = 0x3f31_8000;
    pub const DP1: u32 = 0xbf49_0000;
    pub const DP2: u32 = 0xb97d_a000;
    pub const DP3: u32 = 0xb322_2169;
    pub const SIN_P: [u32; 3] = [0xb94c_a1f9, 0x3c08_839e, 0xbe2a_aaa3];
    pub const COS_P: [u32; 3] = [0x37cc_f5ce, 0xbab6_061a, 0x3d2a_aaa5];
    pub const FOPI: u32 = 0x3fa2_f983;
    /// 2 pi as f32.
    pub const TWO_PI: u32 = 0x40c9_0fdb;
}

#[inline(always)]
fn f(bits: u32) -> f32 {
    f32::from_bits(bits)
}

/// `log256_ps` for one lane, as PyTorch's AVX2 build computes it.
#[inline(always)]
fn log256(x: f32) -> f32 {
    let invalid = x <= 0.0;
    let x = x.max(f(0x0080_0000));
    let bits = x.to_bits();
    let imm0 = (bits >> 23) as i32;
    let mut x = f((bits & !0x7f80_0000) | 0.5f32.to_bits());
    let mut e = (imm0 - 0x7f) as f32 + 1.0;
    let mask = x < f(c::SQRTHF);
    let tmp = if mask { x } else { 0.0 };
    x -= 1.0;
    e -= if mask { 1.0 } else { 0.0 };
    x += tmp;
    let z = x * x;
    let mut y = f(c::LOG_P[0]).mul_add(x, f(c::LOG_P[1]));
    for &p in &c::LOG_P[2..] {
        y = y.mul_add(x, f(p));
    }
    y *= x;
    let tmp = e * f(c::Q1);
    y = y.mul_add(z, tmp);
    y = (-z).mul_add(0.5, y);
    x += y;
    x = e.mul_add(f(c::Q2), x);
    if invalid { f32::NAN } else { x }
}

/// `sincos256_ps` for one lane, as PyTorch's AVX2 build computes it:
/// `(sin x, cos x)`.
#[inline(always)]
fn sincos256(x: f32) -> (f32, f32) {
    let xb = x.to_bits();
    let mut sign_sin = xb & 0x8000_0000;
    let x = f(xb & 0x7fff_ffff);
    // cvttps2dq: truncation (the angles here are small and finite).
    let mut j = (x * f(c::FOPI)) as i32;
    j = j.wrapping_add(1) & !1;
    let y = j as f32;
    let swap_sin = ((j & 4) as u32) << 29;
    let poly = (j & 2) == 0;
    let mut x = y.mul_add(f(c::DP1), x);
    x = y.mul_add(f(c::DP2), x);
    x = y.mul_add(f(c::DP3), x);
    let sign_cos = ((!j.wrapping_sub(2) & 4) as u32) << 29;
    sign_sin ^= swap_sin;
    let z = x * x;
    let mut yc = f(c::COS_P[0]).mul_add(z, f(c::COS_P[1]));
    yc = yc.mul_add(z, f(c::COS_P[2]));
    yc *= z;
    yc = yc.mul_add(z, -(z * 0.5));
    yc += 1.0;
    let mut ys = f(c::SIN_P[0]).mul_add(z, f(c::SIN_P[1]));
    ys = ys.mul_add(z, f(c::SIN_P[2]));
    ys *= z;
    ys = ys.mul_add(x, x);
    let ysin2 = if poly { ys } else { 0.0 };
    let ysin1 = if poly { 0.0 } else { yc };
    let ys = ys - ysin2;
    let yc = yc - ysin1;
    let s = f((ysin1 + ysin2).to_bits() ^ sign_sin);
    let c = f((yc + ys).to_bits() ^ sign_cos);
    (s, c)
}

/// PyTorch's `normal_fill_16_AVX2` on one block of 16 uniforms (f32).
#[inline(always)]
fn block_f32(d: &mut [f32], mean: f32, std: f32) {
    for j in 0..8 {
        let u1 = 1.0 - d[j];
        let u2 = d[j + 8];
        let radius = (-2.0 * log256(u1)).sqrt();
        let theta = f(c::TWO_PI) * u2;
        let (s, c) = sincos256(theta);
        d[j] = (radius * c).mul_add(std, mean);
        d[j + 8] = (radius * s).mul_add(std, mean);
    }
}

/// PyTorch's `normal_fill_16<double>` on one block of 16 uniforms.
fn block_f64(d: &mut [f64], mean: f64, std: f64) {
    for j in 0..8 {
        let u1 = 1.0 - d[j];
        let u2 = d[j + 8];
        let radius = (-2.0 * u1.ln()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * u2;
        d[j] = (radius * theta.cos()).mul_add(std, mean);
        d[j + 8] = (radius * theta.sin()).mul_add(std, mean);
    }
}

multiversion! {
    /// [`block_f32`] over consecutive blocks of 16 (compiled with FMA where
    /// the CPU has it: the fused multiply-adds are single instructions
    /// there instead of libm calls; the results are the same bits).
    fn blocks_f32(d: &mut [f32], mean: f32, std: f32) {
        for blk in d.chunks_exact_mut(16) {
            block_f32(blk, mean, std);
        }
    }
}

/// The block path over `n >= 16` values: `upfront` uniforms drawn first
/// (n for f32 and f64; those of the full blocks for f16 and bf16, which
/// draw each block as they reach it: the same order, since transforming
/// draws nothing), the full blocks transformed, then a partial last block
/// drawn again as 16 fresh uniforms over the last 16 values.
fn blocks<V: Copy + Default>(
    n: usize,
    upfront: usize,
    draw: &mut impl FnMut() -> V,
    block: impl Fn(&mut [V]),
) -> Vec<V> {
    let mut d: Vec<V> = (0..upfront).map(|_| draw()).collect();
    d.resize(n, V::default());
    let full = n - n % 16;
    block(&mut d[..full]);
    if full < n {
        let tail = &mut d[n - 16..];
        tail.iter_mut().for_each(|v| *v = draw());
        block(tail);
    }
    d
}

/// Fills `out` with normal samples (mean `mean`, std `std`) as PyTorch's
/// `normal_kernel`.
pub(super) fn normal_fill<T: Sampled>(
    name: &'static str,
    out: &Tensor,
    mean: f64,
    std: f64,
    g: &mut GeneratorState,
) -> Result<()> {
    let n = out.numel();
    if n < 16 || !out.is_contiguous() {
        return fill_in_order::<T>(name, out, |_| Ok(T::cast_f64(g.normal_f64().mul_add(std, mean))));
    }
    if T::DTYPE == DType::F64 {
        let d = blocks(n, n, &mut || g.uniform_f64(), |b| {
            b.chunks_exact_mut(16).for_each(|blk| block_f64(blk, mean, std))
        });
        fill_in_order::<T>(name, out, |i| Ok(T::cast_f64(d[i])))
    } else {
        let (m, s) = (mean as f32, std as f32);
        let upfront = if T::DTYPE == DType::F32 { n } else { n - n % 16 };
        let d = blocks(n, upfront, &mut || g.uniform_f32(), |b| blocks_f32(b, m, s));
        fill_in_order::<T>(name, out, |i| Ok(T::cast_f32(d[i])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polynomials_track_libm() {
        // The AVX2 polynomials are accurate to a few ulps on the inputs
        // normal_ gives them: log on (0, 1], sincos on [0, 2 pi).
        for i in 1..=1000 {
            let x = i as f32 / 1000.0;
            assert!((log256(x) as f64 - (x as f64).ln()).abs() <= 4e-7 * (x as f64).ln().abs().max(1.0));
            let t = x * std::f32::consts::TAU;
            let (s, c) = sincos256(t);
            assert!((s as f64 - (t as f64).sin()).abs() < 1e-6, "{t}");
            assert!((c as f64 - (t as f64).cos()).abs() < 1e-6, "{t}");
        }
        assert!(log256(0.0).is_nan());
        assert!(log256(-1.0).is_nan());
    }
}
