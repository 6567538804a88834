# tilesim: the README's two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch that lies on this kind of machine's disk; the Triton
# interpreter runs the kernels on the CPU with it (no CUDA needed).
TORCH_SPEC ?= torch==2.13.0

# The kernel profile is compiled by the Triton it describes (profiles/sm90a-triton-3.6.json:
# Triton 3.6, the GPU machines'), on the CPU: point PROFILE_PYTHON at a Python that has it.
PROFILE_PYTHON ?= $(BIN)/python

.PHONY: demo test lint bench clean profile

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Core only: simpy, numpy, rich, typer, matplotlib. No torch, no GPU.
$(VENV)/.core: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e .
	touch $@

# Everything: core + kernels extra (torch CPU build, triton) + dev tools + the Dask cluster extra.
$(VENV)/.all: $(VENV)/.core
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[kernels,dev,cluster]"
	touch $@

demo: $(VENV)/.core
	$(BIN)/tilesim compare --gpu h100

test: $(VENV)/.all
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 2

lint: $(VENV)/.all
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

profile:
	$(PROFILE_PYTHON) -m tilesim.validate.profile --out profiles/sm90a-triton-3.6.json

# BENCH_ARGS=--whatif adds fast vs detailed on what-if variants (minutes)
bench: $(VENV)/.core
	$(BIN)/python -m tilesim.simulator.bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
