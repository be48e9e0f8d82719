//! A generator's state as the bytes of `torch.get_rng_state()`: PyTorch's
//! `CPUGeneratorImplState` (5056 bytes, little-endian, C layout), so a state
//! saved by PyTorch restores here and ours restores in PyTorch.
//!
//! | offset | field |
//! |---|---|
//! | 0 | `u64` initial seed |
//! | 8 | `i32` left (draws until the next twist, plus one) |
//! | 12 | `i32` seeded (1) |
//! | 16 | `u64` next (index of the next word) |
//! | 24 | 624 x `u64`, the Mersenne-Twister words |
//! | 5016 | `f64` normal_x (unused, 0) |
//! | 5024 | `f64` normal_y: the cached second Box-Muller sample |
//! | 5032 | `f64` normal_rho (unused, 0) |
//! | 5040 | `i32` normal_y is valid |
//! | 5048 | `f32` the cached float normal sample |
//! | 5052 | `bool` it is valid |

use crate::error::{Error, Result};
use crate::random::{Generator, GeneratorState, MT_WORDS, default_generator};
use crate::{DType, Tensor};

/// The size of a generator state in bytes (`torch.get_rng_state().numel()`).
pub const RNG_STATE_BYTES: usize = 5056;

const WORDS_AT: usize = 24;
const NORMAL_Y_AT: usize = WORDS_AT + 8 * MT_WORDS + 8;
const NORMAL_VALID_AT: usize = NORMAL_Y_AT + 16;
const FLOAT_NORMAL_AT: usize = NORMAL_VALID_AT + 8;
const FLOAT_VALID_AT: usize = FLOAT_NORMAL_AT + 4;

fn read<const K: usize>(bytes: &[u8], at: usize) -> [u8; K] {
    let mut out = [0u8; K];
    out.copy_from_slice(&bytes[at..at + K]);
    out
}

impl GeneratorState {
    /// The state as the bytes of `torch.get_rng_state()`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; RNG_STATE_BYTES];
        b[0..8].copy_from_slice(&self.seed.to_le_bytes());
        // `left` counts down to the twist: one more than the unread words.
        let left = (MT_WORDS + 1 - self.index) as i32;
        b[8..12].copy_from_slice(&left.to_le_bytes());
        b[12..16].copy_from_slice(&1i32.to_le_bytes());
        let next = if self.fresh { 0 } else { self.index as u64 };
        b[16..24].copy_from_slice(&next.to_le_bytes());
        for (i, w) in self.state.iter().enumerate() {
            b[WORDS_AT + 8 * i..WORDS_AT + 8 * i + 8].copy_from_slice(&(*w as u64).to_le_bytes());
        }
        if let Some(v) = self.next_double_normal {
            b[NORMAL_Y_AT..NORMAL_Y_AT + 8].copy_from_slice(&v.to_le_bytes());
            b[NORMAL_VALID_AT..NORMAL_VALID_AT + 4].copy_from_slice(&1i32.to_le_bytes());
        }
        if let Some(v) = self.next_float_normal {
            b[FLOAT_NORMAL_AT..FLOAT_NORMAL_AT + 4].copy_from_slice(&v.to_le_bytes());
            b[FLOAT_VALID_AT] = 1;
        }
        b
    }

    /// Parses the bytes of `torch.get_rng_state()` (or of
    /// [`to_bytes`](Self::to_bytes)). Errors when the length is not
    /// [`RNG_STATE_BYTES`], or the state is not one a generator can be in
    /// (PyTorch's "Invalid mt19937 state": not seeded, `left` outside
    /// 1..=624, a word above 32 bits, or `next` disagreeing with `left`).
    pub fn from_bytes(bytes: &[u8]) -> Result<GeneratorState> {
        let invalid = |why: String| Error::invalid("set_rng_state", why);
        if bytes.len() != RNG_STATE_BYTES {
            return Err(invalid(format!(
                "expected a generator state of {RNG_STATE_BYTES} bytes but got {}",
                bytes.len()
            )));
        }
        let seed = u64::from_le_bytes(read(bytes, 0));
        let left = i32::from_le_bytes(read(bytes, 8));
        let seeded = i32::from_le_bytes(read(bytes, 12));
        let next = u64::from_le_bytes(read(bytes, 16));
        if seeded == 0 || !(1..=MT_WORDS as i32).contains(&left) || next > MT_WORDS as u64 {
            return Err(invalid(format!(
                "invalid mt19937 state (seeded {seeded}, left {left}, next {next})"
            )));
        }
        let index = MT_WORDS + 1 - left as usize;
        let fresh = left == 1 && next == 0;
        // Past a twist, `next` and `left` move together; PyTorch reads word
        // `next`, this generator word `index`: they must agree.
        if left > 1 && next != index as u64 {
            return Err(invalid(format!(
                "invalid mt19937 state: next {next} does not follow from left {left}"
            )));
        }
        let mut words = Box::new([0u32; MT_WORDS]);
        for (i, w) in words.iter_mut().enumerate() {
            let v = u64::from_le_bytes(read(bytes, WORDS_AT + 8 * i));
            *w = u32::try_from(v).map_err(|_| invalid(format!("invalid mt19937 state: word {i} is {v}")))?;
        }
        let next_double_normal = (i32::from_le_bytes(read(bytes, NORMAL_VALID_AT)) != 0)
            .then(|| f64::from_le_bytes(read(bytes, NORMAL_Y_AT)));
        let next_float_normal = (bytes[FLOAT_VALID_AT] != 0).then(|| f32::from_le_bytes(read(bytes, FLOAT_NORMAL_AT)));
        Ok(GeneratorState {
            seed,
            state: words,
            index,
            next_double_normal,
            next_float_normal,
            fresh,
        })
    }

    /// The state as a `u8` tensor of [`RNG_STATE_BYTES`] elements, as
    /// `generator.get_state()` returns it.
    pub fn to_tensor(&self) -> Result<Tensor> {
        Tensor::from_vec(self.to_bytes(), [RNG_STATE_BYTES])
    }

    /// Parses a state tensor (`u8`, [`RNG_STATE_BYTES`] elements, any
    /// layout). Errors on another dtype or size, or an invalid state.
    pub fn from_tensor(state: &Tensor) -> Result<GeneratorState> {
        if state.dtype() != DType::U8 {
            return Err(Error::invalid(
                "set_rng_state",
                format!("the state must be a uint8 tensor, got {:?}", state.dtype()),
            ));
        }
        GeneratorState::from_bytes(&state.to_vec::<u8>()?)
    }
}

impl Generator {
    /// The state as a `u8` tensor (`generator.get_state()`).
    pub fn get_state_tensor(&self) -> Result<Tensor> {
        self.get_state().to_tensor()
    }

    /// Restores a state tensor (`generator.set_state(state)`); on error the
    /// generator is unchanged.
    pub fn set_state_tensor(&self, state: &Tensor) -> Result<()> {
        self.set_state(GeneratorState::from_tensor(state)?);
        Ok(())
    }
}

/// The global generator's state (`torch.get_rng_state()`), a `u8` tensor of
/// [`RNG_STATE_BYTES`] elements in PyTorch's layout.
///
/// ```
/// use ferrotorch_core::{Tensor, get_rng_state, manual_seed, set_rng_state};
///
/// manual_seed(0);
/// let state = get_rng_state()?;
/// let a = Tensor::rand([3])?;
/// set_rng_state(&state)?;
/// let b = Tensor::rand([3])?;
/// assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
/// # Ok::<(), ferrotorch_core::Error>(())
/// ```
pub fn get_rng_state() -> Result<Tensor> {
    default_generator().get_state_tensor()
}

/// Restores the global generator from a state tensor
/// (`torch.set_rng_state(state)`), as [`Generator::set_state_tensor`].
pub fn set_rng_state(state: &Tensor) -> Result<()> {
    default_generator().set_state_tensor(state)
}
