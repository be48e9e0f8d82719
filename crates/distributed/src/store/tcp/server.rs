//! The TCPStore server: PyTorch's c10d `TCPStore` daemon, serving our
//! clients and PyTorch's alike.
//!
//! One thread accepts, one thread per connection reads requests; every
//! request is carried out, and its answer written, under one lock over the
//! store's state, so answers and wake-ups reach each client in order (as
//! PyTorch's single-threaded libuv loop gives). A connection that sends
//! bytes outside the protocol is closed; the others are served on.

use std::collections::{HashMap, VecDeque};
use std::io::{BufReader, Write};
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::wire::{self, Request, read_request};
use crate::error::{DistError, Result};
use crate::store::add_to_counter;

/// How long a write to one client may block the server before that client
/// is dropped (a client that stopped reading).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// A running TCPStore server. Dropping it stops the server and closes
/// every connection.
#[derive(Debug)]
pub struct TcpStoreServer {
    port: u16,
    local: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    stopping: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    map: HashMap<Vec<u8>, Vec<u8>>,
    queues: HashMap<Vec<u8>, VecDeque<Vec<u8>>>,
    /// Key -> the clients waiting for it.
    waiting: HashMap<Vec<u8>, Vec<u64>>,
    /// Client -> how many of its awaited keys are still missing.
    awaited: HashMap<u64, usize>,
    clients: HashMap<u64, Arc<TcpStream>>,
    next_id: u64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Each request's changes are applied before any write that can
        // fail, so a poisoned lock still guards a consistent state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl TcpStoreServer {
    /// Starts a server on `port` (0: a free port) of every local address,
    /// IPv6 and IPv4 (IPv4 only where IPv6 is off), as PyTorch's does.
    pub fn bind(port: u16) -> Result<Self> {
        let v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
        match TcpListener::bind(v6) {
            Ok(l) => Self::start(l),
            Err(_) => Self::bind_addr(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))),
        }
    }

    /// Starts a server on one address.
    pub fn bind_addr(addr: SocketAddr) -> Result<Self> {
        let listener =
            TcpListener::bind(addr).map_err(|e| DistError::io(format!("TCPStore server: bind {addr}"), e))?;
        Self::start(listener)
    }

    fn start(listener: TcpListener) -> Result<Self> {
        let local = listener
            .local_addr()
            .map_err(|e| DistError::io("TCPStore server: local address", e))?;
        let shared = Arc::new(Shared::default());
        let accept = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("tcpstore-accept".into())
                .spawn(move || accept_loop(listener, shared))
                .map_err(|e| DistError::io("TCPStore server: spawn", e))?
        };
        Ok(TcpStoreServer {
            port: local.port(),
            local,
            shared,
            accept: Some(accept),
        })
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The number of connections open now.
    pub fn num_clients(&self) -> usize {
        self.shared.lock().clients.len()
    }
}

impl Drop for TcpStoreServer {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the accept loop with a connection of our own.
        let wake = if self.local.is_ipv6() {
            SocketAddr::from((Ipv6Addr::LOCALHOST, self.port))
        } else {
            SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
        };
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(2));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        for client in self.shared.lock().clients.values() {
            let _ = client.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = conn else { continue };
        let _ = stream.set_nodelay(true);
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let stream = Arc::new(stream);
        let id = {
            let mut st = shared.lock();
            st.next_id += 1;
            let id = st.next_id;
            st.clients.insert(id, stream.clone());
            id
        };
        let worker = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("tcpstore-client".into())
            .spawn(move || serve_client(&worker, id, &stream));
        if spawned.is_err()
            && let Some(s) = shared.lock().clients.remove(&id)
        {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Serves one connection until it closes or breaks the protocol.
fn serve_client(shared: &Shared, id: u64, stream: &Arc<TcpStream>) {
    let mut reader = BufReader::new(&**stream);
    if let Ok(Some(Request::Validate(wire::VALIDATION_MAGIC))) = read_request(&mut reader) {
        while let Ok(Some(req)) = read_request(&mut reader) {
            if shared.stopping.load(Ordering::SeqCst) {
                break;
            }
            let mut st = shared.lock();
            if st.handle(id, req, stream).is_err() {
                break;
            }
        }
    }
    let mut st = shared.lock();
    st.clear_wait(id);
    st.clients.remove(&id);
    drop(st);
    let _ = stream.shutdown(Shutdown::Both);
}

fn bytes_reply(out: &mut Vec<u8>, v: &[u8]) {
    wire::put_bytes(out, v);
}

impl State {
    /// Carries out one request and writes its answer. An error closes the
    /// connection: a bad request (a counter that is not a number, a
    /// second VALIDATE) or a failed write.
    fn handle(&mut self, id: u64, req: Request, stream: &TcpStream) -> std::io::Result<()> {
        let mut out = Vec::new();
        match req {
            Request::Validate(_) => return Err(bad("VALIDATE after the connection was validated")),
            Request::Ping(nonce) => out.extend_from_slice(&nonce.to_le_bytes()),
            Request::Set { key, value } => self.set(key, value),
            Request::CompareSet { key, expected, desired } => {
                let current = self.map.get(&key).map(Vec::as_slice);
                let (store, ret) = crate::store::compare_set_outcome(current, &expected, &desired);
                bytes_reply(&mut out, &ret);
                if let Some(v) = store {
                    self.set(key, v);
                }
            }
            Request::Get { key } => bytes_reply(&mut out, self.map.get(&key).map_or(&[][..], Vec::as_slice)),
            Request::Add { key, delta } => {
                let name = String::from_utf8_lossy(&key).into_owned();
                let value = add_to_counter(&name, self.map.get(&key).map(Vec::as_slice), delta)
                    .map_err(|e| bad(&e.to_string()))?;
                self.set(key, value.to_string().into_bytes());
                out.extend_from_slice(&value.to_le_bytes());
            }
            Request::Check { keys } => out.push(if self.ready(&keys) {
                wire::CHECK_READY
            } else {
                wire::CHECK_NOT_READY
            }),
            Request::Wait { keys } => {
                if self.ready(&keys) {
                    out.push(wire::STOP_WAITING);
                } else {
                    let mut missing = 0;
                    for k in keys {
                        if !self.map.contains_key(&k) {
                            self.waiting.entry(k).or_default().push(id);
                            missing += 1;
                        }
                    }
                    self.awaited.insert(id, missing);
                }
            }
            Request::GetNumKeys => out.extend_from_slice(&(self.map.len() as i64).to_le_bytes()),
            Request::DeleteKey { key } => {
                let n = i64::from(self.map.remove(&key).is_some());
                out.extend_from_slice(&n.to_le_bytes());
            }
            Request::Append { key, value } => {
                let mut joined = self.map.remove(&key).unwrap_or_default();
                joined.extend_from_slice(&value);
                self.set(key, joined);
            }
            Request::MultiGet { keys } => {
                for k in &keys {
                    bytes_reply(&mut out, self.map.get(k).map_or(&[][..], Vec::as_slice));
                }
            }
            Request::MultiSet { pairs } => pairs.into_iter().for_each(|(k, v)| self.set(k, v)),
            Request::CancelWait => {
                self.clear_wait(id);
                out.push(wire::WAIT_CANCELED);
            }
            Request::QueuePush { key, value } => {
                self.queues.entry(key.clone()).or_default().push_back(value);
                self.wake_one(&key);
            }
            Request::QueuePop { key } => {
                let queue = self.queues.entry(key).or_default();
                out.extend_from_slice(&(queue.len() as i64).to_le_bytes());
                if let Some(v) = queue.pop_front() {
                    bytes_reply(&mut out, &v);
                }
            }
            Request::QueueLen { key } => {
                let n = self.queues.get(&key).map_or(0, VecDeque::len);
                out.extend_from_slice(&(n as i64).to_le_bytes());
            }
        }
        if out.is_empty() {
            Ok(())
        } else {
            (&*stream).write_all(&out)
        }
    }

    fn ready(&self, keys: &[Vec<u8>]) -> bool {
        keys.iter()
            .all(|k| self.map.contains_key(k) || self.queues.get(k).is_some_and(|q| !q.is_empty()))
    }

    /// Stores `value` and wakes the clients whose last awaited key it was.
    fn set(&mut self, key: Vec<u8>, value: Vec<u8>) {
        let waiters = self.waiting.remove(&key);
        self.map.insert(key, value);
        for client in waiters.into_iter().flatten() {
            self.count_down(client);
        }
    }

    /// Wakes the first client waiting on queue `key` whose wait it ends.
    fn wake_one(&mut self, key: &[u8]) {
        let Some(list) = self.waiting.get_mut(key) else {
            return;
        };
        let mut list = std::mem::take(list);
        if let Some(pos) = list.iter().position(|c| self.awaited.get(c) == Some(&1)) {
            let client = list.remove(pos);
            self.count_down(client);
        }
        if list.is_empty() {
            self.waiting.remove(key);
        } else {
            self.waiting.insert(key.to_vec(), list);
        }
    }

    fn count_down(&mut self, client: u64) {
        let Some(n) = self.awaited.get_mut(&client) else {
            return;
        };
        *n = n.saturating_sub(1);
        if *n == 0 {
            self.awaited.remove(&client);
            if let Some(s) = self.clients.get(&client)
                && (&**s).write_all(&[wire::STOP_WAITING]).is_err()
            {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    fn clear_wait(&mut self, id: u64) {
        if self.awaited.remove(&id).is_none() {
            return;
        }
        self.waiting.retain(|_, clients| {
            clients.retain(|c| *c != id);
            !clients.is_empty()
        });
    }
}

fn bad(msg: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.to_owned())
}
