# streamlab: `make lab-NAME` installs what that lab needs (python -m labs setup NAME reads it off
# the scenario's path); `make setup` and `make test` install everything. Only what is missing.
SHELL        := /bin/bash
PYTHON       ?= python3
VENV         := .venv
PY           := $(VENV)/bin/python
STAMPS       := .setup-stamps
MODEL_DIR    := .models/tiny
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_NO_ADVISORY_WARNINGS := 1
# Python keeps the modules it compiles in .venv/ and the checkout (both ignored by git); where the
# environment turns that off, every lab would compile torch and transformers again: the model
# server's start took 8-10 s instead of 4.4 s here.
unexport PYTHONDONTWRITEBYTECODE

# torch 2.13.0 is the CPU build that lies on this machine's disk; any other version pulls a
# multi-GB CUDA build. A machine that already has torch (a GPU box) keeps its own.
TORCH_PIN    ?= torch==2.13.0

# LAB_RUNTIME=docker: the labs' proxies run in containers; make starts an engine and finds (or
# builds) their images first. DOCKER_GUARDS: a `pytest -k` expression for `make docker-guards`,
# the container pass of the scenario guards; empty runs them all.
DOCKER_READY  = $(if $(filter docker,$(LAB_RUNTIME)),docker-ready)
DOCKER_GUARDS ?=

.PHONY: setup test check bench bench-gpu bench-peers labs lab-all lab-view clean help
.PHONY: docker-setup images-offline docker-ready test-docker docker-guards docker-clean
.DEFAULT_GOAL := help

help:
	@echo "make setup              install everything that is missing (.venv, proxies, apps, Chromium, the model)"
	@echo "make test               the whole test suite (what CI runs), side by side, then the container tests"
	@echo "make check              the fast tests (catalogue, layout, docs, units, static verify)"
	@echo "make labs               list every scenario"
	@echo "make lab-NAME           run one scenario, installing only what it needs, e.g. make lab-nginx-buffering"
	@echo "make lab-all            run every scenario and write reports/index.md"
	@echo "make lab-view           the browser view on http://127.0.0.1:8765 (VIEW_PORT=N for another port)"
	@echo "make bench              the benchmarks (not part of make test)"
	@echo "make bench-gpu          the engine on a CUDA GPU (BENCH_GPU_ARGS='--device cpu --size tiny': CPU path)"
	@echo "make bench-peers        the lab client beside AIPerf and guidellm (installs both into .venvs/)"
	@echo "make docker-setup       start a Docker engine (installs docker.io on Debian as root)"
	@echo "make images-offline     build stand-in images from this machine's binaries (no registry)"
	@echo "make test-docker        the container tests and the scenario guards in containers"
	@echo "LAB_RUNTIME=docker make lab-NAME   run a scenario with the proxies in containers"

# What every lab needs: the Python environment with the real model's packages, and the model.
LAB_BASE     := $(STAMPS)/venv $(MODEL_DIR)/config.json

# Everything: the test, load and app extras, then every hop's and client's own needs (Debian's
# proxies and Chromium, the Node modules and the Next.js build, LiteLLM's venv; labs/needs.py).
setup: $(STAMPS)/venv-full $(MODEL_DIR)/config.json
	@$(PY) -m labs setup --all
	@$(PY) -m proxies.install --check >/dev/null

# torch first, with pip: its CPU build lies on this machine's disk, where only pip looks (without
# compiling its 2,000 modules: the first run compiles the few hundred a lab imports). Then uv
# installs the rest, ~6x faster than pip here (parallel downloads), torch held where it is.
UV           := $(VENV)/bin/uv
UV_INSTALL    = $(UV) pip install -q --python $(PY) --constraint $(STAMPS)/torch.txt
$(STAMPS)/venv: pyproject.toml
	@mkdir -p $(STAMPS)
	@test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q --no-compile "$(TORCH_PIN)"
	@test -x $(UV) || $(PY) -m pip install -q "uv>=0.9,<1"
	@$(PY) -c "import torch; print('torch==' + torch.__version__)" > $(STAMPS)/torch.txt
	$(UV_INSTALL) -e ".[model]"
	@touch $@

$(STAMPS)/venv-full: $(STAMPS)/venv
	$(UV_INSTALL) -e ".[model,test,locust,apps]"
	@touch $@

$(MODEL_DIR)/config.json: $(STAMPS)/venv server/tools/model_builder.py $(wildcard server/corpus/*.txt)
	$(PY) -m server.tools.model_builder --out $(MODEL_DIR)

# Every test, side by side: TEST_WORKERS pytest-xdist workers (the suite mostly waits on paced
# streams and silences, so more workers than cores pay off; docs/testing.md). Where a Docker
# engine answers, the container tests run next, on images found or built first, with
# DOCKER_WORKERS: in one pass with the rest (4-5 workers), the containers' timing checks were
# starved now and then (1-3 of 1,746 tests in 2 of 4 runs here).
TEST_WORKERS   ?= 4
DOCKER_WORKERS ?= 2
XDIST           = -n $(TEST_WORKERS) --dist loadscope
test: setup
	$(PY) -m pytest $(XDIST) -m "not docker"
	@if docker info >/dev/null 2>&1 || [ "$$CI" = true ]; then \
	  $(PY) -m proxies.runtime.offline_images --if-missing && \
	  $(PY) -m pytest -n $(DOCKER_WORKERS) --dist loadscope -m docker; \
	else echo "no Docker engine: the container tests (-m docker) were not run (make docker-setup)"; fi

# The fast tests for the inner loop (no proxy, server or browser started): the catalogue, the
# layout and the docs, the units, verify's static reading. They prove configs with each proxy's
# own check (nginx -t, haproxy -c ...): `labs setup check` installs those binaries if missing.
CHECK_TESTS  := tests/labs/test_catalogue.py tests/labs/test_catalogue_checks.py tests/test_layout.py tests/test_docs.py \
                tests/verify/test_static.py tests/labs/test_measurements.py tests/labs/test_peaks.py \
                tests/labs/test_timeline.py tests/server/test_sse.py tests/server/test_detokenizer.py \
                tests/proxies/test_settings.py tests/view/test_specs.py
check: $(STAMPS)/venv-full
	@$(PY) -m labs setup check
	$(PY) -m pytest -q -m "not slow" $(CHECK_TESTS)

bench: setup
	$(PY) -m labs bench

# No CI depends on it: a machine with a CUDA GPU builds the gpu-size model and measures the engine.
BENCH_GPU_ARGS ?=
bench-gpu: $(LAB_BASE)
	$(PY) -m labs.bench.gpu $(BENCH_GPU_ARGS)

# Not part of `make test`: AIPerf and guidellm (~2.6 GB) go into their own venvs under .venvs/,
# guidellm's torch pinned to $(TORCH_PIN) (the CPU build), then all three tools run side by side.
BENCH_PEERS_ARGS ?=
bench-peers: setup
	TORCH_PIN="$(TORCH_PIN)" $(PY) -m labs.bench.peers $(BENCH_PEERS_ARGS)

labs: $(STAMPS)/venv
	@$(PY) -m labs list

lab-all: setup $(DOCKER_READY)
	$(PY) -m labs run-all

# The browser view: broken and fixed side by side, measured by the browser (python -m labs serve).
VIEW_PORT ?= 8765
lab-view: $(LAB_BASE) $(DOCKER_READY)
	@$(PY) -m labs setup view
	$(PY) -m labs serve --port $(VIEW_PORT) $(if $(LAB_RUNTIME),--runtime $(LAB_RUNTIME))

# The model is built while what the lab's path needs is installed (python -m labs setup NAME).
lab-%: $(STAMPS)/venv $(DOCKER_READY)
	@$(MAKE) --no-print-directory -j2 $(MODEL_DIR)/config.json needs-$*
	$(PY) -m labs run $*

needs-%: $(STAMPS)/venv
	@$(PY) -m labs setup $*

docker-setup:
	@docker/setup-engine.sh

# FROM scratch + the host's nginx, HAProxy, Envoy, Python and node (about 2 s each), and each unpacked
# release's root (nginx 1.30: 2.5 s; Varnish 7.7: 10 s): no registry needed.
images-offline: setup docker-setup
	$(PY) -m proxies.runtime.offline_images

# The images the docker runtime will use (each release of nginx and HAProxy): official ones if here
# or pullable, else stand-ins (the server's, the apps' and the MCP origin's rebuilt when built for another checkout).
docker-ready: setup docker-setup
	@$(PY) -m proxies.runtime.offline_images --if-missing nginx haproxy envoy server apps mcp

# Only the container tests (make test runs them too, where an engine answers).
test-docker: setup docker-setup images-offline
	$(PY) -m pytest -n $(DOCKER_WORKERS) --dist loadscope -m docker

# The scenario guards with the server and every proxy in containers.
docker-guards: setup docker-ready
	$(PY) -m pytest -n $(DOCKER_WORKERS) --dist loadscope tests/test_scenarios.py -m docker $(if $(DOCKER_GUARDS),-k '$(DOCKER_GUARDS)')

# Containers left by a run that was killed (their owner process is gone).
docker-clean:
	@$(PY) -c "from proxies.runtime.docker import stop_leftovers; print('removed', len(stop_leftovers()))"

clean:
	rm -rf reports $(STAMPS) .pytest_cache
