# Everything set-up needs is here: `make test` and `make demo` create .venv and install the project.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo lint typecheck bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check repertory tests benchmarks
	$(VENV)/bin/mypy

typecheck: lint

demo: $(STAMP)
	$(VENV)/bin/repertory demo

# The whole suite at full size (the better part of an hour): every benchmark writes JSON under
# benchmarks/results/, then benchmarks/RESULTS.md and the plots are rendered from all of it.
# `python -m benchmarks --quick` is the seconds-long smoke version (tests/test_benchmarks_smoke.py).
bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
