# Quick start: `make demo` (set up, then tune/compile and time a GEMM) and `make test`.
# `make test-all` also runs the tests marked slow (every ONNX backend node test).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo deploy-demo test test-all bench clean

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,plots]'
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/tiletune demo

deploy-demo: $(VENV)/.installed
	$(PY) examples/deploy_shipped_log.py --model bert

test: $(VENV)/.installed
	$(PY) -m pytest -q tests

test-all: $(VENV)/.installed
	$(PY) -m pytest -q -m "slow or not slow" tests

bench: $(VENV)/.installed
	$(PY) benchmarks/gemm_cpu.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
