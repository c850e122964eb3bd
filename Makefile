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

# LAB_RUNTIME=docker: the labs' proxies run in containers; make starts an engine and finds (or
# builds) their images first. DOCKER_GUARDS: a `pytest -k` expression for the container pass of
# the scenario guards; empty runs them all (~110 s here, about as long as the local pass).
DOCKER_READY  = $(if $(filter docker,$(LAB_RUNTIME)),docker-ready)
DOCKER_GUARDS ?=

.PHONY: setup system-packages test bench bench-gpu bench-peers labs lab-all lab-view clean help
.PHONY: docker-setup images-offline docker-ready test-docker docker-guards docker-clean
.DEFAULT_GOAL := help

help:
	@echo "make setup              install what is missing (.venv, proxies, the offline model)"
	@echo "make test               the whole test suite"
	@echo "make labs               list every scenario"
	@echo "make lab-NAME           run one scenario, e.g. make lab-nginx-buffering"
	@echo "make lab-all            run every scenario and write reports/index.md"
	@echo "make lab-view           the browser view on http://127.0.0.1:8765 (VIEW_PORT=N for another port)"
	@echo "make bench              the benchmarks (not part of make test)"
	@echo "make bench-gpu          the engine on a CUDA GPU (BENCH_GPU_ARGS='--device cpu --size tiny': CPU path)"
	@echo "make bench-peers        the lab client beside AIPerf and guidellm (installs both into .venvs/)"
	@echo "make docker-setup       start a Docker engine (installs docker.io on Debian as root)"
	@echo "make images-offline     build stand-in images from this machine's binaries (no registry)"
	@echo "make test-docker        the container tests and the scenario guards in containers"
	@echo "LAB_RUNTIME=docker make lab-NAME   run a scenario with the proxies in containers"

# The app hops (proxies/apps): Node packages from the committed lockfile, the Next.js site built
# once, LiteLLM in its own venv; each step stamped, redone when what it reads changes.
NODE_APPS    := proxies/apps/node
# (`[...path]` is a Next.js route folder: its brackets escaped, or make would glob them.)
NEXT_SOURCES := $(shell find $(NODE_APPS)/next-site -type f 2>/dev/null | sed 's/[][]/\\&/g')

setup: system-packages $(STAMPS)/venv $(MODEL_DIR)/config.json $(STAMPS)/node $(STAMPS)/next $(STAMPS)/litellm

system-packages:
	@$(PYTHON) -m proxies.install
	@$(PYTHON) -m labs.view.install

$(STAMPS)/venv: pyproject.toml
	@mkdir -p $(STAMPS)
	@test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_PIN)"
	$(PY) -m pip install -q -e ".[model,test,locust,apps]"
	@$(PY) -m proxies.install --check
	@touch $@

$(STAMPS)/node: $(NODE_APPS)/package-lock.json | $(STAMPS)/venv
	$(PY) -m proxies.apps.install node
	@touch $@

$(STAMPS)/next: $(STAMPS)/node $(NEXT_SOURCES)
	$(PY) -m proxies.apps.install next
	@touch $@

$(STAMPS)/litellm: proxies/apps/install.py | $(STAMPS)/venv
	$(PY) -m proxies.apps.install litellm
	@touch $@

$(MODEL_DIR)/config.json: $(STAMPS)/venv server/model_builder.py $(wildcard server/corpus/*.txt)
	$(PY) -m server.model_builder --out $(MODEL_DIR)

test: setup
	$(PY) -m pytest

bench: setup
	$(PY) -m labs bench

# No CI depends on it: a machine with a CUDA GPU builds the gpu-size model and measures the engine.
BENCH_GPU_ARGS ?=
bench-gpu: setup
	$(PY) -m labs.bench.gpu $(BENCH_GPU_ARGS)

# Not part of `make test`: AIPerf and guidellm (~2.6 GB) go into their own venvs under .venvs/,
# guidellm's torch pinned to $(TORCH_PIN) (the CPU build), then all three tools run side by side.
BENCH_PEERS_ARGS ?=
bench-peers: setup
	TORCH_PIN="$(TORCH_PIN)" $(PY) -m labs.bench.peers $(BENCH_PEERS_ARGS)

labs: setup
	@$(PY) -m labs list

lab-all: setup $(DOCKER_READY)
	$(PY) -m labs run-all

# The browser view: broken and fixed side by side, measured by the browser (python -m labs serve).
VIEW_PORT ?= 8765
lab-view: setup $(DOCKER_READY)
	$(PY) -m labs serve --port $(VIEW_PORT) $(if $(LAB_RUNTIME),--runtime $(LAB_RUNTIME))

lab-%: setup $(DOCKER_READY)
	$(PY) -m labs run $*

docker-setup:
	@docker/setup-engine.sh

# FROM scratch + the host's nginx, HAProxy, Envoy, Python and node (about 2 s each): no registry needed.
images-offline: setup docker-setup
	$(PY) -m proxies.runtime.offline_images

# The images the docker runtime will use: official ones if here or pullable, else stand-ins
# (the server's stand-in rebuilt when it was built for another checkout).
docker-ready: setup docker-setup
	@$(PY) -m proxies.runtime.offline_images --if-missing nginx haproxy envoy server apps

test-docker: setup docker-setup images-offline
	$(PY) -m pytest tests/docker tests/proxies/test_runtime.py -k docker
	$(MAKE) --no-print-directory docker-guards

# The scenario guards with the server and every proxy in containers.
docker-guards: setup docker-ready
	LAB_RUNTIME=docker $(PY) -m pytest tests/test_scenarios.py $(if $(DOCKER_GUARDS),-k '$(DOCKER_GUARDS)')

# Containers left by a run that was killed (their owner process is gone).
docker-clean:
	@$(PY) -c "from proxies.runtime.docker import stop_leftovers; print('removed', len(stop_leftovers()))"

clean:
	rm -rf reports $(STAMPS) .pytest_cache
