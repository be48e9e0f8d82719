//! Reading another process's memory (Linux's cross-memory attach,
//! `process_vm_readv`), and the probe that tells whether every rank of a
//! group on one host may read every other's: the kernel allows it between
//! processes of one user unless a security module such as Yama's
//! `ptrace_scope` or a seccomp filter forbids it, and the pid must name the
//! peer (ranks in different pid namespaces fail). `FERROTORCH_CMA_DISABLE=1`
//! turns it off for a rank (and so for its groups). `cma.rs` builds the
//! single-copy collectives on it.

use std::hash::BuildHasher;

use crate::error::Result;
use crate::store::Store;

/// Copies `dst.len()` bytes at address `addr` of process `pid` into `dst`.
///
/// Fails with the kernel's error: `EPERM` when this process may not read
/// the other's memory, `ESRCH` when it is gone, `EFAULT` when the range is
/// not mapped there.
pub(crate) fn read_remote(pid: i32, addr: u64, dst: &mut [u8]) -> std::io::Result<()> {
    let mut done = 0usize;
    while done < dst.len() {
        let rest = &mut dst[done..];
        let local = libc::iovec {
            iov_base: rest.as_mut_ptr().cast(),
            iov_len: rest.len(),
        };
        let remote = libc::iovec {
            iov_base: addr.wrapping_add(done as u64) as usize as *mut libc::c_void,
            iov_len: rest.len(),
        };
        // SAFETY: `local` is `rest`, borrowed mutably here (the kernel
        // writes at most its `iov_len` bytes); `remote` is only read, in the
        // peer, checked by the kernel against its mappings (EFAULT).
        let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the peer's range ended early",
            ));
        }
        done += n as usize;
    }
    Ok(())
}

/// Whether `FERROTORCH_CMA_DISABLE` turns single-copy reads off.
fn disabled() -> bool {
    matches!(
        std::env::var("FERROTORCH_CMA_DISABLE").as_deref(),
        Ok("1" | "true" | "yes")
    )
}

/// Finds out, through the store, whether every rank of a group on one host
/// (`all_local`) can read every other's memory: each publishes its pid
/// and the address of a random word, reads its peers' words, and
/// publishes whether all matched. Returns every rank's pid when all did
/// (the same answer on every rank), else `None`.
pub(crate) fn probe(store: &dyn Store, rank: usize, size: usize, all_local: bool) -> Result<Option<Vec<i32>>> {
    if size < 2 {
        return Ok(None);
    }
    let able = all_local && !disabled();
    // A word no other process holds at that address by chance.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let nonce: Box<u64> =
        Box::new(std::collections::hash_map::RandomState::new().hash_one((std::process::id(), rank, now)));
    let pid = std::process::id() as i32;
    let me = format!("{pid} {} {}", &*nonce as *const u64 as usize, *nonce);
    store.set(&format!("cma/{rank}"), if able { me.as_bytes() } else { b"" })?;
    let mut pids = vec![0i32; size];
    let mut ok = able;
    for (p, slot) in pids.iter_mut().enumerate() {
        let text = String::from_utf8_lossy(&store.get(&format!("cma/{p}"))?).into_owned();
        let fields: Vec<u64> = text.split(' ').filter_map(|f| f.parse().ok()).collect();
        let [peer_pid, addr, want] = fields[..] else {
            ok = false;
            continue;
        };
        *slot = peer_pid as i32;
        if p != rank && ok {
            let mut got = [0u8; 8];
            ok = read_remote(peer_pid as i32, addr, &mut got).is_ok() && u64::from_ne_bytes(got) == want;
        }
    }
    store.set(&format!("cma_ok/{rank}"), if ok { b"1" } else { b"0" })?;
    // Every rank's verdict (read after every rank has read this one's
    // word, so `nonce` may go once they are in).
    for p in 0..size {
        if store.get(&format!("cma_ok/{p}"))? != b"1" {
            ok = false;
        }
    }
    drop(nonce);
    Ok(ok.then_some(pids))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::store::HashStore;

    #[test]
    fn a_group_off_one_host_does_not_probe() {
        let store = HashStore::new();
        assert_eq!(probe(&store, 0, 1, true).unwrap(), None);
        // A rank that says it is not local makes every rank say no.
        let store = Arc::new(HashStore::new());
        let s1 = store.clone();
        let other = std::thread::spawn(move || probe(&*s1, 1, 2, false).unwrap());
        assert_eq!(probe(&*store, 0, 2, true).unwrap(), None);
        assert_eq!(other.join().unwrap(), None);
    }

    #[test]
    fn reading_memory_that_is_not_mapped_is_an_error() {
        let mut dst = [0u8; 16];
        let e = read_remote(std::process::id() as i32, 8, &mut dst).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFAULT));
        let word = 0x1234_5678_9abc_def0u64;
        read_remote(
            std::process::id() as i32,
            &word as *const u64 as usize as u64,
            &mut dst[..8],
        )
        .unwrap();
        assert_eq!(u64::from_ne_bytes(dst[..8].try_into().unwrap()), word);
    }
}
