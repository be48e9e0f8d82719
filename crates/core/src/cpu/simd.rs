//! Runtime selection of the instruction set for hot loops.
//!
//! Code is compiled for the baseline x86-64 target so the binary runs on any
//! CPU. [`vectorized`] runs a closure inside a function compiled with AVX2 or
//! AVX-512 enabled (whichever the CPU has), so loops inlined into it are
//! vectorised for that instruction set. `FERROTORCH_ISA=scalar|avx2|avx512`
//! caps the choice (for testing the fallbacks).

use std::sync::OnceLock;

/// An instruction-set level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// Baseline (SSE2 on x86-64, or any other architecture).
    Baseline,
    /// AVX2 + FMA.
    Avx2,
    /// AVX-512 (F, BW, DQ, VL).
    Avx512,
}

fn detect() -> Isa {
    #[cfg(target_arch = "x86_64")]
    let found = if std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512vl")
        && std::arch::is_x86_feature_detected!("fma")
    {
        Isa::Avx512
    } else if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        Isa::Avx2
    } else {
        Isa::Baseline
    };
    #[cfg(not(target_arch = "x86_64"))]
    let found = Isa::Baseline;
    let cap = match std::env::var("FERROTORCH_ISA").as_deref() {
        Ok("scalar") | Ok("baseline") => Isa::Baseline,
        Ok("avx2") => Isa::Avx2,
        _ => Isa::Avx512,
    };
    found.min(cap)
}

/// The instruction set hot loops use on this machine.
pub fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(detect)
}

/// Runs `f` compiled for the best available instruction set.
#[inline(always)]
pub(crate) fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        match isa() {
            // SAFETY: the features were detected at runtime.
            Isa::Avx512 => unsafe { run_avx512(f) },
            Isa::Avx2 => unsafe { run_avx2(f) },
            Isa::Baseline => f(),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
unsafe fn run_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn run_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}
