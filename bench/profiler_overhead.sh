#!/usr/bin/env bash
# What the profiler costs per operator: bench/examples/overhead_profile's
# workloads (1 thread) built with the profiler compiled in, idle and
# recording (FT_PROFILE=1), against a build without it
# (--cfg ferrotorch_no_profiler, in target/no-profiler). Runs interleaved,
# best of N each; prints the ratios (1.00 = no cost).
# Usage: bench/profiler_overhead.sh [rounds] [workloads...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
rounds="${1:-7}"
shift || true
workloads=("$@")
if [ ${#workloads[@]} -eq 0 ]; then
  workloads=(add1 chain50_fwd chain50 module_mlp16)
fi
target="${CARGO_TARGET_DIR:-$root/target}"
cargo build --release -p ferrotorch-bench --example overhead_profile --quiet
RUSTFLAGS="--cfg ferrotorch_no_profiler" CARGO_TARGET_DIR="$root/target/no-profiler" \
  cargo build --release -p ferrotorch-bench --example overhead_profile --quiet
with="$target/release/examples/overhead_profile"
without="$root/target/no-profiler/release/examples/overhead_profile"
iters() {
  case "$1" in
    add1) echo 400000 ;;
    chain50*) echo 4000 ;;
    *) echo 100000 ;;
  esac
}
# One run's microseconds per iteration.
time_of() {
  RAYON_NUM_THREADS=1 "$@" 2>/dev/null | sed -n 's/.*: \([0-9.]*\) us per iteration.*/\1/p'
}
printf '| workload | without profiler (us) | compiled in, idle | ratio | recording | ratio |\n|---|---|---|---|---|---|\n'
for w in "${workloads[@]}"; do
  n="$(iters "$w")"
  a=1e30; b=1e30; c=1e30
  for _ in $(seq "$rounds"); do
    a="$(python3 -c "print(min($a, $(time_of "$without" "$w" "$n")))")"
    b="$(python3 -c "print(min($b, $(time_of "$with" "$w" "$n")))")"
    c="$(python3 -c "print(min($c, $(FT_PROFILE=1 time_of "$with" "$w" "$n")))")"
  done
  python3 -c "print(f'| $w | {$a:.3f} | {$b:.3f} | {$b/$a:.3f} | {$c:.3f} | {$c/$a:.2f} |')"
done
