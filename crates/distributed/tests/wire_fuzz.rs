//! The TCPStore wire protocol under garbage: every encoding round-trips
//! (proptest); 100k mutated, truncated or random frames never panic the
//! parser and cost no more memory than the bytes that arrived; and a live
//! server fed garbage connections closes each of them and keeps serving
//! a well-behaved client throughout.

use std::io::{Cursor, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use ferrotorch_distributed::store::tcp::wire::{self, Request, WireError, read_request};
use ferrotorch_distributed::store::{Store, TcpStore, TcpStoreOptions};
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

fn request() -> impl Strategy<Value = Request> {
    let keys = || proptest::collection::vec(bytes(12), 0..4);
    prop_oneof![
        any::<u32>().prop_map(Request::Validate),
        (bytes(12), bytes(40)).prop_map(|(key, value)| Request::Set { key, value }),
        (bytes(12), bytes(20), bytes(20))
            .prop_map(|(key, expected, desired)| { Request::CompareSet { key, expected, desired } }),
        bytes(12).prop_map(|key| Request::Get { key }),
        (bytes(12), any::<i64>()).prop_map(|(key, delta)| Request::Add { key, delta }),
        keys().prop_map(|keys| Request::Check { keys }),
        keys().prop_map(|keys| Request::Wait { keys }),
        Just(Request::GetNumKeys),
        bytes(12).prop_map(|key| Request::DeleteKey { key }),
        (bytes(12), bytes(40)).prop_map(|(key, value)| Request::Append { key, value }),
        keys().prop_map(|keys| Request::MultiGet { keys }),
        proptest::collection::vec((bytes(8), bytes(8)), 0..4).prop_map(|pairs| Request::MultiSet { pairs }),
        Just(Request::CancelWait),
        any::<u32>().prop_map(Request::Ping),
        (bytes(12), bytes(40)).prop_map(|(key, value)| Request::QueuePush { key, value }),
        bytes(12).prop_map(|key| Request::QueuePop { key }),
        bytes(12).prop_map(|key| Request::QueueLen { key }),
    ]
}

proptest! {
    #[test]
    fn every_request_round_trips(reqs in proptest::collection::vec(request(), 1..5)) {
        let mut stream = Vec::new();
        for r in &reqs {
            stream.extend_from_slice(&r.encode());
        }
        let mut cur = Cursor::new(stream);
        for r in &reqs {
            prop_assert_eq!(&read_request(&mut cur).unwrap().unwrap(), r);
        }
        prop_assert!(read_request(&mut cur).unwrap().is_none());
    }

    #[test]
    fn every_strict_prefix_is_truncated(r in request(), cut in any::<prop::sample::Index>()) {
        let full = r.encode();
        let cut = 1 + cut.index(full.len().max(2) - 1);
        if cut < full.len() {
            let err = read_request(&mut Cursor::new(&full[..cut])).unwrap_err();
            prop_assert!(matches!(err, WireError::Truncated(_)), "{err}");
        }
    }
}

/// xorshift64*: the fuzzer's deterministic randomness.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A valid frame, then damaged one of four ways.
fn garbage(rng: &mut Rng) -> Vec<u8> {
    let key = vec![b'k'; rng.below(20)];
    let value = vec![b'v'; rng.below(60)];
    let valid = match rng.below(8) {
        0 => Request::Set { key, value },
        1 => Request::CompareSet {
            key,
            expected: value.clone(),
            desired: value,
        },
        2 => Request::Add {
            key,
            delta: rng.next() as i64,
        },
        3 => Request::Wait {
            keys: vec![key; rng.below(4)],
        },
        4 => Request::MultiSet {
            pairs: vec![(key, value); rng.below(3)],
        },
        5 => Request::Ping(rng.next() as u32),
        6 => Request::Validate(rng.next() as u32),
        _ => Request::QueuePop { key },
    }
    .encode();
    let mut f = valid;
    match rng.below(4) {
        0 => f.truncate(rng.below(f.len())),
        1 => {
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(f.len());
                f[i] = rng.next() as u8;
            }
        }
        2 => {
            // A huge claimed length right after the command byte.
            f.truncate(1);
            f.extend_from_slice(&(rng.next() | 1 << 40).to_le_bytes());
        }
        _ => f = (0..rng.below(64)).map(|_| rng.next() as u8).collect(),
    }
    f
}

#[test]
fn parser_survives_100k_garbage_frames() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut ok, mut errors) = (0u32, 0u32);
    for _ in 0..100_000 {
        let frame = garbage(&mut rng);
        let mut r = Cursor::new(&frame[..]);
        // Parse until the bytes run out or break the protocol: at most one
        // request per byte, so this loop is bounded.
        for _ in 0..=frame.len() {
            match read_request(&mut r) {
                Ok(Some(_)) => ok += 1,
                Ok(None) => break,
                Err(e) => {
                    errors += 1;
                    // An error says what was wrong, never an I/O failure
                    // on an in-memory stream.
                    assert!(!matches!(e, WireError::Io(_)), "{e}");
                    break;
                }
            }
        }
    }
    assert!(ok > 1000 && errors > 50_000, "ok {ok} errors {errors}");
}

#[test]
fn lying_lengths_are_refused_before_allocation() {
    let mut f = vec![wire::cmd::SET];
    f.extend_from_slice(&u64::MAX.to_le_bytes());
    let err = read_request(&mut Cursor::new(&f)).unwrap_err();
    assert!(matches!(err, WireError::TooLong { what: "a key", .. }), "{err}");
    // A value length under the limit but with no bytes behind it.
    let mut f = vec![wire::cmd::SET];
    wire::put_bytes(&mut f, b"k");
    f.extend_from_slice(&(wire::MAX_VALUE_LEN).to_le_bytes());
    let err = read_request(&mut Cursor::new(&f)).unwrap_err();
    assert!(matches!(err, WireError::Truncated("a value")), "{err}");
    let mut f = vec![wire::cmd::WAIT];
    f.extend_from_slice(&(wire::MAX_KEY_COUNT + 1).to_le_bytes());
    assert!(matches!(
        read_request(&mut Cursor::new(&f)).unwrap_err(),
        WireError::TooLong {
            what: "a key count",
            ..
        }
    ));
    assert!(matches!(
        read_request(&mut Cursor::new(&[200u8][..])).unwrap_err(),
        WireError::UnknownCommand(200)
    ));
}

/// Garbage connections to a live server: each is closed, the server keeps
/// answering a good client between them, and no connection is left open.
#[test]
fn server_survives_garbage_connections() {
    let cases: usize = std::env::var("FERROTORCH_STORE_FUZZ_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let opts = TcpStoreOptions::new()
        .is_master(true)
        .wait_for_workers(false)
        .timeout(Duration::from_secs(30));
    let good = TcpStore::new("127.0.0.1", 0, opts).unwrap();
    let port = good.port();
    let mut rng = Rng(42);
    for i in 0..cases {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut frame = Vec::new();
        if rng.below(2) == 0 {
            frame.extend_from_slice(&Request::Validate(wire::VALIDATION_MAGIC).encode());
        }
        frame.extend_from_slice(&garbage(&mut rng));
        // The server may close before reading everything: a failed write
        // is part of the game.
        let _ = s.write_all(&frame);
        let _ = s.shutdown(Shutdown::Write);
        // The server answers what was valid, then closes: read to the end.
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
        if i % 100 == 0 {
            good.set("alive", i.to_string().as_bytes()).unwrap();
            assert_eq!(good.get("alive").unwrap(), i.to_string().as_bytes());
        }
    }
    assert!(good.check(&["alive"]).unwrap());
    // Every garbage connection is gone (the good client remains).
    let server = good.server().unwrap();
    let t0 = std::time::Instant::now();
    while server.num_clients() > 1 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(server.num_clients(), 1);
}
