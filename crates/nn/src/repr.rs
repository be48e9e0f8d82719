//! PyTorch's module repr (`print(model)`).

use crate::Module;

/// The repr of `m` (what `Display` of a derived module prints).
pub fn repr<M: Module + ?Sized>(m: &M) -> String {
    m.repr()
}
