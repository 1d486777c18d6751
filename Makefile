# Two commands for a fresh machine:  `make demo` (install everything, run the example)  and  `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-all bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m dtables.spark.jars
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(PY) projects_example/quickstart.py
	$(PY) projects_example/retail_demo.py

test: setup
	$(PY) -m ruff check .  # lint rules ([tool.ruff] in pyproject.toml)
	$(PY) -m mypy  # the packages' types ([tool.mypy] in pyproject.toml); fails the run like a test
	$(VENV)/bin/lint-imports  # import contracts ([tool.importlinter] in pyproject.toml)
	$(PY) -m pytest -q --durations=15
	# the heavy tests (tests/heavy.txt): the default suite above stays under 20 minutes without them
	$(PY) -m pytest -q --durations=10 -m heavy
	# a standalone cluster and a Spark Connect server, each started by its tests, each in a process of its own
	$(PY) -m pytest -q -m cluster tests/remote/test_cluster.py
	$(PY) -m pytest -q -m connect tests/remote/test_connect.py

test-all: setup
	$(PY) -m pytest -q -m 'not cluster and not connect'

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
