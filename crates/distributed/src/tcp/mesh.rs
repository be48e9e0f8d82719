//! The tcp backend's transport: one TCP connection between every pair of
//! ranks of a group, found through the store; a reader thread per peer
//! that files incoming messages by (sender, sequence number, tag); and the
//! failure bookkeeping that lets every rank fail fast and say why (a dead
//! peer, an abort from another rank, a message of another group or an
//! older sequence number, a mismatched collective).

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

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
    timeout: Duration,
    /// Payload buffers handed back after use, for the reader threads to
    /// fill again (no allocation and page faults per segment).
    pool: Arc<Mutex<Vec<Vec<u8>>>>,
}

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
            std::thread::Builder::new()
                .name(format!("ferro-dist-r{rank}-from{peer}"))
                .spawn(move || read_loop(reader, peer, group, &inbox, &pool))
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
            timeout,
            pool,
        })
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

    /// Sends `payload` to `peer` for (seq, tag): the header, then the
    /// payload from where it lies (no copy into a frame).
    pub(crate) fn send(&self, peer: usize, seq: u64, tag: u64, fingerprint: u64, payload: &[u8]) -> Result<()> {
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
    /// message, or why it will never come.
    pub(crate) fn recv(
        &self,
        peer: usize,
        seq: u64,
        tag: u64,
        fingerprint: u64,
        deadline: Instant,
    ) -> std::result::Result<Message, NoMessage> {
        let (lock, cv) = &*self.inbox;
        let mut inbox = lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(fp) = inbox.fingerprints.get(&(peer, seq))
                && *fp != fingerprint
            {
                return Err(NoMessage::Mismatch(*fp));
            }
            if let Some(m) = inbox.messages.remove(&(peer, seq, tag)) {
                return Ok(m);
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
            inbox = cv
                .wait_timeout(inbox, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
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

/// Reads frames from `peer` into the inbox until the connection ends.
fn read_loop(stream: TcpStream, peer: usize, group: u32, inbox: &(Mutex<Inbox>, Condvar), pool: &Mutex<Vec<Vec<u8>>>) {
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
            DATA => {
                if seq & P2P_SEQ == 0 {
                    if seq < ib.done_below {
                        let why =
                            format!("rank {peer} sent a message for sequence number {seq}, which this rank finished");
                        ib.aborted.get_or_insert(why);
                    }
                    let seen = ib.seen_seq.entry(peer).or_insert(0);
                    *seen = (*seen).max(seq);
                }
                ib.fingerprints.entry((peer, seq)).or_insert(fingerprint);
                ib.messages.insert((peer, seq, tag), Message { fingerprint, payload });
            }
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
    };
    let (lock, cv) = inbox;
    lock.lock().unwrap_or_else(|e| e.into_inner()).dead.insert(peer, why);
    cv.notify_all();
}
