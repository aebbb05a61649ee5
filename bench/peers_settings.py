"""The knobs, names and goals of bench/peers_compare.py, shared by its modules: how many
runs, cycles and rounds, the peers' environment, the agents' script, the systems' names
and the issue's goals. Each knob reads its BENCH_PEERS_* variable once, at import."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from bench import common

BENCHMARK = "vs_peers"
RUNS = int(os.environ.get("BENCH_PEERS_RUNS", "200"))
CYCLES = int(os.environ.get("BENCH_PEERS_CYCLES", "100"))
CONCURRENCY = int(os.environ.get("BENCH_PEERS_CONCURRENCY", "16"))
ROUNDS = max(1, int(os.environ.get("BENCH_PEERS_ROUNDS", "3")))
LATENCY_RUNS = int(os.environ.get("BENCH_PEERS_LATENCY_RUNS", "10"))
SQL_RUNS = int(os.environ.get("BENCH_PEERS_SQL_RUNS", "10"))
SQL_LOG = os.environ.get("BENCH_PEERS_SQL_LOG") == "1"  # print the last run's statements
MEMORY_RUNS = int(os.environ.get("BENCH_PEERS_MEMORY_RUNS", "1000"))
WORKER_CONCURRENCY = int(os.environ.get("BENCH_PEERS_WORKER_CONCURRENCY", "2"))
# `langgraph dev --n-jobs-per-worker`: 1 (the CLI's default: one run at a time) and the
# client's concurrency (its documented tuning), each measured as a system of its own; for
# every figure the better of them is the goals' baseline. A comma-separated list; 0 means
# the concurrency.
LANGGRAPH_JOBS_LIST = tuple(
    dict.fromkeys(
        int(jobs) or CONCURRENCY
        for jobs in os.environ.get("BENCH_PEERS_LANGGRAPH_JOBS", "1,0").split(",")
        if jobs.strip()
    )
)
LANGGRAPH_JOBS = LANGGRAPH_JOBS_LIST[-1]


def langgraph_label(jobs: int) -> str:
    return f"LangGraph dev, {jobs} job{'s' if jobs != 1 else ''}"


PEERS_ENABLED = os.environ.get("BENCH_PEERS", "1") != "0"
PEERS_INSTALL = os.environ.get("BENCH_PEERS_INSTALL", "1") != "0"
PEERS_VENV = common.ROOT / (os.environ.get("BENCH_PEERS_VENV") or ".venv-peers")  # abs. wins
PEERS_DIR = Path(__file__).resolve().parent / "peers"
# the DBOS peer's database: the bench database's name + "_dbos" (awaken_bench_dbos)
DBOS_DATABASE = (
    urlsplit(os.environ.get("BENCH_DATABASE_URL") or common.DEFAULT_DATABASE_URL).path.lstrip("/")
    or common.DEFAULT_DATABASE_NAME
) + "_dbos"
ASGI_APP = "awaken_site.asgi:application"
# The API throttles each token (API_THROTTLE_RATE, 600/min by default); the bench's one
# client token would hit that in seconds. The throttle still runs (its cost is measured),
# with a rate no round reaches.
THROTTLE_RATE = os.environ.get("BENCH_PEERS_THROTTLE_RATE", "1000000/min")
INSTALL_TIMEOUT = 900.0
DBOS_TIMEOUT = 300.0

PLAIN_AGENT = "bench-assistant"
APPROVAL_AGENT = "bench-approver"
SCRIPT = [
    {"text": "", "tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]},
    {"text": "42"},
]
AWAKEN = "Awaken Ops"
LANGGRAPH = "LangGraph dev"
DBOS = "DBOS (in-process)"

# goals of the issue
GOAL_THROUGHPUT_RATIO = 1.0  # x LangGraph (stretch: 2x)
GOAL_APPROVAL_RATIO = 1.0
GOAL_FINISH_MS = 50.0
GOAL_FIRST_EVENT_MS = 20.0
GOAL_APPROVE_MS = 50.0
GOAL_CPU_MS = 15.0
GOAL_STATEMENTS = 15.0
GOAL_TRANSACTIONS = 4.0
GOAL_MEMORY_MB = 350.0
# requests per floor measurement (daphne's CPU per bare and per API request)
FLOOR_REQUESTS = int(os.environ.get("BENCH_PEERS_FLOOR_REQUESTS", "500"))
