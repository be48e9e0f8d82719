#!/usr/bin/env bash
# all_reduce bus bandwidth across "hosts": 2 ranks in two network namespaces
# joined by a veth pair (made here, removed on exit; needs root and
# iproute2), ferrotorch's tcp backend (sockets: the ranks are on different
# hosts as far as it can tell) against PyTorch's Gloo, side by side, f32,
# 4 KB to 16 MB by default. The issue asks for at least Gloo's figure.
# Usage: sudo bench/allreduce_netns.sh [max_bytes]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
max="${1:-16777216}"
"$here/setup_venv.sh"
(cd "$root" && cargo build --release --quiet -p ferrotorch-distributed --example allreduce_bw)
bin="${CARGO_TARGET_DIR:-$root/target}/release"
a="ftbencha$$"; b="ftbenchb$$"; net=$((1 + $$ % 250)); ipa="10.232.$net.1"; ipb="10.232.$net.2"
tmp="$(mktemp -d)"
cleanup() { ip netns delete "$a" 2>/dev/null || true; ip netns delete "$b" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
ip netns add "$a"; ip netns add "$b"
ip link add "${a}v" type veth peer name "${b}v"
ip link set "${a}v" netns "$a"; ip link set "${b}v" netns "$b"
ip -n "$a" addr add "$ipa/24" dev "${a}v"; ip -n "$b" addr add "$ipb/24" dev "${b}v"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "${a}v" up; ip -n "$b" link set "${b}v" up
# run NAME PORT CMD...: rank 0 in namespace a (the store's host), rank 1 in b.
run() {
  local name="$1" port="$2"; shift 2
  for r in 0 1; do
    ns="$a"; [ "$r" = 1 ] && ns="$b"
    ip netns exec "$ns" env GLOO_SOCKET_IFNAME="${ns}v" RANK="$r" WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR="$ipa" \
      MASTER_PORT="$port" OMP_NUM_THREADS=1 RAYON_NUM_THREADS=1 timeout 300 "$@" > "$tmp/$name.$r" 2>"$tmp/$name.$r.err" &
  done
  wait
}
lscpu | grep "Model name" || true
run ours 29591 "$bin/examples/allreduce_bw" --max-bytes "$max"
run gloo 29592 "$here/.venv/bin/python" "$here/allreduce_gloo.py" --max-bytes "$max"
echo "2 ranks across network namespaces (veth): size | ours busbw GB/s (time us) | Gloo busbw GB/s (time us) | ours / Gloo"
join <(sort -k1,1 "$tmp/ours.0") <(sort -k1,1 "$tmp/gloo.0") | sort -n | \
  awk '{ printf "%10d | %7.3f (%9.1f) | %7.3f (%9.1f) | %5.2fx\n", $1, $3, $2, $5, $4, $3 / $5 }'
