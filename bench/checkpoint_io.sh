#!/usr/bin/env bash
# Checkpoint I/O against cat, dd and torch.load (bench/checkpoint_io.py).
# Usage: bench/checkpoint_io.sh [MB (500)] [ROUNDS (5)]; CKPT_DIR=dir for the files.
set -euo pipefail
cd "$(dirname "$0")/.."
bench/setup_venv.sh >/dev/null
cargo build --release -p ferrotorch-bench --example checkpoint_io >/dev/null 2>&1
OURS=target/release/examples/checkpoint_io bench/.venv/bin/python bench/checkpoint_io.py "$@"
