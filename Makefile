# The two commands of the README: `make demo` (the main job) and `make test`.
PYTHON_SYSTEM ?= python3
VENV ?= .venv
PYTHON := $(VENV)/bin/python
# One stamp per requirement set: the package (requirements.txt) for `demo`, and each
# extra on top of it for the target that needs it.
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
BENCH_STAMP := $(VENV)/.installed-bench
DOCS_STAMP := $(VENV)/.installed-docs
DIST ?= dist
WHEEL_VENV ?= build/wheel-venv

.PHONY: setup test demo bench docs wheel-check clean

MINUTES ?= 25

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON_SYSTEM) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -r requirements.txt
	$(PYTHON) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP) requirements-test.txt
	$(PYTHON) -m pip install --quiet -r requirements-test.txt
	touch $(TEST_STAMP)

$(BENCH_STAMP): $(STAMP) requirements-bench.txt
	$(PYTHON) -m pip install --quiet -r requirements-bench.txt
	touch $(BENCH_STAMP)

$(DOCS_STAMP): $(STAMP) requirements-docs.txt
	$(PYTHON) -m pip install --quiet -r requirements-docs.txt
	touch $(DOCS_STAMP)

setup: $(STAMP)

# Two worker processes: much of a test's time is single-threaded Python (tracing,
# SentencePiece, the server), so two files at once cut the suite by a quarter on 2
# cores. `--dist loadfile` keeps a file's module-scoped fixtures in one worker.
TEST_WORKERS ?= 2

test: $(TEST_STAMP)
	$(PYTHON) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

demo: setup
	MINUTES=$(MINUTES) bash scripts/demo.sh

bench: $(BENCH_STAMP)
	$(PYTHON) -m bench

# The documentation site; --strict fails on a broken reference or a page left out of the nav
# (not with --quiet, which hides the warnings that --strict counts).
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The wheel as a user gets it: built from the source tree, installed in a fresh virtual
# environment, its command and import run there. `--help` and the import load no
# dependency (the package imports lazily), so the fresh environment takes the wheel
# alone; the project's environment, which holds the pinned dependencies, checks that
# they satisfy the wheel's declared requirements.
wheel-check: setup
	rm -rf $(DIST) $(WHEEL_VENV)
	$(PYTHON) -m pip wheel --quiet --no-deps --wheel-dir $(DIST) .
	$(PYTHON) -m pip install --quiet --dry-run --no-index $(DIST)/*.whl
	$(PYTHON_SYSTEM) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install --quiet --no-deps $(DIST)/*.whl
	cd $(WHEEL_VENV) && bin/keras-transformer --help > /dev/null
	cd $(WHEEL_VENV) && bin/python -c "import keras_transformer; print('wheel:', keras_transformer.__version__)"

clean:
	rm -rf $(VENV) .pytest_cache site $(DIST) build
