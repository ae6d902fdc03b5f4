# greenfront — the two commands a fresh machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
MODEL  := models/tekken-tiny
PORT   ?= 8000
WORKERS ?= 1

.PHONY: setup model run test test-unit test-integration clean

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

run: setup
	GREENFRONT_BIND=0.0.0.0:$(PORT) GREENFRONT_WORKERS=$(WORKERS) \
	GREENFRONT_SERVED_MODEL_NAME=$${GREENFRONT_SERVED_MODEL_NAME:-tiny} \
	$(VENV)/bin/gunicorn -c gunicorn.conf.py app:api

test: setup
	GREENFRONT_TEST_MODEL_DIR=$(CURDIR)/$(MODEL) $(PY) -m pytest -q

test-unit: setup
	GREENFRONT_TEST_MODEL_DIR=$(CURDIR)/$(MODEL) $(PY) -m pytest -q tests/unit

test-integration: setup
	GREENFRONT_TEST_MODEL_DIR=$(CURDIR)/$(MODEL) $(PY) -m pytest -q tests/integration

clean:
	rm -rf $(VENV) $(MODEL)
