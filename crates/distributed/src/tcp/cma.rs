//! Single-copy collectives between the ranks of one host, by cross-memory
//! attach (CMA: Linux's `process_vm_readv`, the single-copy mechanism of
//! Open MPI's shared-memory transport): a rank reads a peer's buffer
//! straight out of the peer's address space, with no staging copy through
//! a shared mailbox.
//!
//! The all-reduce moves about 2.75 times the buffer through memory per
//! rank at 4 ranks (the ring through mailboxes: 6.75 times), and runs in
//! three rounds of small messages whatever the rank count, where the ring
//! needs `2 (n - 1)` dependent steps: on a host with fewer cores than
//! ranks each of those steps waits for a peer to be scheduled.
//!
//! Whether the group can is probed when its mesh connects
//! (`cross_memory.rs`).

use std::ops::Range;

use ferrotorch_core::DType;

use super::algorithms::{Fail, Step, even_blocks};
use super::cross_memory::read_remote;
use crate::reduce_op::{ReduceOp, finish_avg, reduce_into};

/// All-reduces from this size up go by single-copy reads. Below it the
/// ring through the mailboxes is faster: its copies stay in cache, where
/// each read here pins the peer's pages first. (Ice Lake, 2 cores: at
/// 1 MiB single-copy reads gave 1.8x the ring's bandwidth at 2 ranks,
/// 1.2x at 3 and 0.9x at 4; at 512 KiB 0.75x to 0.9x.)
pub(crate) const MIN_BYTES: usize = 1 << 20;

/// Bytes a rank reads from one peer before reducing them into its block:
/// small enough that the piece of its own block and the piece read stay
/// in L2 while the peers' pieces are added one after another.
const PIECE: usize = 128 << 10;

/// Tags of the all-reduce's three rounds of messages.
const TAG_ADDRESS: u64 = 8 << 56;
const TAG_REDUCED: u64 = 9 << 56;
const TAG_READ: u64 = 10 << 56;

/// Round 1 of every single-copy call: each rank tells the others where
/// its buffer (`here`) lies; the buffer holds its input from now on.
fn exchange_addresses(st: &Step<'_>, here: &[u8]) -> std::result::Result<Vec<u64>, Fail> {
    let (r, n) = (st.mesh.rank(), st.mesh.size());
    let here = here.as_ptr() as usize as u64;
    for p in peers(r, n) {
        st.send(p, TAG_ADDRESS, &here.to_le_bytes())?;
    }
    let mut addr = vec![here; n];
    for p in peers(r, n) {
        let m = st.recv_exact(p, TAG_ADDRESS, 8)?;
        addr[p] = u64::from_le_bytes(m[..].try_into().expect("8 bytes"));
    }
    Ok(addr)
}

/// The other ranks, starting after this one (so that the ranks do not
/// all read the same peer at once).
fn peers(r: usize, n: usize) -> impl Iterator<Item = usize> {
    (1..n).map(move |k| (r + k) % n)
}

/// Sends an empty message with `tag` to every peer, then waits for
/// theirs.
fn round(st: &Step<'_>, tag: u64) -> std::result::Result<(), Fail> {
    let (r, n) = (st.mesh.rank(), st.mesh.size());
    for p in peers(r, n) {
        st.send(p, tag, &[])?;
    }
    for p in peers(r, n) {
        st.recv_exact(p, tag, 0)?;
    }
    Ok(())
}

/// Reads `at` (a byte range of its buffer) from rank `p` into `dst`.
fn read_peer(
    st: &Step<'_>,
    pids: &[i32],
    addr: &[u64],
    p: usize,
    at: &Range<usize>,
    dst: &mut [u8],
) -> std::result::Result<(), Fail> {
    read_remote(pids[p], addr[p] + at.start as u64, dst)
        .map_err(|e| format!("{}: reading rank {p}'s buffer: {e}", st.what()))
}

/// Reduces `block` of every peer's buffer into the same block of `buf`,
/// piece by piece: this rank's values first, then the peers' in rank
/// order, so the bits repeat. With `avg`, divides by the rank count.
#[allow(clippy::too_many_arguments)]
fn reduce_block(
    st: &Step<'_>,
    pids: &[i32],
    addr: &[u64],
    buf: &mut [u8],
    block: Range<usize>,
    dtype: DType,
    op: ReduceOp,
    avg: bool,
) -> std::result::Result<(), Fail> {
    let (r, n) = (st.mesh.rank(), st.mesh.size());
    let es = dtype.element_size();
    let mut scratch = vec![0u8; PIECE.min(block.len())];
    let piece_len = (PIECE / es).max(1) * es;
    let mut at = block.start;
    while at < block.end {
        let piece = at..(at + piece_len).min(block.end);
        let tmp = &mut scratch[..piece.len()];
        for p in (0..n).filter(|&p| p != r) {
            read_peer(st, pids, addr, p, &piece, tmp)?;
            reduce_into(dtype, op, &mut buf[piece.clone()], tmp);
        }
        if avg {
            finish_avg(dtype, &mut buf[piece.clone()], n);
        }
        at = piece.end;
    }
    Ok(())
}

/// All-reduce by single-copy reads: rank `r` reduces block `r` of every
/// rank's buffer into its own ([`reduce_block`]; every rank ends with the
/// bits of the block's one reducer), tells the others it is done, then
/// reads each peer's reduced block straight into its buffer, and returns
/// once every peer has read its block. `pids` are the group's processes.
pub(crate) fn all_reduce(
    st: &Step<'_>,
    pids: &[i32],
    buf: &mut [u8],
    dtype: DType,
    op: ReduceOp,
) -> std::result::Result<(), Fail> {
    let (r, n) = (st.mesh.rank(), st.mesh.size());
    let (addr, blocks) = reduce_own_block(st, pids, buf, dtype, op, op == ReduceOp::Avg)?;
    // Round 2: this block is reduced (and this rank has read the peers'
    // copies of it: they may overwrite them).
    for p in peers(r, n) {
        st.send(p, TAG_REDUCED, &[])?;
    }
    for p in peers(r, n) {
        st.recv_exact(p, TAG_REDUCED, 0)?;
        let b = blocks[p].clone();
        read_peer(st, pids, &addr, p, &b, &mut buf[b.clone()])?;
    }
    // Round 3: the peers have read this rank's block.
    round(st, TAG_READ)
}

/// Round 1, then this rank's block of `buf` ([`even_blocks`]) reduced over
/// every rank ([`reduce_block`]): the ranks' buffer addresses and the
/// blocks.
fn reduce_own_block(
    st: &Step<'_>,
    pids: &[i32],
    buf: &mut [u8],
    dtype: DType,
    op: ReduceOp,
    avg: bool,
) -> std::result::Result<(Vec<u64>, Vec<Range<usize>>), Fail> {
    let es = dtype.element_size();
    let blocks = even_blocks(buf.len() / es, st.mesh.size(), es);
    let addr = exchange_addresses(st, buf)?;
    reduce_block(st, pids, &addr, buf, blocks[st.mesh.rank()].clone(), dtype, op, avg)?;
    Ok((addr, blocks))
}

/// Reduce-scatter by single-copy reads: `buf` holds one block per rank
/// ([`even_blocks`]); afterwards this rank's block of it holds the
/// reduction over every rank (the mean's division left to the caller).
pub(crate) fn reduce_scatter(
    st: &Step<'_>,
    pids: &[i32],
    buf: &mut [u8],
    dtype: DType,
    op: ReduceOp,
) -> std::result::Result<(), Fail> {
    reduce_own_block(st, pids, buf, dtype, op, false)?;
    round(st, TAG_READ)
}

/// All-gather by single-copy reads: `out` holds one block per rank (equal
/// lengths), this rank's already in place; every other block is read
/// straight from its owner's.
pub(crate) fn all_gather(st: &Step<'_>, pids: &[i32], out: &mut [u8]) -> std::result::Result<(), Fail> {
    let (r, n) = (st.mesh.rank(), st.mesh.size());
    let len = out.len() / n;
    let addr = exchange_addresses(st, &out[r * len..(r + 1) * len])?;
    for p in peers(r, n) {
        read_peer(st, pids, &addr, p, &(0..len), &mut out[p * len..(p + 1) * len])?;
    }
    round(st, TAG_READ)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use half::{bf16, f16};

    use super::*;
    use crate::store::HashStore;
    use crate::tcp::mesh::Mesh;

    const T: Duration = Duration::from_secs(20);

    /// `n` ranks of `group`, connected in this process (one host), each
    /// handed to `f` on its own thread; their results in rank order.
    fn ranks<R: Send + 'static>(group: &str, n: usize, f: impl Fn(Mesh) -> R + Send + Sync + 'static) -> Vec<R> {
        let store = Arc::new(HashStore::new());
        let f = Arc::new(f);
        let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let threads: Vec<_> = (0..n)
            .map(|r| {
                let (store, f, g) = (store.clone(), f.clone(), group.to_owned());
                std::thread::spawn(move || f(Mesh::connect(&*store, &g, r, n, ip, T).unwrap()))
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    }

    fn step(mesh: &Mesh, seq: u64) -> Step<'_> {
        Step {
            mesh,
            seq,
            fingerprint: 7,
            op: "all_reduce",
            deadline: Instant::now() + T,
            grace: Duration::from_millis(100),
        }
    }

    /// Rank `r`'s element `i` for `op`: small integers, whose reductions
    /// are exact in every dtype (products of 1s and 2s).
    fn value(op: ReduceOp, r: usize, i: usize) -> f64 {
        match op {
            ReduceOp::Product => (1 + (r + i) % 2) as f64,
            _ => ((r * 3 + i * 5) % 11) as f64 + 1.0,
        }
    }

    fn encode(dtype: DType, xs: &[f64]) -> Vec<u8> {
        match dtype {
            DType::F32 => xs.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect(),
            DType::F64 => xs.iter().flat_map(|&x| x.to_le_bytes()).collect(),
            DType::F16 => xs.iter().flat_map(|&x| f16::from_f64(x).to_le_bytes()).collect(),
            DType::BF16 => xs.iter().flat_map(|&x| bf16::from_f64(x).to_le_bytes()).collect(),
            DType::I64 => xs.iter().flat_map(|&x| (x as i64).to_le_bytes()).collect(),
            DType::I32 => xs.iter().flat_map(|&x| (x as i32).to_le_bytes()).collect(),
            DType::U8 => xs.iter().map(|&x| x as u8).collect(),
            other => panic!("no encoding for {other:?} in this test"),
        }
    }

    /// Every dtype and op, at lengths that do not divide by the rank count
    /// (and shorter than it), on 2, 3 and 4 ranks: every rank ends with the
    /// exact reduction.
    #[test]
    fn single_copy_all_reduce_is_exact_for_every_dtype_and_op() {
        for n in [2usize, 3, 4] {
            let results = ranks(&format!("cma-exact-{n}"), n, move |mesh| {
                assert!(mesh.cma_pids().is_some(), "ranks of one process read each other");
                let r = mesh.rank();
                let mut seq = 0;
                let mut checked = 0;
                for dtype in [
                    DType::F32,
                    DType::F64,
                    DType::F16,
                    DType::BF16,
                    DType::I64,
                    DType::I32,
                    DType::U8,
                ] {
                    for op in [
                        ReduceOp::Sum,
                        ReduceOp::Avg,
                        ReduceOp::Max,
                        ReduceOp::Min,
                        ReduceOp::Product,
                    ] {
                        if op == ReduceOp::Avg && !dtype.is_floating_point() {
                            continue;
                        }
                        for len in [0usize, 1, n - 1, 1000, 100_003] {
                            let mine: Vec<f64> = (0..len).map(|i| value(op, r, i)).collect();
                            let mut buf = encode(dtype, &mine);
                            seq += 1;
                            all_reduce(&step(&mesh, seq), mesh.cma_pids().unwrap(), &mut buf, dtype, op).unwrap();
                            let want: Vec<f64> = (0..len)
                                .map(|i| {
                                    let xs = (0..n).map(|p| value(op, p, i));
                                    match op {
                                        ReduceOp::Sum => xs.sum(),
                                        // The mean's division, in f32 below f64.
                                        ReduceOp::Avg if dtype == DType::F64 => xs.sum::<f64>() / n as f64,
                                        ReduceOp::Avg => f64::from(xs.sum::<f64>() as f32 / n as f32),
                                        ReduceOp::Max => xs.fold(f64::MIN, f64::max),
                                        ReduceOp::Min => xs.fold(f64::MAX, f64::min),
                                        _ => xs.product(),
                                    }
                                })
                                .collect();
                            let want = encode(dtype, &want);
                            assert!(buf == want, "{n} ranks, rank {r}: {dtype:?} {op:?} of {len}");
                            checked += 1;
                        }
                    }
                }
                checked
            });
            assert!(results.iter().all(|&c| c == results[0] && c > 100));
        }
    }

    /// A buffer of many pieces: every rank ends with the same bits.
    #[test]
    fn every_rank_ends_with_the_same_bits() {
        let results = ranks("cma-bits", 3, |mesh| {
            let r = mesh.rank();
            let xs: Vec<f32> = (0..400_001)
                .map(|i| ((i as f32) * 0.001 * (r + 1) as f32).sin())
                .collect();
            let mut buf: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
            all_reduce(
                &step(&mesh, 1),
                mesh.cma_pids().unwrap(),
                &mut buf,
                DType::F32,
                ReduceOp::Sum,
            )
            .unwrap();
            buf
        });
        assert!(results.iter().all(|b| *b == results[0]));
        let first = f32::from_le_bytes(results[0][4..8].try_into().unwrap());
        let want = (0.001f32).sin() + (0.002f32).sin() + (0.003f32).sin();
        assert!((first - want).abs() < 1e-6, "{first} vs {want}");
    }

    /// Reduce-scatter and all-gather on 2 to 4 ranks, with blocks of odd
    /// lengths: each rank's block is the exact sum; every rank gathers
    /// every rank's bytes in rank order.
    #[test]
    fn single_copy_reduce_scatter_and_all_gather() {
        for n in [2usize, 3, 4] {
            ranks(&format!("cma-rs-ag-{n}"), n, move |mesh| {
                let r = mesh.rank();
                let pids = mesh.cma_pids().unwrap().to_vec();
                for (k, per) in [0usize, 1, 1001, 40_003].into_iter().enumerate() {
                    let xs: Vec<f64> = (0..per * n).map(|i| value(ReduceOp::Sum, r, i)).collect();
                    let mut buf = encode(DType::I64, &xs);
                    reduce_scatter(
                        &step(&mesh, 2 * k as u64 + 1),
                        &pids,
                        &mut buf,
                        DType::I64,
                        ReduceOp::Sum,
                    )
                    .unwrap();
                    let want: Vec<f64> = (r * per..(r + 1) * per)
                        .map(|i| (0..n).map(|p| value(ReduceOp::Sum, p, i)).sum())
                        .collect();
                    assert!(buf[r * per * 8..(r + 1) * per * 8] == encode(DType::I64, &want)[..]);
                    let mine: Vec<u8> = (0..per * 3 + 1).map(|i| (i * 7 + r * 13) as u8).collect();
                    let mut out = vec![0u8; mine.len() * n];
                    out[r * mine.len()..(r + 1) * mine.len()].copy_from_slice(&mine);
                    all_gather(&step(&mesh, 2 * k as u64 + 2), &pids, &mut out).unwrap();
                    for p in 0..n {
                        let theirs: Vec<u8> = (0..mine.len()).map(|i| (i * 7 + p * 13) as u8).collect();
                        assert!(
                            out[p * mine.len()..(p + 1) * mine.len()] == theirs[..],
                            "{n} ranks, rank {r} from {p}"
                        );
                    }
                }
            });
        }
    }
}
