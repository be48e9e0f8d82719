//! The tcp backend's transport: one TCP connection between every pair of
//! ranks of a group, found through the store; a reader thread per peer
//! that files incoming messages by (sender, sequence number, tag); and the
//! failure bookkeeping that lets every rank fail fast and say why (a dead
//! peer, an abort from another rank, a message of another group or an
//! older sequence number, a mismatched collective). Between ranks of one
//! host the messages themselves go through shared memory (`shm.rs`); the
//! sockets then carry the rest (aborts, timeout notices, messages larger
//! than a slot) and tell when a peer dies.

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::shm::{self, Inbound, Mailbox, Outbox, SlotHeader};
use crate::error::{DistError, Result};
use crate::store::Store;

/// First bytes of every frame and of the connection's hello.
const MAGIC: u32 = 0x4654_4443; // "FTDC"
/// Frame kinds.
const DATA: u8 = 0;
const ABORT: u8 = 1;
const TIMED_OUT: u8 = 2;
/// Sequence numbers of point-to-point messages have this bit set.
pub(crate) const P2P_SEQ: u64 = 1 << 63;
/// A frame header: magic, kind, group, seq, tag, fingerprint, length.
const HEADER: usize = 4 + 1 + 4 + 8 + 8 + 8 + 8;
/// Largest single message (a block of one collective step).
const MAX_MESSAGE: u64 = 1 << 40;

/// One received message.
#[derive(Debug)]
pub(crate) struct Message {
    pub fingerprint: u64,
    pub payload: Vec<u8>,
}

/// What the reader threads and the collectives share.
#[derive(Debug, Default)]
struct Inbox {
    /// (sender, seq, tag) -> message.
    messages: HashMap<(usize, u64, u64), Message>,
    /// Peers whose connection ended, and why.
    dead: HashMap<usize, String>,
    /// The first abort received (the reason another rank gave up).
    aborted: Option<String>,
    /// Sequence numbers for which a peer reported a timeout: seq -> ranks.
    timed_out: HashMap<u64, Vec<usize>>,
    /// The highest collective sequence number seen from each peer.
    seen_seq: HashMap<usize, u64>,
    /// Collectives finished here: messages for them are refused.
    done_below: u64,
    /// The fingerprint of the first message of each (sender, seq).
    fingerprints: HashMap<(usize, u64), u64>,
}

impl Inbox {
    /// Bookkeeping of a message's arrival: a message of a finished
    /// collective aborts, the highest sequence number seen from `peer`, the
    /// first fingerprint of `(peer, seq)`.
    fn note(&mut self, peer: usize, seq: u64, fingerprint: u64) {
        if seq & P2P_SEQ == 0 {
            if seq < self.done_below {
                let why = format!("rank {peer} sent a message for sequence number {seq}, which this rank finished");
                self.aborted.get_or_insert(why);
            }
            let seen = self.seen_seq.entry(peer).or_insert(0);
            *seen = (*seen).max(seq);
            // Point-to-point sequence numbers count per (peer, tag): two
            // tags share numbers, so only a receive's own message (matched
            // with its tag) says what the sender called.
            self.fingerprints.entry((peer, seq)).or_insert(fingerprint);
        }
    }

    /// Files a data message from `peer` until a receive asks for it.
    fn file(&mut self, peer: usize, seq: u64, tag: u64, fingerprint: u64, payload: Vec<u8>) {
        self.note(peer, seq, fingerprint);
        self.messages.insert((peer, seq, tag), Message { fingerprint, payload });
    }
}

/// A received message's bytes: filed in the inbox (a socket's, or a
/// shared-memory message that arrived out of turn), or still in its
/// shared-memory slot, which is given back when this is dropped.
pub(crate) enum Payload<'a> {
    Owned(Vec<u8>, &'a Mesh),
    Slot { from: &'a Inbound, pos: u64, len: usize },
}

impl<'a> Payload<'a> {
    /// Hands out the peeked message `p` of `ring`, read in place.
    fn take(ring: &'a Inbound, p: &shm::Peeked) -> Self {
        Payload::Slot {
            from: ring,
            pos: ring.take(p),
            len: p.header.len,
        }
    }
}

impl std::ops::Deref for Payload<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Payload::Owned(v, _) => v,
            // SAFETY: `pos` was taken from `from` and is released only when
            // this payload drops, which the returned borrow cannot outlive;
            // `len` is its header's length.
            Payload::Slot { from, pos, len } => unsafe { from.bytes(*pos, *len) },
        }
    }
}

impl Drop for Payload<'_> {
    fn drop(&mut self) {
        match self {
            Payload::Owned(v, mesh) => mesh.recycle(std::mem::take(v)),
            Payload::Slot { from, pos, .. } => from.release(*pos),
        }
    }
}

/// The shared-memory links of a rank to the peers on its host.
struct ShmLinks {
    /// This rank's mailbox (absent when it could not be created): its
    /// doorbell is what a receive sleeps on.
    own: Option<Arc<Mailbox>>,
    /// The ring of each peer in this rank's mailbox.
    inbound: Vec<Option<Inbound>>,
    /// This rank's ring in each peer's mailbox.
    outbound: Vec<Option<Outbox>>,
    /// How long a receive spins before it sleeps (none when the host has
    /// fewer cores than ranks).
    spin: Duration,
}

/// Why a receive returned no message.
#[derive(Debug)]
pub(crate) enum NoMessage {
    /// The deadline passed.
    Deadline,
    /// The peer died or another rank aborted: why.
    Gone(String),
    /// The peer sent messages of another call (its fingerprint) at this
    /// sequence number.
    Mismatch(u64),
}

/// The connections of one rank to every other rank of its group.
pub(crate) struct Mesh {
    rank: usize,
    size: usize,
    group: u32,
    group_name: String,
    writers: Vec<Option<Mutex<TcpStream>>>,
    inbox: Arc<(Mutex<Inbox>, Condvar)>,
    shm: ShmLinks,
    /// Bytes per pipelined segment of the ring algorithms: a shared-memory
    /// slot when every rank of the group is on one host, else larger (one
    /// segment per socket write costs more).
    segment: usize,
    timeout: Duration,
    /// Every rank's pid when the group's ranks can read one another's
    /// memory (`cross_memory.rs`).
    cma: Option<Vec<i32>>,
    /// Payload buffers handed back after use, for the reader threads to
    /// fill again (no allocation and page faults per segment).
    pool: Arc<Mutex<Vec<Vec<u8>>>>,
}

/// Bytes per pipelined segment between hosts.
const TCP_SEGMENT: usize = 1 << 20;

/// Buffers kept in the pool at most.
const POOL_MAX: usize = 64;

impl std::fmt::Debug for Mesh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mesh")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("group", &self.group_name)
            .finish()
    }
}

/// A stable 32-bit id of a group name (FNV-1a).
pub(crate) fn group_id(name: &str) -> u32 {
    name.bytes()
        .fold(0x811C_9DC5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DistError {
    let what = what.into();
    move |e| DistError::io(what, e)
}

impl Mesh {
    /// Connects rank `rank` of `size` to every other rank: each listens on
    /// `ip` (port chosen by the system) and publishes `ip:port` in the
    /// store; higher ranks connect to lower ones and introduce themselves
    /// (group, rank, world size), which the lower rank checks.
    pub(crate) fn connect(
        store: &dyn Store,
        group_name: &str,
        rank: usize,
        size: usize,
        ip: std::net::IpAddr,
        timeout: Duration,
    ) -> Result<Mesh> {
        let group = group_id(group_name);
        let listener = TcpListener::bind(SocketAddr::new(ip, 0)).map_err(io(format!("bind {ip}")))?;
        let addr = listener.local_addr().map_err(io("listener address"))?;
        store.set(&format!("addr/{rank}"), addr.to_string().as_bytes())?;
        let mut streams: Vec<Option<TcpStream>> = (0..size).map(|_| None).collect();
        // Connect to every lower rank.
        for (peer, slot) in streams.iter_mut().enumerate().take(rank) {
            let raw = store.get(&format!("addr/{peer}"))?;
            let text = String::from_utf8_lossy(&raw).into_owned();
            let peer_addr: SocketAddr = text
                .parse()
                .map_err(|_| DistError::Protocol(format!("rank {peer} published the address {text:?}")))?;
            let mut s = TcpStream::connect_timeout(&peer_addr, timeout)
                .map_err(io(format!("rank {rank}: connect to rank {peer} at {peer_addr}")))?;
            let mut hello = Vec::with_capacity(16);
            hello.extend_from_slice(&MAGIC.to_le_bytes());
            hello.extend_from_slice(&group.to_le_bytes());
            hello.extend_from_slice(&(rank as u32).to_le_bytes());
            hello.extend_from_slice(&(size as u32).to_le_bytes());
            s.write_all(&hello).map_err(io(format!("hello to rank {peer}")))?;
            s.set_read_timeout(Some(timeout)).map_err(io("socket option"))?;
            let mut answer = [0u8; 1];
            s.read_exact(&mut answer).map_err(io(format!("rank {peer}'s answer")))?;
            if answer[0] != 0 {
                let mut why = String::new();
                let _ = s.take(4096).read_to_string(&mut why);
                return Err(DistError::Protocol(format!("rank {peer} refused rank {rank}: {why}")));
            }
            *slot = Some(s);
        }
        // Accept every higher rank.
        listener.set_nonblocking(true).map_err(io("socket option"))?;
        let start = Instant::now();
        let mut missing = size - rank - 1;
        while missing > 0 {
            match listener.accept() {
                Ok((mut s, from)) => {
                    s.set_nonblocking(false).map_err(io("socket option"))?;
                    s.set_read_timeout(Some(timeout)).map_err(io("socket option"))?;
                    let mut hello = [0u8; 16];
                    if s.read_exact(&mut hello).is_err() {
                        continue; // not one of ours: a scanner, a dead connection
                    }
                    let word = |i: usize| u32::from_le_bytes(hello[i..i + 4].try_into().expect("4 bytes"));
                    let (magic, g, peer, n) = (word(0), word(4), word(8) as usize, word(12) as usize);
                    let refuse = if magic != MAGIC {
                        Some(format!("{from} is not a ferrotorch rank"))
                    } else if g != group {
                        Some(format!(
                            "a rank of another group (id {g:#x}) connected to group {group_name:?}"
                        ))
                    } else if n != size {
                        Some(format!("rank {peer} has world size {n}, this rank {size}"))
                    } else if peer <= rank || peer >= size || streams[peer].is_some() {
                        Some(format!("rank {peer} connected twice or out of order"))
                    } else {
                        None
                    };
                    if let Some(why) = refuse {
                        let mut answer = vec![1u8];
                        answer.extend_from_slice(why.as_bytes());
                        let _ = s.write_all(&answer);
                        return Err(DistError::Protocol(format!(
                            "rank {rank} of group {group_name:?}: {why}"
                        )));
                    }
                    s.write_all(&[0]).map_err(io(format!("answer to rank {peer}")))?;
                    streams[peer] = Some(s);
                    missing -= 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if start.elapsed() > timeout {
                        let absent: Vec<usize> = (rank + 1..size).filter(|&p| streams[p].is_none()).collect();
                        return Err(DistError::Timeout {
                            op: "process group start",
                            what: format!("ranks {absent:?} to connect to rank {rank}"),
                            after: timeout,
                        });
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(DistError::io("accept", e)),
            }
        }
        let (shm, all_local) = connect_shm(store, group, rank, size)?;
        let cma = super::cross_memory::probe(store, rank, size, all_local)?;
        let inbox = Arc::new((Mutex::new(Inbox::default()), Condvar::new()));
        let pool: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let mut writers = Vec::with_capacity(size);
        for (peer, s) in streams.into_iter().enumerate() {
            let Some(s) = s else {
                writers.push(None);
                continue;
            };
            s.set_nodelay(true).map_err(io("socket option"))?;
            s.set_read_timeout(None).map_err(io("socket option"))?;
            s.set_write_timeout(Some(timeout)).map_err(io("socket option"))?;
            let reader = s.try_clone().map_err(io("socket clone"))?;
            let inbox = inbox.clone();
            let pool = pool.clone();
            let bell = shm.own.clone();
            std::thread::Builder::new()
                .name(format!("ferro-dist-r{rank}-from{peer}"))
                .spawn(move || read_loop(reader, peer, group, &inbox, &pool, bell.as_deref()))
                .map_err(io("spawn reader"))?;
            writers.push(Some(Mutex::new(s)));
        }
        Ok(Mesh {
            rank,
            size,
            group,
            group_name: group_name.to_owned(),
            writers,
            inbox,
            shm,
            segment: if all_local { shm::SLOT_BYTES } else { TCP_SEGMENT },
            timeout,
            cma,
            pool,
        })
    }

    /// Every rank's pid, when the group reads peers' memory directly
    /// (the same answer on every rank of the group).
    pub(crate) fn cma_pids(&self) -> Option<&[i32]> {
        self.cma.as_deref()
    }

    /// Bytes per pipelined segment (the same on every rank of the group).
    pub(crate) fn segment(&self) -> usize {
        self.segment
    }

    /// How many pieces a ring's first sends may run ahead of the pieces
    /// being reduced: a few through shared memory (its slots are few),
    /// all of them over sockets (the reader threads take whatever comes).
    pub(crate) fn lookahead(&self) -> usize {
        if self.segment == shm::SLOT_BYTES { 2 } else { usize::MAX }
    }

    /// Hands a received payload back for reuse.
    pub(crate) fn recycle(&self, buf: Vec<u8>) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < POOL_MAX {
            pool.push(buf);
        }
    }

    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    pub(crate) fn size(&self) -> usize {
        self.size
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    pub(crate) fn group_name(&self) -> &str {
        &self.group_name
    }

    fn lock(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn frame(&self, kind: u8, seq: u64, tag: u64, fingerprint: u64, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::with_capacity(HEADER + payload.len());
        f.extend_from_slice(&MAGIC.to_le_bytes());
        f.push(kind);
        f.extend_from_slice(&self.group.to_le_bytes());
        f.extend_from_slice(&seq.to_le_bytes());
        f.extend_from_slice(&tag.to_le_bytes());
        f.extend_from_slice(&fingerprint.to_le_bytes());
        f.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// Sends `payload` to `peer` for (seq, tag): through shared memory when
    /// the peer is on this host, it fits a slot and a slot is free; else
    /// over the socket, the header and then the payload from where it lies
    /// (no copy into a frame).
    pub(crate) fn send(&self, peer: usize, seq: u64, tag: u64, fingerprint: u64, payload: &[u8]) -> Result<()> {
        if let Some(out) = self.shm.outbound.get(peer).and_then(Option::as_ref) {
            let h = SlotHeader {
                seq,
                tag,
                fingerprint,
                len: payload.len(),
            };
            if out.try_send(h, payload) {
                return Ok(());
            }
        }
        let mut header = self.frame(DATA, seq, tag, fingerprint, &[]);
        header[HEADER - 8..].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        self.write_parts(peer, &[&header, payload])
    }

    fn write(&self, peer: usize, frame: &[u8]) -> Result<()> {
        self.write_parts(peer, &[frame])
    }

    fn write_parts(&self, peer: usize, parts: &[&[u8]]) -> Result<()> {
        let Some(w) = self.writers.get(peer).and_then(Option::as_ref) else {
            return Err(DistError::InvalidArgument(format!(
                "rank {} has no connection to rank {peer}",
                self.rank
            )));
        };
        let mut s = w.lock().unwrap_or_else(|e| e.into_inner());
        parts.iter().try_for_each(|p| s.write_all(p)).map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                    format!("rank {peer} stopped reading (a send blocked for {:?})", self.timeout)
                }
                _ => format!("the connection to rank {peer} failed: {e}"),
            };
            DistError::Collective(why)
        })
    }

    /// Waits until `(peer, seq, tag)` arrived, up to `deadline`; the
    /// message, or why it will never come (a message of `(peer, seq)` with
    /// another fingerprint than `fingerprint` is a mismatch).
    pub(crate) fn recv(
        &self,
        peer: usize,
        seq: u64,
        tag: u64,
        fingerprint: u64,
        deadline: Instant,
    ) -> std::result::Result<Payload<'_>, NoMessage> {
        let (lock, cv) = &*self.inbox;
        let ring = self.shm.inbound.get(peer).and_then(Option::as_ref);
        loop {
            let bell = self.shm.own.as_ref().map(|b| b.bell_count());
            let mut inbox = lock.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(fp) = inbox.fingerprints.get(&(peer, seq))
                && *fp != fingerprint
            {
                return Err(NoMessage::Mismatch(*fp));
            }
            if let Some(m) = inbox.messages.remove(&(peer, seq, tag)) {
                if m.fingerprint != fingerprint {
                    return Err(NoMessage::Mismatch(m.fingerprint));
                }
                return Ok(Payload::Owned(m.payload, self));
            }
            // The ring before the peer's death: what it sent before it left
            // still counts.
            if let Some(ring) = ring {
                match ring.peek() {
                    Err(why) => {
                        let why = format!("rank {peer} is gone ({why})");
                        inbox.dead.insert(peer, why.clone());
                        return Err(NoMessage::Gone(why));
                    }
                    Ok(Some(p)) => {
                        let h = p.header;
                        inbox.note(peer, h.seq, h.fingerprint);
                        let slot = Payload::take(ring, &p);
                        if (h.seq, h.tag) == (seq, tag) {
                            if h.fingerprint != fingerprint {
                                return Err(NoMessage::Mismatch(h.fingerprint));
                            }
                            return Ok(slot);
                        }
                        // Another message than this one: file a copy and
                        // look again.
                        let copy = self.copy_out(&slot);
                        inbox.file(peer, h.seq, h.tag, h.fingerprint, copy);
                        continue;
                    }
                    Ok(None) => {}
                }
            }
            if let Some(why) = &inbox.aborted {
                return Err(NoMessage::Gone(why.clone()));
            }
            if let Some(why) = inbox.dead.get(&peer) {
                return Err(NoMessage::Gone(format!("rank {peer} is gone ({why})")));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(NoMessage::Deadline);
            }
            match (&self.shm.own, bell) {
                (Some(own), Some(bell)) => {
                    drop(inbox);
                    own.wait(bell, deadline, self.shm.spin);
                }
                _ => drop(
                    cv.wait_timeout(inbox, deadline - now)
                        .unwrap_or_else(|e| e.into_inner()),
                ),
            }
        }
    }

    /// A pooled copy of a payload's bytes.
    fn copy_out(&self, bytes: &[u8]) -> Vec<u8> {
        let mut v = self
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        v.clear();
        v.extend_from_slice(bytes);
        v
    }

    /// Files every message waiting in this rank's shared-memory rings into
    /// the inbox (so the inbox knows what every peer sent).
    fn drain_rings(&self) {
        for (peer, ring) in self.shm.inbound.iter().enumerate() {
            let Some(ring) = ring else { continue };
            while let Ok(Some(p)) = ring.peek() {
                let h = p.header;
                let slot = Payload::take(ring, &p);
                let copy = self.copy_out(&slot);
                drop(slot);
                self.lock().file(peer, h.seq, h.tag, h.fingerprint, copy);
            }
        }
    }

    /// Marks collectives below `seq` finished: later messages for them are
    /// protocol errors.
    pub(crate) fn finished_below(&self, seq: u64) {
        let mut inbox = self.lock();
        inbox.done_below = inbox.done_below.max(seq);
        inbox.messages.retain(|(_, s, _), _| *s >= seq);
        inbox.fingerprints.retain(|(_, s), _| *s >= seq);
    }

    /// Tells every peer this rank gave up, and why (best effort).
    pub(crate) fn abort_all(&self, reason: &str) {
        let frame = self.frame(ABORT, 0, 0, 0, reason.as_bytes());
        for peer in (0..self.size).filter(|&p| p != self.rank) {
            if self.lock().dead.contains_key(&peer) {
                continue;
            }
            let _ = self.write(peer, &frame);
        }
    }

    /// After a timeout at `seq`: tells the peers, waits up to `grace` for
    /// theirs, and returns the ranks that never reached `seq` (no message
    /// of `seq` or later and no timeout notice), dead ones included.
    pub(crate) fn absent_at(&self, seq: u64, grace: Duration) -> Vec<usize> {
        let frame = self.frame(TIMED_OUT, seq, 0, 0, &[]);
        for peer in (0..self.size).filter(|&p| p != self.rank) {
            let _ = self.write(peer, &frame);
        }
        self.drain_rings();
        let end = Instant::now() + grace;
        let (lock, cv) = &*self.inbox;
        let mut inbox = lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let absent: Vec<usize> = (0..self.size)
                .filter(|&p| p != self.rank)
                .filter(|p| {
                    let reported = inbox.timed_out.get(&seq).is_some_and(|v| v.contains(p));
                    let reached = inbox.seen_seq.get(p).is_some_and(|s| *s >= seq);
                    !(reported || reached) || inbox.dead.contains_key(p)
                })
                .collect();
            let now = Instant::now();
            let settled = absent.iter().all(|p| inbox.dead.contains_key(p));
            if now >= end || settled {
                return absent;
            }
            inbox = cv.wait_timeout(inbox, end - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Why peer `p` is gone, if it is.
    pub(crate) fn death(&self, p: usize) -> Option<String> {
        self.lock().dead.get(&p).cloned()
    }

    /// Closes every connection (the reader threads end).
    pub(crate) fn shutdown(&self) {
        for w in self.writers.iter().flatten() {
            let s = w.lock().unwrap_or_else(|e| e.into_inner());
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Mesh {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Reads frames from `peer` into the inbox until the connection ends,
/// waking the receive (the condition variable, and this rank's doorbell
/// when it has a mailbox).
fn read_loop(
    stream: TcpStream,
    peer: usize,
    group: u32,
    inbox: &(Mutex<Inbox>, Condvar),
    pool: &Mutex<Vec<Vec<u8>>>,
    bell: Option<&Mailbox>,
) {
    let mut r = BufReader::with_capacity(1 << 16, stream);
    let why = loop {
        let mut h = [0u8; HEADER];
        if let Err(e) = r.read_exact(&mut h) {
            break match e.kind() {
                std::io::ErrorKind::UnexpectedEof => "its connection closed (the process died or left)".to_owned(),
                _ => format!("its connection failed: {e}"),
            };
        }
        let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        let (magic, kind, g) = (u32_at(0), h[4], u32_at(5));
        let (seq, tag, fingerprint, len) = (u64_at(9), u64_at(17), u64_at(25), u64_at(33));
        if magic != MAGIC {
            break "it sent bytes that are not a ferrotorch frame".to_owned();
        }
        if g != group {
            break format!("it sent a message of another group (id {g:#x}, this group {group:#x})");
        }
        if len > MAX_MESSAGE {
            break format!("it sent a message of {len} bytes");
        }
        // Up to 64 MiB in one piece (a pipelined segment is 1 MiB); a
        // longer message grows as its bytes arrive, so a lying length
        // costs no memory.
        let mut payload = pool.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_default();
        payload.clear();
        let complete = if len <= 1 << 26 {
            payload.resize(len as usize, 0);
            r.read_exact(&mut payload).is_ok()
        } else {
            matches!((&mut r).take(len).read_to_end(&mut payload), Ok(n) if n as u64 == len)
        };
        if !complete {
            break "its connection closed inside a message".to_owned();
        }
        let (lock, cv) = inbox;
        let mut ib = lock.lock().unwrap_or_else(|e| e.into_inner());
        match kind {
            DATA => ib.file(peer, seq, tag, fingerprint, payload),
            ABORT => {
                let reason = String::from_utf8_lossy(&payload).into_owned();
                ib.aborted.get_or_insert(format!("rank {peer} aborted: {reason}"));
            }
            TIMED_OUT => ib.timed_out.entry(seq).or_default().push(peer),
            other => {
                drop(ib);
                break format!("it sent a frame of unknown kind {other}");
            }
        }
        drop(ib);
        cv.notify_all();
        bell.inspect(|b| b.ring());
    };
    let (lock, cv) = inbox;
    lock.lock().unwrap_or_else(|e| e.into_inner()).dead.insert(peer, why);
    cv.notify_all();
    bell.inspect(|b| b.ring());
}

/// Sets up the shared-memory links of rank `rank` to the ranks of its host
/// (through the store: host keys, then mailbox names, then "mapped"
/// notes, after which each mailbox is unlinked). Also whether every rank of
/// the group is on this host.
fn connect_shm(store: &dyn Store, group: u32, rank: usize, size: usize) -> Result<(ShmLinks, bool)> {
    let mut links = ShmLinks {
        own: None,
        inbound: (0..size).map(|_| None).collect(),
        outbound: (0..size).map(|_| None).collect(),
        spin: Duration::ZERO,
    };
    let key = shm::host_key().unwrap_or_default();
    store.set(&format!("host/{rank}"), key.as_bytes())?;
    let mut locals = Vec::new();
    for p in 0..size {
        if p == rank || (!key.is_empty() && store.get(&format!("host/{p}"))? == key.as_bytes()) {
            locals.push(p);
        }
    }
    let all_local = locals.len() == size;
    if locals.len() < 2 {
        return Ok((links, all_local));
    }
    // Sender p's ring in owner o's mailbox: p's place among the host's
    // ranks other than o.
    let place = |p: usize| locals.iter().position(|&q| q == p).unwrap_or(0);
    let ring_of = |p: usize, owner: usize| place(p) - usize::from(place(p) > place(owner));
    let rings = locals.len() - 1;
    links.spin = shm::spin_for(locals.len());
    match Mailbox::create(group, rank, rings) {
        Ok((mailbox, name)) => {
            store.set(&format!("shm/{rank}"), name.as_bytes())?;
            links.own = Some(Arc::new(mailbox));
        }
        // No shared memory here (no /dev/shm, a full one): the peers send
        // over the socket.
        Err(_) => store.set(&format!("shm/{rank}"), b"")?,
    }
    for &p in locals.iter().filter(|&&p| p != rank) {
        if let Some(own) = &links.own {
            links.inbound[p] = Some(Inbound::new(own.clone(), ring_of(p, rank)));
        }
        let name = String::from_utf8_lossy(&store.get(&format!("shm/{p}"))?).into_owned();
        if name.is_empty() {
            continue;
        }
        if let Ok(mailbox) = Mailbox::open(&name, group, p, rings) {
            links.outbound[p] = Some(Outbox::new(Arc::new(mailbox), ring_of(rank, p)));
        }
    }
    // Every rank of the host notes that it mapped the others' mailboxes;
    // once all did, each owner removes its mailbox's name.
    store.set(&format!("shm_mapped/{rank}"), b"1")?;
    if let Some(own) = &links.own {
        for &p in locals.iter().filter(|&&p| p != rank) {
            store.get(&format!("shm_mapped/{p}"))?;
        }
        own.unlink();
    }
    Ok((links, all_local))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::HashStore;

    const T: Duration = Duration::from_secs(10);

    /// Ranks 0 and 1 of `group`, connected in this process (one host).
    fn pair(group: &str) -> (Mesh, Mesh) {
        let store = Arc::new(HashStore::new());
        let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let (s1, g) = (store.clone(), group.to_owned());
        let one = std::thread::spawn(move || Mesh::connect(&*s1, &g, 1, 2, ip, T).unwrap());
        let zero = Mesh::connect(&*store, group, 0, 2, ip, T).unwrap();
        (zero, one.join().unwrap())
    }

    fn soon() -> Instant {
        Instant::now() + T
    }

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    #[test]
    fn ranks_of_one_host_talk_through_shared_memory() {
        let (a, b) = pair("shm-one-host");
        assert!(a.shm.outbound[1].is_some() && b.shm.inbound[0].is_some());
        assert_eq!((a.segment(), b.segment()), (shm::SLOT_BYTES, shm::SLOT_BYTES));
        let msg = bytes(shm::SLOT_BYTES, 3);
        a.send(1, 1, 7, 42, &msg).unwrap();
        let got = b.recv(0, 1, 7, 42, soon()).unwrap();
        assert!(matches!(got, Payload::Slot { .. }), "read in place from the slot");
        assert_eq!(&got[..], &msg[..]);
        // Every mailbox name is gone once both ranks mapped them.
        let prefix = format!("ferrotorch-{}-{:08x}-", std::process::id(), group_id("shm-one-host"));
        let left: Vec<_> = std::fs::read_dir("/dev/shm")
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn out_of_turn_full_ring_and_large_messages_all_arrive() {
        let (a, b) = pair("shm-out-of-turn");
        let n = 3 * shm::SLOTS as usize;
        for t in 0..n {
            a.send(1, 1, t as u64, 5, &bytes(1000 + t, t as u8)).unwrap();
        }
        let big = bytes(2 * shm::SLOT_BYTES + 3, 1);
        a.send(1, 1, 1000, 5, &big).unwrap();
        assert_eq!(&b.recv(0, 1, 1000, 5, soon()).unwrap()[..], &big[..]);
        for t in (0..n).rev() {
            let got = b.recv(0, 1, t as u64, 5, soon()).unwrap();
            assert_eq!(&got[..], &bytes(1000 + t, t as u8)[..], "tag {t}");
        }
        // The ring was drained: the next message goes through it again.
        a.send(1, 2, 0, 5, &[1, 2, 3]).unwrap();
        assert!(matches!(b.recv(0, 2, 0, 5, soon()).unwrap(), Payload::Slot { .. }));
    }

    #[test]
    fn another_fingerprint_at_the_same_sequence_number_is_a_mismatch() {
        let (a, b) = pair("shm-mismatch");
        a.send(1, 1, 3, 5, &[1]).unwrap();
        assert!(matches!(b.recv(0, 1, 3, 6, soon()), Err(NoMessage::Mismatch(5))));
        a.send(1, 2, 1, 7, &[1]).unwrap();
        assert!(matches!(b.recv(0, 2, 0, 8, soon()), Err(NoMessage::Mismatch(7))));
    }

    #[test]
    fn a_receive_sleeping_on_the_doorbell_learns_that_the_peer_died() {
        let (a, b) = pair("shm-dead-peer");
        let start = Instant::now();
        let waiter = std::thread::spawn(move || {
            let r = b.recv(0, 1, 0, 1, soon()).map(|_| ());
            (r, start.elapsed())
        });
        std::thread::sleep(Duration::from_millis(100));
        drop(a);
        let (r, took) = waiter.join().unwrap();
        assert!(
            matches!(&r, Err(NoMessage::Gone(why)) if why.contains("rank 0 is gone")),
            "{r:?}"
        );
        assert!(took < Duration::from_secs(3), "{took:?}");
    }

    #[test]
    fn what_a_peer_sent_before_it_left_is_still_received() {
        let (a, b) = pair("shm-sent-then-left");
        a.send(1, 1, 0, 4, &[7; 100]).unwrap();
        drop(a);
        std::thread::sleep(Duration::from_millis(100));
        assert!(b.death(0).is_some(), "the socket closed first");
        assert_eq!(&b.recv(0, 1, 0, 4, soon()).unwrap()[..], &[7; 100]);
        assert!(matches!(b.recv(0, 1, 1, 4, soon()), Err(NoMessage::Gone(_))));
    }

    #[test]
    fn without_shared_memory_the_sockets_carry_everything() {
        let store = Arc::new(HashStore::new());
        // Rank 1 says it has no shared memory (an empty host key): rank 0
        // must not count it as local.
        store.set("host/1", b"").unwrap();
        let links = connect_shm(&*store, 9, 0, 2).unwrap();
        assert!(!links.1 && links.0.own.is_none() && links.0.outbound.iter().all(Option::is_none));
    }
}
