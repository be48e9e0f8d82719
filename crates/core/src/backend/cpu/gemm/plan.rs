//! How the GEMM blocks a product on the CPU at hand: the register tile,
//! the depth, row and column blocks, and whether operands are read in
//! place, all derived from what `cpuid` says (`cpu_info.rs`) rather than
//! from constants measured on one machine.
//!
//! The rules (each checked by measurement on the CPUs named):
//! - **Tile.** Two 512-bit FMAs per cycle (Intel Xeon, Zen 5) need more FMAs
//!   per load than one: on an Ice Lake Xeon the 6 x 64 tile (10 loads per
//!   24 FMAs) runs sgemm 256-2048 at 86-94% of peak, the 8 x 48 tile (11
//!   loads) at 81-90%, the 12 x 32 tile (14 loads) at 74-76%; with one FMA
//!   port (Zen 4) the 12 x 32 tile reaches 95%. A product takes the tile
//!   with the least padding per unit of speed (`Tile::for_product`): on
//!   two-port cores a 32-column product (attention's head dimension) runs
//!   1.3-1.8x faster on 12 x 32 than padded to 8 x 48. All the tiles share
//!   one depth blocking on a CPU (`f32_depth_mr`), so they give the same bits.
//! - **Depth `kc`.** The L1-resident micro-panel (`mr x kc` of A in the
//!   A-resident order, `kc x nr` of B in the BLIS order) fills at most half
//!   of L1d, rounded down to a power of two in `[128, 512]` (Zen 3 / Zen 4,
//!   32 KiB: 256; Intel's 48 KiB: 256 for the 12 x 32 tile, 512 for 8 x 48).
//! - **Column block `nc`** (A-resident order): the block of B panels
//!   (`kc x nc`) fills at most half of L2, the rest holding C's rows and the
//!   A panels that stream through.
//! - **Row block `mc`** (BLIS order): the packed A block (`mc x kc`) takes
//!   about 30% of L2; its column block of B (`kc x nc`) at most an eighth
//!   of L3 and 4096 columns.
//! - **In place.** A row-major B, and A in the layouts `a_reads_in_place`
//!   allows, are read in place (no packed copy). On two-FMA-port cores only
//!   at short strides (`InPlace`): there the kernel waits on rows of B that
//!   lie 2 KiB or more apart (sgemm 1024 on an Ice Lake Xeon with B in
//!   place: 96 against 128 GFLOP/s packed), while the narrow products of a
//!   transformer's layers run 10-30% faster without the packing.
//!
//! `FERROTORCH_GEMM_BLOCKING=kc,nc[,mc]`, `FERROTORCH_GEMM_TILE=12x32 |
//! 8x32 | 8x48 | 6x64` and `FERROTORCH_GEMM_IN_PLACE=a | b | ab | none`
//! override the choices (for tuning on a new machine).

use super::super::cpu_info::{CpuInfo, cpu_info};
use super::super::simd::{Isa, isa};

/// The AVX-512 f32 register tiles (rows x columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tile {
    /// 12 x 32 (one-FMA-port cores).
    R12C32,
    /// 8 x 32 (the 12 x 32 tile's variant for row counts 8-row tiles pad less).
    R8C32,
    /// 8 x 48 (the 6 x 64 tile's variant for column counts 48-column tiles pad less).
    R8C48,
    /// 6 x 64 (two-FMA-port cores).
    R6C64,
}

impl Tile {
    /// `(rows, columns)` of the tile.
    pub fn shape(self) -> (usize, usize) {
        match self {
            Tile::R12C32 => (12, 32),
            Tile::R8C32 => (8, 32),
            Tile::R8C48 => (8, 48),
            Tile::R6C64 => (6, 64),
        }
    }

    /// The tile for an `m x n` product on a core issuing `fma_ports` 512-bit
    /// FMAs per cycle: the one with the least padded area per unit of
    /// its speed. Two-port cores weigh 6 x 64 at 1, 8 x 48 at 0.95, 12 x 32
    /// at 0.87 and 8 x 32 at 0.75 (from their speeds on an Ice Lake Xeon:
    /// with 32 columns, 12 x 32 runs 1.3-1.8x faster than 8 x 48, which pads
    /// them to 48); one-port cores 12 x 32 at 1 and 8 x 32 at 0.95. Ties go
    /// to the tile listed first.
    pub fn for_product(fma_ports: u32, m: usize, n: usize) -> Tile {
        // In u128, saturating: no overflow for any usize sizes (products that
        // large never reach a kernel; the choice is then the first tile).
        let padded = |t: Tile| {
            let (r, c) = t.shape();
            let up = |x: usize, to: usize| (x as u128).div_ceil(to as u128) * to as u128;
            up(m, r).saturating_mul(up(n, c))
        };
        let candidates = Tile::candidates(fma_ports);
        let mut best = candidates[0];
        for &(t, speed) in &candidates[1..] {
            // padded(t) / speed < padded(best) / best_speed, cross-multiplied.
            if padded(t).saturating_mul(best.1) < padded(best.0).saturating_mul(speed) {
                best = (t, speed);
            }
        }
        best.0
    }

    /// The tiles a core issuing `fma_ports` 512-bit FMAs per cycle chooses
    /// from, each with its speed in percent of the first (the best).
    fn candidates(fma_ports: u32) -> &'static [(Tile, u128)] {
        if fma_ports >= 2 {
            &[
                (Tile::R6C64, 100),
                (Tile::R8C48, 95),
                (Tile::R12C32, 87),
                (Tile::R8C32, 75),
            ]
        } else {
            &[(Tile::R12C32, 100), (Tile::R8C32, 95)]
        }
    }

    fn parse(s: &str) -> Option<Tile> {
        [Tile::R12C32, Tile::R8C32, Tile::R8C48, Tile::R6C64]
            .into_iter()
            .find(|t| format!("{}x{}", t.shape().0, t.shape().1) == s.trim())
    }
}

/// Which operand stays in L1 while the other streams past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// An `mr x kc` A micro-panel in L1, B's block in L2 (`gemm_with`).
    AResident,
    /// A `kc x nr` B micro-panel in L1, A's block in L2 (`b_resident`).
    BResident,
}

/// Cache blocking of one GEMM: depth `kc`, column block `nc`, row block `mc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Blocking {
    /// Depth of a packed block.
    pub kc: usize,
    /// Columns of a block of B (a multiple of the tile's columns).
    pub nc: usize,
    /// Rows of a packed A block (BLIS order; a multiple of the tile's rows).
    pub mc: usize,
}

/// The largest power of two at most `x` (1 for 0).
fn pow2_floor(x: usize) -> usize {
    if x < 2 {
        1
    } else {
        1 << (usize::BITS - 1 - x.leading_zeros())
    }
}

/// The blocking for an `mr x nr` tile of `elem`-byte values in `order`, on
/// a core with `l1d` / `l2` bytes of L1 data and L2 cache and `l3` of last
/// level (0: unknown).
pub fn blocking_for(order: Order, mr: usize, nr: usize, elem: usize, l1d: usize, l2: usize, l3: usize) -> Blocking {
    let resident = match order {
        Order::AResident => mr,
        Order::BResident => nr,
    };
    let kc = pow2_floor(l1d / (2 * resident * elem)).clamp(128, 512);
    let round = |x: usize, to: usize| (x / to).max(1) * to;
    match order {
        Order::AResident => Blocking {
            kc,
            nc: round(l2 / (2 * kc * elem), nr),
            mc: round(l2 * 3 / 10 / (kc * elem), mr),
        },
        Order::BResident => {
            let l3 = if l3 == 0 { 8 * l2 } else { l3 };
            Blocking {
                kc,
                nc: round((l3 / (8 * kc * elem)).min(4096), nr),
                mc: round(l2 * 3 / 10 / (kc * elem), mr),
            }
        }
    }
}

/// The blocking for this CPU (or the `FERROTORCH_GEMM_BLOCKING` override;
/// a missing `mc` keeps the rule's).
pub fn blocking(order: Order, mr: usize, nr: usize, elem: usize) -> Blocking {
    let c = cpu_info();
    let rule = blocking_for(order, mr, nr, elem, c.l1d_bytes, c.l2_bytes, c.l3_bytes);
    match blocking_override().as_deref() {
        Some([kc, nc]) => Blocking {
            kc: *kc,
            nc: *nc,
            ..rule
        },
        Some([kc, nc, mc]) => Blocking {
            kc: *kc,
            nc: *nc,
            mc: *mc,
        },
        _ => rule,
    }
}

fn blocking_override() -> &'static Option<Vec<usize>> {
    static B: std::sync::OnceLock<Option<Vec<usize>>> = std::sync::OnceLock::new();
    B.get_or_init(|| {
        std::env::var("FERROTORCH_GEMM_BLOCKING").ok().and_then(|v| {
            let p: Vec<usize> = v.split(',').filter_map(|x| x.trim().parse().ok()).collect();
            ((p.len() == 2 || p.len() == 3) && p.iter().all(|&x| x > 0)).then_some(p)
        })
    })
}

/// The tile rows every AVX-512 f32 tile's depth blocking is derived from on
/// this CPU: its best tile's (6 on two-FMA-port cores, 12 on one-port
/// ones), so that all the tiles block alike and give the same bits.
pub fn f32_depth_mr() -> usize {
    Tile::candidates(cpu_info().fma512_per_cycle)[0].0.shape().0
}

/// The AVX-512 f32 tile for an `m x n` product on this CPU (or the
/// `FERROTORCH_GEMM_TILE` override).
pub fn f32_tile(m: usize, n: usize) -> Tile {
    static FORCED: std::sync::OnceLock<Option<Tile>> = std::sync::OnceLock::new();
    let forced = FORCED.get_or_init(|| std::env::var("FERROTORCH_GEMM_TILE").ok().and_then(|v| Tile::parse(&v)));
    forced.unwrap_or_else(|| Tile::for_product(cpu_info().fma512_per_cycle, m, n))
}

/// Which operands kernels that can (`MicroKernel::IN_PLACE`) read in
/// place rather than packing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InPlace {
    /// A row-major B's full panels.
    pub b: bool,
    /// A's full panels, where `a_reads_in_place` allows for the layout.
    pub a: bool,
    /// The two-FMA-port limits on strides (see [`InPlace::reads_b`] and
    /// [`InPlace::col_stride_ok`]); off, any stride the layout rules allow.
    pub short_strides: bool,
}

impl InPlace {
    /// Whether a row-major B whose rows lie `row_stride_bytes` apart is
    /// read in place. Under the two-port limits only below 2 KiB: on an
    /// Ice Lake Xeon (1024 x 512 x n) in place ran 3-30% faster up to 448
    /// columns and 10-25% slower from 512 (2 KiB: the panel's rows then
    /// share a few L1 sets) and beyond 1000.
    pub fn reads_b(&self, row_stride_bytes: usize) -> bool {
        self.b && (!self.short_strides || row_stride_bytes < 2048)
    }

    /// Whether a column-major A whose columns lie `col_stride_bytes` apart
    /// may be read in place. Under the two-port limits not at multiples of
    /// 2 KiB: on an Ice Lake Xeon (m x 1024 x 128, A transposed) in place
    /// ran 10-20% faster for m 64-384, 640 and 768, and 5-20% slower at
    /// m 512, 1024 and 2048.
    pub fn col_stride_ok(&self, col_stride_bytes: usize) -> bool {
        !self.short_strides || !col_stride_bytes.is_multiple_of(2048)
    }
}

/// The in-place choices for `cpu`, or the `FERROTORCH_GEMM_IN_PLACE=a|b|ab|none`
/// override (which keeps the CPU's stride limits). Both operands are read
/// in place where their layouts allow; on two-FMA-port cores only at the
/// strides [`InPlace`]'s limits allow (on an Ice Lake Xeon a 1024-column B
/// read in place ran at 96 against 128 GFLOP/s packed).
pub fn in_place(cpu: &CpuInfo) -> InPlace {
    static FORCED: std::sync::OnceLock<Option<(bool, bool)>> = std::sync::OnceLock::new();
    let forced = FORCED.get_or_init(|| {
        let v = std::env::var("FERROTORCH_GEMM_IN_PLACE").ok()?;
        let v = v.trim();
        matches!(v, "a" | "b" | "ab" | "none").then(|| (v.contains('a'), v.contains('b')))
    });
    let (a, b) = forced.unwrap_or((true, true));
    InPlace {
        a,
        b,
        short_strides: cpu.fma512_per_cycle >= 2,
    }
}

/// What the f32 GEMM does for an `m x n` product on this CPU (for the
/// tools that print it: `ferrotorch-bench --cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemmChoice {
    /// The instruction set of the kernel.
    pub isa: Isa,
    /// The register tile `(rows, columns)`.
    pub tile: (usize, usize),
    /// The loop order.
    pub order: Order,
    /// The cache blocking.
    pub blocking: Blocking,
    /// Which operands the product reads in place (else packed).
    pub in_place: InPlace,
}

/// What the f32 GEMM chooses for the product of a row-major `m x k` A and
/// a row-major `k x n` B on this CPU (`in_place`: the operands this
/// product reads in place, the CPU's rules applied to its strides).
pub fn sgemm_choice(m: usize, k: usize, n: usize) -> GemmChoice {
    let (isa, tile, order, depth_mr, in_place) = match isa() {
        Isa::Avx512 => {
            let t = f32_tile(m, n).shape();
            let rules = in_place(cpu_info());
            let a = super::Mat::<f32> {
                ptr: std::ptr::null(),
                rs: k,
                cs: 1,
            };
            let this = InPlace {
                a: rules.a && super::a_reads_in_place(a, n, rules),
                b: rules.reads_b(n * 4),
                ..rules
            };
            (Isa::Avx512, t, Order::AResident, f32_depth_mr(), this)
        }
        Isa::Avx2 => (Isa::Avx2, (6, 16), Order::BResident, 6, NONE),
        Isa::Baseline => (Isa::Baseline, (4, 8), Order::BResident, 4, NONE),
    };
    GemmChoice {
        isa,
        tile,
        order,
        blocking: blocking(order, depth_mr, tile.1, 4),
        in_place,
    }
}

/// Nothing read in place (kernels without `IN_PLACE`).
const NONE: InPlace = InPlace {
    a: false,
    b: false,
    short_strides: false,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_keeps_the_measured_zen_choices() {
        // Zen 4: 32 KiB L1d, 1 MiB L2, 12 x 32 tile: kc 256 (measured best), nc 512.
        let z4 = blocking_for(Order::AResident, 12, 32, 4, 32 << 10, 1 << 20, 32 << 20);
        assert_eq!((z4.kc, z4.nc), (256, 512));
        // Zen 3: 32 KiB L1d, 512 KiB L2, 32 MiB L3, AVX2's 6 x 16 in the BLIS order.
        let z3 = blocking_for(Order::BResident, 6, 16, 4, 32 << 10, 512 << 10, 32 << 20);
        assert_eq!((z3.kc, z3.nc, z3.mc), (256, 4096, 150));
    }

    #[test]
    fn blocks_fit_their_caches_for_any_cache_size() {
        for l1 in [16 << 10, 32 << 10, 48 << 10, 64 << 10, 80 << 10] {
            for l2 in [256 << 10, 512 << 10, 1 << 20, 1280 << 10, 2 << 20, 4 << 20] {
                for (mr, nr) in [(12, 32), (8, 32), (8, 48), (6, 64), (6, 16), (12, 16), (6, 8), (4, 8)] {
                    for elem in [4, 8] {
                        let a = blocking_for(Order::AResident, mr, nr, elem, l1, l2, 0);
                        assert!((128..=512).contains(&a.kc) && a.kc.is_power_of_two());
                        assert!(a.nc.is_multiple_of(nr) && a.nc >= nr);
                        assert!(mr * a.kc * elem <= l1.max(128 * mr * elem));
                        assert!(a.kc * a.nc * elem <= (l2 / 2).max(a.kc * nr * elem));
                        let b = blocking_for(Order::BResident, mr, nr, elem, l1, l2, 0);
                        assert!(b.mc.is_multiple_of(mr) && b.nc.is_multiple_of(nr) && b.nc <= 4096);
                        assert!(b.mc * b.kc * elem <= (l2 * 3 / 10).max(mr * b.kc * elem));
                    }
                }
            }
        }
    }

    #[test]
    fn in_place_stride_limits_apply_on_two_port_cores_only() {
        let two = InPlace {
            a: true,
            b: true,
            short_strides: true,
        };
        let one = InPlace {
            short_strides: false,
            ..two
        };
        // B rows under 2 KiB apart (448 f32 columns) in place, 512 and 1024 columns packed.
        assert!(two.reads_b(448 * 4) && !two.reads_b(512 * 4) && !two.reads_b(1024 * 4));
        assert!(one.reads_b(512 * 4) && one.reads_b(4096 * 4));
        assert!(!InPlace { b: false, ..one }.reads_b(64));
        // Column-major A: not at multiples of 2 KiB.
        assert!(two.col_stride_ok(384 * 4) && two.col_stride_ok(768 * 4));
        assert!(!two.col_stride_ok(512 * 4) && !two.col_stride_ok(1024 * 4));
        assert!(one.col_stride_ok(1024 * 4));
    }

    #[test]
    fn tiles_follow_the_fma_ports_and_the_padding() {
        assert_eq!(Tile::for_product(1, 1024, 1024), Tile::R12C32);
        assert_eq!(Tile::for_product(1, 64, 1024), Tile::R8C32);
        assert_eq!(Tile::for_product(2, 1024, 1008), Tile::R6C64);
        assert_eq!(Tile::for_product(2, 1024, 144), Tile::R8C48);
        assert_eq!(Tile::for_product(2, 1024, 1024), Tile::R6C64);
        assert_eq!(Tile::for_product(2, 1024, 96), Tile::R8C48);
        // 32 and 16 columns (attention's head dimension): 12 x 32 on every core.
        assert_eq!(Tile::for_product(2, 64, 32), Tile::R12C32);
        assert_eq!(Tile::for_product(2, 1024, 16), Tile::R12C32);
        assert_eq!(Tile::for_product(2, 8, 32), Tile::R8C32);
        assert_eq!(Tile::for_product(1, 60, 48), Tile::R12C32);
        assert_eq!(Tile::for_product(0, 100, 100), Tile::R12C32);
        // Sizes near usize::MAX choose without overflowing.
        assert_eq!(Tile::for_product(2, usize::MAX / 64, 144), Tile::R8C48);
        assert_eq!(Tile::for_product(1, usize::MAX - 7, usize::MAX - 31), Tile::R12C32);
        assert_eq!(Tile::parse("8x48"), Some(Tile::R8C48));
        assert_eq!(Tile::parse("9x9"), None);
    }
}
