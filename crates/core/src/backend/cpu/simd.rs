//! Runtime selection of the instruction set for hot loops.
//!
//! Code is compiled for the baseline x86-64 target so the binary runs on any
//! CPU. `vectorized` runs a closure inside a function compiled with AVX2 or
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

/// Defines a function compiled three times (AVX-512, AVX2+FMA, baseline)
/// that runs the best version for this CPU. Only the body is duplicated, so
/// `#[inline(always)]` helpers it calls are vectorised for each instruction
/// set (closures would not reliably be inlined into a `target_feature` function).
/// Exported for the workspace's other crates (the optimizers' update loops).
#[doc(hidden)]
#[macro_export]
macro_rules! multiversion {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")]
                unsafe fn v512($($arg: $ty),*) $(-> $ret)? $body
                #[target_feature(enable = "avx2,fma,f16c")]
                unsafe fn v256($($arg: $ty),*) $(-> $ret)? $body
                match $crate::backend::cpu::simd::isa() {
                    // SAFETY: the features were detected at runtime.
                    $crate::backend::cpu::simd::Isa::Avx512 => return unsafe { v512($($arg),*) },
                    // SAFETY: AVX2, FMA and F16C were detected at runtime (`isa()` returns Avx2 only then).
                    $crate::backend::cpu::simd::Isa::Avx2 => return unsafe { v256($($arg),*) },
                    $crate::backend::cpu::simd::Isa::Baseline => {}
                }
            }
            $body
        }
    };
}
pub(crate) use crate::multiversion;
