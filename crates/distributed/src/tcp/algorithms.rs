//! The tcp backend's algorithms over [`Mesh`]: ring reduce-scatter and
//! all-gather (pipelined in segments, each forwarded as soon as it is
//! reduced), ring all-reduce from the two (each segment goes on to the
//! all-gather as soon as it is reduced, while it is still in cache), binomial-tree reduce and
//! broadcast (a pipelined chain for large broadcasts), direct gather,
//! scatter and all-to-all. Reduction orders are fixed by the ranks, so
//! results repeat bit for bit, and every rank of an all-reduce ends with
//! the same bits (each block is reduced on one rank and copied to the rest).

use std::ops::Range;
use std::time::{Duration, Instant};

use ferrotorch_core::DType;

use super::mesh::{Mesh, NoMessage, Payload};
use crate::reduce_op::{ReduceOp, finish_avg, reduce_into};
/// Broadcasts up to this size go down a binomial tree; larger ones down a
/// pipelined chain.
const TREE_BROADCAST_MAX: usize = 256 * 1024;

/// One collective in flight: its sequence number, fingerprint and deadline,
/// with the mesh's send and receive checked against them.
pub(crate) struct Step<'a> {
    pub mesh: &'a Mesh,
    pub seq: u64,
    pub fingerprint: u64,
    pub op: &'static str,
    pub deadline: Instant,
    /// Time kept after the deadline to find out which ranks are absent.
    pub grace: Duration,
}

/// A failure, as the message the work and the other ranks get.
pub(crate) type Fail = String;

impl Step<'_> {
    /// The call in words, for messages: `all_reduce (group "0", sequence number 3)`.
    pub(crate) fn what(&self) -> String {
        format!(
            "{} (group {:?}, sequence number {})",
            self.op,
            self.mesh.group_name(),
            self.seq
        )
    }

    pub(crate) fn send(&self, peer: usize, tag: u64, bytes: &[u8]) -> Result<(), Fail> {
        self.mesh
            .send(peer, self.seq, tag, self.fingerprint, bytes)
            .map_err(|e| format!("{}: {e}", self.what()))
    }

    /// [`Step::recv`] of a message that must be `want` bytes long.
    pub(crate) fn recv_exact(&self, peer: usize, tag: u64, want: usize) -> Result<Payload<'_>, Fail> {
        let m = self.recv(peer, tag)?;
        if m.len() == want {
            Ok(m)
        } else {
            Err(format!(
                "{}: rank {peer} sent {} bytes where {want} were expected",
                self.what(),
                m.len()
            ))
        }
    }

    pub(crate) fn recv(&self, peer: usize, tag: u64) -> Result<Payload<'_>, Fail> {
        match self.mesh.recv(peer, self.seq, tag, self.fingerprint, self.deadline) {
            Ok(m) => Ok(m),
            Err(NoMessage::Mismatch(fingerprint)) => Err(format!(
                "collective mismatch at sequence number {} of group {:?}: rank {peer} called {}, rank {} called {}",
                self.seq,
                self.mesh.group_name(),
                describe(fingerprint),
                self.mesh.rank(),
                describe(self.fingerprint)
            )),
            Err(NoMessage::Gone(why)) => Err(format!("{}: {why}", self.what())),
            Err(NoMessage::Deadline) => {
                let absent = self.mesh.absent_at(self.seq, self.grace);
                let mut msg = format!(
                    "{} timed out after {:?} waiting for rank {peer}",
                    self.what(),
                    self.mesh.timeout()
                );
                if absent.is_empty() {
                    msg.push_str("; every rank reached it (a slow or stuck peer)");
                } else {
                    msg.push_str(&format!("; ranks {absent:?} did not arrive"));
                    for p in &absent {
                        if let Some(why) = self.mesh.death(*p) {
                            msg.push_str(&format!(" (rank {p}: {why})"));
                        }
                    }
                }
                Err(msg)
            }
        }
    }
}

/// A fingerprint in words: `all_reduce(f32, SUM, 1000 elements)`.
pub(crate) fn describe(fp: u64) -> String {
    use crate::collective::code;
    let kind = match (fp >> 56) as u8 {
        code::BROADCAST => "broadcast",
        code::ALL_REDUCE => "all_reduce",
        code::REDUCE => "reduce",
        code::ALL_GATHER => "all_gather",
        code::REDUCE_SCATTER => "reduce_scatter",
        code::GATHER => "gather",
        code::SCATTER => "scatter",
        code::ALL_TO_ALL => "all_to_all",
        code::BARRIER => "barrier",
        code::P2P => "send/recv",
        _ => "an unknown call",
    };
    let dtype = ferrotorch_core::ALL_DTYPES
        .get(((fp >> 48) & 0xFF) as usize)
        .map(|d| d.name());
    let ops = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"];
    let op = ops.get(((fp >> 40) & 0xFF) as usize);
    let numel = fp & 0xFF_FFFF_FFFF;
    let mut parts = Vec::new();
    parts.extend(dtype.map(str::to_owned));
    parts.extend(op.map(|o| (*o).to_owned()));
    if numel > 0 {
        parts.push(format!("{numel} elements"));
    }
    format!("{kind}({})", parts.join(", "))
}

/// Tag of segment `k` of step `s` in phase `phase`.
fn tag(phase: u64, s: usize, k: usize) -> u64 {
    (phase << 56) | ((s as u64) << 28) | k as u64
}

/// Piece `k` of `m` of a block: near-equal whole elements of `es` bytes
/// (the first `elems % m` pieces one element longer).
fn piece(block: &Range<usize>, k: usize, m: usize, es: usize) -> Range<usize> {
    let elems = block.len() / es;
    let (base, rem) = (elems / m, elems % m);
    let start = block.start + (k * base + k.min(rem)) * es;
    start..start + (base + usize::from(k < rem)) * es
}

/// Pieces per block so that none is longer than the mesh's segment (the
/// same count for every block, so every step of a ring moves piece `k`).
fn pieces(st: &Step<'_>, blocks: &[Range<usize>]) -> usize {
    let longest = blocks.iter().map(Range::len).max().unwrap_or(0);
    longest.div_ceil(st.mesh.segment()).max(1)
}

/// `n` nearly equal blocks of `elems` elements (the first `elems % n` one
/// longer), as byte ranges.
pub(crate) fn even_blocks(elems: usize, n: usize, es: usize) -> Vec<Range<usize>> {
    let (base, rem) = (elems / n, elems % n);
    let mut at = 0;
    (0..n)
        .map(|i| {
            let len = (base + usize::from(i < rem)) * es;
            let r = at..at + len;
            at += len;
            r
        })
        .collect()
}

fn modn(x: isize, n: usize) -> usize {
    x.rem_euclid(n as isize) as usize
}

/// The ring neighbours of this rank: (rank, size, next, prev).
fn ring(st: &Step<'_>) -> (isize, usize, usize, usize) {
    let (r, n) = (st.mesh.rank(), st.mesh.size());
    (r as isize, n, (r + 1) % n, (r + n - 1) % n)
}

/// The reduce-scatter's first sends: piece `k` of every block goes out
/// (this rank's own data, needing nothing received) once the pieces below
/// `k + 1 - lookahead` have been reduced; `sent` counts those sent.
fn reduce_scatter_first_sends(
    st: &Step<'_>,
    buf: &[u8],
    blocks: &[Range<usize>],
    (k, m): (usize, usize),
    shift: isize,
    es: usize,
    sent: &mut usize,
) -> Result<(), Fail> {
    let (ri, n, next, _) = ring(st);
    let first = modn(ri + shift, n);
    let upto = k.saturating_add(st.mesh.lookahead()).min(m);
    while *sent < upto {
        st.send(next, tag(0, 0, *sent), &buf[piece(&blocks[first], *sent, m, es)])?;
        *sent += 1;
    }
    Ok(())
}

/// The reduce-scatter of piece `k` (of `m`) of every block, after its
/// first send: afterwards this rank's piece `k` of block `r + 1 + shift`
/// (mod n), returned, holds the reduction over every rank. Each rank
/// alternately receives and sends, so no send runs ahead of the ring by
/// more than the lookahead.
fn reduce_scatter_piece(
    st: &Step<'_>,
    buf: &mut [u8],
    blocks: &[Range<usize>],
    (k, m): (usize, usize),
    shift: isize,
    dtype: DType,
    op: ReduceOp,
) -> Result<usize, Fail> {
    let (ri, n, next, prev) = ring(st);
    let es = dtype.element_size();
    let first = modn(ri + shift, n);
    let mut last = first;
    for s in 0..n - 1 {
        let c = modn(ri - s as isize - 1 + shift, n);
        let p = piece(&blocks[c], k, m, es);
        let msg = st.recv_exact(prev, tag(0, s, k), p.len())?;
        reduce_into(dtype, op, &mut buf[p.clone()], &msg);
        drop(msg);
        if s + 1 < n - 1 {
            st.send(next, tag(0, s + 1, k), &buf[p])?;
        }
        last = c;
    }
    Ok(last)
}

/// The all-gather of piece `k` (of `m`) of every block, where this rank
/// holds block `r + own` (mod n).
fn all_gather_piece(
    st: &Step<'_>,
    buf: &mut [u8],
    blocks: &[Range<usize>],
    (k, m): (usize, usize),
    own: isize,
    es: usize,
) -> Result<(), Fail> {
    let (ri, n, next, prev) = ring(st);
    st.send(next, tag(1, 0, k), &buf[piece(&blocks[modn(ri + own, n)], k, m, es)])?;
    for s in 0..n - 1 {
        let c = modn(ri + own - s as isize - 1, n);
        let p = piece(&blocks[c], k, m, es);
        let msg = st.recv_exact(prev, tag(1, s, k), p.len())?;
        buf[p.clone()].copy_from_slice(&msg);
        drop(msg);
        if s + 1 < n - 1 {
            st.send(next, tag(1, s + 1, k), &buf[p])?;
        }
    }
    Ok(())
}

/// Ring reduce-scatter over `blocks` of `buf`: afterwards rank `r` holds
/// block `r + 1 + shift` (mod n), returned, reduced over every rank.
pub(crate) fn ring_reduce_scatter(
    st: &Step<'_>,
    buf: &mut [u8],
    blocks: &[Range<usize>],
    shift: isize,
    dtype: DType,
    op: ReduceOp,
) -> Result<usize, Fail> {
    let m = pieces(st, blocks);
    let (mut last, mut sent) = (0, 0);
    for k in 0..m {
        reduce_scatter_first_sends(st, buf, blocks, (k, m), shift, dtype.element_size(), &mut sent)?;
        last = reduce_scatter_piece(st, buf, blocks, (k, m), shift, dtype, op)?;
    }
    Ok(last)
}

/// Ring all-gather over `blocks` of `buf` (elements of `es` bytes), where
/// rank `r` holds block `r + own` (mod n) and every rank ends with every
/// block.
pub(crate) fn ring_all_gather(
    st: &Step<'_>,
    buf: &mut [u8],
    blocks: &[Range<usize>],
    own: isize,
    es: usize,
) -> Result<(), Fail> {
    let m = pieces(st, blocks);
    (0..m).try_for_each(|k| all_gather_piece(st, buf, blocks, (k, m), own, es))
}

/// Ring all-reduce: piece by piece, the reduce-scatter, the mean's
/// division on the block piece each rank finished, and the all-gather of
/// that piece.
pub(crate) fn all_reduce(st: &Step<'_>, buf: &mut [u8], dtype: DType, op: ReduceOp) -> Result<(), Fail> {
    let n = st.mesh.size();
    let es = dtype.element_size();
    let blocks = even_blocks(buf.len() / es, n, es);
    let m = pieces(st, &blocks);
    let mut sent = 0;
    for k in 0..m {
        reduce_scatter_first_sends(st, buf, &blocks, (k, m), 0, es, &mut sent)?;
        let own = reduce_scatter_piece(st, buf, &blocks, (k, m), 0, dtype, op)?;
        if op == ReduceOp::Avg {
            finish_avg(dtype, &mut buf[piece(&blocks[own], k, m, es)], n);
        }
        all_gather_piece(st, buf, &blocks, (k, m), 1, es)?;
    }
    Ok(())
}

/// Binomial-tree reduce to `root`; only the root's `buf` holds the result.
pub(crate) fn reduce(st: &Step<'_>, buf: &mut [u8], root: usize, dtype: DType, op: ReduceOp) -> Result<(), Fail> {
    let (r, n) = (st.mesh.rank(), st.mesh.size());
    let v = (r + n - root) % n;
    let mut mask = 1;
    while mask < n {
        if v & mask != 0 {
            let parent = ((v - mask) + root) % n;
            return st.send(parent, 0, buf);
        }
        if v + mask < n {
            let child = (v + mask + root) % n;
            let m = st.recv_exact(child, 0, buf.len())?;
            reduce_into(dtype, op, buf, &m);
        }
        mask <<= 1;
    }
    if op == ReduceOp::Avg {
        finish_avg(dtype, buf, n);
    }
    Ok(())
}

/// Broadcast from `root`: a binomial tree for small buffers, a pipelined
/// chain of segments for large ones.
pub(crate) fn broadcast(st: &Step<'_>, buf: &mut [u8], root: usize) -> Result<(), Fail> {
    let (r, n) = (st.mesh.rank(), st.mesh.size());
    let v = (r + n - root) % n;
    if buf.len() <= TREE_BROADCAST_MAX {
        // Receive from the parent (v without its lowest set bit) ...
        let mut mask = 1;
        while mask < n {
            if v & mask != 0 {
                let parent = ((v - mask) + root) % n;
                let m = st.recv_exact(parent, 0, buf.len())?;
                buf.copy_from_slice(&m);
                break;
            }
            mask <<= 1;
        }
        // ... then send to the children below that bit.
        mask >>= 1;
        while mask > 0 {
            if v + mask < n {
                st.send((v + mask + root) % n, 0, buf)?;
            }
            mask >>= 1;
        }
        return Ok(());
    }
    let whole = 0..buf.len();
    let next = (v + 1 < n).then(|| (v + 1 + root) % n);
    let m = buf.len().div_ceil(st.mesh.segment());
    for (k, seg) in (0..m).map(|k| (k, piece(&whole, k, m, 1))) {
        if v > 0 {
            let prev = (v - 1 + root) % n;
            let m = st.recv_exact(prev, k as u64, seg.len())?;
            buf[seg.clone()].copy_from_slice(&m);
        }
        if let Some(next) = next {
            st.send(next, k as u64, &buf[seg])?;
        }
    }
    Ok(())
}
