//! Dispatch keys and key sets.

use std::fmt;

use crate::Device;

/// One entry of an operator's dispatch table.
///
/// Backend keys (`Cpu`, `Cuda`, `Meta`, `PrivateUse1`) select the kernel that
/// computes; layer keys (`Autograd`, `Autocast`, `Profiler`) wrap it. A call
/// runs the highest key of its key set first; a layer does its work and
/// redispatches to the keys below itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DispatchKey {
    /// The CPU backend.
    Cpu = 0,
    /// The CUDA backend.
    Cuda = 1,
    /// Shape-only tensors: runs shape rules, allocates nothing.
    Meta = 2,
    /// An out-of-tree backend (see [`super::register_backend`]).
    PrivateUse1 = 3,
    /// Records the autograd graph, then redispatches.
    Autograd = 4,
    /// Casts inputs for mixed precision, then redispatches.
    Autocast = 5,
    /// Times the call, then redispatches.
    Profiler = 6,
}

/// Number of dispatch keys.
pub const NUM_KEYS: usize = 7;

/// Every key, lowest priority first.
pub const ALL_KEYS: [DispatchKey; NUM_KEYS] = [
    DispatchKey::Cpu,
    DispatchKey::Cuda,
    DispatchKey::Meta,
    DispatchKey::PrivateUse1,
    DispatchKey::Autograd,
    DispatchKey::Autocast,
    DispatchKey::Profiler,
];

impl DispatchKey {
    /// The backend key of a device.
    pub const fn for_device(device: Device) -> DispatchKey {
        match device {
            Device::Cpu => DispatchKey::Cpu,
            Device::Cuda(_) => DispatchKey::Cuda,
            Device::Meta => DispatchKey::Meta,
            Device::PrivateUse1(_) => DispatchKey::PrivateUse1,
        }
    }

    /// True for the keys that compute (as opposed to layers that wrap).
    pub const fn is_backend(self) -> bool {
        (self as u8) < DispatchKey::Autograd as u8
    }

    const fn from_index(i: u32) -> DispatchKey {
        ALL_KEYS[i as usize]
    }
}

impl fmt::Display for DispatchKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A set of dispatch keys as a bit set; the highest key wins.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DispatchKeySet(pub(crate) u16);

impl DispatchKeySet {
    /// The empty set.
    pub const EMPTY: DispatchKeySet = DispatchKeySet(0);

    /// A set holding one key.
    pub const fn of(key: DispatchKey) -> Self {
        DispatchKeySet(1 << key as u8)
    }

    /// This set plus `key`.
    pub const fn with(self, key: DispatchKey) -> Self {
        DispatchKeySet(self.0 | 1 << key as u8)
    }

    /// This set minus `key`.
    pub const fn without(self, key: DispatchKey) -> Self {
        DispatchKeySet(self.0 & !(1 << key as u8))
    }

    /// Union.
    pub const fn union(self, other: DispatchKeySet) -> Self {
        DispatchKeySet(self.0 | other.0)
    }

    /// This set minus every key in `other`.
    pub const fn minus(self, other: DispatchKeySet) -> Self {
        DispatchKeySet(self.0 & !other.0)
    }

    /// The keys strictly below `key` (what a layer at `key` redispatches to).
    pub const fn below(self, key: DispatchKey) -> Self {
        DispatchKeySet(self.0 & ((1u16 << key as u8) - 1))
    }

    /// Whether `key` is in the set.
    pub const fn contains(self, key: DispatchKey) -> bool {
        self.0 & (1 << key as u8) != 0
    }

    /// True for the empty set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The highest-priority key, if any.
    pub const fn highest(self) -> Option<DispatchKey> {
        if self.0 == 0 {
            None
        } else {
            Some(DispatchKey::from_index(15 - self.0.leading_zeros()))
        }
    }

    /// The keys, highest first.
    pub fn iter(self) -> impl Iterator<Item = DispatchKey> {
        ALL_KEYS.into_iter().rev().filter(move |k| self.contains(*k))
    }
}

impl fmt::Debug for DispatchKeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl fmt::Display for DispatchKeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highest_key_wins() {
        let ks = DispatchKeySet::of(DispatchKey::Cpu).with(DispatchKey::Autograd);
        assert_eq!(ks.highest(), Some(DispatchKey::Autograd));
        assert_eq!(ks.below(DispatchKey::Autograd).highest(), Some(DispatchKey::Cpu));
        assert_eq!(DispatchKeySet::EMPTY.highest(), None);
        assert_eq!(
            ks.iter().collect::<Vec<_>>(),
            vec![DispatchKey::Autograd, DispatchKey::Cpu]
        );
    }

    /// Every set operation against a model over the keys' list.
    #[test]
    fn set_operations_match_a_model() {
        let model =
            |ks: DispatchKeySet| -> Vec<DispatchKey> { ALL_KEYS.iter().copied().filter(|k| ks.contains(*k)).collect() };
        for (i, &a) in ALL_KEYS.iter().enumerate() {
            for &b in &ALL_KEYS[i..] {
                let s = DispatchKeySet::of(a).with(b);
                let want: Vec<_> = ALL_KEYS.iter().copied().filter(|k| *k == a || *k == b).collect();
                assert_eq!(model(s), want);
                assert!(!s.is_empty());
                // without: removes exactly one key.
                let w = s.without(a);
                assert!(!w.contains(a), "{a:?} removed");
                assert_eq!(w.contains(b), a != b, "{b:?} kept");
                assert_eq!(s.without(a).without(b), DispatchKeySet::EMPTY);
                assert_eq!(DispatchKeySet::EMPTY.without(a), DispatchKeySet::EMPTY);
                // minus / union.
                assert_eq!(s.minus(DispatchKeySet::of(a)), w);
                assert_eq!(w.union(DispatchKeySet::of(a)), s);
                // below: the keys strictly lower than a.
                let below: Vec<_> = model(s.below(a));
                assert_eq!(
                    below,
                    want.iter()
                        .copied()
                        .filter(|k| (*k as u8) < (a as u8))
                        .collect::<Vec<_>>()
                );
                assert_eq!(s.highest(), want.iter().copied().max_by_key(|k| *k as u8));
            }
        }
        assert!(DispatchKeySet::EMPTY.is_empty());
    }
}
