#!/usr/bin/env bash
# Creates bench/.venv with PyTorch from PyPI (the reference for every figure in bench/).
# Idempotent: does nothing when the venv already imports torch.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
# The Linux wheel pulls the CUDA libraries (several GB); only the CPU path is timed.
"$venv/bin/python" -m pip install --quiet "torch==2.15.0" numpy
"$venv/bin/python" -c 'import torch; print("bench venv: torch", torch.__version__)'
