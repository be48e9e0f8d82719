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

/// Most operands handled without heap allocation.
const INLINE: usize = 6;

/// Locks the storages of `inputs` and `outputs` and returns their data pointers.
pub(crate) fn access<'a>(op: &'static str, inputs: &[&'a Tensor], outputs: &[&'a Tensor]) -> Result<Access<'a>> {
    let (n_in, n) = (inputs.len(), inputs.len() + outputs.len());
    if n > INLINE {
        return access_many(op, inputs, outputs);
    }
    let operand = |i: usize| if i < n_in { inputs[i] } else { outputs[i - n_in] };
    // Every operand as (storage id, operand index), sorted by id (insertion
    // sort: there are few).
    let mut order = [(0usize, 0usize); INLINE];
    for i in 0..n {
        let id = operand(i).storage().id();
        let mut at = i;
        while at > 0 && order[at - 1].0 > id {
            order[at] = order[at - 1];
            at -= 1;
        }
        order[at] = (id, i);
    }
    let mut guards: SmallVec<[Guard<'a>; 4]> = SmallVec::new();
    let mut ptrs = [std::ptr::null_mut::<u8>(); INLINE];
    let mut i = 0;
    while i < n {
        let id = order[i].0;
        let mut j = i;
        let mut write = false;
        while j < n && order[j].0 == id {
            write |= order[j].1 >= n_in;
            j += 1;
        }
        let st = operand(order[i].1).storage();
        let (guard, base) = if write {
            let g = st.write();
            let p = cpu_ptr(op, st, &g)?;
            (Guard::Write(g), p)
        } else {
            let g = st.read();
            let p = cpu_ptr(op, st, &g)?;
            (Guard::Read(g), p)
        };
        guards.push(guard);
        for &(_, k) in &order[i..j] {
            let t = operand(k);
            // SAFETY: the offset lies inside the storage (an invariant of every tensor).
            ptrs[k] = unsafe { base.add(t.storage_offset() * t.element_size()) };
        }
        i = j;
    }
    // Inline lists built from fixed arrays (no `memcpy` call).
    let ins = if n_in <= 4 {
        SmallVec::from_buf_and_len(std::array::from_fn(|k| ptrs[k] as *const u8), n_in)
    } else {
        ptrs[..n_in].iter().map(|&p| p as *const u8).collect()
    };
    let outs = if n - n_in <= 2 {
        SmallVec::from_buf_and_len(std::array::from_fn(|k| ptrs[(n_in + k).min(INLINE - 1)]), n - n_in)
    } else {
        SmallVec::from_slice(&ptrs[n_in..n])
    };
    Ok(Access {
        ins,
        outs,
        _guards: guards,
    })
}

/// The data pointer of a locked CPU buffer (an error for other devices).
fn cpu_ptr(op: &'static str, st: &crate::storage::Storage, buf: &Buffer) -> Result<*mut u8> {
    match buf {
        Buffer::Cpu(b) => Ok(b.as_ptr()),
        _ => Err(Error::NoData {
            op,
            device: st.device(),
        }),
    }
}

/// `access` for any number of operands.
fn access_many<'a>(op: &'static str, inputs: &[&'a Tensor], outputs: &[&'a Tensor]) -> Result<Access<'a>> {
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
