//! `TCPStore`: a key-value store served by one process over TCP, in
//! PyTorch's c10d wire protocol ([`wire`]), so that ferrotorch and PyTorch
//! processes can share one store in either role.

mod server;
pub mod wire;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{Store, check_pairs, key_list};
use crate::error::{DistError, Result};
pub use server::TcpStoreServer;
use wire::Request;

/// The prefix PyTorch's client puts before every user key.
const KEY_PREFIX: &str = "/";
/// The counter the workers increment when they join (unprefixed).
const INIT_KEY: &str = "init/";
/// How long a cancelled wait may take to be acknowledged.
const CANCEL_GRACE: Duration = Duration::from_secs(30);

/// Options of [`TcpStore::new`], as the keyword arguments of PyTorch's
/// `TCPStore(host_name, port, world_size, is_master, timeout,
/// wait_for_workers)`.
#[derive(Debug, Clone)]
pub struct TcpStoreOptions {
    /// Whether this process runs the server (on the port, 0: any free one).
    pub is_master: bool,
    /// The number of processes that will join; with `wait_for_workers`,
    /// the master waits for all of them.
    pub world_size: Option<usize>,
    /// The timeout of connecting, `get` and `wait` (zero: forever).
    pub timeout: Duration,
    /// Whether the constructor waits until `world_size` processes joined.
    pub wait_for_workers: bool,
}

impl Default for TcpStoreOptions {
    fn default() -> Self {
        TcpStoreOptions {
            is_master: false,
            world_size: None,
            timeout: super::DEFAULT_TIMEOUT,
            wait_for_workers: true,
        }
    }
}

impl TcpStoreOptions {
    /// The defaults: a client, unknown world size, 300 s, waiting for workers.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets `is_master`.
    pub fn is_master(mut self, v: bool) -> Self {
        self.is_master = v;
        self
    }
    /// Sets `world_size`.
    pub fn world_size(mut self, n: usize) -> Self {
        self.world_size = Some(n);
        self
    }
    /// Sets `timeout`.
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }
    /// Sets `wait_for_workers`.
    pub fn wait_for_workers(mut self, v: bool) -> Self {
        self.wait_for_workers = v;
        self
    }
}

/// A client of a TCPStore server, and the server itself in the master
/// process (`torch.distributed.TCPStore`).
///
/// ```
/// use std::time::Duration;
/// use ferrotorch_distributed::store::{Store, TcpStore, TcpStoreOptions};
/// // The master (port 0: any free port) ...
/// let master = TcpStore::new("127.0.0.1", 0, TcpStoreOptions::new().is_master(true).wait_for_workers(false))?;
/// // ... and a worker, in another process as a rule.
/// let worker = TcpStore::new("127.0.0.1", master.port(), TcpStoreOptions::new())?;
/// worker.set("addr", b"10.0.0.2:7000")?;
/// assert_eq!(master.get("addr")?, b"10.0.0.2:7000");
/// assert_eq!(master.add("n", 2)? + worker.add("n", 3)?, 7);
/// # Ok::<(), ferrotorch_distributed::DistError>(())
/// ```
#[derive(Debug)]
pub struct TcpStore {
    host: String,
    port: u16,
    conn: Mutex<TcpStream>,
    server: Option<Arc<TcpStoreServer>>,
    timeout_ms: std::sync::atomic::AtomicU64,
    world_size: Option<usize>,
}

impl TcpStore {
    /// Connects to the server at `host:port` (starting it first when
    /// `is_master`), retrying until the timeout while the server is not up
    /// yet; then, with `wait_for_workers` and a `world_size`, joins the
    /// count of workers and (the master) waits for all of them.
    pub fn new(host: &str, port: u16, opts: TcpStoreOptions) -> Result<Self> {
        let server = if opts.is_master {
            Some(Arc::new(TcpStoreServer::bind(port)?))
        } else {
            None
        };
        let port = server.as_ref().map_or(port, |s| s.port());
        let stream = connect(host, port, opts.timeout)?;
        let store = TcpStore {
            host: host.to_owned(),
            port,
            conn: Mutex::new(stream),
            server,
            timeout_ms: std::sync::atomic::AtomicU64::new(millis(opts.timeout)),
            world_size: opts.world_size,
        };
        if opts.wait_for_workers {
            store.wait_for_workers()?;
        }
        Ok(store)
    }

    /// A second connection to the same server (`TCPStore.clone()`), for a
    /// thread that should not queue behind this one's waits.
    pub fn try_clone(&self) -> Result<Self> {
        let stream = connect(&self.host, self.port, self.timeout())?;
        Ok(TcpStore {
            host: self.host.clone(),
            port: self.port,
            conn: Mutex::new(stream),
            server: self.server.clone(),
            timeout_ms: std::sync::atomic::AtomicU64::new(millis(self.timeout())),
            world_size: self.world_size,
        })
    }

    /// The server's host, as given.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The server's port (the chosen one when the master asked for 0).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The local address of this client's connection: the address the
    /// other ranks can reach this host at, as far as routing knows.
    pub fn local_ip(&self) -> Option<std::net::IpAddr> {
        let ip = self.lock().local_addr().ok()?.ip();
        // An IPv4 peer seen through a dual-stack socket.
        Some(match ip {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
            v4 => v4,
        })
    }

    /// The server this process runs, if it is the master.
    pub fn server(&self) -> Option<&TcpStoreServer> {
        self.server.as_deref()
    }

    fn wait_for_workers(&self) -> Result<()> {
        let Some(n) = self.world_size else {
            return Ok(());
        };
        self.add_raw(INIT_KEY, 1)?;
        if self.server.is_none() {
            return Ok(());
        }
        let timeout = self.timeout();
        let start = Instant::now();
        loop {
            let joined = self.get_raw(INIT_KEY, timeout)?;
            let joined = String::from_utf8_lossy(&joined).parse::<i64>().unwrap_or(0);
            if joined >= n as i64 {
                return Ok(());
            }
            if !timeout.is_zero() && start.elapsed() > timeout {
                return Err(DistError::Timeout {
                    op: "TCPStore",
                    what: format!("workers to join: {joined}/{n} joined"),
                    after: timeout,
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn lock(&self) -> MutexGuard<'_, TcpStream> {
        // The lock guards whole exchanges; a panic inside one leaves the
        // stream possibly mid-frame, which the next read reports.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn what(&self) -> String {
        format!("TCPStore {}:{}", self.host, self.port)
    }

    fn send(&self, conn: &mut TcpStream, req: &Request) -> Result<()> {
        conn.write_all(&req.encode()).map_err(|e| self.broken(e))
    }

    fn broken(&self, e: std::io::Error) -> DistError {
        match e.kind() {
            std::io::ErrorKind::UnexpectedEof => DistError::Closed(self.what()),
            _ => DistError::io(self.what(), e),
        }
    }

    fn read_exact(&self, conn: &mut TcpStream, buf: &mut [u8]) -> Result<()> {
        conn.set_read_timeout(nonzero(self.timeout()))
            .map_err(|e| self.broken(e))?;
        conn.read_exact(buf).map_err(|e| self.broken(e))
    }

    fn read_i64(&self, conn: &mut TcpStream) -> Result<i64> {
        let mut b = [0u8; 8];
        self.read_exact(conn, &mut b)?;
        Ok(i64::from_le_bytes(b))
    }

    fn read_u8(&self, conn: &mut TcpStream) -> Result<u8> {
        let mut b = [0u8; 1];
        self.read_exact(conn, &mut b)?;
        Ok(b[0])
    }

    fn read_bytes(&self, conn: &mut TcpStream) -> Result<Vec<u8>> {
        let len = self.read_i64(conn)? as u64;
        if len > wire::MAX_VALUE_LEN {
            return Err(DistError::Protocol(format!(
                "{}: a reply of {len} bytes is past the limit of {}",
                self.what(),
                wire::MAX_VALUE_LEN
            )));
        }
        let mut v = vec![0u8; len as usize];
        self.read_exact(conn, &mut v)?;
        Ok(v)
    }

    /// `WAIT` on raw keys, cancelling it at the timeout.
    fn wait_raw(&self, conn: &mut TcpStream, keys: &[Vec<u8>], timeout: Duration) -> Result<()> {
        self.send(conn, &Request::Wait { keys: keys.to_vec() })?;
        conn.set_read_timeout(nonzero(timeout)).map_err(|e| self.broken(e))?;
        let mut b = [0u8; 1];
        match conn.read_exact(&mut b) {
            Ok(()) => return self.expect(b[0], wire::STOP_WAITING, "WAIT"),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(self.broken(e)),
        }
        // Timed out: cancel; the server may have woken us just before.
        self.send(conn, &Request::CancelWait)?;
        conn.set_read_timeout(Some(CANCEL_GRACE)).map_err(|e| self.broken(e))?;
        let mut r = [0u8; 1];
        conn.read_exact(&mut r).map_err(|e| self.broken(e))?;
        if r[0] == wire::STOP_WAITING {
            conn.read_exact(&mut r).map_err(|e| self.broken(e))?;
        }
        self.expect(r[0], wire::WAIT_CANCELED, "CANCEL_WAIT")?;
        // Name the keys still missing (the first few).
        let mut missing = Vec::new();
        for k in keys {
            self.send(conn, &Request::Check { keys: vec![k.clone()] })?;
            if self.read_u8(conn)? != wire::CHECK_READY {
                missing.push(k);
                if missing.len() == 8 {
                    break;
                }
            }
        }
        let names: Vec<String> = missing
            .iter()
            .map(|k| {
                let k = String::from_utf8_lossy(k);
                k.strip_prefix(KEY_PREFIX).unwrap_or(&k).to_owned()
            })
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        Err(DistError::Timeout {
            op: "wait",
            what: format!("{} of {}", key_list(&refs), self.what()),
            after: timeout,
        })
    }

    fn expect(&self, got: u8, want: u8, after: &str) -> Result<()> {
        if got == want {
            Ok(())
        } else {
            Err(DistError::Protocol(format!(
                "{}: answer {got} to {after}, expected {want}",
                self.what()
            )))
        }
    }

    fn get_raw(&self, key: &str, timeout: Duration) -> Result<Vec<u8>> {
        let mut conn = self.lock();
        let k = key.as_bytes().to_vec();
        self.wait_raw(&mut conn, std::slice::from_ref(&k), timeout)?;
        self.send(&mut conn, &Request::Get { key: k })?;
        self.read_bytes(&mut conn)
    }

    /// `ADD` on a raw key. A server closes the connection of an `ADD` on
    /// a key that holds no decimal integer (the protocol has no error
    /// answer); this reconnects and reports that, so the store stays usable.
    fn add_raw(&self, key: &str, delta: i64) -> Result<i64> {
        let mut conn = self.lock();
        let req = Request::Add {
            key: key.as_bytes().to_vec(),
            delta,
        };
        let answer = self.send(&mut conn, &req).and_then(|()| self.read_i64(&mut conn));
        match answer {
            Err(DistError::Closed(_)) => {
                let Ok(fresh) = connect(&self.host, self.port, self.timeout()) else {
                    return Err(DistError::Closed(self.what()));
                };
                *conn = fresh;
                Err(DistError::InvalidArgument(format!(
                    "add: {} refused to add to key {key:?}: it holds a value that is not a decimal integer",
                    self.what()
                )))
            }
            other => other,
        }
    }
}

/// `"/key"` as bytes, checked against the protocol's key limit.
fn prefixed(key: &str) -> Result<Vec<u8>> {
    let k = format!("{KEY_PREFIX}{key}").into_bytes();
    if k.len() as u64 > wire::MAX_KEY_LEN {
        return Err(DistError::InvalidArgument(format!(
            "TCPStore: a key of {} bytes is past the protocol's limit of {}",
            k.len(),
            wire::MAX_KEY_LEN
        )));
    }
    Ok(k)
}

fn value(v: &[u8]) -> Result<Vec<u8>> {
    if v.len() as u64 > wire::MAX_VALUE_LEN {
        return Err(DistError::InvalidArgument(format!(
            "TCPStore: a value of {} bytes is past the protocol's limit of {}",
            v.len(),
            wire::MAX_VALUE_LEN
        )));
    }
    Ok(v.to_vec())
}

fn prefixed_keys(keys: &[&str]) -> Result<Vec<Vec<u8>>> {
    if keys.len() as u64 > wire::MAX_KEY_COUNT {
        return Err(DistError::InvalidArgument(format!(
            "TCPStore: {} keys in one request, past the protocol's limit of {}",
            keys.len(),
            wire::MAX_KEY_COUNT
        )));
    }
    keys.iter().map(|k| prefixed(k)).collect()
}

fn millis(t: Duration) -> u64 {
    u64::try_from(t.as_millis()).unwrap_or(u64::MAX)
}

fn nonzero(t: Duration) -> Option<Duration> {
    (!t.is_zero()).then_some(t)
}

/// Connects, validates and pings, retrying refused connections with
/// back-off until `timeout` (the server may not be up yet).
fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream> {
    let what = format!("TCPStore {host}:{port}");
    let start = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .map_err(|e| DistError::io(format!("{what}: resolve"), e))?
            .collect();
        let mut last = None;
        for addr in &addrs {
            let attempt = match nonzero(timeout) {
                Some(t) => TcpStream::connect_timeout(addr, t),
                None => TcpStream::connect(addr),
            };
            match attempt.and_then(|s| handshake(s, timeout)) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        if !timeout.is_zero() && start.elapsed() + pause > timeout {
            let cause = last.map_or("no address".to_owned(), |e| e.to_string());
            return Err(DistError::Timeout {
                op: "connect",
                what: format!("{what} (last error: {cause})"),
                after: timeout,
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

fn handshake(mut s: TcpStream, timeout: Duration) -> std::io::Result<TcpStream> {
    s.set_nodelay(true)?;
    s.set_read_timeout(nonzero(timeout))?;
    let nonce = std::process::id() ^ (Instant::now().elapsed().subsec_nanos());
    let mut hello = Request::Validate(wire::VALIDATION_MAGIC).encode();
    hello.extend_from_slice(&Request::Ping(nonce).encode());
    s.write_all(&hello)?;
    let mut echo = [0u8; 4];
    s.read_exact(&mut echo)?;
    if u32::from_le_bytes(echo) != nonce {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the server did not echo PING's nonce (not a TCPStore?)",
        ));
    }
    Ok(s)
}

impl Store for TcpStore {
    fn set(&self, key: &str, v: &[u8]) -> Result<()> {
        let req = Request::Set {
            key: prefixed(key)?,
            value: value(v)?,
        };
        self.send(&mut self.lock(), &req)
    }

    fn get(&self, key: &str) -> Result<Vec<u8>> {
        let k = prefixed(key)?;
        let mut conn = self.lock();
        self.wait_raw(&mut conn, std::slice::from_ref(&k), self.timeout())?;
        self.send(&mut conn, &Request::Get { key: k })?;
        self.read_bytes(&mut conn)
    }

    fn add(&self, key: &str, delta: i64) -> Result<i64> {
        prefixed(key)?;
        self.add_raw(&format!("{KEY_PREFIX}{key}"), delta)
    }

    fn compare_set(&self, key: &str, expected: &[u8], desired: &[u8]) -> Result<Vec<u8>> {
        let req = Request::CompareSet {
            key: prefixed(key)?,
            expected: value(expected)?,
            desired: value(desired)?,
        };
        let mut conn = self.lock();
        self.send(&mut conn, &req)?;
        self.read_bytes(&mut conn)
    }

    fn wait_timeout(&self, keys: &[&str], timeout: Duration) -> Result<()> {
        let keys = prefixed_keys(keys)?;
        self.wait_raw(&mut self.lock(), &keys, timeout)
    }

    fn check(&self, keys: &[&str]) -> Result<bool> {
        let req = Request::Check {
            keys: prefixed_keys(keys)?,
        };
        let mut conn = self.lock();
        self.send(&mut conn, &req)?;
        match self.read_u8(&mut conn)? {
            wire::CHECK_READY => Ok(true),
            wire::CHECK_NOT_READY => Ok(false),
            other => Err(DistError::Protocol(format!("{}: answer {other} to CHECK", self.what()))),
        }
    }

    fn delete_key(&self, key: &str) -> Result<bool> {
        let mut conn = self.lock();
        self.send(&mut conn, &Request::DeleteKey { key: prefixed(key)? })?;
        Ok(self.read_i64(&mut conn)? == 1)
    }

    fn num_keys(&self) -> Result<i64> {
        let mut conn = self.lock();
        self.send(&mut conn, &Request::GetNumKeys)?;
        self.read_i64(&mut conn)
    }

    fn append(&self, key: &str, v: &[u8]) -> Result<()> {
        let req = Request::Append {
            key: prefixed(key)?,
            value: value(v)?,
        };
        self.send(&mut self.lock(), &req)
    }

    fn multi_get(&self, keys: &[&str]) -> Result<Vec<Vec<u8>>> {
        let keys = prefixed_keys(keys)?;
        let mut conn = self.lock();
        self.wait_raw(&mut conn, &keys, self.timeout())?;
        let n = keys.len();
        self.send(&mut conn, &Request::MultiGet { keys })?;
        (0..n).map(|_| self.read_bytes(&mut conn)).collect()
    }

    fn multi_set(&self, keys: &[&str], values: &[&[u8]]) -> Result<()> {
        check_pairs(keys.len(), values.len())?;
        let keys = prefixed_keys(keys)?;
        let pairs = keys
            .into_iter()
            .zip(values)
            .map(|(k, v)| Ok((k, value(v)?)))
            .collect::<Result<_>>()?;
        self.send(&mut self.lock(), &Request::MultiSet { pairs })
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn set_timeout(&self, timeout: Duration) {
        self.timeout_ms
            .store(millis(timeout), std::sync::atomic::Ordering::Relaxed);
    }
}
