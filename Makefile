# Quick start: `make demo` (set up, then tune/compile and time a GEMM) and `make test`.
# `make test-all` also runs the tests marked slow (every ONNX backend node test); `make fuzz` runs the ONNX
# differential fuzzer over 2,000 seeds; `make lint` runs ruff (pyproject.toml) and the layer contract
# (tests/layers.py: tensorir <- codegen <- autotune, tensorir/compat on top).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo deploy-demo lint test test-all fuzz bench clean

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,plots]'
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/tiletune demo

deploy-demo: $(VENV)/.installed
	$(PY) examples/deploy_shipped_log.py --model bert

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(PY) tests/layers.py

test: $(VENV)/.installed
	$(PY) -m pytest -q --durations=25 tests

test-all: $(VENV)/.installed
	$(PY) -m pytest -q -m "slow or not slow" tests

# The differential ONNX fuzzer (tests/onnx_fuzz.py) against onnxruntime: 2,000 seeds (about 20 minutes on
# 2 cores) and a summary (ok, wrong, crash, refused by reason); FUZZ_SEEDS=START:STOP picks others.
FUZZ_SEEDS ?= 0:2000
fuzz: $(VENV)/.installed
	$(PY) tests/onnx_fuzz.py $(FUZZ_SEEDS)

bench: $(VENV)/.installed
	$(PY) benchmarks/gemm_cpu.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
