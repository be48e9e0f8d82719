"""Checkpoint I/O figures of issue 17, each a ratio measured side by side
in one run, ROUNDS rounds interleaved (median ratio reported):

- load a safetensors file of MB megabytes (default 500): ours against
  `cat FILE > /dev/null` (target <= 1.2), load alone and load + one read
  of every element;
- save a state dict of that size as .pt (fsynced): ours against
  `dd bs=4M conv=fsync` copying the .pt file we wrote (the same bytes, read
  from the page cache); both write a new file on an idle disk (target <= 1.5);
- load that .pt back: ours against `torch.load(path, weights_only=True)`
  (target <= 1.0), and against `torch.load(..., mmap=True)` for reference.

Both sides run THREADS threads (default 1). The page cache is warm for every load (each file was just written or
read), as it is for all of them alike.

Usage: bench/checkpoint_io.sh [MB] [ROUNDS]   (runs this with the bench venv)
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

MB = int(sys.argv[1]) if len(sys.argv) > 1 else 500
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
OURS = os.environ.get("OURS", "target/release/examples/checkpoint_io")


def ours(*args):
    env = dict(os.environ, RAYON_NUM_THREADS=os.environ.get("THREADS", "1"))
    out = subprocess.run([OURS, *map(str, args)], check=True, capture_output=True, text=True, env=env).stdout
    return float(next(l.split()[1] for l in out.splitlines() if l.startswith("SECONDS")))


def wall(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, shell=True, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def torch_load(path, mmap):
    t = time.perf_counter()
    sd = torch.load(path, weights_only=True, mmap=mmap)
    if mmap:
        for v in sd.values():
            v.sum()
    dt = time.perf_counter() - t
    assert len(sd) == 16
    return dt


def main():
    torch.set_num_threads(int(os.environ.get("THREADS", "1")))
    d = tempfile.mkdtemp(prefix="ferrotorch-ckpt-io-", dir=os.environ.get("CKPT_DIR"))
    pt, st = os.path.join(d, "ckpt.pt"), os.path.join(d, "ckpt.safetensors")
    subprocess.run([OURS, "make", d, str(MB)], check=True)
    size = os.path.getsize(st)
    rows = {k: [] for k in ["cat", "st", "st_touch", "dd", "save", "tload", "tload_mmap", "pt", "pt_touch"]}
    for r in range(ROUNDS):
        rows["cat"].append(wall(f"cat {st} > /dev/null"))
        rows["st"].append(ours("load-st", st))
        rows["st_touch"].append(ours("load-st", st, "touch"))
        # Alternate which write goes first: the disk may still be busy
        # with the one before.
        writes = [("dd", lambda: wall(f"dd if={pt} of={d}/dd.bin bs=4M conv=fsync")),
                  ("save", lambda: ours("save-pt", f"{d}/save.pt", MB))]
        for k, f in writes if r % 2 == 0 else writes[::-1]:
            # Both write a new file (an atomic save always does: overwriting
            # a file in place can reuse its blocks, which a fresh file on a
            # thin-provisioned disk cannot), once the disk is idle.
            for old in ("dd.bin", "save.pt"):
                if os.path.exists(os.path.join(d, old)):
                    os.remove(os.path.join(d, old))
            os.sync()
            time.sleep(2)
            rows[k].append(f())
        rows["tload"].append(torch_load(pt, False))
        rows["tload_mmap"].append(torch_load(pt, True))
        rows["pt"].append(ours("load-pt", pt))
        rows["pt_touch"].append(ours("load-pt", pt, "touch"))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1] * 1e3:.1f} ms" for k, v in rows.items()), flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}

    def ratio(a, b):
        rs = [x / y for x, y in zip(rows[a], rows[b])]
        return f"{statistics.median(rs):.3f} (rounds {min(rs):.3f}-{max(rs):.3f})"

    print(f"\n{MB} MB in 16 float32 tensors ({size / 1e6:.0f} MB files), {ROUNDS} rounds, medians:")
    print(f"  cat {med['cat'] * 1e3:.1f} ms; ours: load {med['st'] * 1e3:.1f} ms, load + read all {med['st_touch'] * 1e3:.1f} ms")
    print(f"    safetensors load / cat: {ratio('st', 'cat')}; with a read of every element: {ratio('st_touch', 'cat')} (target <= 1.2)")
    print(f"  dd (fsync) {med['dd'] * 1e3:.1f} ms; ours .pt save (fsync) {med['save'] * 1e3:.1f} ms")
    print(f"    .pt save / dd: {ratio('save', 'dd')}; ratio of the medians {med['save'] / med['dd']:.3f} (target <= 1.5)")
    print(f"  torch.load {med['tload'] * 1e3:.1f} ms (mmap=True + a sum per tensor: {med['tload_mmap'] * 1e3:.1f} ms); "
          f"ours load {med['pt'] * 1e3:.1f} ms, load + read all {med['pt_touch'] * 1e3:.1f} ms")
    print(f"    .pt load / torch.load: {ratio('pt', 'tload')}; with a read of every element: {ratio('pt_touch', 'tload')} (target <= 1.0)")
    print(f"    with a read of every element / torch.load(mmap=True) + sums: {ratio('pt_touch', 'tload_mmap')}")
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    os.rmdir(d)


if __name__ == "__main__":
    main()
