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
for t in 1 2; do
  "$here/.venv/bin/python" "$here/torch_ref.py" --threads "$t" --filter "$filter" >> "$out/torch.tsv"
  "$root/target/release/ferrotorch-bench" --threads "$t" --filter "$filter" >> "$out/ours.tsv"
done
python3 "$here/compare.py" "$out/ours.tsv" "$out/torch.tsv" | tee "$out/latest.md"
