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
    let n = inputs.len() + outputs.len();
    if n <= INLINE {
        let (mut order, mut ptrs) = ([(0, 0); INLINE], [std::ptr::null_mut(); INLINE]);
        lock_all(op, inputs, outputs, &mut order[..n], &mut ptrs[..n])
    } else {
        lock_all(
            op,
            inputs,
            outputs,
            &mut vec![(0, 0); n],
            &mut vec![std::ptr::null_mut(); n],
        )
    }
}

/// `access` with scratch for every operand: `order` gets (storage id,
/// operand index) sorted by id, `ptrs` each operand's data pointer.
fn lock_all<'a>(
    op: &'static str,
    inputs: &[&'a Tensor],
    outputs: &[&'a Tensor],
    order: &mut [(usize, usize)],
    ptrs: &mut [*mut u8],
) -> Result<Access<'a>> {
    let (n_in, n) = (inputs.len(), order.len());
    if n == 0 {
        return Ok(Access {
            ins: SmallVec::new(),
            outs: SmallVec::new(),
            _guards: SmallVec::new(),
        });
    }
    let operand = |i: usize| if i < n_in { inputs[i] } else { outputs[i - n_in] };
    for i in 0..n {
        // Insertion sort by storage id: there are few operands (a sort for many).
        let id = operand(i).storage().id();
        let mut at = i;
        while at > 0 && n <= INLINE && order[at - 1].0 > id {
            order[at] = order[at - 1];
            at -= 1;
        }
        order[at] = (id, i);
    }
    if n > INLINE {
        order.sort_unstable();
    }
    let mut guards: SmallVec<[Guard<'a>; 4]> = SmallVec::new();
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
        SmallVec::from_buf_and_len(std::array::from_fn(|k| ptrs[k.min(n - 1)] as *const u8), n_in)
    } else {
        ptrs[..n_in].iter().map(|&p| p as *const u8).collect()
    };
    let outs = if n - n_in <= 2 {
        SmallVec::from_buf_and_len(std::array::from_fn(|k| ptrs[(n_in + k).min(n - 1)]), n - n_in)
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
        Buffer::Meta if st.device() == crate::Device::Cpu => Err(Error::Released { op }),
        _ => Err(Error::NoData {
            op,
            device: st.device(),
        }),
    }
}
