#!/usr/bin/env bash
# Continue the embedded model's long run on a CUDA GPU, tune its sampler there, and export it.
#
#   scripts/train_gpu.sh OUT_DIR MINUTES [BATCH]
#
# Starts from the committed state (engine/embedded and engine/train/state), trains MINUTES more
# with the run's own options at BATCH rows per step (64 by default; the CPU pieces use 8), then
# writes OUT_DIR/model (tuned on 80 held-out holes), OUT_DIR/state (the resume state to commit
# back), OUT_DIR/tuning.json, OUT_DIR/log.csv and OUT_DIR/score.jsonl. The learning rate follows
# the piece's own clock (warm up, hold, anneal over the last fifth), so no probe is needed.
#
# The corpus is read from $DG_LSP_CORPUS (default ~/.cache/dg-lsp/corpus). A machine without
# network gets it as one file: `python -m dg_engine.train.shards pack shards/corpus.jsonl.xz`
# (at most 60 MB, a fixed sample of every source) where the corpus was built, carried along with
# the working tree, and named by SHARDS=shards/corpus.jsonl.xz here; it is unpacked into OUT_DIR.
# Needs torch with CUDA, transformers >= 5.23, tokenizers, safetensors, numpy; dg_engine is
# imported from this checkout whether it is installed or not.
# DEVICE=cpu TUNE_CASES=4 BATCH=2 with MINUTES=0.5 make a quick run on a machine without a GPU.
#
# OBJECTIVE=ar trains the AR baseline instead (`python -m dg_engine.train baseline`): the same
# system on the same data, until it has processed as many tokens as the committed run has
# (AR_TOKENS to choose another budget), from engine/train/ar_state when that exists and from
# scratch otherwise. It writes OUT_DIR/ar_model (what `benchmarks/quality.py --ar-model` and
# `benchmarks/decode.py --ar-model` compare against), OUT_DIR/ar_state and OUT_DIR/ar_log.csv.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,25p "$0"; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$1
minutes=$2
batch=${3:-${BATCH:-64}}
py=${PYTHON:-python3}
mkdir -p "$out"

# The engine's folder is `engine/` but its package is `dg_engine`; a link makes it importable.
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
ln -s "$repo/engine" "$pkg/dg_engine"
export PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}"

if [ -n "${SHARDS:-}" ]; then
    "$py" -m dg_engine.train.shards unpack "$SHARDS" "$out/corpus"
    export DG_LSP_CORPUS="$out/corpus"
fi

# Work on copies, so that the checkout changes only when OUT_DIR is copied back.
if [ "${OBJECTIVE:-diffusion}" = ar ]; then
    rm -rf "$out/ar_model" "$out/ar_state"
    if [ -d "$repo/engine/train/ar_state" ]; then cp -r "$repo/engine/train/ar_state" "$out/ar_state"; fi
    "$py" -m dg_engine.train baseline --minutes "$minutes" --device "${DEVICE:-cuda}" --out "$out/ar_run" \
        --export "$out/ar_model" --state "$out/ar_state" --like "$repo/engine/train/state" \
        ${AR_TOKENS:+--tokens "$AR_TOKENS"} --batch-size "$batch" --no-progress
    cp "$out/ar_run/log.csv" "$out/ar_log.csv"
    exit 0
fi
rm -rf "$out/model" "$out/state"
cp -r "$repo/engine/embedded" "$out/model"
cp -r "$repo/engine/train/state" "$out/state"
"$py" -m dg_engine.train continue --minutes "$minutes" --device "${DEVICE:-cuda}" --out "$out/run" \
    --export "$out/model" --state "$out/state" --batch-size "$batch" --no-progress
cp "$out/run/log.csv" "$out/log.csv"
"$py" -m dg_engine.train.tune --model "$out/model" --cases "${TUNE_CASES:-80}" --write --report "$out/tuning.json"
"$py" -m dg_engine.train.score --model "$out/model" --cases "${TUNE_CASES:-80}" --state "$out/state" \
    --note "GPU piece, batch $batch" --out "$out/score.jsonl"
