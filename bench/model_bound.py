"""Model-bound runs: Awaken Ops with a model that takes 1 s per answer, beside LangGraph dev
and DBOS on the same model server, in the same invocation.

    .venv/bin/python bench/model_bound.py          (also part of `make bench`)

The model is bench/model_server.py (OpenAI-compatible, streaming, a fixed delay before
each answer, counting the calls in flight). The run is the calculator agent's: model
(a `calculator` call) -> tool -> model ("The answer is 42."), two model calls, so no run
can take less than 2 x the delay.

- Awaken Ops: the distributed mode as the README runs it: daphne, ONE run worker
  (`celery -A awaken_site worker --queues celery`, pool and concurrency from the settings,
  AWAKEN_RUNS_IN_FLIGHT in its environment), the notification worker, beat, PostgreSQL
  (the bench database) and the private Redis. Its agent is on an OpenAI provider whose
  base URL is the model server (AWAKEN_PROVIDERS_ALLOW_PRIVATE=127.0.0.1). Runs are
  submitted over the real API: POST /api/v1/runs answered with the run's event stream,
  until `run_finish` (bench/httpload.py, the client of bench/peers_compare.py).
- LangGraph dev: the same graph with langchain-openai's ChatOpenAI (streaming, awaited in
  an async node) on the same model server (bench/peers/langgraph/model_graph.py), driven
  by the same client code, at `--n-jobs-per-worker` = the workload's concurrency and at
  1 (its default). With 1 job it runs one run at a time, so that configuration gets only
  BENCH_MB_LG_SERIAL_RUNS runs per workload (its rate cannot exceed 1 / (2 x delay)).
- DBOS Transact, in process (bench/peers/dbos_model_bench.py): the same three steps, the
  model steps an httpx call to the same server, `max_executor_threads` = the concurrency.

Each workload (runs@concurrency, rounds) alternates Awaken and LangGraph (jobs =
concurrency) round by round; figures are medians over rounds. For the largest workload
Awaken also runs once with a zero-delay model (the same server, delay 0) for the "latency
hidden" goal, and the PSS of daphne + worker + beat is printed after it.
Knobs: see bench/README.md ("model_bound.py").
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common, httpload, proctree
from bench.common import BenchEnv, BenchError, Figure
from bench.model_bound_report import Measured, Results, print_memory, report
from bench.model_bound_stack import (
    MODEL_AGENT,
    AwakenStack,
    Sampler,
    create_model_agent,
    database_now,
    env_flag,
    outcomes,
    pool_errors,
    pss_parts,
    start_awaken,
    wait_idle,
)
from bench.model_server import ModelServerProcess
from bench.peers_awaken import create_token
from bench.peers_env import peers_env, peers_python
from bench.peers_servers import Server, start_langgraph
from bench.peers_settings import PEERS_DIR

BENCHMARK = "model_bound"
__all__ = ["BENCHMARK", "run"]


def parse_workloads(text: str, rounds_override: str) -> list[tuple[int, int, int]]:
    """ "64@64:3,256@256:3,1000@1000:1" -> [(runs, concurrency, rounds), ...]"""
    workloads = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        spec, _, rounds = item.partition(":")
        runs, _, concurrency = spec.partition("@")
        count = int(rounds_override or rounds or "1")
        workloads.append((int(runs), int(concurrency or runs), max(1, count)))
    return workloads


WORKLOADS = parse_workloads(
    os.environ.get("BENCH_MB_WORKLOADS", "64@64:3,256@256:3,1000@1000:1"),
    os.environ.get("BENCH_MB_ROUNDS", ""),
)
DELAY = float(os.environ.get("BENCH_MB_DELAY", "1.0"))
IN_FLIGHT = int(os.environ.get("BENCH_MB_RUNS_IN_FLIGHT", "0")) or max(c for _, c, _ in WORKLOADS)
WORKER_POOL = int(os.environ.get("BENCH_MB_WORKER_POOL", "0")) or None
WEB_POOL = int(os.environ.get("BENCH_MB_WEB_POOL", "0")) or None  # daphne's DB_POOL_MAX_SIZE
LG_SERIAL_RUNS = int(os.environ.get("BENCH_MB_LG_SERIAL_RUNS", "8"))
TIMEOUT = float(os.environ.get("BENCH_MB_TIMEOUT", "300"))
ZERO_DELAY = env_flag("BENCH_MB_ZERO_DELAY")
PEERS = env_flag("BENCH_MB_PEERS") and env_flag("BENCH_PEERS")
DBOS_POOL = int(os.environ.get("BENCH_MB_DBOS_POOL", "40"))
AWAKEN = "Awaken Ops"
ZERO = "Awaken Ops, zero-delay model"


def drive(
    system: httpload.System, runs: int, concurrency: int, sampler: Sampler | None
) -> tuple[Any, Any]:
    """The client's load (`runs` plain runs, `concurrency` in flight), under the sampler
    when there is one; returns what the client measured and what the sampler saw."""

    def load() -> Any:
        return httpload.drive(
            system, "plain", runs, concurrency, operation_timeout=TIMEOUT, deadline=TIMEOUT + 60
        )

    if sampler is None:
        return load(), None
    with sampler as watch:
        return load(), watch


def measure(
    label: str,
    system: httpload.System,
    model: ModelServerProcess,
    runs: int,
    concurrency: int,
    stack: AwakenStack | None = None,
) -> Measured:
    """One round: `runs` runs with `concurrency` in flight, timed by the client."""
    model.reset()
    since = database_now() if stack else None
    worker = stack.server.procs["worker"].pid if stack else None
    sampler = Sampler(os.environ["DATABASE_URL"], worker) if stack else None
    cpu = time.process_time()
    names = ["daphne", "worker"] if stack else []
    server_cpu = {n: proctree.cpu_seconds([stack.server.procs[n].pid]) for n in names}  # type: ignore[union-attr]
    measured, watch = drive(system, runs, concurrency, sampler)
    client_cpu = time.process_time() - cpu
    server_cpu = {
        n: proctree.cpu_seconds([stack.server.procs[n].pid]) - used  # type: ignore[union-attr]
        for n, used in server_cpu.items()
    }
    stats = model.stats()
    times = [s.finish_ms / 1000 for s in measured.samples]
    result = Measured(
        system=label,
        runs=runs,
        concurrency=concurrency,
        seconds=measured.seconds,
        ok=len(measured.samples),
        p50_s=common.percentile(times, 50),
        p99_s=common.percentile(times, 99),
        errors=measured.errors,
        model_max_in_flight=int(stats["max_in_flight"]),
        model_calls=int(stats["calls"]),
        model_disconnected=int(stats["disconnected_early"]),
        client_cpu_s=client_cpu,
    )
    if server_cpu:
        result.note = "server CPU per run: " + ", ".join(
            f"{n} {used * 1000 / runs:.1f} ms" for n, used in server_cpu.items()
        )
    if stack is not None and sampler is not None:
        wait_idle()
        result.outcomes = outcomes(since)
        natural = sum(n for key, n in result.outcomes.items() if key.endswith(":natural"))
        result.natural = natural == runs and sum(result.outcomes.values()) == runs
        result.pg_max = watch.pg_max
        growth = max(0.0, watch.rss_max - watch.rss_before)
        result.rss_growth_mb_per_run = growth / concurrency
        stack.server.check()
    return result


def warm_up(label: str, system: httpload.System, concurrency: int) -> None:
    """The readiness check (a first run end to end, retried) and one small round."""
    started = time.monotonic()
    common.wait_for(
        lambda: httpload.drive(system, "plain", 1, 1, operation_timeout=60).samples,
        120,
        f"{label} to run a first run",
        interval=0.5,
    )
    warm = httpload.drive(system, "plain", concurrency, concurrency, operation_timeout=TIMEOUT)
    if warm.errors:
        raise BenchError(f"{label} warm-up: {warm.errors[0]}")
    print(f"  warm-up {label}: {time.monotonic() - started:.1f}s", flush=True)


def langgraph(env: BenchEnv, python: Path, base_url: str, jobs: int) -> tuple[Server, object]:
    server, port = start_langgraph(
        env,
        python,
        jobs=jobs,
        extra_env={"BENCH_MODEL_BASE_URL": base_url},
        label=f"LangGraph dev, {jobs} job{'s' if jobs > 1 else ''}",
    )
    client = httpload.LangGraphHttp(f"http://{common.HOST}:{port}", "bench_model", "bench_model")
    client.label = server.name  # type: ignore[misc]
    return server, client


def run(env: BenchEnv) -> list[Figure]:
    common.print_header("5. Model-bound runs: a 1 s model, Awaken vs LangGraph dev and DBOS")
    print(
        f"  model server delay {DELAY:g}s per answer; workloads "
        + ", ".join(f"{n}@{c} x{r}" for n, c, r in WORKLOADS)
        + f"; Awaken worker AWAKEN_RUNS_IN_FLIGHT={IN_FLIGHT}",
        flush=True,
    )
    python, unavailable = peers_python() if PEERS else (None, "disabled")
    results = Results()
    if python is None:
        results.unavailable.append(f"peers: {unavailable}")
        print(f"  peers: unavailable ({unavailable})", flush=True)
    model = ModelServerProcess(delay=DELAY, log_path=env.log_dir / "model-server.log")
    base_url = model.start()
    try:
        create_model_agent(base_url)
        token = create_token()
        measure_servers(env, python, model, token, results)
        if python is not None:
            measure_dbos(env, python, model, results)
    finally:
        model.stop()
    return report(results, WORKLOADS, DELAY)


def measure_servers(
    env: BenchEnv, python: Path | None, model: ModelServerProcess, token: str, results: Results
) -> None:
    stack = start_awaken(env, IN_FLIGHT, WORKER_POOL, WEB_POOL)
    results.configured_connections = stack.configured_connections
    results.pools_text = stack.pools_text()
    awaken = httpload.AwakenHttp(
        f"http://{common.HOST}:{stack.port}", token, MODEL_AGENT, MODEL_AGENT
    )
    servers: list[Server] = []
    try:
        warm_up(AWAKEN, awaken, 16)
        serial = None
        if python is not None:
            serial = start_peer(env, python, model.base_url, 1, results, servers)
        for runs, concurrency, rounds in WORKLOADS:
            workload = (runs, concurrency)
            peer = None
            if python is not None and concurrency > 1:
                peer = start_peer(env, python, model.base_url, concurrency, results, servers)
            for index in range(rounds):
                order: list[tuple[str, httpload.System, AwakenStack | None]] = [
                    (AWAKEN, awaken, stack)
                ]
                if peer is not None:
                    order.append((peer[0].name, peer[1], None))  # type: ignore[arg-type]
                for label, system, own in order if index % 2 == 0 else reversed(order):
                    results.add(workload, measure(label, system, model, runs, concurrency, own))
            if peer is not None:
                stop_peer(env, peer[0], servers)
            if serial is not None:
                count = min(runs, LG_SERIAL_RUNS)
                measured = measure(serial[0].name, serial[1], model, count, concurrency)  # type: ignore[arg-type]
                measured.note = f"({count} of {runs} runs: one job runs one run at a time)"
                results.add(workload, measured)
            if ZERO_DELAY and workload == WORKLOADS[-1][:2]:
                model.set_delay(0.0)
                try:
                    results.add(workload, measure(ZERO, awaken, model, runs, concurrency, stack))
                finally:
                    model.set_delay(DELAY)
        total, parts = pss_parts(stack)
        results.pss_mb = total.pss_mb
        results.memory = print_memory(total, parts)
        results.pool_errors = pool_errors(stack.server.procs["worker"])
        results.web_pool_errors = pool_errors(stack.server.procs["daphne"])
    finally:
        for server in servers:
            stop_peer(env, server, [])
        for proc in stack.server.procs.values():
            env.stop(proc)


def start_peer(
    env: BenchEnv,
    python: Path,
    base_url: str,
    jobs: int,
    results: Results,
    servers: list[Server],
) -> tuple[Server, object] | None:
    try:
        server, client = langgraph(env, python, base_url, jobs)
    except BenchError as exc:
        results.unavailable.append(f"LangGraph ({jobs} jobs): {str(exc)[:300]}")
        print(f"  peers: LangGraph with {jobs} jobs unavailable ({str(exc)[:500]})", flush=True)
        return None
    servers.append(server)
    warm_up(server.name, client, min(jobs, 16))  # type: ignore[arg-type]
    return server, client


def stop_peer(env: BenchEnv, server: Server, servers: list[Server]) -> None:
    for proc in server.procs.values():
        env.stop(proc)
    if server in servers:
        servers.remove(server)


def measure_dbos(env: BenchEnv, python: Path, model: ModelServerProcess, results: Results) -> None:
    """The DBOS peer in its own process (the peers' interpreter), on its own database."""
    import json

    import psycopg
    from psycopg import sql

    _, name, admin_url = common.database_urls()
    database = f"{name}_dbos_model"  # awaken_bench_dbos_model
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as admin:
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        admin.execute(drop.format(sql.Identifier(database)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    database_url = admin_url.rsplit("/", 1)[0] + "/" + database
    options = {
        "database_url": database_url.replace("postgres://", "postgresql://", 1),
        "base_url": model.base_url,
        "workloads": [list(w) for w in WORKLOADS],
        "pool_size": DBOS_POOL,
    }
    try:
        done = subprocess.run(
            [str(python), str(PEERS_DIR / "dbos_model_bench.py"), json.dumps(options)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT * sum(r for _, _, r in WORKLOADS) + 120,
            env=peers_env(),
            cwd=env.log_dir,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        results.unavailable.append(f"DBOS: {exc}")
        return
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        (env.log_dir / "peers-dbos-model.log").write_text(done.stdout + done.stderr)
        results.unavailable.append(f"DBOS exited {done.returncode}: {done.stderr[-800:]}")
        print(f"  peers: DBOS failed ({done.stderr[-800:]})", flush=True)
        return
    for item in json.loads(lines[-1].removeprefix("RESULT "))["workloads"]:
        measured = Measured(
            system="DBOS (in-process)",
            runs=int(item["runs"]),
            concurrency=int(item["concurrency"]),
            seconds=float(item["seconds"]),
            ok=int(item["runs"]),
            p50_s=float(item["p50_s"]),
            p99_s=float(item["p99_s"]),
            model_max_in_flight=int(item["model_max_in_flight"]),
            model_calls=int(item.get("model_calls", 0)),
        )
        results.add((measured.runs, measured.concurrency), measured)


if __name__ == "__main__":
    common.standalone(run)
