#!/usr/bin/env bash
# The layering check: every source file of every target of the workspace
# names nothing of a layer above its own, by the layer tables of
# docs/architecture.md ("Layer tables"), and no cycle runs through files of
# two different entries of a table. Prints each broken rule (the files and
# the names) and exits with 1; run by .ci/run. Works from any folder.
#
#   scripts/check_layers.sh            # the check
#   scripts/check_layers.sh --edges    # also every reference between two files
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cargo run --quiet --release -p ferrotorch-check-layers -- "$@" "$root"
