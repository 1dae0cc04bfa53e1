# Set-up and everyday commands. Everything lives in .venv; nothing is installed globally.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint check bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip "setuptools>=77" wheel
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## demo: install, crawl the bundled demo shop, write demo-items.jsonl
demo: $(STAMP)
	$(BIN)/eclaw demo -o demo-items.jsonl

## test: install, lint, type-check and run the whole test suite
test: $(STAMP) lint
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache demo-items.jsonl
