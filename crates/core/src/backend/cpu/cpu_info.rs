//! What the CPU running this process is, read from `cpuid`: its vendor,
//! family and model (hence its microarchitecture), its brand string, the
//! sizes of its data caches, and how many 512-bit FMAs a core issues per
//! cycle. The GEMM chooses its register tile and blocking from these
//! (`gemm/plan.rs`); the bench and `ferrotorch cpu` print them.
//!
//! Cache sizes come from the deterministic cache leaves (Intel leaf 4, AMD
//! leaf `0x8000_001D`, or AMD's older `0x8000_0005/6`); a hypervisor that
//! hides them leaves the defaults of a typical server core (32 KiB L1d,
//! 1 MiB L2). No cpuid leaf tells the FMA port count, so it comes from the
//! microarchitecture: two 512-bit FMA units on Intel server cores since
//! Skylake-SP and on AMD Zen 5, one (or two 256-bit) on Zen 4 and older.

use std::sync::OnceLock;

/// The CPU's vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    /// `GenuineIntel`.
    Intel,
    /// `AuthenticAMD`.
    Amd,
    /// Anything else (or a non-x86 CPU).
    Other,
}

/// The microarchitectures whose GEMM choices differ (from family and model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uarch {
    /// Intel Skylake-SP / Cascade Lake / Cooper Lake (family 6, model 85).
    SkylakeServer,
    /// Intel Ice Lake server (models 106, 108).
    IceLakeServer,
    /// Intel Sapphire Rapids (model 143).
    SapphireRapids,
    /// Intel Emerald Rapids (model 207).
    EmeraldRapids,
    /// Intel Granite Rapids (models 173, 174).
    GraniteRapids,
    /// Another Intel core (client parts, Atom-based Xeons, future models).
    IntelOther,
    /// AMD Zen 2 (family 0x17).
    Zen2,
    /// AMD Zen 3 (family 0x19 without AVX-512).
    Zen3,
    /// AMD Zen 4 (family 0x19 with AVX-512: 512-bit ops on 256-bit units).
    Zen4,
    /// AMD Zen 5 (family 0x1A: full-width 512-bit FMA units).
    Zen5,
    /// Anything else.
    Unknown,
}

impl Uarch {
    /// The name printed by the tools (`"Zen 4"`, `"Ice Lake server"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Uarch::SkylakeServer => "Skylake/Cascade Lake server",
            Uarch::IceLakeServer => "Ice Lake server",
            Uarch::SapphireRapids => "Sapphire Rapids",
            Uarch::EmeraldRapids => "Emerald Rapids",
            Uarch::GraniteRapids => "Granite Rapids",
            Uarch::IntelOther => "other Intel",
            Uarch::Zen2 => "Zen 2",
            Uarch::Zen3 => "Zen 3",
            Uarch::Zen4 => "Zen 4",
            Uarch::Zen5 => "Zen 5",
            Uarch::Unknown => "unknown",
        }
    }
}

/// The running CPU, as `cpuid` describes it (see [`cpu_info`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuInfo {
    /// The vendor.
    pub vendor: Vendor,
    /// Display family (base family plus extended family).
    pub family: u32,
    /// Display model (base model plus extended model).
    pub model: u32,
    /// The brand string (`"Intel(R) Xeon(R) Platinum 8581C CPU @ 2.10GHz"`), trimmed.
    pub brand: String,
    /// The microarchitecture, from vendor, family, model and features.
    pub uarch: Uarch,
    /// L1 data cache of one core, bytes.
    pub l1d_bytes: usize,
    /// L2 cache of one core, bytes.
    pub l2_bytes: usize,
    /// Last-level cache, bytes (shared; 0 when not reported).
    pub l3_bytes: usize,
    /// 512-bit FMA instructions one core issues per cycle (1 or 2; 0
    /// without AVX-512).
    pub fma512_per_cycle: u32,
    /// AVX-512F (with BW, DQ, VL, as the kernels need).
    pub avx512: bool,
    /// AVX512-BF16 (`vdpbf16ps`).
    pub avx512_bf16: bool,
    /// AMX tiles with bf16 products (`tdpbf16ps`).
    pub amx_bf16: bool,
    /// AMX tiles with f16 products (`tdpfp16ps`).
    pub amx_fp16: bool,
}

/// Typical server-core cache sizes, for CPUs whose cpuid hides them.
const DEFAULT_L1D: usize = 32 << 10;
const DEFAULT_L2: usize = 1 << 20;

/// The running CPU, read once.
pub fn cpu_info() -> &'static CpuInfo {
    static INFO: OnceLock<CpuInfo> = OnceLock::new();
    INFO.get_or_init(read)
}

#[cfg(not(target_arch = "x86_64"))]
fn read() -> CpuInfo {
    CpuInfo {
        vendor: Vendor::Other,
        family: 0,
        model: 0,
        brand: String::new(),
        uarch: Uarch::Unknown,
        l1d_bytes: DEFAULT_L1D,
        l2_bytes: DEFAULT_L2,
        l3_bytes: 0,
        fma512_per_cycle: 0,
        avx512: false,
        avx512_bf16: false,
        amx_bf16: false,
        amx_fp16: false,
    }
}

#[cfg(target_arch = "x86_64")]
fn read() -> CpuInfo {
    use std::arch::x86_64::__cpuid_count;
    // Leaves above the reported maximums are never queried below.
    let q = |leaf: u32, sub: u32| __cpuid_count(leaf, sub);
    let l0 = q(0, 0);
    let max_leaf = l0.eax;
    let mut id = [0u8; 12];
    id[..4].copy_from_slice(&l0.ebx.to_le_bytes());
    id[4..8].copy_from_slice(&l0.edx.to_le_bytes());
    id[8..].copy_from_slice(&l0.ecx.to_le_bytes());
    let vendor = match &id {
        b"GenuineIntel" => Vendor::Intel,
        b"AuthenticAMD" => Vendor::Amd,
        _ => Vendor::Other,
    };
    let sig = q(1, 0).eax;
    let base_family = (sig >> 8) & 0xf;
    let family = if base_family == 0xf {
        base_family + ((sig >> 20) & 0xff)
    } else {
        base_family
    };
    let model = if base_family == 0x6 || base_family == 0xf {
        ((sig >> 4) & 0xf) | (((sig >> 16) & 0xf) << 4)
    } else {
        (sig >> 4) & 0xf
    };
    let max_ext = q(0x8000_0000, 0).eax;
    let brand = if max_ext >= 0x8000_0004 {
        let mut b = Vec::with_capacity(48);
        for leaf in 0x8000_0002..=0x8000_0004 {
            let r = q(leaf, 0);
            for w in [r.eax, r.ebx, r.ecx, r.edx] {
                b.extend_from_slice(&w.to_le_bytes());
            }
        }
        String::from_utf8_lossy(&b)
            .trim_matches(|c: char| c == '\0' || c.is_whitespace())
            .to_string()
    } else {
        String::new()
    };
    let (l1d, l2, l3) = caches(vendor, max_leaf, max_ext, &q);
    let avx512 = std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512vl");
    // AMX (not yet detectable through std): leaf 7's AMX-TILE (EDX bit 24)
    // with AMX-BF16 (EDX bit 22) or, in sub-leaf 1, AMX-FP16 (EAX bit 21),
    // and the OS enabling the tile state in XCR0 (bits 17 and 18).
    let l7 = if max_leaf >= 7 { q(7, 0) } else { q(0, 0) };
    let amx_tile = max_leaf >= 7 && l7.edx & (1 << 24) != 0 && os_tile_state();
    let amx_fp16 = amx_tile && l7.eax >= 1 && q(7, 1).eax & (1 << 21) != 0;
    let uarch = uarch(vendor, family, model, avx512);
    CpuInfo {
        vendor,
        family,
        model,
        brand,
        uarch,
        l1d_bytes: l1d.unwrap_or(DEFAULT_L1D),
        l2_bytes: l2.unwrap_or(DEFAULT_L2),
        l3_bytes: l3.unwrap_or(0),
        fma512_per_cycle: if avx512 { fma512_units(uarch) } else { 0 },
        avx512,
        avx512_bf16: std::arch::is_x86_feature_detected!("avx512bf16"),
        amx_bf16: amx_tile && l7.edx & (1 << 22) != 0,
        amx_fp16,
    }
}

/// Whether the OS has enabled the AMX tile state (XCR0 bits 17 and 18);
/// a process must still request it (`amx.rs`).
#[cfg(target_arch = "x86_64")]
fn os_tile_state() -> bool {
    use std::arch::x86_64::__cpuid;
    // OSXSAVE (leaf 1, ECX bit 27): XGETBV is usable.
    if __cpuid(1).ecx & (1 << 27) == 0 {
        return false;
    }
    #[target_feature(enable = "xsave")]
    fn xcr0() -> u64 {
        // SAFETY: XGETBV with ECX = 0 is valid when OSXSAVE is set (checked by the caller).
        unsafe { std::arch::x86_64::_xgetbv(0) }
    }
    // SAFETY: OSXSAVE implies the XSAVE feature the function is compiled for.
    let x = unsafe { xcr0() };
    x & (0b11 << 17) == 0b11 << 17
}

/// Data and unified cache sizes `(L1d, L2, L3)` from the deterministic
/// cache leaves (the caller's `q` runs `cpuid`).
#[cfg(target_arch = "x86_64")]
fn caches(
    vendor: Vendor,
    max_leaf: u32,
    max_ext: u32,
    q: &dyn Fn(u32, u32) -> std::arch::x86_64::CpuidResult,
) -> (Option<usize>, Option<usize>, Option<usize>) {
    let topo_ext = max_ext >= 0x8000_0001 && q(0x8000_0001, 0).ecx & (1 << 22) != 0;
    let leaf = match vendor {
        Vendor::Intel if max_leaf >= 4 => Some(4),
        Vendor::Amd if topo_ext && max_ext >= 0x8000_001d => Some(0x8000_001d),
        _ => None,
    };
    let mut found = [None; 3];
    if let Some(leaf) = leaf {
        // At most 16 sub-leaves: the list ends at a null type well before.
        for sub in 0..16 {
            let r = q(leaf, sub);
            let kind = r.eax & 0x1f;
            if kind == 0 {
                break;
            }
            let level = ((r.eax >> 5) & 0x7) as usize;
            // Data (1) or unified (3) caches; instruction caches (2) skipped.
            if kind == 2 || !(1..=3).contains(&level) {
                continue;
            }
            let ways = ((r.ebx >> 22) & 0x3ff) as usize + 1;
            let parts = ((r.ebx >> 12) & 0x3ff) as usize + 1;
            let line = (r.ebx & 0xfff) as usize + 1;
            let sets = r.ecx as usize + 1;
            found[level - 1] = Some(ways * parts * line * sets);
        }
    } else if vendor == Vendor::Amd && max_ext >= 0x8000_0006 {
        let l1 = (q(0x8000_0005, 0).ecx >> 24) as usize;
        let r6 = q(0x8000_0006, 0);
        let l2 = (r6.ecx >> 16) as usize;
        let l3 = (r6.edx >> 18) as usize;
        found = [
            (l1 > 0).then_some(l1 << 10),
            (l2 > 0).then_some(l2 << 10),
            (l3 > 0).then_some(l3 * (512 << 10)),
        ];
    }
    let sane = |v: Option<usize>| v.filter(|&b| (4 << 10..=1 << 30).contains(&b));
    (sane(found[0]), sane(found[1]), sane(found[2]))
}

/// The microarchitecture of a vendor, display family and model.
fn uarch(vendor: Vendor, family: u32, model: u32, avx512: bool) -> Uarch {
    match vendor {
        Vendor::Intel if family == 6 => match model {
            85 => Uarch::SkylakeServer,
            106 | 108 => Uarch::IceLakeServer,
            143 => Uarch::SapphireRapids,
            207 => Uarch::EmeraldRapids,
            173 | 174 => Uarch::GraniteRapids,
            _ => Uarch::IntelOther,
        },
        Vendor::Intel => Uarch::IntelOther,
        Vendor::Amd => match family {
            0x17 => Uarch::Zen2,
            0x19 if avx512 => Uarch::Zen4,
            0x19 => Uarch::Zen3,
            0x1a => Uarch::Zen5,
            _ => Uarch::Unknown,
        },
        Vendor::Other => Uarch::Unknown,
    }
}

/// 512-bit FMAs a core of `uarch` issues per cycle (given AVX-512): two on
/// Intel's server cores and Zen 5, one on Zen 4 (its 512-bit operations
/// run on two 256-bit units) and on unknown cores (the safe guess: the
/// one-port tile is good on two-port cores, the reverse is not).
pub fn fma512_units(uarch: Uarch) -> u32 {
    match uarch {
        Uarch::SkylakeServer
        | Uarch::IceLakeServer
        | Uarch::SapphireRapids
        | Uarch::EmeraldRapids
        | Uarch::GraniteRapids
        | Uarch::Zen5 => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microarchitectures_from_family_and_model() {
        assert_eq!(uarch(Vendor::Intel, 6, 207, true), Uarch::EmeraldRapids);
        assert_eq!(uarch(Vendor::Intel, 6, 106, true), Uarch::IceLakeServer);
        assert_eq!(uarch(Vendor::Intel, 6, 143, true), Uarch::SapphireRapids);
        assert_eq!(uarch(Vendor::Amd, 0x19, 0x11, true), Uarch::Zen4);
        assert_eq!(uarch(Vendor::Amd, 0x19, 0x01, false), Uarch::Zen3);
        assert_eq!(uarch(Vendor::Amd, 0x1a, 0x02, true), Uarch::Zen5);
        assert_eq!(fma512_units(Uarch::Zen4), 1);
        assert_eq!(fma512_units(Uarch::EmeraldRapids), 2);
    }

    #[test]
    fn this_cpu_reports_plausible_caches() {
        let c = cpu_info();
        assert!((4 << 10..=1 << 20).contains(&c.l1d_bytes), "{c:?}");
        assert!(c.l2_bytes >= c.l1d_bytes, "{c:?}");
        eprintln!("{c:?}");
    }
}
