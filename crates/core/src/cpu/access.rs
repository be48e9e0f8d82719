//! Locked access to the memory of a kernel's operands.
//!
//! A kernel call locks every storage it touches once (for writing when it
//! writes any output there, else for reading), in address order, so two
//! calls can never wait on each other in a cycle.

use std::sync::{RwLockReadGuard, RwLockWriteGuard};

use smallvec::SmallVec;

use crate::storage::Buffer;
use crate::{Error, Result, Tensor};

#[allow(dead_code)] // the guards are held for their Drop
enum Guard<'a> {
    Read(RwLockReadGuard<'a, Buffer>),
    Write(RwLockWriteGuard<'a, Buffer>),
}

/// Pointers to the first element of each operand, valid while this lives.
pub(crate) struct Access<'a> {
    _guards: SmallVec<[Guard<'a>; 4]>,
    /// Input data pointers, in the order given.
    pub ins: SmallVec<[*const u8; 4]>,
    /// Output data pointers, in the order given.
    pub outs: SmallVec<[*mut u8; 2]>,
}

/// Locks the storages of `inputs` and `outputs` and returns their data pointers.
pub(crate) fn access<'a>(op: &'static str, inputs: &[&'a Tensor], outputs: &[&'a Tensor]) -> Result<Access<'a>> {
    let mut storages: SmallVec<[(usize, &'a Tensor, bool); 6]> = SmallVec::new();
    for t in inputs {
        storages.push((t.storage().id(), *t, false));
    }
    for t in outputs {
        storages.push((t.storage().id(), *t, true));
    }
    storages.sort_by_key(|s| s.0);
    let mut guards: SmallVec<[Guard<'a>; 4]> = SmallVec::new();
    let mut bases: SmallVec<[(usize, *mut u8); 4]> = SmallVec::new();
    let mut i = 0;
    while i < storages.len() {
        let id = storages[i].0;
        let mut j = i;
        let mut write = false;
        while j < storages.len() && storages[j].0 == id {
            write |= storages[j].2;
            j += 1;
        }
        let st = storages[i].1.storage();
        let (guard, base) = if write {
            let g = st.write();
            let p = match &*g {
                Buffer::Cpu(b) => b.as_ptr(),
                _ => {
                    return Err(Error::NoData {
                        op,
                        device: st.device(),
                    });
                }
            };
            (Guard::Write(g), p)
        } else {
            let g = st.read();
            let p = match &*g {
                Buffer::Cpu(b) => b.as_ptr(),
                _ => {
                    return Err(Error::NoData {
                        op,
                        device: st.device(),
                    });
                }
            };
            (Guard::Read(g), p)
        };
        guards.push(guard);
        bases.push((id, base));
        i = j;
    }
    let ptr_of = |t: &Tensor| -> *mut u8 {
        let base = bases.iter().find(|b| b.0 == t.storage().id()).unwrap().1;
        // SAFETY: the offset lies inside the storage (an invariant of every tensor).
        unsafe { base.add(t.storage_offset() * t.element_size()) }
    };
    Ok(Access {
        ins: inputs.iter().map(|t| ptr_of(t) as *const u8).collect(),
        outs: outputs.iter().map(|t| ptr_of(t)).collect(),
        _guards: guards,
    })
}
