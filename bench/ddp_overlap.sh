#!/usr/bin/env bash
# DDP overlap: the training step of the mnist MLP and the gpt figure's model
# with 2 ranks of one thread each in DistributedDataParallel against the
# 1-rank step (one thread) on the same per-rank batch (the issue asks for at
# most 1.1x), and against PyTorch DDP over Gloo in the same run (at most
# 0.7x). Also how much of DDP's communication backward hid (DDP's own
# account: each bucket's launch to completion, and the wait at backward's
# end). Each configuration runs twice, alternating; the faster run counts.
# Usage: bench/ddp_overlap.sh [steps]   (default 40)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
steps="${1:-40}"
"$here/setup_venv.sh"
(cd "$root" && cargo build --release --quiet -p ferrotorch-distributed --bin ferrorun && \
  cargo build --release --quiet -p ferrotorch-bench --example ddp_step)
bin="${CARGO_TARGET_DIR:-$root/target}/release"
py="$here/.venv/bin"
lscpu | grep "Model name" || true
val() { awk -v k="$1" '$1 == k { print $2 }'; }
best() { sort -g | head -1; }
for model in mlp gpt; do
  o1=(); o2=(); op=(); t1=(); t2=(); comm=""; hidden=""
  for rep in 1 2; do
    o1+=("$(RAYON_NUM_THREADS=1 "$bin/examples/ddp_step" --model "$model" --steps "$steps" | val step_ms)")
    # The machine's floor for 2 ranks: two independent 1-rank processes at
    # once (no communication), the slower one's step.
    pair=$( (RAYON_NUM_THREADS=1 "$bin/examples/ddp_step" --model "$model" --steps "$steps" & \
             RAYON_NUM_THREADS=1 "$bin/examples/ddp_step" --model "$model" --steps "$steps"; wait) | val step_ms | sort -g | tail -1)
    op+=("$pair")
    out2=$("$bin/ferrorun" --nproc-per-node 2 --standalone "$bin/examples/ddp_step" --model "$model" --steps "$steps")
    o2+=("$(echo "$out2" | val step_ms)")
    comm=$(echo "$out2" | val ddp_comm_ms)
    hidden=$(echo "$out2" | val hidden_pct)
    t1+=("$(OMP_NUM_THREADS=1 "$py/python" "$here/ddp_step.py" --model "$model" --steps "$steps" | val step_ms)")
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    t2+=("$(OMP_NUM_THREADS=1 "$py/torchrun" --nproc-per-node 2 --master-port "$port" "$here/ddp_step.py" \
      --model "$model" --steps "$steps" 2>/dev/null | val step_ms)")
  done
  ours1=$(printf '%s\n' "${o1[@]}" | best); ours2=$(printf '%s\n' "${o2[@]}" | best)
  oursp=$(printf '%s\n' "${op[@]}" | best)
  torch1=$(printf '%s\n' "${t1[@]}" | best); torch2=$(printf '%s\n' "${t2[@]}" | best)
  awk -v m="$model" -v o1="$ours1" -v o2="$ours2" -v op="$oursp" -v c="$comm" -v h="$hidden" -v t1="$torch1" -v t2="$torch2" 'BEGIN {
    printf "%s: ours 1 rank %.2f ms, two 1-rank processes at once %.2f ms (%.2fx), 2 ranks DDP %.2f ms (%.2fx; DDP communication %.2f ms per step, %.0f%% hidden behind backward) | PyTorch 1 rank %.2f ms, 2 ranks DDP %.2f ms | ours / PyTorch DDP %.2fx\n",
      m, o1, op, op / o1, o2, o2 / o1, c, h, t1, t2, o2 / t2 }'
done
