"""Checkpoint compatibility between ferrotorch-serialize and PyTorch.

1. PyTorch writes checkpoints into DIR/from_torch/ (every dtype the
   ferrotorch core has, views sharing a storage with offsets and strides, a
   training checkpoint with model and optimizer state dicts and plain
   Python values, a Parameter, empty tensors, a protocol-4 pickle, and a
   safetensors file written by hand: the venv has no safetensors package).
2. The Rust example `pt_compat` loads each one and saves it again into
   DIR/from_rust/, and writes rust_native.pt / rust_native.safetensors.
3. This script loads the Rust files with torch.load(weights_only=True) and
   compares them with what PyTorch wrote: types, dtypes, shapes, strides,
   storage offsets, values, requires_grad, and which tensors share a
   storage.

Run with the bench venv:  bench/.venv/bin/python bench/check_pt_compat.py
(builds the example with CARGO_TARGET_DIR / CARGO_BUILD_JOBS from the
environment). Exit status 0 when everything matches.
"""

import collections
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64]
failures = []


def values(dtype):
    """The [3, 4] values both sides build for a dtype."""
    a = torch.arange(12)
    if dtype == torch.bool:
        t = a % 3 == 0
    elif dtype == torch.uint8:
        t = a.to(torch.uint8)
    elif dtype.is_floating_point:
        t = (a - 5).to(dtype) / 4
    else:
        t = (a - 5).to(dtype)
    return t.reshape(3, 4)


def write_torch_files(d):
    torch.manual_seed(0)
    torch.save({str(dt).removeprefix("torch."): values(dt) for dt in DTYPES}, f"{d}/dtypes.pt")
    base = torch.arange(24.0).reshape(4, 6)
    torch.save(
        {"base": base, "t": base.t(), "slice": base[1:, 2:5], "row": base[2], "strided": base[:, ::2], "scalar": base[1, 1]},
        f"{d}/views.pt",
    )
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[30, 80])
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    sched.step()
    torch.save(
        {
            "epoch": 3,
            "model_state_dict": model.state_dict(),
            "optimizer_state_dict": opt.state_dict(),
            "scheduler_state_dict": sched.state_dict(),
            "loss": 0.12,
            "name": "run",
            "flags": [True, False, None],
            "size": torch.Size([2, 3]),
            "bytes": b"\x00\xffab",
            "big": 2**40,
            "neg": -70000,
            "min": -(2**63),
            "tuple": (1, 2.5, "x", 4),
            "nested": {"a": {"b": [1, {"c": 2}]}},
            "nan": float("nan"),
            "inf": float("-inf"),
        },
        f"{d}/checkpoint.pt",
    )
    torch.save({"p": torch.nn.Parameter(torch.randn(2, 2))}, f"{d}/parameter.pt")
    torch.save({"e": torch.empty(0, 3), "z": torch.zeros(()), "specials": torch.tensor([float("nan"), -0.0, float("inf")])}, f"{d}/empty.pt")
    torch.save({"w": torch.randn(3, 2).t(), "text": "protocol 4", "bytes": b"xyz"}, f"{d}/proto4.pt", pickle_protocol=4)
    write_safetensors(f"{d}/st.safetensors", {"a": values(torch.float32), "b": values(torch.int64), "c": values(torch.bfloat16)}, {"note": "by hand"})


ST_DTYPES = {torch.bool: "BOOL", torch.uint8: "U8", torch.int32: "I32", torch.int64: "I64", torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32", torch.float64: "F64"}


def write_safetensors(path, tensors, metadata):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        b = t.contiguous().view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    inv = {v: k for k, v in ST_DTYPES.items()}
    out = {}
    for name, info in header.items():
        s, e = info["data_offsets"]
        buf = bytearray(raw[8 + n + s : 8 + n + e])
        dt = inv[info["dtype"]]
        t = torch.frombuffer(buf, dtype=torch.uint8) if buf else torch.empty(0, dtype=torch.uint8)
        out[name] = t.view(dt).reshape(info["shape"])
    return out, meta


def fail(path, msg):
    failures.append(f"{path}: {msg}")


def tensors_equal(a, b):
    """Equal values, NaN where NaN, and the same sign bits (-0.0)."""
    if not a.dtype.is_floating_point:
        return torch.equal(a, b)
    na, nb = a.isnan(), b.isnan()
    return torch.equal(na, nb) and torch.equal(a[~na], b[~nb]) and torch.equal(a.signbit(), b.signbit())


def same(a, b, path, storages):
    """Compares b (loaded from Rust's file) with a (what PyTorch wrote)."""
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            return fail(path, f"expected a tensor, got {type(b).__name__}")
        for attr in ("dtype", "shape"):
            if getattr(a, attr) != getattr(b, attr):
                return fail(path, f"{attr} {getattr(b, attr)} != {getattr(a, attr)}")
        if a.stride() != b.stride() or a.storage_offset() != b.storage_offset():
            fail(path, f"layout {b.stride()}+{b.storage_offset()} != {a.stride()}+{a.storage_offset()}")
        if a.requires_grad != b.requires_grad:
            fail(path, f"requires_grad {b.requires_grad} != {a.requires_grad}")
        if not tensors_equal(a.detach(), b.detach()):
            fail(path, "values differ")
        storages.append((path, a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr()))
        return
    if isinstance(a, torch.Size):
        if tuple(a) != b or type(b) not in (tuple, torch.Size):
            fail(path, f"{b!r} != {a!r}")
        return
    if type(a) is not type(b):
        return fail(path, f"type {type(b).__name__} != {type(a).__name__}")
    if isinstance(a, dict):
        if hasattr(a, "_metadata") or hasattr(b, "_metadata"):
            same(getattr(a, "_metadata", None), getattr(b, "_metadata", None), f"{path}._metadata", storages)
        if list(a.keys()) != list(b.keys()):
            return fail(path, f"keys {list(b.keys())} != {list(a.keys())}")
        for k in a:
            same(a[k], b[k], f"{path}[{k!r}]", storages)
    elif isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return fail(path, f"length {len(b)} != {len(a)}")
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]", storages)
    elif isinstance(a, float):
        if not (a == b or (math.isnan(a) and math.isnan(b))) or math.copysign(1, a) != math.copysign(1, b):
            fail(path, f"{b!r} != {a!r}")
    elif a != b:
        fail(path, f"{b!r} != {a!r}")


def check_sharing(name, storages):
    """Tensors share a storage in Rust's file exactly when they do in PyTorch's."""
    for i in range(len(storages)):
        for j in range(i + 1, len(storages)):
            (pi, ai, bi), (pj, aj, bj) = storages[i], storages[j]
            if (ai == aj) != (bi == bj):
                fail(f"{name}", f"{pi} and {pj}: shared in PyTorch's file {ai == aj}, in Rust's {bi == bj}")


def check_native(d):
    v = torch.load(f"{d}/rust_native.pt", weights_only=True)
    for dt in DTYPES:
        got = v["dtypes"][str(dt).removeprefix("torch.")]
        if got.dtype != dt or not torch.equal(got, values(dt)):
            fail("rust_native.pt", f"dtype {dt}: {got}")
    base = torch.arange(24.0).reshape(4, 6)
    views = v["views"]
    want = {"base": base, "t": base.t(), "narrow": base[1:4, 2:5], "row": base[2]}
    for k, w in want.items():
        t = views[k]
        if not torch.equal(t, w) or t.stride() != w.stride() or t.storage_offset() != w.storage_offset():
            fail("rust_native.pt", f"view {k}: {t} stride {t.stride()} offset {t.storage_offset()}")
    ptrs = {views[k].untyped_storage().data_ptr() for k in want}
    if len(ptrs) != 1:
        fail("rust_native.pt", "the views do not share one storage")
    views["base"][0, 0] = 100.0
    if views["t"][0, 0].item() != 100.0:
        fail("rust_native.pt", "a write through one view is not seen by the other")
    plain = {k: v[k] for k in ("epoch", "loss", "name", "flags", "big", "neg", "min", "bytes", "tuple", "int_keys")}
    want_plain = {"epoch": 3, "loss": 0.12, "name": "run", "flags": [True, False, None], "big": 2**40, "neg": -70000,
                  "min": -(2**63), "bytes": b"\x00\xffab", "tuple": (1, 2.5, "x", 4), "int_keys": {0: "zero", 7: "seven"}}
    if plain != want_plain:
        fail("rust_native.pt", f"plain values {plain} != {want_plain}")
    if not v["grad"].requires_grad:
        fail("rust_native.pt", "requires_grad lost")
    # Rust's AdamW + MultiStepLR state load into PyTorch's and continue as
    # PyTorch's own (milestones must be a Counter: epoch 4 is no milestone).
    p = torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.AdamW([p])
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 5], gamma=0.5)
    opt.load_state_dict(v["optimizer"])
    sched.load_state_dict(v["scheduler"])
    if type(sched.milestones) is not collections.Counter:
        fail("rust_native.pt", f"milestones are a {type(sched.milestones).__name__}")
    lrs = []
    for _ in range(3):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    if lrs != [0.0005, 0.00025, 0.00025] or sched.last_epoch != 6:
        fail("rust_native.pt", f"scheduler continued with lrs {lrs}, last_epoch {sched.last_epoch}")
    st, meta = read_safetensors(f"{d}/rust_native.safetensors")
    if meta != {"format": "pt"}:
        fail("rust_native.safetensors", f"metadata {meta}")
    for dt in DTYPES:
        got = st[str(dt).removeprefix("torch.")]
        if got.dtype != dt or not torch.equal(got, values(dt)):
            fail("rust_native.safetensors", f"dtype {dt}: {got}")


def main():
    keep = os.environ.get("KEEP_DIR")
    d = keep or tempfile.mkdtemp(prefix="pt_compat_")
    os.makedirs(f"{d}/from_torch", exist_ok=True)
    write_torch_files(f"{d}/from_torch")
    env = dict(os.environ)
    env.setdefault("CARGO_BUILD_JOBS", "1")
    subprocess.run(["cargo", "run", "--quiet", "--release", "-p", "ferrotorch-serialize", "--example", "pt_compat", "--", d],
                   cwd=ROOT, env=env, check=True)
    names = sorted(os.listdir(f"{d}/from_torch"))
    for name in names:
        if name.endswith(".pt"):
            # PyTorch's weights-only unpickler cannot read its own protocol-4
            # files (no FRAME opcode); the reference side is trusted here.
            a = torch.load(f"{d}/from_torch/{name}", weights_only=name != "proto4.pt")
            b = torch.load(f"{d}/from_rust/{name}", weights_only=True)
            storages = []
            same(a, b, name, storages)
            check_sharing(name, storages)
        else:
            a, ma = read_safetensors(f"{d}/from_torch/{name}")
            b, mb = read_safetensors(f"{d}/from_rust/{name}")
            if ma != mb or set(a) != set(b):
                fail(name, f"metadata or names differ: {mb} {sorted(b)}")
            for k in a:
                if k in b and (a[k].dtype != b[k].dtype or not torch.equal(a[k], b[k])):
                    fail(name, f"tensor {k} differs")
    check_native(f"{d}/from_rust")
    checked = len(names) + 2
    for f in failures:
        print("FAIL", f)
    print(f"{checked - len({f.split(':')[0] for f in failures})} passed, {len({f.split(':')[0] for f in failures})} failed")
    print(f"files in {d}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
