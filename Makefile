# Everything set-up needs is here: `make test` and `make demo` create .venv and install the project.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-all test-slow system-deps demo lint typecheck docs wheel-check bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# What the suite needs from the system (chromium, PostgreSQL 15, node, the JS clients): installed
# when missing as root with apt, else one line naming the command to run (scripts/system-deps).
system-deps:
	bash scripts/system-deps

# The suite leaves out tests marked slow (pyproject's addopts); test-all runs them too, test-slow alone.
test: $(STAMP) system-deps
	$(PY) -m pytest -q

test-all: $(STAMP) system-deps
	$(PY) -m pytest -q -m ""

test-slow: $(STAMP) system-deps
	$(PY) -m pytest -q -m slow

# Through the venv's interpreter, not its console scripts, so a copied venv still checks this tree.
# mypy's files and the import-linter contracts are in pyproject.toml.
lint: $(STAMP)
	$(PY) -m ruff check repertory tests benchmarks
	$(PY) -m ruff format --check repertory tests benchmarks
	$(PY) -m mypy
	$(PY) -c 'import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())'

typecheck: lint

demo: $(STAMP)
	$(VENV)/bin/repertory demo

# The documentation site (mkdocs.yml, docs/) into site/: --strict, so a broken link or anchor, a page
# left out of the nav or an API reference mkdocstrings cannot resolve fails. The performance page's
# tables and plots are rendered from benchmarks/results by docs/hooks.py at every build.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# The package as users get it: sdist and wheel built, the wheel (not editable) installed with every
# extra into a fresh venv, its CLI and its modules run from there (scripts/check-wheel).
wheel-check: $(STAMP)
	bash scripts/check-wheel

# The whole suite at full size (the better part of an hour): every benchmark writes its pyperf suite
# under benchmarks/results/, then benchmarks/RESULTS.md and the plots are rendered from all of them.
# `python -m benchmarks --quick` is the seconds-long smoke version (tests/test_benchmarks_smoke.py).
bench: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) build dist site *.egg-info .pytest_cache .mypy_cache .ruff_cache .grimp_cache .import_linter_cache
