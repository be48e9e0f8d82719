//! The machine's measured fp32 FMA peak of one core, for the "% of peak"
//! column of the sgemm figures.
//!
//! The nominal formula (cores x GHz x flop per cycle) needs the clock the
//! core really runs at, which a virtual machine's `/proc/cpuinfo` does not
//! tell (it shows the base clock; the core boosts above it). So the peak is
//! measured instead: twelve independent chains of fused multiply-adds at the
//! widest vector width the CPU has (AVX-512: 16 lanes, AVX2 + FMA: 8), which
//! is what a GEMM micro-kernel does at best.

use std::time::Instant;

/// GFLOP/s of one thread running nothing but independent FMAs: the best of
/// several 50 ms runs (the fastest is the least disturbed by other tenants).
pub fn fma_peak_gflops() -> f64 {
    let mut best = 0.0f64;
    for _ in 0..10 {
        let t = Instant::now();
        let mut flops = 0.0;
        while t.elapsed().as_secs_f64() < 0.05 {
            flops += fma_burst();
        }
        best = best.max(flops / t.elapsed().as_secs_f64() / 1e9);
    }
    best
}

/// Iterations of the twelve-chain loop per burst.
const ITERS: usize = 1 << 16;

/// Runs one burst of FMAs; returns the floating-point operations done.
fn fma_burst() -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F.
            unsafe { x86::burst_avx512() };
            return (ITERS * 12 * 16 * 2) as f64;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has AVX2 and FMA.
            unsafe { x86::burst_avx2() };
            return (ITERS * 12 * 8 * 2) as f64;
        }
    }
    let mut acc = [0.0f32; 12];
    for _ in 0..ITERS {
        for a in acc.iter_mut() {
            *a = std::hint::black_box(1.000_000_1f32).mul_add(0.999_999_9, *a);
        }
    }
    std::hint::black_box(acc);
    (ITERS * 12 * 2) as f64
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::ITERS;

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn burst_avx512() {
        let (x, y) = (_mm512_set1_ps(1.000_000_1), _mm512_set1_ps(0.999_999_9));
        let mut acc = [_mm512_setzero_ps(); 12];
        for _ in 0..ITERS {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(x, y, *a);
            }
        }
        std::hint::black_box(acc);
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn burst_avx2() {
        let (x, y) = (_mm256_set1_ps(1.000_000_1), _mm256_set1_ps(0.999_999_9));
        let mut acc = [_mm256_setzero_ps(); 12];
        for _ in 0..ITERS {
            for a in acc.iter_mut() {
                *a = _mm256_fmadd_ps(x, y, *a);
            }
        }
        std::hint::black_box(acc);
    }
}
