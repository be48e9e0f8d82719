"""Times PyTorch and ferrotorch block by block, alternating, in the same run.

Starts `torch_ref.py --serve` and `ferrotorch-bench --serve` for each thread
count and, figure by figure: sets both up (warm-up, 0.2 s each), then asks for
blocks of at least 0.1 s in the order PyTorch, ours, ours, PyTorch, PyTorch,
ours, ... until each side has `--blocks` of them. Each side's time is the
median of its blocks; the ratio is the median over the pairs of blocks run
one right after the other (PyTorch-ours, ours-PyTorch, ...) of ours /
PyTorch. On a shared machine whose speed drifts over seconds (on 2 vCPUs a
neighbour sometimes takes a core for a second or two, which halves a
2-thread figure for a few blocks), both sides are thus timed in the same
moments, and a slow spell changes both blocks of a pair rather than the
median of one side.

Writes `figure<TAB>threads<TAB>value` lines to OUT/ours.tsv, OUT/torch.tsv
(seconds) and OUT/ratio.tsv (the paired ratio), the input of compare.py,
and every block, in time order per side, to OUT/blocks.tsv; prints one
progress line per figure on stderr. Only the standard library.

Usage: python interleave.py --ours BIN --torch-python PY --out DIR
       [--threads 1,2] [--filter SUBSTRING[,SUBSTRING...]] [--blocks 10]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


class Server:
    """One block server (either side), spoken to line by line."""

    def __init__(self, argv):
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def ask(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline().strip()
        if not reply or reply.startswith("error"):
            code = self.proc.poll()
            raise SystemExit(f"{' '.join(self.argv)}: {command!r} -> {reply or f'no reply (exit {code})'}")
        return reply

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait()


def fmt(s):
    return f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.2f} us"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ours", required=True)
    p.add_argument("--torch-python", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--filter", default="")
    p.add_argument("--blocks", type=int, default=10)
    args = p.parse_args()
    if args.blocks < 5:
        raise SystemExit("--blocks must be at least 5")
    torch_ref = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_ref.py")
    os.makedirs(args.out, exist_ok=True)
    files = {side: open(os.path.join(args.out, f"{side}.tsv"), "w") for side in ("ours", "torch", "ratio")}
    blocks_file = open(os.path.join(args.out, "blocks.tsv"), "w")
    for threads in [int(t) for t in args.threads.split(",")]:
        servers = {
            "torch": Server([args.torch_python, torch_ref, "--serve", "--threads", str(threads)]),
            "ours": Server([args.ours, "--serve", "--threads", str(threads)]),
        }
        names = [n for n in servers["ours"].ask("list").split("\t") if any(f in n for f in args.filter.split(","))]
        for name in names:
            if any(servers[side].ask(f"setup {name}") != "ok" for side in ("torch", "ours")):
                print(f"{name} t={threads}: not on both sides, skipped", file=sys.stderr)
                continue
            times = {"torch": [], "ours": []}
            pairs = []
            for i in range(2 * args.blocks):
                side = "torch" if i % 4 in (0, 3) else "ours"
                # A short pause: the other side's idle threads stop spinning.
                time.sleep(0.01)
                times[side].append(float(servers[side].ask("block")))
                if i % 2 == 1:
                    pairs.append(times["ours"][-1] / times["torch"][-1])
            med = {side: statistics.median(v) for side, v in times.items()}
            med["ratio"] = statistics.median(pairs)
            for side in ("ours", "torch", "ratio"):
                print(f"{name}\t{threads}\t{med[side]:.9e}", file=files[side], flush=True)
            for side, v in times.items():
                print("\t".join([name, str(threads), side] + [f"{x:.9e}" for x in v]), file=blocks_file, flush=True)
            print(
                f"{name} t={threads}: ours {fmt(med['ours'])}, PyTorch {fmt(med['torch'])}, "
                f"ratio {med['ratio']:.2f}",
                file=sys.stderr,
                flush=True,
            )
        for s in servers.values():
            s.close()


if __name__ == "__main__":
    main()
