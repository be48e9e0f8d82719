#!/usr/bin/env bash
# Runs every benchmark figure in PyTorch and in ferrotorch, 1 and 2 threads,
# side by side, and prints a table of ratios (ours / PyTorch; lower is better).
# Usage: bench/run.sh [filter]    (substrings of figure names, comma-separated)     (the table is also written to bench/results/latest.md)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
filter="${1:-}"
"$here/setup_venv.sh"
(cd "$root" && cargo build --release -p ferrotorch-bench --quiet)
out="$here/results"
mkdir -p "$out"
: > "$out/ours.tsv"
: > "$out/torch.tsv"
torch_side() { "$here/.venv/bin/python" "$here/torch_ref.py" --threads "$1" --filter "$filter" >> "$out/torch.tsv"; }
ours_side() { "$root/target/release/ferrotorch-bench" --threads "$1" --filter "$filter" >> "$out/ours.tsv"; }
# Two rounds, PyTorch-ours then ours-PyTorch, so that neither side always
# runs in the same moments of a shared machine; compare.py keeps each side's
# faster round.
for t in 1 2; do
  torch_side "$t"
  ours_side "$t"
  ours_side "$t"
  torch_side "$t"
done
"$root/target/release/ferrotorch-bench" --peak > "$out/peak.tsv"
python3 "$here/compare.py" "$out/ours.tsv" "$out/torch.tsv" "$out/peak.tsv" | tee "$out/latest.md"
