# The two commands of the README: `make demo` (the main job) and `make test`.
PYTHON_SYSTEM ?= python3
VENV ?= .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup test demo bench clean

MINUTES ?= 25

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON_SYSTEM) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -r requirements.txt
	$(PYTHON) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

# Two worker processes: much of a test's time is single-threaded Python (tracing,
# SentencePiece, the server), so two files at once cut the suite by a quarter on 2
# cores. `--dist loadfile` keeps a file's module-scoped fixtures in one worker.
TEST_WORKERS ?= 2

test: setup
	$(PYTHON) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

demo: setup
	MINUTES=$(MINUTES) bash scripts/demo.sh

bench: setup
	$(PYTHON) -m bench

clean:
	rm -rf $(VENV) .pytest_cache
