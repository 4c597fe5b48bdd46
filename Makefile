# scalefit targets. Each sets up what it needs in the virtual environment .venv on first use:
# `make demo` the package alone (the demo imports no extra; tests/workflows/test_demo.py checks it
# with the extras blocked), `make dev` (and every other target) the extras, the CPU build of torch
# and the development tools on top.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
OUT    ?= results/demo
export NO_MKDOCS_2_WARNING := 1

.PHONY: setup dev test test-slow test-docs test-matrix lint docs demo bench clean

setup dev: $(STAMP)

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0  # the CPU build; the torch extra's floor
	$(PY) -m pip install --quiet -e ".[all,dev,docs]"
	touch $(STAMP)

# pytest -q ends every line of dots with the share of tests done so far.
test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# Every shell and Python block of README.md, docs/*.md and docs/studies/*.md (slow pages
# included), with the outputs the pages quote compared (tests/docs/test_docs_run.py). CI runs it
# after `make test`.
test-docs: $(STAMP)
	$(PY) -m pytest -q -m "slow or not slow" tests/docs/test_docs_run.py

# The core tests on Python 3.12 and 3.13 (newest releases) and on the declared floors (3.11), each
# in a fresh venv of its own, torch-free; LEGS="py3.12" runs one. See .ci/matrix.
test-matrix:
	bash .ci/matrix $(LEGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports  # the layer contracts of pyproject.toml ([tool.importlinter])

docs: $(STAMP)
	$(BIN)/mkdocs build --strict

$(DEMO_STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $(DEMO_STAMP)

# The demo finds the Chinchilla table the way `scalefit demo` does everywhere (scalefit/datasets):
# --data-dir, SCALEFIT_DATA_DIR, the user cache, a download; else it fits a bundled table.
demo: $(DEMO_STAMP)
	$(BIN)/scalefit demo --out $(OUT)

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) results site .pytest_cache
