//! The four stores against one set of semantics (PyTorch's), plus what is
//! particular to each: FileStore across handles and its cleanup, TCPStore's
//! cancelled waits, connection errors and limits.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ferrotorch_distributed::DistError;
use ferrotorch_distributed::store::{FileStore, HashStore, PrefixStore, Store, TcpStore, TcpStoreOptions};

/// Every operation of the trait, on an empty store.
fn semantics(s: &dyn Store) {
    s.set("a", b"1").unwrap();
    assert_eq!(s.get("a").unwrap(), b"1");
    s.set("a", b"").unwrap();
    assert_eq!(s.get("a").unwrap(), b"", "an empty value is a set key");
    assert_eq!(s.add("n", 5).unwrap(), 5);
    assert_eq!(s.add("n", -7).unwrap(), -2);
    assert_eq!(s.get("n").unwrap(), b"-2");
    s.set("text", b"abc").unwrap();
    let err = s.add("text", 1).unwrap_err();
    assert!(
        matches!(err, DistError::InvalidArgument(_) | DistError::Closed(_)),
        "{err}"
    );

    // compare_set: PyTorch's three cases.
    assert_eq!(
        s.compare_set("c", b"", b"x").unwrap(),
        b"x",
        "missing + empty expected sets"
    );
    assert_eq!(
        s.compare_set("c", b"y", b"z").unwrap(),
        b"x",
        "mismatch returns current"
    );
    assert_eq!(s.compare_set("c", b"x", b"z").unwrap(), b"z", "match sets");
    assert_eq!(
        s.compare_set("m", b"e", b"d").unwrap(),
        b"e",
        "missing + expected returns it"
    );
    assert!(!s.check(&["m"]).unwrap(), "and sets nothing");

    assert!(s.check(&["a", "c"]).unwrap());
    assert!(!s.check(&["a", "zzz"]).unwrap());
    assert!(s.check(&[]).unwrap());

    s.append("ap", b"x").unwrap();
    s.append("ap", b"yz").unwrap();
    assert_eq!(s.get("ap").unwrap(), b"xyz");

    s.multi_set(&["k1", "k2"], &[b"v1", b"v2"]).unwrap();
    assert_eq!(
        s.multi_get(&["k2", "k1"]).unwrap(),
        vec![b"v2".to_vec(), b"v1".to_vec()]
    );
    assert!(matches!(
        s.multi_set(&["k1"], &[]).unwrap_err(),
        DistError::InvalidArgument(_)
    ));

    let before = s.num_keys().unwrap();
    assert!(s.delete_key("k1").unwrap());
    assert!(!s.check(&["k1"]).unwrap());
    assert_eq!(s.num_keys().unwrap(), before - 1);

    // A wait that times out names the missing key, within bounds.
    let t0 = Instant::now();
    let err = s.wait_timeout(&["a", "late"], Duration::from_millis(100)).unwrap_err();
    let waited = t0.elapsed();
    assert!(matches!(err, DistError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("late\""), "{err}");
    assert!(
        !err.to_string().contains("\"a\""),
        "only the missing key is named: {err}"
    );
    assert!(
        waited >= Duration::from_millis(90) && waited < Duration::from_secs(5),
        "{waited:?}"
    );

    // get waits for a key set later by another handle of the store.
    s.set_timeout(Duration::from_millis(150));
    assert!(matches!(s.get("nobody").unwrap_err(), DistError::Timeout { .. }));
    s.set_timeout(Duration::from_secs(30));
    assert_eq!(s.timeout(), Duration::from_secs(30));
}

/// `waiter` waits for a key that `setter` sets 50 ms later.
fn wakes(waiter: Arc<dyn Store>, setter: Arc<dyn Store>) {
    let h = thread::spawn(move || {
        let t0 = Instant::now();
        let v = waiter.get("later").unwrap();
        (v, t0.elapsed())
    });
    thread::sleep(Duration::from_millis(50));
    setter.set("later", b"now").unwrap();
    let (v, waited) = h.join().unwrap();
    assert_eq!(v, b"now");
    assert!(waited >= Duration::from_millis(40), "{waited:?}");
}

#[test]
fn hash_store() {
    let s = Arc::new(HashStore::new());
    semantics(&*s);
    wakes(s.clone(), s);
}

#[test]
fn prefix_store_namespaces_keys() {
    let base: Arc<dyn Store> = Arc::new(HashStore::new());
    let p = PrefixStore::new("pg0", base.clone());
    semantics(&p);
    assert!(base.check(&["pg0/a", "pg0/c"]).unwrap());
    assert!(!base.check(&["a"]).unwrap());
    let q = PrefixStore::new("inner", Arc::new(p.clone()));
    q.set("k", b"v").unwrap();
    assert_eq!(base.get("pg0/inner/k").unwrap(), b"v");
    let err = q.wait_timeout(&["x"], Duration::from_millis(10)).unwrap_err();
    assert!(err.to_string().contains("pg0/inner/x"), "{err}");
}

#[test]
fn file_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fs");
    let s = Arc::new(FileStore::new(&path, None));
    semantics(&*s);
    // A second handle (a second process, as far as the file is concerned).
    let other = Arc::new(FileStore::new(&path, None));
    assert_eq!(other.get("ap").unwrap(), b"xyz");
    wakes(other, s);
}

#[test]
fn file_store_last_user_removes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fs");
    let a = FileStore::new(&path, Some(2));
    let b = FileStore::new(&path, Some(2));
    a.set("x", b"1").unwrap();
    assert_eq!(b.get("x").unwrap(), b"1");
    drop(a);
    assert!(path.exists(), "one of two users left");
    drop(b);
    assert!(!path.exists(), "the second removes it");
}

#[test]
fn file_store_reports_a_truncated_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fs");
    {
        let s = FileStore::new(&path, None);
        s.set("key", b"value").unwrap();
    }
    let bytes = std::fs::read(&path).unwrap();
    for cut in [1, 5, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let s = FileStore::new(&path, None);
        let err = s.check(&["key"]).unwrap_err();
        assert!(err.to_string().contains("truncated record"), "cut {cut}: {err}");
        std::mem::forget(s); // its drop would append to the damaged file
    }
}

fn master() -> TcpStore {
    let opts = TcpStoreOptions::new()
        .is_master(true)
        .wait_for_workers(false)
        .timeout(Duration::from_secs(30));
    TcpStore::new("127.0.0.1", 0, opts).unwrap()
}

fn client(port: u16) -> TcpStore {
    TcpStore::new(
        "127.0.0.1",
        port,
        TcpStoreOptions::new().timeout(Duration::from_secs(30)),
    )
    .unwrap()
}

#[test]
fn tcp_store() {
    let m = master();
    semantics(&m);
    let c: Arc<dyn Store> = Arc::new(client(m.port()));
    let m2: Arc<dyn Store> = Arc::new(m.try_clone().unwrap());
    wakes(c.clone(), m2.clone());
    // Keys are shared between connections; the cancelled waits of
    // `semantics` left the master's connection in step.
    assert_eq!(c.get("ap").unwrap(), b"xyz");
    assert_eq!(m.get("later").unwrap(), b"now");
}

#[test]
fn tcp_store_waits_for_workers() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let workers: Vec<_> = (0..3)
        .map(|_| {
            thread::spawn(move || {
                let opts = TcpStoreOptions::new().world_size(4).timeout(Duration::from_secs(30));
                TcpStore::new("127.0.0.1", port, opts).map(|s| s.port())
            })
        })
        .collect();
    let opts = TcpStoreOptions::new()
        .is_master(true)
        .world_size(4)
        .timeout(Duration::from_secs(30));
    let m = TcpStore::new("127.0.0.1", port, opts).unwrap();
    for w in workers {
        assert_eq!(w.join().unwrap().unwrap(), port);
    }
    assert_eq!(m.server().unwrap().port(), port);
}

#[test]
fn tcp_store_master_times_out_waiting_for_workers() {
    let opts = TcpStoreOptions::new()
        .is_master(true)
        .world_size(3)
        .timeout(Duration::from_millis(300));
    let err = TcpStore::new("127.0.0.1", 0, opts).unwrap_err();
    assert!(err.to_string().contains("1/3 joined"), "{err}");
}

#[test]
fn tcp_store_connect_times_out_without_a_server() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let t0 = Instant::now();
    let opts = TcpStoreOptions::new().timeout(Duration::from_millis(300));
    let err = TcpStore::new("127.0.0.1", port, opts).unwrap_err();
    assert!(matches!(err, DistError::Timeout { op: "connect", .. }), "{err}");
    assert!(err.to_string().contains(&port.to_string()), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn tcp_store_client_sees_the_server_die() {
    let m = master();
    let c = client(m.port());
    c.set("k", b"v").unwrap();
    let h = thread::spawn(move || c.get("never"));
    thread::sleep(Duration::from_millis(50));
    drop(m);
    let err = h.join().unwrap().unwrap_err();
    assert!(matches!(err, DistError::Closed(_) | DistError::Io { .. }), "{err}");
}

#[test]
fn tcp_store_refuses_oversized_requests() {
    let m = master();
    let big_key = "k".repeat(9000);
    let err = m.set(&big_key, b"v").unwrap_err();
    assert!(err.to_string().contains("limit"), "{err}");
    let big_value = vec![0u8; 8 * 1024 * 1024 + 1];
    assert!(m.set("k", &big_value).unwrap_err().to_string().contains("limit"));
    // The largest value the protocol allows goes through.
    let max = vec![7u8; 8 * 1024 * 1024];
    m.set("k", &max).unwrap();
    assert_eq!(m.get("k").unwrap(), max);
}

#[test]
fn tcp_store_counter_on_a_non_number_closes_only_that_connection() {
    let m = master();
    let c = client(m.port());
    m.set("text", b"abc").unwrap();
    assert_eq!(m.get("text").unwrap(), b"abc"); // the set has arrived
    let err = c.add("text", 1).unwrap_err();
    assert!(err.to_string().contains("not a decimal integer"), "{err}");
    // The client reconnected: it is still usable.
    assert_eq!(c.get("text").unwrap(), b"abc");
    // The master's own connection is unaffected.
    assert_eq!(m.add("n", 1).unwrap(), 1);
}
