//! `ferrotorch-bench --cpu`: what this machine is (from `cpuid`), what the
//! f32 GEMM chooses on it for each size (kernel, tile, blocking, operands
//! read in place), and the GFLOP/s it reaches at 1 and 2 threads against
//! one core's measured FMA peak.

use std::time::Instant;

use ferrotorch::backend::cpu::cpu_info::{CpuInfo, cpu_info};
use ferrotorch::backend::cpu::gemm::plan::{Order, sgemm_choice};
use ferrotorch::{Result, Tensor};

/// One line naming the CPU: brand string, vendor family / model and
/// microarchitecture (for the bench's tables).
pub fn cpu_line(c: &CpuInfo) -> String {
    format!(
        "{} (family {} model {}: {})",
        if c.brand.is_empty() { "unknown CPU" } else { &c.brand },
        c.family,
        c.model,
        c.uarch.name()
    )
}

fn kib(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 20 {
        format!("{:.2} MiB", bytes as f64 / (1 << 20) as f64)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

/// Best GFLOP/s of `a.mm(&b)` for `n x n` operands over about 0.3 s.
fn sgemm_gflops(n: usize) -> Result<f64> {
    let (a, b) = (Tensor::randn([n, n])?, Tensor::randn([n, n])?);
    drop(a.mm(&b)?);
    let start = Instant::now();
    let mut best = f64::INFINITY;
    while start.elapsed().as_secs_f64() < 0.3 {
        let t = Instant::now();
        std::hint::black_box(a.mm(&b)?);
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(2.0 * (n * n * n) as f64 / best / 1e9)
}

/// Prints the report (see the module doc).
pub fn report() -> Result<()> {
    let c = cpu_info();
    println!("CPU: {}", cpu_line(c));
    println!(
        "caches: L1d {} and L2 {} per core, L3 {}",
        kib(c.l1d_bytes),
        kib(c.l2_bytes),
        if c.l3_bytes == 0 {
            "not reported".to_string()
        } else {
            kib(c.l3_bytes)
        }
    );
    println!(
        "AVX-512: {} ({} 512-bit FMA per cycle), AVX512-BF16: {}, AMX-BF16: {}, AMX-FP16: {}",
        yes(c.avx512),
        c.fma512_per_cycle,
        yes(c.avx512_bf16),
        yes(c.amx_bf16),
        yes(c.amx_fp16)
    );
    println!(
        "kernels in use: {:?} (FERROTORCH_ISA caps it; FERROTORCH_GEMM_TILE, _BLOCKING and _IN_PLACE override the GEMM's choices)",
        ferrotorch::backend::cpu::simd::isa()
    );
    let peak = crate::peak::fma_peak_gflops();
    println!("measured FMA peak: {peak:.1} GFLOP/s per core\n");
    println!(
        "| sgemm n | kernel | tile | order | kc | nc | mc | in place | 1 thread GFLOP/s (% peak) | 2 threads GFLOP/s (% peak) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for n in [256, 512, 1024, 2048] {
        let ch = sgemm_choice(n, n, n);
        let mut rates = Vec::new();
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .map_err(|e| ferrotorch::Error::invalid("thread pool", e.to_string()))?;
            let g = pool.install(|| sgemm_gflops(n))?;
            rates.push(format!("{g:.1} ({:.0}%)", 100.0 * g / (peak * threads as f64)));
        }
        let in_place = match (ch.in_place.a, ch.in_place.b) {
            (true, true) => "A, B",
            (true, false) => "A",
            (false, true) => "B",
            (false, false) => "none",
        };
        let (order, mc) = match ch.order {
            Order::AResident => ("A in L1", "-".to_string()),
            Order::BResident => ("B in L1", ch.blocking.mc.to_string()),
        };
        println!(
            "| {n} | {:?} | {}x{} | {order} | {} | {} | {mc} | {in_place} | {} | {} |",
            ch.isa, ch.tile.0, ch.tile.1, ch.blocking.kc, ch.blocking.nc, rates[0], rates[1]
        );
    }
    Ok(())
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
