"""Awaken Ops over its real HTTP API beside two peers measured in the same run.

Systems, all on this machine:
- Awaken Ops, distributed mode: daphne, ONE `celery worker --pool prefork --concurrency 2`,
  `celery beat`, PostgreSQL (the bench database) and the private Redis. Agents
  `bench-assistant` (scripted model: a calculator 6*7 call, auto-allowed, then "42") and
  `bench-approver` (the same, but the calculator call asks for approval).
- LangGraph's Agent Server, `langgraph dev` (in-memory runtime), serving the same 2-step
  tool graph with no LLM (bench/peers/langgraph/), plus its interrupt_before=["tools"]
  variant for approvals.
- DBOS Transact, in process (bench/peers/dbos_bench.py) on its own PostgreSQL database:
  a 3-step workflow, the approval waiting in DBOS.recv. No HTTP: its client is in the
  same process, so its figures are printed for context, not as the goals' baseline.

The two HTTP systems are driven by the same client code (bench/httpload.py): the same
httpx AsyncClient, SSE reader, concurrency and timing. Rounds alternate between them.
The peers run from a separate environment (.venv-peers, `make bench-peers`); when it
cannot be installed the peers are reported unavailable and Awaken's figures still print.

Run alone: .venv/bin/python bench/peers_compare.py

Its parts: peers_settings.py (knobs, names, goals), peers_env.py (the peers' environment),
peers_awaken.py (agents, token, SQL per run in process), peers_servers.py (starting the
systems), peers_rounds.py (the measured rounds), peers_report.py (the table, the figures).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common, httpload
from bench.common import BenchEnv, BenchError, Figure
from bench.model_bound_stack import worker_banner
from bench.peers_awaken import SqlFigures, count_sql, create_bench_agents, create_token
from bench.peers_env import peers_python, print_peer_versions
from bench.peers_report import report
from bench.peers_rounds import (
    SystemResults,
    latency_round,
    measure_request_floor,
    throughput_round,
    timed_round,
    top_up_and_measure_memory,
)
from bench.peers_servers import Server, run_dbos, start_awaken, start_langgraph
from bench.peers_settings import (
    APPROVAL_AGENT,
    AWAKEN,
    BENCHMARK,
    CONCURRENCY,
    CYCLES,
    LANGGRAPH_JOBS_LIST,
    LATENCY_RUNS,
    PLAIN_AGENT,
    ROUNDS,
    RUNS,
    SQL_RUNS,
    THROTTLE_RATE,
    WORKER_CONCURRENCY,
    langgraph_label,
)

__all__ = ["BENCHMARK", "run"]  # what bench/run_all.py uses

Measured = tuple[Server, httpload.System, SystemResults]


def run(env: BenchEnv) -> list[Figure]:
    common.print_header("4. Awaken Ops over HTTP vs LangGraph dev and DBOS (same run)")
    print(
        f"  {RUNS} runs and {CYCLES} approval cycles per round at concurrency {CONCURRENCY}, "
        f"{ROUNDS} rounds alternating systems; latency: {LATENCY_RUNS} runs per round at "
        f"concurrency 1; Awaken: daphne + 1 worker --pool prefork --concurrency "
        f"{WORKER_CONCURRENCY} + beat; LangGraph: langgraph dev --n-jobs-per-worker "
        f"{' and '.join(map(str, LANGGRAPH_JOBS_LIST))} (each measured, the better is the "
        f"baseline); Awaken's per-token API throttle set to {THROTTLE_RATE}",
        flush=True,
    )
    python, unavailable = peers_python()
    if python is None:
        print(f"  peers: unavailable ({unavailable})", flush=True)
    else:
        print_peer_versions(python)
    create_bench_agents()
    token = create_token()
    sql_figures = measure_sql(token)
    peer_errors: list[str] = []
    awaken_port, systems = start_systems(env, python, token, peer_errors)
    try:
        measure_systems(systems)
        banner = worker_banner(systems[0][0].procs["worker"].log())
        if banner is not None:  # what the worker says it runs, whatever its command line
            print(f"  Awaken worker's banner: concurrency {banner[0]} ({banner[1]})", flush=True)
        measure_request_floor(systems[0][0], awaken_port, token, systems[0][2])
    finally:
        for server, _, _ in systems:
            for proc in server.procs.values():
                env.stop(proc)
    dbos = measure_dbos(env, python, peer_errors)
    ours = systems[0][2]
    peers = [results for _, _, results in systems[1:]]
    return report(ours, peers, dbos, sql_figures, unavailable or "; ".join(peer_errors))


def measure_sql(token: str) -> SqlFigures:
    """SQL per plain run, in this process before any server starts."""
    sql_figures = count_sql(token, SQL_RUNS)
    statements, web_statements, worker_statements = sql_figures.per_run("statements")
    transactions, web_transactions, worker_transactions = sql_figures.per_run("transactions")
    print(
        f"  SQL per plain run ({SQL_RUNS} runs in this process: POST via the test client, "
        f"then run_advance): {statements:.1f} statements (web {web_statements:.1f} + worker "
        f"{worker_statements:.1f}) in {transactions:.1f} transactions (web "
        f"{web_transactions:.1f} + worker {worker_transactions:.1f})",
        flush=True,
    )
    return sql_figures


def start_systems(
    env: BenchEnv, python: Path | None, token: str, peer_errors: list[str]
) -> tuple[int, list[Measured]]:
    """Awaken's processes, then `langgraph dev` when the peers are there (a failure to
    start it is noted in `peer_errors`). Returns Awaken's port and the systems."""
    awaken_server, awaken_port = start_awaken(env)
    awaken = httpload.AwakenHttp(
        f"http://{common.HOST}:{awaken_port}", token, PLAIN_AGENT, APPROVAL_AGENT
    )
    systems: list[Measured] = [(awaken_server, awaken, SystemResults(AWAKEN))]
    for jobs in LANGGRAPH_JOBS_LIST if python is not None else ():
        label = langgraph_label(jobs)
        try:
            lg_server, lg_port = start_langgraph(env, python, jobs=jobs, label=label)
        except BenchError as exc:
            peer_errors.append(f"{label}: {exc}")
            print(f"  peers: {label} unavailable ({str(exc)[:500]})", flush=True)
            continue
        lg = httpload.LangGraphHttp(
            f"http://{common.HOST}:{lg_port}", "bench_plain", "bench_approval"
        )
        lg.label = label  # type: ignore[misc]
        systems.append((lg_server, lg, SystemResults(label)))
    return awaken_port, systems


def measure_systems(systems: list[Measured]) -> None:
    """Warm-up, throughput and latency rounds alternating between the systems, then each
    one's memory."""
    # warm-up, and readiness: a server that answers has executed work end to end
    for server, system, results in systems:
        started = time.monotonic()
        common.wait_for(
            lambda s=system: httpload.drive(s, "plain", 1, 1).samples,  # type: ignore[misc]
            60,
            f"{server.name} to run a first run",
            interval=0.5,
        )
        timed_round(server, system, results, "plain", 2 * CONCURRENCY, CONCURRENCY)
        timed_round(server, system, results, "approval", CONCURRENCY, CONCURRENCY)
        print(f"  warm-up {server.name}: {time.monotonic() - started:.1f}s", flush=True)
    for index in range(ROUNDS):
        order = systems if index % 2 == 0 else list(reversed(systems))
        for server, system, results in order:
            throughput_round(index, server, system, results)
    for index in range(ROUNDS):
        order = systems if index % 2 == 0 else list(reversed(systems))
        for server, system, results in order:
            latency_round(index, server, system, results)
    for server, system, results in systems:
        top_up_and_measure_memory(server, system, results)


def measure_dbos(
    env: BenchEnv, python: Path | None, peer_errors: list[str]
) -> dict[str, Any] | None:
    """The DBOS peer, after the servers are stopped; None when it is not there."""
    if python is None:
        return None
    try:
        return run_dbos(env, python)
    except (BenchError, subprocess.SubprocessError, OSError) as exc:
        peer_errors.append(f"DBOS: {exc}")
        print(f"  peers: DBOS unavailable ({str(exc)[:800]})", flush=True)
        return None


if __name__ == "__main__":
    common.standalone(run)
