#!/usr/bin/env bash
# The whole mnist example against the same script in PyTorch (bench/mnist_ref.py),
# run alternately ROUNDS times (default 2): wall time from process start (data
# loading included) and peak RSS of each, and their ratios.
# Usage: bench/mnist_compare.sh [mlp|cnn] [extra flags for both, e.g. --epochs 1]
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-mlp}"; shift || true
rounds="${ROUNDS:-2}"
bench/setup_venv.sh >/dev/null
cargo build --release --example mnist >/dev/null 2>&1
measure() { # prints "seconds rss_kib" of the command
    local out
    out=$( { /usr/bin/time -f "TIME %e %M" "$@" >/dev/null; } 2>&1 | grep '^TIME' )
    echo "${out#TIME }"
}
for r in $(seq "$rounds"); do
    read -r ot orss < <(measure target/release/examples/mnist --model "$model" "$@")
    read -r pt prss < <(measure bench/.venv/bin/python bench/mnist_ref.py --model "$model" "$@")
    python3 -c "
ot, orss, pt, prss = $ot, $orss, $pt, $prss
print(f'round $r ($model): ours {ot:.1f} s, {orss/1024:.0f} MiB; PyTorch {pt:.1f} s, {prss/1024:.0f} MiB; '
      f'time ratio {ot/pt:.2f}, RSS ratio {orss/prss:.2f}')"
done
