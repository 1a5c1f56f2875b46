# Everyday commands; each is one line you can also type yourself. `make install` first.
PYTHON ?= .venv/bin/python
export LANGGRAPH_CLI_NO_ANALYTICS = 1
export LANGGRAPH_NO_VERSION_CHECK = 1

.PHONY: install test lint typecheck bench

install:  ## a virtualenv with the package, its dev tools and every optional extra the tests use
	python3 -m venv .venv && $(PYTHON) -m pip install --quiet -e ".[dev]"

test:  ## the README's test command (what CI runs)
	$(PYTHON) -m pytest -q

lint:
	$(PYTHON) -m ruff check src tests benchmarks scripts

typecheck:
	$(PYTHON) -m mypy --strict src

bench:  ## the evaluation sets against plain RAG (needs ../shared/datasets), then the CPU and round-trip figures
	$(PYTHON) benchmarks/eval_datasets.py
	$(PYTHON) benchmarks/question_cpu.py
	$(PYTHON) benchmarks/model_roundtrips.py
