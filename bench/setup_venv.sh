#!/usr/bin/env bash
# Creates bench/.venv with PyTorch from PyPI (the reference for every figure in bench/),
# and Hugging Face's transformers and tokenizers (the embed_minilm_b32 figure's BertModel).
# Idempotent: does nothing when the venv already imports both.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch, transformers' 2>/dev/null; then
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
# The Linux wheel pulls the CUDA libraries (several GB); only the CPU path is timed.
"$venv/bin/python" -m pip install --quiet "torch==2.15.0" numpy "transformers==5.23.0" "tokenizers==0.23.3"
"$venv/bin/python" -c 'import torch, transformers; print("bench venv: torch", torch.__version__, "transformers", transformers.__version__)'
