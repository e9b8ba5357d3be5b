# tierbot: `make run` to chat, `make test` to run the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CONFIG ?= config.toml

.PHONY: run test check bench lint clean config

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Re-install when the package metadata changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

run: $(VENV)/.installed
	$(BIN)/tierbot run --config $(CONFIG)

# One pytest worker per core (at most 4): most of the suite waits on the processes and
# servers it starts.  `.venv/bin/python -m pytest` alone runs it serially.  The package is
# compiled first: with PYTHONDONTWRITEBYTECODE set (as CI sets it) every bot process a
# test starts would otherwise compile it from source (about 0.3 s each, a minute in all).
# Work stealing: a worker that runs out takes tests queued for the other, so the long
# end-to-end tests do not leave one worker idle at the end (471 s against 497 s, 2 cores).
test: $(VENV)/.installed
	$(BIN)/python -m compileall -q bot tierbot channels compactor workers branches memory_graph > /dev/null
	$(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist worksteal

lint: $(VENV)/.installed
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy tierbot bot channels compactor workers branches memory_graph

check: lint test

# config.toml is generated from the config models (tierbot/config_template.py).
config: $(VENV)/.installed
	$(BIN)/python -c "from tierbot.config_template import render; open('config.toml', 'w').write(render())"

bench: $(VENV)/.installed
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache benchmarks/results
