#!/usr/bin/env bash
# Runs the core's unit, property and hostile-input tests under valgrind
# memcheck and fails on any memory error (invalid read/write, use of
# uninitialised values, invalid free). Not part of CI (it takes a while):
#
#     scripts/valgrind.sh            # every test binary of ferrotorch-core
#     scripts/valgrind.sh hostile    # only test binaries whose name matches
#
# Installs Debian's valgrind when it is missing. Property tests run with
# fewer cases (PROPTEST_CASES, default 16) so the run stays within minutes.
# AVX-512 is beyond valgrind, so the kernels run their AVX2 paths
# (FERROTORCH_ISA=avx2; set it to `scalar` to check the fallback paths).
set -euo pipefail
cd "$(dirname "$0")/.."
filter="${1:-}"
if ! command -v valgrind >/dev/null; then
  echo "installing valgrind (Debian package)"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq valgrind
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq valgrind
  fi
fi
export PROPTEST_CASES="${PROPTEST_CASES:-16}"
export FERROTORCH_ISA="${FERROTORCH_ISA:-avx2}"
export RAYON_NUM_THREADS="${RAYON_NUM_THREADS:-2}"
# Release code with line tables (the workspace's release profile), so
# reports name lines; the test harness runs one test at a time.
bins=$(cargo test --release -p ferrotorch-core --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])')
failed=0
for bin in $bins; do
  name=$(basename "$bin")
  if [ -n "$filter" ] && [[ "$name" != *"$filter"* ]]; then
    continue
  fi
  echo "== valgrind $name"
  log="target/valgrind-$name.log"
  if valgrind --tool=memcheck --error-exitcode=99 --errors-for-leak-kinds=none \
      --track-origins=yes --log-file="$log" "$bin" --test-threads=1 -q >/dev/null 2>&1; then
    echo "   $(grep -E 'ERROR SUMMARY' "$log" | sed 's/==[0-9]*== //')"
  else
    echo "   FAILED (see $log):"
    grep -E 'ERROR SUMMARY|Invalid|uninitialised|Process terminating' "$log" | head -20
    failed=1
  fi
done
exit $failed
