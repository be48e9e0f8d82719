//! PyTorch's c10d TCPStore wire protocol, both directions.
//!
//! A request is a command byte and its fields; integers are
//! little-endian, strings and byte strings a `u64` length and the bytes.
//! A new connection first sends `VALIDATE` and the magic number (the server
//! answers nothing, and closes a connection that sends anything else
//! first); PyTorch's client then sends `PING` with a nonce, which the
//! server echoes. The limits on keys, values and key counts are those of
//! PyTorch's libuv server, so a request one server accepts, the other does.

use std::io::Read;

/// The number a client sends after `VALIDATE`.
pub const VALIDATION_MAGIC: u32 = 0x3C85_F7CE;
/// Longest key the server accepts (bytes).
pub const MAX_KEY_LEN: u64 = 8 * 1024;
/// Longest value the server accepts (bytes).
pub const MAX_VALUE_LEN: u64 = 8 * 1024 * 1024;
/// Most keys in one `CHECK`, `WAIT`, `MULTI_GET` or `MULTI_SET`.
pub const MAX_KEY_COUNT: u64 = 128 * 1024;

/// The command bytes (`c10d::detail::QueryType`).
#[allow(missing_docs)]
pub mod cmd {
    pub const VALIDATE: u8 = 0;
    pub const SET: u8 = 1;
    pub const COMPARE_SET: u8 = 2;
    pub const GET: u8 = 3;
    pub const ADD: u8 = 4;
    pub const CHECK: u8 = 5;
    pub const WAIT: u8 = 6;
    pub const GET_NUM_KEYS: u8 = 7;
    pub const DELETE_KEY: u8 = 8;
    pub const APPEND: u8 = 9;
    pub const MULTI_GET: u8 = 10;
    pub const MULTI_SET: u8 = 11;
    pub const CANCEL_WAIT: u8 = 12;
    pub const PING: u8 = 13;
    pub const QUEUE_PUSH: u8 = 14;
    pub const QUEUE_POP: u8 = 15;
    pub const QUEUE_LEN: u8 = 16;
}

/// `CHECK`'s answer: all keys set.
pub const CHECK_READY: u8 = 0;
/// `CHECK`'s answer: some key missing.
pub const CHECK_NOT_READY: u8 = 1;
/// `WAIT`'s answer once every key is set.
pub const STOP_WAITING: u8 = 0;
/// `CANCEL_WAIT`'s answer.
pub const WAIT_CANCELED: u8 = 1;

/// One request, decoded. Keys are bytes: PyTorch's are `std::string`s,
/// which need not be UTF-8.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Request {
    Validate(u32),
    Set {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    CompareSet {
        key: Vec<u8>,
        expected: Vec<u8>,
        desired: Vec<u8>,
    },
    Get {
        key: Vec<u8>,
    },
    Add {
        key: Vec<u8>,
        delta: i64,
    },
    Check {
        keys: Vec<Vec<u8>>,
    },
    Wait {
        keys: Vec<Vec<u8>>,
    },
    GetNumKeys,
    DeleteKey {
        key: Vec<u8>,
    },
    Append {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    MultiGet {
        keys: Vec<Vec<u8>>,
    },
    MultiSet {
        pairs: Vec<(Vec<u8>, Vec<u8>)>,
    },
    CancelWait,
    Ping(u32),
    QueuePush {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    QueuePop {
        key: Vec<u8>,
    },
    QueueLen {
        key: Vec<u8>,
    },
}

/// Why a request could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The stream ended inside a request.
    #[error("truncated request: the stream ended inside {0}")]
    Truncated(&'static str),
    /// A command byte the protocol does not have.
    #[error("unknown command byte {0}")]
    UnknownCommand(u8),
    /// A length or count past the protocol's limits.
    #[error("{what} of {got} is past the limit of {max}")]
    TooLong {
        /// What was too long.
        what: &'static str,
        /// Its claimed size.
        got: u64,
        /// The limit.
        max: u64,
    },
    /// A socket error.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Reads exactly `buf.len()` bytes; `Truncated(what)` at end of stream.
fn fill(r: &mut impl Read, buf: &mut [u8], what: &'static str) -> Result<(), WireError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => WireError::Truncated(what),
        _ => WireError::Io(e),
    })
}

fn read_u32(r: &mut impl Read, what: &'static str) -> Result<u32, WireError> {
    let mut b = [0u8; 4];
    fill(r, &mut b, what)?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(r: &mut impl Read, what: &'static str) -> Result<u64, WireError> {
    let mut b = [0u8; 8];
    fill(r, &mut b, what)?;
    Ok(u64::from_le_bytes(b))
}

/// A length-prefixed byte string of at most `max` bytes. The buffer grows
/// with the bytes that arrive, so a lying length costs no memory.
fn read_bytes(r: &mut impl Read, max: u64, what: &'static str) -> Result<Vec<u8>, WireError> {
    let len = read_u64(r, what)?;
    if len > max {
        return Err(WireError::TooLong { what, got: len, max });
    }
    let mut out = Vec::with_capacity(len.min(64 * 1024) as usize);
    let got = r.take(len).read_to_end(&mut out)?;
    if (got as u64) < len {
        return Err(WireError::Truncated(what));
    }
    Ok(out)
}

fn read_key(r: &mut impl Read) -> Result<Vec<u8>, WireError> {
    read_bytes(r, MAX_KEY_LEN, "a key")
}

fn read_value(r: &mut impl Read) -> Result<Vec<u8>, WireError> {
    read_bytes(r, MAX_VALUE_LEN, "a value")
}

fn read_count(r: &mut impl Read) -> Result<u64, WireError> {
    let n = read_u64(r, "a key count")?;
    if n > MAX_KEY_COUNT {
        return Err(WireError::TooLong {
            what: "a key count",
            got: n,
            max: MAX_KEY_COUNT,
        });
    }
    Ok(n)
}

fn read_keys(r: &mut impl Read) -> Result<Vec<Vec<u8>>, WireError> {
    let n = read_count(r)?;
    (0..n).map(|_| read_key(r)).collect()
}

/// Reads one request; `Ok(None)` when the stream ends cleanly before its
/// first byte.
pub fn read_request(r: &mut impl Read) -> Result<Option<Request>, WireError> {
    let mut c = [0u8; 1];
    loop {
        match r.read(&mut c) {
            Ok(0) => return Ok(None),
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        }
    }
    let req = match c[0] {
        cmd::VALIDATE => Request::Validate(read_u32(r, "VALIDATE's magic number")?),
        cmd::SET => Request::Set {
            key: read_key(r)?,
            value: read_value(r)?,
        },
        cmd::COMPARE_SET => Request::CompareSet {
            key: read_key(r)?,
            expected: read_value(r)?,
            desired: read_value(r)?,
        },
        cmd::GET => Request::Get { key: read_key(r)? },
        cmd::ADD => Request::Add {
            key: read_key(r)?,
            delta: read_u64(r, "ADD's delta")? as i64,
        },
        cmd::CHECK => Request::Check { keys: read_keys(r)? },
        cmd::WAIT => Request::Wait { keys: read_keys(r)? },
        cmd::GET_NUM_KEYS => Request::GetNumKeys,
        cmd::DELETE_KEY => Request::DeleteKey { key: read_key(r)? },
        cmd::APPEND => Request::Append {
            key: read_key(r)?,
            value: read_value(r)?,
        },
        cmd::MULTI_GET => Request::MultiGet { keys: read_keys(r)? },
        cmd::MULTI_SET => {
            let n = read_count(r)?;
            let pairs = (0..n)
                .map(|_| Ok((read_key(r)?, read_value(r)?)))
                .collect::<Result<_, WireError>>()?;
            Request::MultiSet { pairs }
        }
        cmd::CANCEL_WAIT => Request::CancelWait,
        cmd::PING => Request::Ping(read_u32(r, "PING's nonce")?),
        cmd::QUEUE_PUSH => Request::QueuePush {
            key: read_key(r)?,
            value: read_value(r)?,
        },
        cmd::QUEUE_POP => Request::QueuePop { key: read_key(r)? },
        cmd::QUEUE_LEN => Request::QueueLen { key: read_key(r)? },
        other => return Err(WireError::UnknownCommand(other)),
    };
    Ok(Some(req))
}

/// Appends a length-prefixed byte string.
pub fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

fn put_keys(out: &mut Vec<u8>, keys: &[Vec<u8>]) {
    out.extend_from_slice(&(keys.len() as u64).to_le_bytes());
    keys.iter().for_each(|k| put_bytes(out, k));
}

impl Request {
    /// The request's bytes on the wire.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        match self {
            Request::Validate(m) => {
                out.push(cmd::VALIDATE);
                out.extend_from_slice(&m.to_le_bytes());
            }
            Request::Set { key, value } => {
                out.push(cmd::SET);
                put_bytes(&mut out, key);
                put_bytes(&mut out, value);
            }
            Request::CompareSet { key, expected, desired } => {
                out.push(cmd::COMPARE_SET);
                put_bytes(&mut out, key);
                put_bytes(&mut out, expected);
                put_bytes(&mut out, desired);
            }
            Request::Get { key } => {
                out.push(cmd::GET);
                put_bytes(&mut out, key);
            }
            Request::Add { key, delta } => {
                out.push(cmd::ADD);
                put_bytes(&mut out, key);
                out.extend_from_slice(&delta.to_le_bytes());
            }
            Request::Check { keys } => {
                out.push(cmd::CHECK);
                put_keys(&mut out, keys);
            }
            Request::Wait { keys } => {
                out.push(cmd::WAIT);
                put_keys(&mut out, keys);
            }
            Request::GetNumKeys => out.push(cmd::GET_NUM_KEYS),
            Request::DeleteKey { key } => {
                out.push(cmd::DELETE_KEY);
                put_bytes(&mut out, key);
            }
            Request::Append { key, value } => {
                out.push(cmd::APPEND);
                put_bytes(&mut out, key);
                put_bytes(&mut out, value);
            }
            Request::MultiGet { keys } => {
                out.push(cmd::MULTI_GET);
                put_keys(&mut out, keys);
            }
            Request::MultiSet { pairs } => {
                out.push(cmd::MULTI_SET);
                out.extend_from_slice(&(pairs.len() as u64).to_le_bytes());
                for (k, v) in pairs {
                    put_bytes(&mut out, k);
                    put_bytes(&mut out, v);
                }
            }
            Request::CancelWait => out.push(cmd::CANCEL_WAIT),
            Request::Ping(n) => {
                out.push(cmd::PING);
                out.extend_from_slice(&n.to_le_bytes());
            }
            Request::QueuePush { key, value } => {
                out.push(cmd::QUEUE_PUSH);
                put_bytes(&mut out, key);
                put_bytes(&mut out, value);
            }
            Request::QueuePop { key } => {
                out.push(cmd::QUEUE_POP);
                put_bytes(&mut out, key);
            }
            Request::QueueLen { key } => {
                out.push(cmd::QUEUE_LEN);
                put_bytes(&mut out, key);
            }
        }
        out
    }
}
