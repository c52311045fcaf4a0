#!/usr/bin/env bash
# Train the embedded model further on a CUDA GPU, tune its sampler there, and export it.
#
#   scripts/train_gpu.sh RUN_DIR OUT_DIR MINUTES [BATCH] [CORPUS_ROOT]
#
# RUN_DIR   a run directory to resume (a copy of runs/embedded with its latest checkpoint), or a
#           new one to start the small model from scratch; checkpoints and log.csv grow in place.
# MINUTES   training time for this call. A first pass of 40 steps measures the seconds per step, so
#           that the learning-rate schedule is laid over the steps that fit and anneals by the end.
# BATCH     examples per step, 64 by default (the CPU runs used 8).
# CORPUS_ROOT  a CPython 3.11 Lib/ folder, for a machine whose Python is another version: the
#           held-out split and the tokenizer are defined on 3.11's library.
#
# Writes OUT_DIR/model (a model directory whose sampler defaults were tuned on 80 held-out holes),
# OUT_DIR/tuning.json and OUT_DIR/log.csv. Needs torch with CUDA, transformers >= 5.23, tokenizers
# and safetensors; dg_engine is imported from this checkout whether it is installed or not.
# DEVICE=cpu and TUNE_CASES=4 make a quick run on a machine without a GPU.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,17p "$0"; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
run=$1
out=$2
minutes=$3
batch=${4:-64}
root=${5:-}
py=${PYTHON:-python3}
mkdir -p "$run" "$out"

# The engine's folder is `engine/` but its package is `dg_engine`; a link makes it importable.
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
ln -s "$repo/engine" "$pkg/dg_engine"
export PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}"

# The options the shipped model was trained with, at a GPU's batch size.
common=(--device "${DEVICE:-cuda}" --out "$run" --size small --tokenizer "$repo/engine/embedded"
        --batch-size "$batch" --lr 1.5e-3 --warmup 200 --seed 0 --canvas-draws 4 --rename-prob 0.5
        --bf16 --no-progress)
corpus=()
[ -n "$root" ] && corpus=(--corpus-root "$root")

state() {  # the latest checkpoint's step or elapsed_s, 0 for a new run
    "$py" - "$run" "$1" <<'EOF'
import json, sys
from pathlib import Path
run, key = Path(sys.argv[1]), sys.argv[2]
latest = run / "latest"
print(json.loads((run / latest.read_text().strip() / "state.json").read_text())[key] if latest.exists() else 0)
EOF
}

start=$(state step)
start_elapsed=$(state elapsed_s)
"$py" -m dg_engine.train "${common[@]}" "${corpus[@]}" --steps $((start + 40)) --save-every 40 --val-every 1000000
probed=$(state step)
probed_elapsed=$(state elapsed_s)

# Training time is stored in the checkpoint, so the probe's own seconds per step are the
# difference; 90% of the minutes are planned, the time limit stops the run if it is slower.
read -r steps limit < <("$py" -c "
per_step = max(1e-3, ($probed_elapsed - $start_elapsed) / max(1, $probed - $start))
print($probed + int($minutes * 60 * 0.9 / per_step), round($probed_elapsed / 60 + $minutes, 2))")
echo "probe: $((probed - start)) steps; planning steps $probed..$steps, time limit $limit min"
"$py" -m dg_engine.train "${common[@]}" "${corpus[@]}" --steps "$steps" --time-limit "$limit" \
    --save-every 500 --val-every 500 --export "$out/model"
cp "$run/log.csv" "$out/log.csv"
"$py" -m dg_engine.train.tune --model "$out/model" --cases "${TUNE_CASES:-80}" --write \
    --report "$out/tuning.json" "${corpus[@]}"
