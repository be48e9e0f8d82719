//! Python's pickle, as far as `torch.save` and
//! `torch.load(weights_only=True)` use it: the opcodes ([`op`]), the
//! allow-listed globals ([`globals`]), a reader that builds [`Value`]s
//! without executing anything ([`reader`]) and a protocol-2 writer
//! ([`writer`]).
//!
//! [`Value`]: crate::Value

pub(crate) mod globals;
pub(crate) mod op;
pub(crate) mod reader;
pub(crate) mod writer;
