#!/usr/bin/env bash
# Runs every benchmark figure in PyTorch and in ferrotorch, 1 and 2 threads,
# side by side, and prints a table of ratios (ours / PyTorch; lower is better).
# Usage: bench/run.sh [filter]    (substrings of figure names, comma-separated)     (the table is also written to bench/results/latest.md)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
filter="${1:-}"
"$here/setup_venv.sh"
# The embed figure's model (PyPI, into the git-ignored models/), when the
# filter selects that figure (as interleave.py matches names).
IFS=',' read -r -a parts <<< "$filter"
selected=0
if [ -z "$filter" ]; then
  selected=1
fi
for f in "${parts[@]}"; do
  if [[ "embed_minilm_b32" == *"$f"* ]]; then
    selected=1
  fi
done
if [ "$selected" = 1 ]; then
  "$root/scripts/fetch_minilm.sh"
fi
(cd "$root" && cargo build --release -p ferrotorch-bench --quiet)
# The bench binary, in the target folder cargo used (CARGO_TARGET_DIR when set).
bin="${CARGO_TARGET_DIR:-$root/target}/release/ferrotorch-bench"
out="$here/results"
mkdir -p "$out"
# Both sides run as block servers; interleave.py alternates their blocks
# (PyTorch, ours, ours, PyTorch, ...) figure by figure, so both are timed in
# the same moments of a shared machine, and writes ours.tsv, torch.tsv and
# ratio.tsv (the median ratio over adjacent pairs of blocks).
"$here/.venv/bin/python" "$here/interleave.py" --ours "$bin" \
  --torch-python "$here/.venv/bin/python" --out "$out" --threads 1,2 --filter "$filter"
"$bin" --peak > "$out/peak.tsv"
python3 "$here/compare.py" "$out/ours.tsv" "$out/torch.tsv" "$out/peak.tsv" "$out/ratio.tsv" | tee "$out/latest.md"
