#!/usr/bin/env bash
# all_reduce bus bandwidth (f32, 4 KB to 256 MB) of ferrotorch's tcp backend
# and of PyTorch's Gloo, side by side on this machine: 2 and 4 ranks, the two
# alternating (REPS times, default 2), each size's best of 3 timed loops
# in each run and the best run. Prints a table with the
# ratio ours / Gloo (higher is better) and the one-core memcpy bandwidth.
# Usage: [REPS=2] bench/allreduce.sh [max_bytes]   (default 268435456)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
max="${1:-268435456}"
reps="${REPS:-2}"
"$here/setup_venv.sh"
(cd "$root" && cargo build --release --quiet -p ferrotorch-distributed --bin ferrorun --example allreduce_bw)
bin="${CARGO_TARGET_DIR:-$root/target}/release"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
lscpu | grep "Model name" || true
# Each size's figure is the best of REPS runs of each side, the two
# alternating, so that a slow spell of this shared machine does not land on
# one side only.
best() { sort -k1,1n -k2,2g "$@" | awk '!seen[$1]++'; }
for n in 2 4; do
  for rep in $(seq "$reps"); do
    "$bin/ferrorun" --nproc-per-node "$n" --standalone "$bin/examples/allreduce_bw" --memcpy --max-bytes "$max" > "$tmp/ours$n.$rep"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    OMP_NUM_THREADS=1 "$here/.venv/bin/torchrun" --nproc-per-node "$n" --master-port "$port" \
      "$here/allreduce_gloo.py" --max-bytes "$max" 2>/dev/null > "$tmp/gloo$n.$rep"
  done
  grep -h memcpy "$tmp"/ours$n.* | sort -k2,2g | tail -1 > "$tmp/memcpy$n"
  grep -hv memcpy "$tmp"/ours$n.* | best > "$tmp/ours$n"
  best "$tmp"/gloo$n.* > "$tmp/gloo$n"
  echo
  cat "$tmp/memcpy$n"
  echo "$n ranks: size | ours busbw GB/s (time us) | Gloo busbw GB/s (time us) | ours / Gloo"
  join <(sort -k1,1 "$tmp/ours$n") <(sort -k1,1 "$tmp/gloo$n") | sort -n | \
    awk '{ printf "%10d | %7.3f (%9.1f) | %7.3f (%9.1f) | %5.2fx\n", $1, $3, $2, $5, $4, $3 / $5 }'
done
