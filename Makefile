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

# Each benchmark prints a table and writes JSON under benchmarks/results/ (minutes each, not a test).
bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	for b in store steps sessions export memory ray; do $(PY) -m benchmarks.$$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
