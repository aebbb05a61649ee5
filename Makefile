# Two commands set everything up on a fresh machine with Python 3.11+:
#   make run    install, migrate, seed the demo and serve on http://127.0.0.1:8000/
#   make test   install and run the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test test-postgres lint bench clean

$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

install: $(VENV)/.installed

run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py seed_demo
	$(BIN)/python manage.py serve --host $(HOST) --port $(PORT)

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy runs agents awaken_site
	$(BIN)/lint-imports
	$(BIN)/python manage.py makemigrations --check --dry-run

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
