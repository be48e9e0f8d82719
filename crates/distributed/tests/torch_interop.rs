//! ferrotorch's stores and PyTorch's share one store, in both roles: a
//! PyTorch TCPStore server with our client, our server with PyTorch's
//! client, and one FileStore file. PyTorch is the bench venv's
//! (`bash bench/setup_venv.sh`); without it these tests skip with a
//! message, unless FERROTORCH_REQUIRE_TORCH=1 (CI) makes that a failure.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ferrotorch_distributed::store::{FileStore, Store, TcpStore, TcpStoreOptions};

const TIMEOUT: Duration = Duration::from_secs(30);

/// The Python with torch, or `None` (after saying why) when absent.
fn torch_python() -> Option<PathBuf> {
    let python = std::env::var_os("FERROTORCH_TORCH_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/.venv/bin/python"),
        PathBuf::from,
    );
    let works = Command::new(&python)
        .args(["-c", "import torch.distributed as d; assert d.is_available()"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if works {
        return Some(python);
    }
    let why = format!(
        "no PyTorch at {} (run `bash bench/setup_venv.sh`, or set FERROTORCH_TORCH_PYTHON)",
        python.display()
    );
    assert!(
        std::env::var_os("FERROTORCH_REQUIRE_TORCH").is_none(),
        "FERROTORCH_REQUIRE_TORCH is set but {why}"
    );
    eprintln!("skipped: {why}");
    None
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/torch_store.py")
}

fn spawn(python: &PathBuf, mode: &str, arg: &str) -> Child {
    Command::new(python)
        .arg(script())
        .args([mode, arg])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python")
}

/// Waits for the child (bounded) and asserts it printed "ok".
fn finish(child: Child) {
    let out = child.wait_with_output().expect("wait for python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("ok"),
        "PyTorch's side failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

#[test]
fn pytorch_server_ferrotorch_client() {
    let Some(python) = torch_python() else { return };
    let port = free_port();
    let child = spawn(&python, "torch_master", &port.to_string());
    // Our client joins PyTorch's worker count ("init/"), which the master waits for.
    let opts = TcpStoreOptions::new().world_size(2).timeout(TIMEOUT);
    let s = TcpStore::new("127.0.0.1", port, opts).expect("connect to PyTorch's TCPStore");
    s.add("counter", 5).unwrap();
    s.set("from_rust", b"hello").unwrap();
    assert_eq!(s.get("from_torch").unwrap(), b"hi");
    assert_eq!(s.get("counter").unwrap(), b"7");
    assert_eq!(s.get("cas").unwrap(), b"first");
    assert!(s.check(&["from_torch", "cas"]).unwrap());
    assert!(!s.check(&["absent"]).unwrap());
    let err = s.wait_timeout(&["absent"], Duration::from_millis(150)).unwrap_err();
    assert!(err.to_string().contains("absent"), "{err}");
    // The connection is still in step after the cancelled wait.
    assert_eq!(s.get("counter").unwrap(), b"7");
    s.append("appended", b"a").unwrap();
    s.append("appended", b"b").unwrap();
    s.multi_set(&["m1", "m2"], &[b"x", b"y"]).unwrap();
    assert_eq!(s.multi_get(&["m1", "m2"]).unwrap(), vec![b"x".to_vec(), b"y".to_vec()]);
    s.set("deleted_by_rust", b"1").unwrap();
    assert!(s.delete_key("deleted_by_rust").unwrap());
    assert!(s.num_keys().unwrap() >= 8);
    s.set("rust_checked", b"1").unwrap();
    assert_eq!(s.get("done").unwrap(), b"1");
    s.set("bye", b"1").unwrap();
    finish(child);
}

#[test]
fn ferrotorch_server_pytorch_client() {
    let Some(python) = torch_python() else { return };
    let port = free_port();
    let child = spawn(&python, "torch_worker", &port.to_string());
    // Our master waits until PyTorch's client has joined.
    let opts = TcpStoreOptions::new().is_master(true).world_size(2).timeout(TIMEOUT);
    let s = TcpStore::new("127.0.0.1", port, opts).expect("serve PyTorch's TCPStore client");
    s.add("counter", 5).unwrap();
    s.set("from_rust", b"hello").unwrap();
    assert_eq!(s.get("from_torch").unwrap(), b"hi");
    assert_eq!(s.get("cas").unwrap(), b"second");
    assert_eq!(s.get("appended").unwrap(), b"ab");
    assert!(!s.check(&["to_delete", "missing"]).unwrap());
    let seen: i64 = String::from_utf8(s.get("num_keys_seen").unwrap())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        seen + 2,
        s.num_keys().unwrap(),
        "num_keys as PyTorch's client saw it, before its last two sets"
    );
    s.set("done", b"1").unwrap();
    finish(child);
}

#[test]
fn one_file_store_shared_with_pytorch() {
    let Some(python) = torch_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let child = spawn(&python, "file_peer", path.to_str().unwrap());
    let fs = FileStore::new(&path, Some(2));
    fs.set_timeout(TIMEOUT);
    assert_eq!(fs.get("py").unwrap(), b"1");
    fs.set("rs", b"2").unwrap();
    assert_eq!(fs.get("py_done").unwrap(), b"1");
    finish(child);
    assert_eq!(fs.get("c").unwrap(), b"3");
    assert_eq!(fs.get("cas").unwrap(), b"p");
    assert!(!fs.check(&["gone"]).unwrap());
    assert_eq!(fs.add("c", 4).unwrap(), 7);
    // Both processes counted out: the last one removes the file.
    drop(fs);
    assert!(!path.exists(), "the last FileStore user removes the file");
}
