"""Joins the outputs of torch_ref.py and the Rust bench into one table.

Usage: python compare.py ours.tsv torch.tsv > table.md
Ratio = ours / PyTorch time (lower is better). For sgemm figures the
GFLOP/s and the share of the machine's fp32 peak (threads x GHz x 64) are
shown too.
"""
import re
import sys


def load(path):
    out = {}
    for line in open(path):
        parts = line.strip().split("\t")
        if len(parts) == 3:
            out[(parts[0], int(parts[1]))] = float(parts[2])
    return out


def ghz():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("cpu MHz"):
                return float(line.split(":")[1]) / 1000.0
    except OSError:
        pass
    return 2.5


def fmt_time(s):
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.2f} us"


def main():
    ours, ref = load(sys.argv[1]), load(sys.argv[2])
    peak_per_thread = ghz() * 64
    print("| figure | threads | ours | PyTorch | ratio | note |")
    print("|---|---|---|---|---|---|")
    for key in sorted(ours, key=lambda k: (list(ours).index(k),)):
        name, threads = key
        o, r = ours[key], ref.get(key)
        note = ""
        m = re.match(r"sgemm_(\d+)", name)
        if m:
            n = int(m.group(1))
            gf_o, gf_r = 2 * n**3 / o / 1e9, (2 * n**3 / r / 1e9 if r else 0)
            peak = peak_per_thread * threads
            note = f"{gf_o:.0f} vs {gf_r:.0f} GFLOP/s; ours {100 * gf_o / peak:.0f}% of peak"
        ratio = f"{o / r:.2f}" if r else "-"
        print(f"| {name} | {threads} | {fmt_time(o)} | {fmt_time(r) if r else '-'} | {ratio} | {note} |")


if __name__ == "__main__":
    main()
