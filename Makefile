# Two commands set everything up on a fresh machine with Python 3.11+:
#   make run    install, migrate, seed the demo and serve on http://127.0.0.1:8000/
#   make test   install and run the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test test-fast test-distributed lint bench bench-peers bench-scale clean screenshots

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

# The test process runs without a connection pool (DB_POOL=false): Django's test clients
# keep each request's connection open, so a pool would run dry over a session; the
# daphne, worker and beat processes the tests start use the pool, as in production.
test: install
	DB_POOL=$${DB_POOL:-false} $(BIN)/python -m pytest $(PYTEST_ARGS)

# The quick lane while working: the suite on SQLite and the in-memory layer, without the
# browser tests, tests/integration (real worker/daphne processes) and the tests marked
# `slow`, spread over FAST_WORKERS processes (pytest-xdist; each has its own test database).
# `make test` remains the whole suite, in one process.
FAST_WORKERS ?= 2
test-fast: install
	env -u DATABASE_URL -u REDIS_URL -u CELERY_BROKER_URL DB_POOL=false \
	$(BIN)/python -m pytest -n $(FAST_WORKERS) -m "not slow" \
		--ignore=tests/browser --ignore=tests/integration $(PYTEST_ARGS)

# The same suite on PostgreSQL + a private Redis, with real worker/beat/daphne processes.
TEST_REDIS_PORT ?= 6390
test-distributed: install
	@redis-cli -p $(TEST_REDIS_PORT) ping >/dev/null 2>&1 || redis-server --daemonize yes \
		--bind 127.0.0.1 --port $(TEST_REDIS_PORT) --save "" --appendonly no
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test} \
	REDIS_URL=redis://127.0.0.1:$(TEST_REDIS_PORT)/0 AWAKEN_TEST_REDIS_RESTARTABLE=1 \
	AWAKEN_REQUIRE_POSTGRES=1 AWAKEN_REQUIRE_INTEGRATION=1 DB_POOL=$${DB_POOL:-false} \
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy runs agents awaken_site common
	$(BIN)/lint-imports
	$(BIN)/python manage.py makemigrations --check --dry-run

# Needs PostgreSQL (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/awaken_bench,
# dropped and recreated; the DBOS peer gets awaken_bench_dbos) and the redis-server binary;
# starts and kills its own processes. The peers come from $(PEERS_VENV), installed by the
# bench when missing (BENCH_PEERS_INSTALL=0 to skip, BENCH_PEERS=0 to leave them out).
PEERS_VENV ?= .venv-peers
bench: install
	BENCH_PEERS_VENV=$(PEERS_VENV) $(BIN)/python bench/run_all.py

# Every page and API list on a million-run PostgreSQL database (BENCH_SCALE_DATABASE_URL,
# default postgres://postgres@127.0.0.1:5432/awaken_bench_scale, dropped and recreated, plus
# <name>_empty); ~2 min to load, ~5 min in all. BENCH_SCALE_ARGS="--reuse" keeps the data.
bench-scale: install
	$(BIN)/python bench/scale.py $(BENCH_SCALE_ARGS)

# The peers measured by bench/peers_compare.py (LangGraph's dev server, DBOS Transact) in
# their own environment, never in the project's dependencies.
bench-peers:
	@test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet -r bench/peers/requirements.txt

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache

# Full-page PNGs of the UI for the README (static/docs/): a fresh temporary `serve`, demo
# data, Debian's Chromium at /usr/bin/chromium driven by Playwright.
screenshots: install
	$(BIN)/python -m tests.browser.screenshots
