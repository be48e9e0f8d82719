//! The tcp backend's same-host transport (NCCL's SHM transport idea):
//! between ranks of one host, messages move through shared memory instead
//! of sockets.
//!
//! Each rank with a peer on its host owns a *mailbox*: a POSIX shared
//! memory object holding one ring of [`SLOTS`] slots per sender on the host
//! and a doorbell. A sender copies a message into a free slot of its ring
//! in the receiver's mailbox, publishes it by advancing the ring's head and
//! rings the receiver's doorbell (a futex, so a waiting receiver sleeps in
//! the kernel instead of spinning). The receiver reduces or copies straight
//! out of the slot and frees it by advancing the ring's tail. Messages keep
//! their (sequence number, tag, fingerprint) header, so a receiver that
//! finds another message than the one it waits for files it in the inbox,
//! as a socket's reader thread would; and a sender whose ring is full, or
//! whose message is larger than a slot, sends over the socket instead. No
//! send ever waits for a receiver, which keeps every algorithm free of
//! deadlocks whatever its order of sends and receives.
//!
//! The sockets stay: they carry aborts and timeout notices, and a closed
//! socket is how a rank learns that a peer died. Mailboxes are unlinked
//! once every peer of the host has mapped them, so a killed job leaves
//! nothing behind in `/dev/shm`.
//!
//! Hosts are told apart by boot id, mount namespace and network namespace:
//! ranks in different network namespaces of one machine (the tests'
//! simulated hosts) talk over sockets. `FERROTORCH_SHM_DISABLE=1` turns the
//! transport off for a rank (as `NCCL_SHM_DISABLE`).

use std::fs::File;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memmap2::MmapRaw;
use rustix::fs::Mode;
use rustix::shm::{self, OFlags};
use rustix::thread::futex;

/// Payload bytes of one slot: also the pipelined segment of the ring
/// algorithms when every rank of a group is on one host.
pub(crate) const SLOT_BYTES: usize = 256 << 10;
/// Slots per ring.
pub(crate) const SLOTS: u64 = 8;
/// "FTSHMBX1": the first word of a mailbox.
const MAGIC: u64 = u64::from_le_bytes(*b"FTSHMBX1");
/// A cache line: every word one process writes and another reads has one
/// to itself.
const LINE: usize = 64;
/// How long a receiver spins on its doorbell before it sleeps, when the
/// host has a core for every rank on it (else a spin only takes the core
/// from the rank it waits for).
const SPIN: Duration = Duration::from_micros(20);

/// The spin for `ranks` ranks on this host: [`SPIN`] when the process may
/// run on at least as many cores, else none.
pub(crate) fn spin_for(ranks: usize) -> Duration {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if ranks <= cores { SPIN } else { Duration::ZERO }
}

/// Layout of a mailbox with `rings` rings.
#[derive(Debug, Clone, Copy)]
struct Layout {
    rings: usize,
}

impl Layout {
    /// Offset of the doorbell (a u32) and, 4 bytes on, its sleeper count.
    const BELL: usize = LINE;

    /// Offset of ring `j`'s head (written by its sender; the tail, written
    /// by the receiver, is one line further).
    fn head(self, j: usize) -> usize {
        2 * LINE + j * 2 * LINE
    }

    fn tail(self, j: usize) -> usize {
        self.head(j) + LINE
    }

    /// Offset of the header of slot `i` of ring `j`.
    fn slot_header(self, j: usize, i: usize) -> usize {
        self.head(self.rings) + (j * SLOTS as usize + i) * LINE
    }

    /// Offset of the first payload byte (page aligned).
    fn data(self) -> usize {
        self.slot_header(self.rings, 0).next_multiple_of(4096)
    }

    fn payload(self, j: usize, i: usize) -> usize {
        self.data() + (j * SLOTS as usize + i) * SLOT_BYTES
    }

    fn size(self) -> usize {
        self.payload(self.rings, 0)
    }
}

/// The identity of this rank's shared memory (boot id, mount and network
/// namespaces): ranks with equal keys reach each other through
/// `/dev/shm`. `None` when the transport is disabled or the identity
/// cannot be read.
pub(crate) fn host_key() -> Option<String> {
    if matches!(
        std::env::var("FERROTORCH_SHM_DISABLE").as_deref(),
        Ok("1" | "true" | "yes")
    ) {
        return None;
    }
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let ns = |which: &str| std::fs::read_link(format!("/proc/self/ns/{which}")).ok();
    let (mnt, net) = (ns("mnt")?, ns("net")?);
    Some(format!("{}/{}/{}", boot.trim(), mnt.display(), net.display()))
}

/// One rank's mailbox, mapped into this process (its owner's or a
/// sender's).
pub(crate) struct Mailbox {
    map: MmapRaw,
    layout: Layout,
    /// The shared memory object's name while it is still linked (owner
    /// only).
    linked: Mutex<Option<String>>,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox").field("rings", &self.layout.rings).finish()
    }
}

/// Where POSIX shared memory objects live on Linux.
const SHM_DIR: &str = "/dev/shm";

/// The creator's pid in a mailbox's name (`ferrotorch-PID-...`).
fn creator_pid(file_name: &str) -> Option<i32> {
    file_name.strip_prefix("ferrotorch-")?.split('-').next()?.parse().ok()
}

/// Unlinks the mailboxes whose creator no longer runs: a rank killed
/// between creating its mailbox and the moment every peer had mapped it
/// (when it unlinks the name itself) leaves the object behind, holding its
/// memory until reboot. A creator that still runs (or whose pid cannot be
/// checked) keeps its object.
fn remove_orphans() {
    let Ok(dir) = std::fs::read_dir(SHM_DIR) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(pid) = creator_pid(name).and_then(rustix::process::Pid::from_raw) else {
            continue;
        };
        if rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH) {
            let _ = shm::unlink(format!("/{name}").as_str());
        }
    }
}

impl Mailbox {
    /// Creates the mailbox of rank `owner` of group `group` with `rings`
    /// rings; its name is for the senders to open.
    pub(crate) fn create(group: u32, owner: usize, rings: usize) -> std::io::Result<(Mailbox, String)> {
        remove_orphans();
        let layout = Layout { rings };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!("/ferrotorch-{}-{group:08x}-{owner}-{nanos:08x}", std::process::id());
        let fd = shm::open(
            name.as_str(),
            OFlags::CREATE | OFlags::EXCL | OFlags::RDWR,
            Mode::RUSR | Mode::WUSR,
        )?;
        let file = File::from(fd);
        let mailbox = (|| {
            file.set_len(layout.size() as u64)?;
            // Every page reserved now: a full /dev/shm (Docker's default is
            // 64 MiB) is an error here, not a SIGBUS at the first write.
            rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, layout.size() as u64)?;
            let map = MmapRaw::map_raw(&file)?;
            Ok(Mailbox {
                map,
                layout,
                linked: Mutex::new(Some(name.clone())),
            })
        })();
        let mailbox = match mailbox {
            Ok(m) => m,
            Err(e) => {
                let _ = shm::unlink(name.as_str());
                return Err(e);
            }
        };
        // The object starts zeroed (heads, tails, doorbell); the header
        // says whose it is.
        mailbox.word(0).store(MAGIC, Ordering::Relaxed);
        mailbox
            .word(8)
            .store(u64::from(group) << 32 | owner as u64, Ordering::Relaxed);
        mailbox.word(16).store(rings as u64, Ordering::Release);
        Ok((mailbox, name))
    }

    /// Maps the mailbox `name` of rank `owner` of group `group`, checking
    /// that it is one (size and header).
    pub(crate) fn open(name: &str, group: u32, owner: usize, rings: usize) -> std::io::Result<Mailbox> {
        let layout = Layout { rings };
        let file = File::from(shm::open(name, OFlags::RDWR, Mode::empty())?);
        let len = file.metadata()?.len();
        if len != layout.size() as u64 {
            return Err(std::io::Error::other(format!(
                "the mailbox {name} has {len} bytes, not {}",
                layout.size()
            )));
        }
        let map = MmapRaw::map_raw(&file)?;
        let mailbox = Mailbox {
            map,
            layout,
            linked: Mutex::new(None),
        };
        let header = (
            mailbox.word(0).load(Ordering::Relaxed),
            mailbox.word(8).load(Ordering::Relaxed),
            mailbox.word(16).load(Ordering::Acquire),
        );
        if header != (MAGIC, u64::from(group) << 32 | owner as u64, rings as u64) {
            return Err(std::io::Error::other(format!(
                "{name} is not the mailbox of rank {owner} of this group"
            )));
        }
        Ok(mailbox)
    }

    /// Removes the shared memory object's name (the mappings stay).
    pub(crate) fn unlink(&self) {
        if let Some(name) = self.linked.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = shm::unlink(name.as_str());
        }
    }

    /// The u64 at byte `off` (a multiple of 8 inside the header lines).
    fn word(&self, off: usize) -> &AtomicU64 {
        assert!(off.is_multiple_of(8) && off + 8 <= self.layout.data());
        // SAFETY: the mapping is page aligned and at least `data()` bytes
        // long (checked at open / set at create), so `off` is an aligned
        // u64 inside it; it lives as long as `self`, and every process
        // touches these words only atomically.
        unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(off).cast()) }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.layout.data());
        // SAFETY: as in `word`, for an aligned u32.
        unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(off).cast()) }
    }

    fn bell(&self) -> &AtomicU32 {
        self.u32_at(Layout::BELL)
    }

    fn sleepers(&self) -> &AtomicU32 {
        self.u32_at(Layout::BELL + 4)
    }

    /// The doorbell's count now: pass it to [`Mailbox::wait`].
    pub(crate) fn bell_count(&self) -> u32 {
        self.bell().load(Ordering::SeqCst)
    }

    /// Rings the doorbell: wakes the owner if it sleeps in [`Mailbox::wait`].
    pub(crate) fn ring(&self) {
        self.bell().fetch_add(1, Ordering::SeqCst);
        if self.sleepers().load(Ordering::SeqCst) > 0 {
            let _ = futex::wake(self.bell(), futex::Flags::empty(), i32::MAX as u32);
        }
    }

    /// Waits until the doorbell count differs from `seen` or `until`
    /// passes: a spin of up to `spin`, then a futex sleep.
    pub(crate) fn wait(&self, seen: u32, until: Instant, spin: Duration) {
        let bell = self.bell();
        let spin_end = Instant::now() + spin;
        let mut i = 0u32;
        while bell.load(Ordering::SeqCst) == seen {
            std::hint::spin_loop();
            i = i.wrapping_add(1);
            if i.is_multiple_of(64) && Instant::now() >= spin_end {
                break;
            }
        }
        let now = Instant::now();
        if bell.load(Ordering::SeqCst) != seen || now >= until {
            return;
        }
        let left = (until - now).min(Duration::from_millis(100));
        let timeout = futex::Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        self.sleepers().fetch_add(1, Ordering::SeqCst);
        // Returns at once when the count moved since `seen` (EAGAIN), on a
        // wake, on a signal or at the timeout: the caller checks again.
        let _ = futex::wait(bell, futex::Flags::empty(), seen, Some(&timeout));
        self.sleepers().fetch_sub(1, Ordering::SeqCst);
    }

    fn head(&self, j: usize) -> &AtomicU64 {
        self.word(self.layout.head(j))
    }

    fn tail(&self, j: usize) -> &AtomicU64 {
        self.word(self.layout.tail(j))
    }

    fn header_words(&self, j: usize, i: usize) -> [&AtomicU64; 4] {
        let at = self.layout.slot_header(j, i);
        [0, 8, 16, 24].map(|o| self.word(at + o))
    }

    /// The payload bytes of slot `i` of ring `j`.
    fn payload(&self, j: usize, i: usize) -> *mut u8 {
        debug_assert!(j < self.layout.rings && (i as u64) < SLOTS);
        let off = self.layout.payload(j, i);
        debug_assert!(off + SLOT_BYTES <= self.map.len());
        // SAFETY: `off + SLOT_BYTES` lies inside the mapping (the layout
        // sized it so), so the pointer stays in bounds.
        unsafe { self.map.as_mut_ptr().add(off) }
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        self.unlink();
    }
}

/// A message's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotHeader {
    pub seq: u64,
    pub tag: u64,
    pub fingerprint: u64,
    pub len: usize,
}

/// This rank's ring in a peer's mailbox (the sending end).
pub(crate) struct Outbox {
    mailbox: std::sync::Arc<Mailbox>,
    ring: usize,
    /// Serialises senders of this process (one worker thread per group in
    /// practice).
    lock: Mutex<()>,
}

impl Outbox {
    pub(crate) fn new(mailbox: std::sync::Arc<Mailbox>, ring: usize) -> Outbox {
        Outbox {
            mailbox,
            ring,
            lock: Mutex::new(()),
        }
    }

    /// Copies the message into a free slot and publishes it; `false`
    /// (nothing sent) when it is larger than a slot or the ring is full.
    pub(crate) fn try_send(&self, h: SlotHeader, payload: &[u8]) -> bool {
        if payload.len() > SLOT_BYTES || h.len != payload.len() {
            return false;
        }
        let _one = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mb = &*self.mailbox;
        let head = mb.head(self.ring).load(Ordering::Relaxed);
        let tail = mb.tail(self.ring).load(Ordering::Acquire);
        if head.wrapping_sub(tail) >= SLOTS {
            return false;
        }
        let i = (head % SLOTS) as usize;
        let [seq, tag, fp, len] = mb.header_words(self.ring, i);
        seq.store(h.seq, Ordering::Relaxed);
        tag.store(h.tag, Ordering::Relaxed);
        fp.store(h.fingerprint, Ordering::Relaxed);
        len.store(h.len as u64, Ordering::Relaxed);
        // Slot `i` is free: head - tail < SLOTS, the tail read with Acquire
        // after the receiver's Release, so no one reads it until the head moves.
        // SAFETY: this process writes the free slot alone; the length check
        // keeps the copy inside it, and the payload cannot overlap the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(payload.as_ptr(), mb.payload(self.ring, i), payload.len());
        }
        mb.head(self.ring).store(head + 1, Ordering::Release);
        mb.ring();
        true
    }
}

/// One sender's ring in this rank's mailbox (the receiving end).
pub(crate) struct Inbound {
    mailbox: std::sync::Arc<Mailbox>,
    ring: usize,
    state: Mutex<Cursor>,
}

/// The receiving end's position: slots from `tail` to `next` have been
/// handed out; `done` has a bit per handed-out slot already given back.
#[derive(Debug, Default)]
struct Cursor {
    next: u64,
    done: u64,
}

/// A published message not yet handed out.
#[derive(Debug)]
pub(crate) struct Peeked {
    pub header: SlotHeader,
    pos: u64,
}

impl Inbound {
    pub(crate) fn new(mailbox: std::sync::Arc<Mailbox>, ring: usize) -> Inbound {
        Inbound {
            mailbox,
            ring,
            state: Mutex::new(Cursor::default()),
        }
    }

    /// The next published message, if any; an error when its header is
    /// impossible (the peer wrote garbage).
    pub(crate) fn peek(&self) -> Result<Option<Peeked>, String> {
        let c = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mb = &*self.mailbox;
        let head = mb.head(self.ring).load(Ordering::Acquire);
        if c.next >= head {
            return Ok(None);
        }
        if head.wrapping_sub(mb.tail(self.ring).load(Ordering::Relaxed)) > SLOTS {
            return Err(format!(
                "its shared-memory ring claims {head} messages, more than it has slots"
            ));
        }
        let i = (c.next % SLOTS) as usize;
        let [seq, tag, fp, len] = mb.header_words(self.ring, i).map(|w| w.load(Ordering::Relaxed));
        if len > SLOT_BYTES as u64 {
            return Err(format!("it published a shared-memory message of {len} bytes"));
        }
        Ok(Some(Peeked {
            header: SlotHeader {
                seq,
                tag,
                fingerprint: fp,
                len: len as usize,
            },
            pos: c.next,
        }))
    }

    /// Hands out the message `p` (the one [`Inbound::peek`] returned):
    /// its bytes stay readable until [`Inbound::release`].
    pub(crate) fn take(&self, p: &Peeked) -> u64 {
        let mut c = self.state.lock().unwrap_or_else(|e| e.into_inner());
        debug_assert_eq!(c.next, p.pos);
        c.next = p.pos + 1;
        p.pos
    }

    /// The bytes of handed-out message `pos` of length `len`.
    ///
    /// # Safety
    /// `pos` must have been handed out by [`Inbound::take`] and not yet
    /// released, and `len` must be its header's length; the slice must not
    /// outlive the release.
    pub(crate) unsafe fn bytes(&self, pos: u64, len: usize) -> &[u8] {
        let i = (pos % SLOTS) as usize;
        // SAFETY: (the caller's contract) the slot holds a published
        // message of `len <= SLOT_BYTES` bytes that the sender does not
        // touch until it is released.
        unsafe { std::slice::from_raw_parts(self.mailbox.payload(self.ring, i), len) }
    }

    /// Gives slot `pos` back; the tail advances over every slot given back
    /// in order, and the sender may reuse them.
    pub(crate) fn release(&self, pos: u64) {
        let mut c = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mb = &*self.mailbox;
        let tail = mb.tail(self.ring).load(Ordering::Relaxed);
        let Some(bit) = pos.checked_sub(tail).filter(|b| *b < SLOTS) else {
            return;
        };
        c.done |= 1 << bit;
        let free = c.done.trailing_ones();
        if free > 0 {
            c.done >>= free;
            mb.tail(self.ring).store(tail + u64::from(free), Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn header(tag: u64, len: usize) -> SlotHeader {
        SlotHeader {
            seq: 1,
            tag,
            fingerprint: 9,
            len,
        }
    }

    /// A mailbox with two rings, its owner's mapping and a sender's.
    fn mailbox(group: u32) -> (Arc<Mailbox>, Arc<Mailbox>) {
        let (own, name) = Mailbox::create(group, 0, 2).unwrap();
        let theirs = Mailbox::open(&name, group, 0, 2).unwrap();
        (Arc::new(own), Arc::new(theirs))
    }

    #[test]
    fn a_ring_fills_and_frees_its_slots_in_order() {
        let (own, theirs) = mailbox(0xA1);
        let out = Outbox::new(theirs, 1);
        let inb = Inbound::new(own.clone(), 1);
        let bell = own.bell_count();
        for t in 0..SLOTS {
            assert!(out.try_send(header(t, 3), &[t as u8; 3]));
        }
        assert_ne!(own.bell_count(), bell, "each message rings the doorbell");
        assert!(!out.try_send(header(99, 1), &[0]), "a full ring refuses");
        assert!(!out.try_send(header(99, SLOT_BYTES + 1), &vec![0; SLOT_BYTES + 1]));
        let a = inb.peek().unwrap().unwrap();
        assert_eq!(a.header, header(0, 3));
        let pa = inb.take(&a);
        let b = inb.peek().unwrap().unwrap();
        let pb = inb.take(&b);
        // SAFETY: both taken and not yet released; lengths from headers.
        assert_eq!(unsafe { inb.bytes(pb, 3) }, &[1, 1, 1]);
        inb.release(pb);
        assert!(!out.try_send(header(99, 1), &[0]), "slot 0 is still in use");
        inb.release(pa);
        assert!(out.try_send(header(8, 1), &[8]));
        assert!(out.try_send(header(9, 1), &[9]));
        assert!(!out.try_send(header(10, 1), &[10]));
        for t in 2..10 {
            let p = inb.peek().unwrap().unwrap();
            assert_eq!(p.header.tag, t);
            inb.release(inb.take(&p));
        }
        assert!(inb.peek().unwrap().is_none());
    }

    #[test]
    fn impossible_headers_are_errors() {
        let (own, theirs) = mailbox(0xA2);
        let inb = Inbound::new(own, 1);
        let [_, _, _, len] = theirs.header_words(1, 0);
        len.store(SLOT_BYTES as u64 + 1, Ordering::Relaxed);
        theirs.head(1).store(1, Ordering::Release);
        assert!(inb.peek().unwrap_err().contains("bytes"));
        theirs.head(1).store(SLOTS + 5, Ordering::Release);
        assert!(inb.peek().unwrap_err().contains("slots"));
    }

    #[test]
    fn open_checks_the_owner_and_the_size() {
        let (own, name) = Mailbox::create(0xA3, 2, 3).unwrap();
        assert!(Mailbox::open(&name, 0xA3, 2, 3).is_ok());
        assert!(
            Mailbox::open(&name, 0xA3, 1, 3)
                .unwrap_err()
                .to_string()
                .contains("rank 1")
        );
        assert!(Mailbox::open(&name, 0xA4, 2, 3).is_err());
        assert!(
            Mailbox::open(&name, 0xA3, 2, 2)
                .unwrap_err()
                .to_string()
                .contains("bytes")
        );
        own.unlink();
        assert!(Mailbox::open(&name, 0xA3, 2, 3).is_err(), "unlinked");
    }

    #[test]
    fn orphaned_mailboxes_of_dead_ranks_are_removed() {
        // A pid that ran and is gone: a child that has exited and been reaped.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let orphan = format!("/ferrotorch-{dead}-000000a5-0-00000000");
        let create =
            |name: &str| shm::open(name, OFlags::CREATE | OFlags::RDWR, Mode::RUSR | Mode::WUSR).map(File::from);
        create(&orphan).unwrap();
        let exists = |name: &str| std::path::Path::new(&format!("{SHM_DIR}{name}")).exists();
        assert!(exists(&orphan));
        // A live rank's mailbox (this process) survives the sweep.
        let (live, live_name) = Mailbox::create(0xA6, 0, 1).unwrap();
        let (second, second_name) = Mailbox::create(0xA6, 1, 1).unwrap();
        assert!(!exists(&orphan), "the dead rank's mailbox is removed");
        assert!(exists(&live_name) && exists(&second_name), "live mailboxes stay");
        live.unlink();
        second.unlink();
        assert_eq!(creator_pid("ferrotorch-123-0000-1-2"), Some(123));
        assert_eq!(creator_pid("ferrotorch-x-1"), None);
        assert_eq!(creator_pid("other-123"), None);
    }

    #[test]
    fn a_sleeping_receiver_wakes_on_the_doorbell() {
        let (own, theirs) = mailbox(0xA5);
        let seen = own.bell_count();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            theirs.ring();
        });
        let start = Instant::now();
        while own.bell_count() == seen && start.elapsed() < Duration::from_secs(5) {
            own.wait(seen, Instant::now() + Duration::from_secs(5), SPIN);
        }
        t.join().unwrap();
        assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
        let before = Instant::now();
        own.wait(
            own.bell_count(),
            Instant::now() + Duration::from_millis(30),
            Duration::ZERO,
        );
        assert!(before.elapsed() >= Duration::from_millis(25), "waits out its deadline");
    }
}
