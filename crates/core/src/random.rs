//! Random number generators: PyTorch's CPU generator (MT19937) with its
//! seeding and its transforms to uniform, normal and integer values, so a
//! seed gives the same sequence of draws as `torch.manual_seed` on the CPU.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

const N: usize = 624;
/// Words of the Mersenne-Twister state.
pub(crate) const MT_WORDS: usize = N;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// The default seed of a fresh generator (PyTorch's `default_rng_seed_val`).
pub const DEFAULT_SEED: u64 = 67280421310721;

/// The full state of a generator: the Mersenne-Twister words plus the cached
/// second Box-Muller sample PyTorch keeps for scalar normal draws.
#[derive(Clone, PartialEq)]
pub struct GeneratorState {
    pub(crate) seed: u64,
    pub(crate) state: Box<[u32; N]>,
    pub(crate) index: usize,
    pub(crate) next_double_normal: Option<f64>,
    pub(crate) next_float_normal: Option<f32>,
    /// Seeded and not drawn from yet (PyTorch's `next_ == 0` with
    /// `left_ == 1`), told apart from a state whose 624 words are used up.
    pub(crate) fresh: bool,
}

impl fmt::Debug for GeneratorState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GeneratorState(seed={}, index={})", self.seed, self.index)
    }
}

impl GeneratorState {
    fn new(seed: u64) -> Self {
        let mut state = Box::new([0u32; N]);
        state[0] = (seed & 0xffff_ffff) as u32;
        for j in 1..N {
            state[j] = 1_812_433_253u32
                .wrapping_mul(state[j - 1] ^ (state[j - 1] >> 30))
                .wrapping_add(j as u32);
        }
        GeneratorState {
            seed,
            state,
            index: N,
            next_double_normal: None,
            next_float_normal: None,
            fresh: true,
        }
    }

    fn twist(&mut self) {
        let s = &mut self.state;
        for i in 0..N {
            let y = (s[i] & UPPER_MASK) | (s[(i + 1) % N] & LOWER_MASK);
            let mut v = s[(i + M) % N] ^ (y >> 1);
            if y & 1 != 0 {
                v ^= MATRIX_A;
            }
            s[i] = v;
        }
        self.index = 0;
        self.fresh = false;
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            self.twist();
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// The next 64 random bits (two 32-bit draws, the first one high).
    pub fn next_u64(&mut self) -> u64 {
        let hi = self.next_u32() as u64;
        let lo = self.next_u32() as u64;
        (hi << 32) | lo
    }

    /// Uniform in [0, 1) with 24 random bits (PyTorch's float path).
    pub fn uniform_f32(&mut self) -> f32 {
        (self.next_u32() & ((1 << 24) - 1)) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// Uniform in [0, 1) with 53 random bits (PyTorch's double path).
    pub fn uniform_f64(&mut self) -> f64 {
        (self.next_u64() & ((1u64 << 53) - 1)) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, 1) with `digits` (at most 24) random bits from one 32-bit draw.
    pub fn uniform_bits(&mut self, digits: u32) -> f32 {
        (self.next_u32() & ((1 << digits) - 1)) as f32 / (1u32 << digits) as f32
    }

    /// One standard normal sample by Box-Muller in f64, caching the second
    /// value as PyTorch's `normal_distribution<double>` does (`u1` then `u2`,
    /// radius `sqrt(-2 log1p(-u2))`, angle `2 pi u1`; the cached value is
    /// used first, and reseeding clears it). PyTorch scales it with one
    /// fused multiply-add: `v.mul_add(std, mean)`.
    pub fn normal_f64(&mut self) -> f64 {
        if let Some(v) = self.next_double_normal.take() {
            return v;
        }
        let u1 = self.uniform_f64();
        let u2 = self.uniform_f64();
        let r = (-2.0 * (-u2).ln_1p()).sqrt();
        let theta = 2.0 * std::f64::consts::PI * u1;
        self.next_double_normal = Some(r * theta.sin());
        r * theta.cos()
    }

    /// A uniform integer in `[low, low + range)` (PyTorch's
    /// `random_from_to`: one 32-bit draw, or one 64-bit draw when `range`
    /// is 2^28 or more; the sum wraps as PyTorch's `uint64_t` arithmetic).
    pub fn int_in_range(&mut self, low: i64, range: u64) -> i64 {
        let v = if range >= 1 << 28 {
            self.next_u64() % range
        } else {
            self.next_u32() as u64 % range
        };
        low.wrapping_add(v as i64)
    }

    /// The seed this state was created from.
    pub fn seed(&self) -> u64 {
        self.seed
    }
}

/// A random number generator (`torch.Generator`): cheap to clone, clones
/// share state. Draws are sequential, so results do not depend on the number
/// of threads.
#[derive(Clone)]
pub struct Generator(Arc<Mutex<GeneratorState>>);

impl fmt::Debug for Generator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Generator(seed={})", self.initial_seed())
    }
}

impl Default for Generator {
    fn default() -> Self {
        Generator::new(DEFAULT_SEED)
    }
}

impl Generator {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Generator(Arc::new(Mutex::new(GeneratorState::new(seed))))
    }

    /// Reseeds (`generator.manual_seed(seed)`).
    pub fn manual_seed(&self, seed: u64) {
        *self.lock() = GeneratorState::new(seed);
    }

    /// The seed last set.
    pub fn initial_seed(&self) -> u64 {
        self.lock().seed
    }

    /// A copy of the full state (`get_state`).
    pub fn get_state(&self) -> GeneratorState {
        self.lock().clone()
    }

    /// Restores a state taken with [`Generator::get_state`].
    pub fn set_state(&self, state: GeneratorState) {
        *self.lock() = state;
    }

    /// Exclusive access for a sequence of draws.
    pub fn lock(&self) -> MutexGuard<'_, GeneratorState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn default_cell() -> &'static Generator {
    static DEFAULT: OnceLock<Generator> = OnceLock::new();
    DEFAULT.get_or_init(Generator::default)
}

/// The global CPU generator (`torch.default_generator`).
pub fn default_generator() -> Generator {
    default_cell().clone()
}

/// Seeds the global generator (`torch.manual_seed`).
pub fn manual_seed(seed: u64) {
    default_cell().manual_seed(seed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt19937_reference_values() {
        // The C++ standard requires the 10000th draw of mt19937 seeded with
        // 5489 to be 4123659995.
        let mut g = GeneratorState::new(5489);
        let mut last = 0;
        for _ in 0..10000 {
            last = g.next_u32();
        }
        assert_eq!(last, 4_123_659_995);
    }

    #[test]
    fn torch_rand_seed_0() {
        // torch.manual_seed(0); torch.rand(3) -> [0.4963, 0.7682, 0.0885]
        let mut g = GeneratorState::new(0);
        let v: Vec<f32> = (0..3).map(|_| g.uniform_f32()).collect();
        assert!((v[0] - 0.4963).abs() < 1e-4 && (v[1] - 0.7682).abs() < 1e-4 && (v[2] - 0.0885).abs() < 1e-4);
    }
}
