#!/usr/bin/env bash
# Mutation testing of one crate's logic files with cargo-mutants: every
# mutant (an operator flipped, a function body replaced by a default, ...)
# is built and the crate's and the facade's tests are run against it; a
# mutant that no test notices is a gap in the tests (or an equivalent
# mutant, recorded in docs/mutants.md). Slow and not part of CI.
#
#   scripts/mutants.sh                 # the core, a wide sample: every 40th mutant
#   scripts/mutants.sh --shard 3/40    # another sample of the same size
#   scripts/mutants.sh --shard 0/1     # every mutant (hours)
#   scripts/mutants.sh --list          # what would be mutated
#   CRATE=nn scripts/mutants.sh        # core, nn, optim, data, serialize or cli
#   FILES="crates/core/src/backend/layout.rs" scripts/mutants.sh --shard 0/1
#
# It installs cargo-mutants into .tools/ on first use, mutates a separate
# git worktree of HEAD (target/mutants-tree; commit what you want tested),
# builds with the `mutants` profile (release, incremental) into
# target/mutants, and writes its report to target/mutants-out/<crate>/mutants.out
# (caught.txt, missed.txt, timeout.txt, unviable.txt).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
version=27.1.0
bin="$root/.tools/bin/cargo-mutants"
if ! "$bin" mutants --version 2>/dev/null | grep -q "$version"; then
  cargo install --locked "cargo-mutants@$version" --root "$root/.tools"
fi
# Each crate's logic files and the packages whose tests judge its mutants.
case "${CRATE:-core}" in
  core)
    # Layout, dtype and promotion, scalars, the dispatcher, autograd,
    # operator declarations and backward formulas, the CPU reductions.
    pkg=ferrotorch-core
    default_files="crates/core/src/backend/layout.rs crates/core/src/dtype.rs crates/core/src/scalar.rs \
crates/core/src/backend/dispatch/*.rs crates/core/src/autograd/*.rs crates/core/src/ops/*.rs crates/core/src/backend/cpu/reduce.rs"
    ;;
  nn) pkg=ferrotorch-nn; default_files="crates/nn/src/*.rs crates/nn/src/*/*.rs" ;;
  optim) pkg=ferrotorch-optim; default_files="crates/optim/src/*.rs" ;;
  data) pkg=ferrotorch-data; default_files="crates/data/src/*.rs crates/data/src/*/*.rs" ;;
  serialize) pkg=ferrotorch-serialize; default_files="crates/serialize/src/*.rs crates/serialize/src/*/*.rs" ;;
  cli) pkg=ferrotorch; default_files="src/bin/ferrotorch/*.rs" ;;
  *) echo "CRATE must be core, nn, optim, data, serialize or cli" >&2; exit 2 ;;
esac
FILES="${FILES:-$default_files}"
tests=(--test-package ferrotorch)
[ "$pkg" != ferrotorch ] && tests=(--test-package "$pkg" "${tests[@]}")
file_args=()
for f in $FILES; do file_args+=(--file "$f"); done
shard=(--shard 0/40 --sharding round-robin)
for a in "$@"; do
  case "$a" in --shard | --shard=*) shard=(--sharding round-robin) ;; esac
done
for a in "$@"; do
  if [ "$a" = --list ]; then
    # Listing reads the sources of HEAD's checkout here: it must not touch
    # the worktree a running sample is mutating.
    exec "$bin" mutants -d "$root" -p "$pkg" "${file_args[@]}" "${shard[@]}" "$@"
  fi
done
tree="$root/target/mutants-tree"
if [ -d "$tree" ]; then
  git -C "$tree" checkout --quiet --detach --force "$(git rev-parse HEAD)"
else
  git worktree add --quiet --detach "$tree" HEAD
fi
export CARGO_TARGET_DIR="$root/target/mutants"
mkdir -p "$root/target/mutants-out/${CRATE:-core}"
exec "$bin" mutants --in-place -d "$tree" -p "$pkg" "${file_args[@]}" \
  "${tests[@]}" --profile mutants \
  --timeout 300 --build-timeout 900 --output "$root/target/mutants-out/${CRATE:-core}" "${shard[@]}" "$@"
