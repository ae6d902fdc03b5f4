# greenfront — the two commands a fresh machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
MODEL  := models/tekken-tiny
MARKER_MODEL := models/tekken-markers
PORT   ?= 8000
WORKERS ?= 1

.PHONY: setup model run test test-unit test-integration fuzz interop interop-setup bench bench-quick soak clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	# The Tekken tokenizer data file only; mistral-common's own dependencies are not needed.
	$(PY) -m pip install -q --no-deps mistral-common==1.13.1
	touch $@

setup: $(VENV)/.installed model

model: $(VENV)/.installed
	$(PY) -m text.make_default_model $(MODEL)
	$(PY) -m text.make_default_model $(MARKER_MODEL) --markers

run: setup
	GREENFRONT_BIND=0.0.0.0:$(PORT) GREENFRONT_WORKERS=$(WORKERS) \
	GREENFRONT_SERVED_MODEL_NAME=$${GREENFRONT_SERVED_MODEL_NAME:-tiny} \
	$(VENV)/bin/gunicorn -c gunicorn.conf.py app:api

test: setup
	GREENFRONT_TEST_MODEL_DIR=$(CURDIR)/$(MODEL) GREENFRONT_TEST_MARKER_MODEL_DIR=$(CURDIR)/$(MARKER_MODEL) $(PY) -m pytest -q

test-unit: setup
	GREENFRONT_TEST_MODEL_DIR=$(CURDIR)/$(MODEL) GREENFRONT_TEST_MARKER_MODEL_DIR=$(CURDIR)/$(MARKER_MODEL) $(PY) -m pytest -q tests/unit

test-integration: setup
	GREENFRONT_TEST_MODEL_DIR=$(CURDIR)/$(MODEL) GREENFRONT_TEST_MARKER_MODEL_DIR=$(CURDIR)/$(MARKER_MODEL) $(PY) -m pytest -q tests/integration

# Property-based suite (tests/fuzz): generated bodies for every endpoint against one real
# deployment, bounded by the Hypothesis profile (fuzz: a few thousand cases, a few minutes; quick;
# long), then schemathesis against the deployment's /openapi.json.
FUZZ_PROFILE ?= fuzz
fuzz: setup
	HYPOTHESIS_PROFILE=$(FUZZ_PROFILE) GREENFRONT_TEST_MODEL_DIR=$(CURDIR)/$(MODEL) \
	$(PY) -m pytest -q -p no:cacheprovider tests/fuzz

# Real vLLM 0.32 (CPU) beside greenfront: installs it under $(PEERS) (~4-5 min once), then runs
# vllm serve with greenfront as its frontend, DP=2, a headless engine joining a standalone
# greenfront, and vLLM's own frontend on greenfront's simulator.
PEERS ?= /tmp/peers
interop-setup:
	PEERS=$(PEERS) bash interop/setup.sh

interop: setup interop-setup
	PEERS=$(PEERS) GREENFRONT_TEST_MODEL_DIR=$(CURDIR)/$(MODEL) GREENFRONT_TEST_MARKER_MODEL_DIR=$(CURDIR)/$(MARKER_MODEL) $(PY) -m pytest -q tests/interop

# Benchmark (bench/README.md): greenfront on the simulator, report in bench/results/<timestamp>/.
# BENCH_ARGS adds options, e.g. BENCH_ARGS="--vllm-peers python,rust" or "--target URL".
bench: setup
	$(PY) -m bench $(BENCH_ARGS)

bench-quick: setup
	$(PY) -m bench --quick $(BENCH_ARGS)

# Mixed load against one deployment (bench/soak.py); SOAK_ARGS="--duration 120" shortens it.
soak: setup
	$(PY) -m bench --soak $(SOAK_ARGS)

clean:
	rm -rf $(VENV) $(MODEL) $(MARKER_MODEL)
