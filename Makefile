# Two entry points for a fresh machine: `make repro` (the pipeline) and `make test` (the tests).
# Both create .venv on first use: torch first (the local CPU build), then the project pinned by
# constraints.txt, so nothing resolves to a CUDA build or a different version.
VENV ?= .venv
PYTHON ?= python3
SYSTEM_PYTHON := $(shell command -v $(PYTHON))
BIN := $(VENV)/bin
# DVC stage commands call `python`: put the venv first on PATH so they find the installed project.
export PATH := $(abspath $(BIN)):$(PATH)

$(VENV)/.installed: pyproject.toml constraints.txt
	$(SYSTEM_PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev]" -c constraints.txt
	touch $@

.PHONY: install repro test test-fast bench status catch-up
install: $(VENV)/.installed

# Both dvc.yaml files are written from their templates (pipelines/stages.yaml and the experiments')
# first, with each stage's deps computed from what it reads: a task yaml and its rows, or a new
# import, are the whole change that brings a task or a file into the pipeline.
repro: install  ## the default pipeline: prepare -> tokenizers -> encode -> pretrain x3 -> evaluate -> tasks -> fine-tuning -> distillation
	python -m scripts.dvc_yaml
	TOKENIZERS_PARALLELISM=false python -m lmforge.freshness repro

# The stages of both pipelines that lag the code (a dependency changed since their lock entry), in
# dependency order with their last measured durations; WRITE=1 also rewrites the stale marks
# (pipelines/experiments/stale.json, the docs' blocks) and reruns `findings` when they moved.
status: install  ## what the experiments owe, and the hours a catch-up costs (docs/pipeline.md#landing-in-steps)
	python -m lmforge.freshness status $(if $(WRITE),--write,)

# Reruns owed stages in dependency order within BUDGET (2h, 90m, 600s), locking each as it ends;
# the next call continues where this one stopped.
BUDGET ?= 2h
catch-up: install  ## rerun the owed stages that fit in BUDGET (default 2h)
	TOKENIZERS_PARALLELISM=false python -m lmforge.freshness catch-up --budget $(BUDGET)

# Most tests spend their time on one core (process start-ups, dvc, Hydra), so `make test` runs the
# longest of them, the smoke pipeline (tests/test_pipeline.py), in a process of its own beside all
# the others, each with one OpenMP thread so that neither spins on the other's core; the smoke
# process's report follows the rest's, and the target fails if either does.
test: install  ## every test, the slow end-to-end ones included (what CI runs)
	@export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1; \
	python -m pytest -q -p no:cacheprovider tests/test_pipeline.py > $(VENV)/test_pipeline.log 2>&1 & smoke=$$!; \
	python -m pytest -q --ignore=tests/test_pipeline.py; rest=$$?; \
	wait $$smoke; piped=$$?; echo "== tests/test_pipeline.py (beside the rest) =="; cat $(VENV)/test_pipeline.log; \
	exit $$(( rest || piped ))

test-fast: install  ## the unit tests only (about 6 minutes on a fast 2-core host, 13.4 on the slowest)
	python -m pytest -q -m "not slow"

bench: install  ## every benchmark against its peer, interleaved in one process; writes reports/bench/ (~12 minutes, the allocator group 6 of them)
	python -m benchmarks
