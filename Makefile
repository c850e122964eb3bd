# streamlab: every target depends on `setup`, which installs only what is missing.
SHELL        := /bin/bash
PYTHON       ?= python3
VENV         := .venv
PY           := $(VENV)/bin/python
STAMPS       := .setup-stamps
MODEL_DIR    := .models/tiny
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS := 1

# torch 2.13.0 is the CPU build that lies on this machine's disk; any other version pulls a
# multi-GB CUDA build. A machine that already has torch (a GPU box) keeps its own.
TORCH_PIN    ?= torch==2.13.0

SCENARIOS = $(shell test -x $(PY) && $(PY) -m labs names 2>/dev/null)

.PHONY: setup system-packages test bench labs lab-all clean help
.DEFAULT_GOAL := help

help:
	@echo "make setup              install what is missing (.venv, proxies, the offline model)"
	@echo "make test               the whole test suite"
	@echo "make labs               list every scenario"
	@echo "make lab-NAME           run one scenario, e.g. make lab-nginx-buffering"
	@echo "make lab-all            run every scenario and write reports/index.md"
	@echo "make bench              the benchmarks (not part of make test)"

setup: system-packages $(STAMPS)/venv $(MODEL_DIR)/config.json

system-packages:
	@$(PYTHON) -m proxies.install

$(STAMPS)/venv: pyproject.toml
	@mkdir -p $(STAMPS)
	@test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[test]"
	@touch $@

$(MODEL_DIR)/config.json: $(STAMPS)/venv server/model_builder.py $(wildcard server/corpus/*.txt)
	$(PY) -m server.model_builder --out $(MODEL_DIR)

test: setup
	$(PY) -m pytest

bench: setup
	$(PY) -m labs bench

labs: setup
	@$(PY) -m labs list

lab-all: setup
	$(PY) -m labs run-all

lab-%: setup
	$(PY) -m labs run $*

clean:
	rm -rf reports $(STAMPS) .pytest_cache
