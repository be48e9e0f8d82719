"""PyTorch's side of tests/torch_interop.rs: real torch.distributed stores
talking to ferrotorch's. Each mode asserts what PyTorch sees and exits
non-zero (with the failed assertion on stderr) on any difference."""
import sys
from datetime import timedelta

import torch.distributed as dist

T = timedelta(seconds=30)


def torch_master(port):
    # The master waits until our client joins through the "init/" counter.
    s = dist.TCPStore("127.0.0.1", port, world_size=2, is_master=True, timeout=T, wait_for_workers=True)
    assert s.get("from_rust") == b"hello", s.get("from_rust")
    assert s.add("counter", 2) == 7
    assert s.compare_set("cas", "", "first") == b"first"
    assert s.compare_set("cas", "wrong", "second") == b"first"
    s.set("from_torch", "hi")
    s.wait(["rust_checked"])
    assert s.get("appended") == b"ab", s.get("appended")
    assert s.get("m1") == b"x" and s.get("m2") == b"y"
    assert not s.check(["deleted_by_rust"])
    s.set("done", "1")
    # Keep the server up until the client has read "done".
    s.wait(["bye"])


def torch_worker(port):
    s = dist.TCPStore("127.0.0.1", port, world_size=2, is_master=False, timeout=T, wait_for_workers=True)
    assert s.get("from_rust") == b"hello"
    assert s.add("counter", 2) == 7
    assert s.compare_set("cas", "", "first") == b"first"
    assert s.compare_set("cas", "first", "second") == b"second"
    assert s.compare_set("missing", "x", "y") == b"x"
    assert s.check(["from_rust", "counter"])
    assert not s.check(["nope"])
    s.append("appended", "a")
    s.append("appended", "b")
    s.multi_set(["m1", "m2"], ["x", "y"])
    assert s.multi_get(["m1", "m2"]) == [b"x", b"y"]
    s.set("to_delete", "z")
    assert s.delete_key("to_delete")
    assert not s.delete_key("to_delete")
    try:
        s.wait(["never"], timedelta(milliseconds=200))
        raise AssertionError("wait on a missing key returned")
    except AssertionError:
        raise
    except Exception:
        pass
    # The connection still works after a cancelled wait.
    assert s.get("counter") == b"7"
    s.queue_push("q", "v1")
    s.queue_push("q", "v2")
    assert s.queue_len("q") == 2
    assert s.queue_pop("q") == b"v1"
    assert s.queue_len("q") == 1
    n = s.num_keys()
    s.set("num_keys_seen", str(n))
    s.set("from_torch", "hi")
    s.wait(["done"])


def file_peer(path):
    fs = dist.FileStore(path, 2)
    fs.set("py", "1")
    assert fs.get("rs") == b"2", fs.get("rs")
    assert fs.add("c", 3) == 3
    assert fs.compare_set("cas", "", "p") == b"p"
    fs.set("gone", "x")
    fs.delete_key("gone")
    fs.set("py_done", "1")
    del fs


if __name__ == "__main__":
    mode, arg = sys.argv[1], sys.argv[2]
    {"torch_master": lambda: torch_master(int(arg)), "torch_worker": lambda: torch_worker(int(arg)),
     "file_peer": lambda: file_peer(arg)}[mode]()
    print("ok", flush=True)
