"""Joins the outputs of torch_ref.py and the Rust bench into one table.

Usage: python compare.py ours.tsv torch.tsv [peak.tsv [ratio.tsv]] > table.md
Ratio = ours / PyTorch time (lower is better): from ratio.tsv when given
(interleave.py's median over adjacent pairs of blocks), else the quotient of
the two times. run.sh measures each figure once per side, with
interleave.py alternating the two sides' blocks; should a file hold a figure
several times (rounds appended by hand), each side keeps its fastest. For
sgemm figures the GFLOP/s and the share of the machine's fp32 peak are shown
too: threads x one core's measured FMA peak from peak.tsv (`ferrotorch-bench
--peak`, which also names the CPU, printed above the table), else threads x nominal GHz x flop per cycle (64 with AVX-512, 32
with AVX2 + FMA). For embed_*_bN figures the sentences per second are shown.
"""
import re
import sys


def load(path):
    out = {}
    for line in open(path):
        parts = line.strip().split("\t")
        if len(parts) == 3:
            try:
                key, value = (parts[0], int(parts[1])), float(parts[2])
            except ValueError:
                continue
            out[key] = min(out.get(key, value), value)
    return out


def cpu_name(path):
    """The `cpu` line of peak.tsv (`ferrotorch-bench --peak`): the CPU's
    brand string, family, model and microarchitecture from cpuid."""
    for line in open(path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) == 3 and parts[0] == "cpu":
            return parts[2]
    return None


def cpu_flags():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return set(line.split(":")[1].split())
    except OSError:
        pass
    return set()


def nominal_peak_per_thread():
    ghz = 2.5
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("cpu MHz"):
                ghz = float(line.split(":")[1]) / 1000.0
                break
    except OSError:
        pass
    flags = cpu_flags()
    flop_per_cycle = 64 if "avx512f" in flags else 32 if "fma" in flags else 8
    return ghz * flop_per_cycle


def fmt_time(s):
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.2f} us"


def main():
    ours, ref = load(sys.argv[1]), load(sys.argv[2])
    measured = load(sys.argv[3]).get(("fma_peak_gflops", 1)) if len(sys.argv) > 3 else None
    paired = load(sys.argv[4]) if len(sys.argv) > 4 else {}
    peak_per_thread = measured or nominal_peak_per_thread()
    peak_kind = "measured FMA peak" if measured else "nominal peak"
    cpu = cpu_name(sys.argv[3]) if len(sys.argv) > 3 else None
    if cpu:
        print(f"CPU: {cpu}\n")
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
            note = f"{gf_o:.0f} vs {gf_r:.0f} GFLOP/s; ours {100 * gf_o / peak:.0f}% of {peak_kind}"
        m = re.match(r"embed_.*_b(\d+)$", name)
        if m and r:
            batch = int(m.group(1))
            note = f"{batch / o:.0f} vs {batch / r:.0f} sentences/s"
        ratio = f"{paired.get(key, o / r):.2f}" if r else "-"
        print(f"| {name} | {threads} | {fmt_time(o)} | {fmt_time(r) if r else '-'} | {ratio} | {note} |")
    if measured:
        print(f"\nMeasured FMA peak: {measured:.1f} GFLOP/s per core.")


if __name__ == "__main__":
    main()
