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
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench import common, httpload, proctree
from bench.common import BenchEnv, BenchError, Figure, median

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
# `langgraph dev` runs 1 job at a time unless told; give it as many as the client has in
# flight, its most favourable setting here
LANGGRAPH_JOBS = int(os.environ.get("BENCH_PEERS_LANGGRAPH_JOBS", "0")) or CONCURRENCY
PEERS_ENABLED = os.environ.get("BENCH_PEERS", "1") != "0"
PEERS_INSTALL = os.environ.get("BENCH_PEERS_INSTALL", "1") != "0"
PEERS_VENV = common.ROOT / (os.environ.get("BENCH_PEERS_VENV") or ".venv-peers")  # abs. wins
PEERS_DIR = Path(__file__).resolve().parent / "peers"
DBOS_DATABASE = "awaken_bench_dbos"
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
GOAL_CPU_MS = 20.0
GOAL_STATEMENTS = 20.0
GOAL_TRANSACTIONS = 5.0
GOAL_MEMORY_MB = 350.0


# --- the peers' environment -------------------------------------------------------------------


def peers_python() -> tuple[Path | None, str]:
    """The peers' interpreter, installing their environment when it is missing and that is
    allowed; (None, reason) when it cannot be had."""
    if not PEERS_ENABLED:
        return None, "disabled by BENCH_PEERS=0"
    python = PEERS_VENV / "bin" / "python"
    probe = [str(python), "-c", "import dbos, langgraph, langgraph_api, langgraph_cli"]
    if python.exists() and subprocess.run(probe, capture_output=True, timeout=120).returncode == 0:
        return python, ""
    if not PEERS_INSTALL:
        return None, f"{PEERS_VENV.name} is missing or incomplete (run `make bench-peers`)"
    print(f"  installing the peers into {PEERS_VENV.name} (make bench-peers) ...", flush=True)
    try:
        install_peers()
    except (OSError, subprocess.SubprocessError, BenchError) as exc:
        return None, f"could not install {PEERS_VENV.name}: {str(exc)[-400:]}"
    if subprocess.run(probe, capture_output=True, timeout=120).returncode != 0:
        return None, f"{PEERS_VENV.name} installed but its packages do not import"
    return python, ""


def install_peers() -> None:
    """python3 -m venv .venv-peers && pip install -r bench/peers/requirements.txt"""
    base = shutil.which("python3") or sys.executable
    if not (PEERS_VENV / "bin" / "python").exists():
        subprocess.run([base, "-m", "venv", str(PEERS_VENV)], check=True, timeout=300)
    pip = [str(PEERS_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    done = subprocess.run(
        [*pip, "--disable-pip-version-check", "-r", str(PEERS_DIR / "requirements.txt")],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    if done.returncode != 0:
        raise BenchError(done.stderr or done.stdout or f"pip exited {done.returncode}")


def peers_env() -> dict[str, str]:
    """A clean environment for the peers: none of the project's settings, and nothing that
    would make them call out (tracing, analytics)."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        LANGSMITH_TRACING="false",
        LANGSMITH_TRACING_V2="false",
        LANGCHAIN_TRACING_V2="false",
        LANGCHAIN_TRACING="false",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        DO_NOT_TRACK="1",
        LOG_LEVEL="WARNING",  # as the Awaken processes run
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


# --- Awaken fixtures ---------------------------------------------------------------------------


def create_bench_agents() -> None:
    """bench-assistant (calculator allowed) and bench-approver (calculator asks), both
    scripted with no delay, created and published like any agent."""
    from agents.models import Agent, Model, ModelProvider
    from agents.services import agent_publish
    from runs.services.audit import Actor

    provider, _ = ModelProvider.objects.get_or_create(
        slug="bench-scripted",
        defaults={"name": "Bench scripted", "kind": ModelProvider.Kind.SCRIPTED},
    )
    model, _ = Model.objects.update_or_create(
        slug="bench-calculator", defaults={"provider": provider, "script": SCRIPT}
    )
    rules = {
        PLAIN_AGENT: [],
        APPROVAL_AGENT: [{"tool": "calculator", "behavior": "ask"}],
    }
    for slug, agent_rules in rules.items():
        agent, _ = Agent.objects.update_or_create(
            slug=slug,
            defaults={
                "name": slug,
                "model": model,
                "system_prompt": "You are a benchmark agent.",
                "tools": ["calculator"],
                "permission": {"default_behavior": "allow", "rules": agent_rules},
            },
        )
        agent_publish(agent=agent, actor=Actor(label="bench", source="cli"))


def create_token() -> str:
    """An operator and a personal API token for it (the raw token, shown once)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from runs.api.tokens import token_create
    from runs.services.audit import Actor

    user, _ = get_user_model().objects.get_or_create(username="bench-operator")
    user.groups.add(Group.objects.get(name="operator"))
    _, raw = token_create(user=user, name="bench", actor=Actor(label="bench", source="cli"))
    return raw


# --- SQL per run, counted in this process --------------------------------------------------------


@dataclass
class SqlCount:
    statements: int = 0
    transactions: int = 0
    pending: int = 0  # statements in the open atomic block
    log: list[str] = field(default_factory=list)  # the latest run's, when SQL_LOG

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        from django.db import connection

        self.statements += 1
        if connection.in_atomic_block:
            self.pending += 1
        else:
            self.transactions += 1  # autocommit: a transaction of its own
        if SQL_LOG:
            self.log.append(("  [tx] " if connection.in_atomic_block else "  [auto] ") + sql[:160])
        return execute(sql, params, many, context)

    def block_ended(self) -> None:
        if self.pending:
            self.transactions += 1
            self.pending = 0
            if SQL_LOG:
                self.log.append("  COMMIT/ROLLBACK")


@dataclass
class SqlFigures:
    runs: int
    web: SqlCount
    worker: SqlCount

    def per_run(self, attribute: str) -> tuple[float, float, float]:
        web = getattr(self.web, attribute) / self.runs
        worker = getattr(self.worker, attribute) / self.runs
        return web + worker, web, worker


def count_sql(token: str, runs: int) -> SqlFigures:
    """`runs` plain runs: the POST through Django's test client with the bearer token (the
    web side), then `run_advance` called directly (the worker side), counting statements
    with an execute wrapper and transactions as autocommit statements plus atomic blocks
    that ran at least one (their COMMIT or ROLLBACK). Enqueueing is disabled meanwhile
    (no SQL: a Redis write), so the real worker does not see these runs."""
    import warnings
    from unittest import mock

    from django.db import connection
    from rest_framework.test import APIClient

    # the test client builds the middleware stack, whose static files check wants a
    # collectstatic directory that a bench environment does not have
    warnings.filterwarnings("ignore", message="No directory at")

    from runs.services import dispatch
    from runs.services.execution import run_advance

    client = APIClient(HTTP_HOST=common.HOST)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    body = {"agent_id": PLAIN_AGENT, "messages": [{"role": "user", "content": "what is 6*7?"}]}
    counts = {"web": SqlCount(), "worker": SqlCount(), "none": SqlCount()}
    current = ["none"]

    def wrapped(name: str) -> Callable[..., Any]:
        original = getattr(connection, name)

        def ended(*args: Any, **kwargs: Any) -> Any:
            counts[current[0]].block_ended()
            return original(*args, **kwargs)

        return ended

    def one_run(counted: bool) -> None:
        current[0] = "web" if counted else "none"
        response = client.post("/api/v1/runs", body, format="json", **headers)
        if response.status_code != 201:
            raise BenchError(
                f"POST /api/v1/runs: {response.status_code} {response.content[:300]!r}"
            )
        run_id = response.json()["run_id"]
        current[0] = "worker" if counted else "none"
        run_advance(run_id=run_id)
        current[0] = "none"
        from runs.models import Run

        status = Run.objects.values_list("status_reason", "final_output").get(pk=run_id)
        if tuple(status) != ("natural", "42"):
            raise BenchError(f"in-process run {run_id} ended {status}")

    with (
        mock.patch.object(dispatch, "_enqueue", lambda run_id: None),
        mock.patch.object(connection, "commit", wrapped("commit")),
        mock.patch.object(connection, "rollback", wrapped("rollback")),
        connection.execute_wrapper(lambda *a: counts[current[0]](*a)),
    ):
        for _ in range(2):  # warm-up: connection set-up, caches
            one_run(False)
        for index in range(runs):
            if index == runs - 1:
                counts["web"].log.clear()
                counts["worker"].log.clear()
            one_run(True)
    if SQL_LOG:
        for side in ("web", "worker"):
            print(f"  SQL of the last run, {side}:\n" + "\n".join(counts[side].log), flush=True)
    return SqlFigures(runs, counts["web"], counts["worker"])


# --- servers -------------------------------------------------------------------------------------


@dataclass
class Server:
    """One system's processes (roots of the trees its cost is summed over)."""

    name: str
    procs: dict[str, common.Proc]
    cpu_roots: list[str]  # which procs count toward CPU per run
    memory_roots: list[str]

    def pids(self, names: list[str]) -> list[int]:
        return [self.procs[name].pid for name in names]

    def check(self) -> None:
        for name, proc in self.procs.items():
            if not proc.alive():
                raise BenchError(f"{self.name}: {name} died:\n{proc.log_tail()}")


def start_awaken(env: BenchEnv) -> tuple[Server, int]:
    port = common.free_port()
    celery = [common.PYTHON, "-m", "celery", "-A", "awaken_site"]
    daphne = env.spawn(
        "peers-daphne",
        # as the Procfile runs it: no access log (a proxy in front logs requests)
        [
            common.PYTHON,
            "-m",
            "daphne",
            "--verbosity",
            "0",
            "-b",
            common.HOST,
            "-p",
            str(port),
            ASGI_APP,
        ],
        env={"API_THROTTLE_RATE": THROTTLE_RATE},
        ready=lambda p: common.port_open(port),
    )
    worker = env.spawn(
        "peers-worker",
        [
            *celery,
            "worker",
            "--pool",
            "prefork",
            "--concurrency",
            str(WORKER_CONCURRENCY),
            "--loglevel",
            "WARNING",
            "--hostname",
            "bench-peers@%h",
            "--without-gossip",
            "--without-mingle",
        ],
    )
    beat = env.spawn(
        "peers-beat",
        [
            *celery,
            "beat",
            "--loglevel",
            "WARNING",
            "--schedule",
            str(env.log_dir / "beat-schedule"),
        ],
    )
    procs = {"daphne": daphne, "worker": worker, "beat": beat}
    return Server(AWAKEN, procs, ["daphne", "worker"], ["daphne", "worker", "beat"]), port


def start_langgraph(env: BenchEnv, python: Path) -> tuple[Server, int]:
    """`langgraph dev` in a scratch copy of bench/peers/langgraph (it writes its in-memory
    state's snapshots under the working directory)."""
    workdir = env.log_dir / "langgraph"
    shutil.copytree(PEERS_DIR / "langgraph", workdir)
    port = common.free_port()
    cli = python.parent / "langgraph"
    args = [
        "/bin/sh",
        "-c",
        'cd "$1" && shift && exec "$@"',
        "sh",
        str(workdir),
        str(cli),
        "dev",
        "--no-browser",
        "--no-reload",
        "--host",
        common.HOST,
        "--port",
        str(port),
        "--n-jobs-per-worker",
        str(LANGGRAPH_JOBS),
        "--server-log-level",
        "WARNING",
    ]
    proc = common.Proc("peers-langgraph", args, peers_env(), env.log_dir)
    env.procs.append(proc)

    def ready() -> bool:
        if not proc.alive():
            raise BenchError(f"langgraph dev exited:\n{proc.log_tail()}")
        return common.port_open(port) and _http_ok(f"http://{common.HOST}:{port}/ok")

    common.wait_for(ready, 90, "langgraph dev to start", interval=0.2)
    return Server(LANGGRAPH, {"server": proc}, ["server"], ["server"]), port


def _http_ok(url: str) -> bool:

    try:
        return httpx.get(url, timeout=1.0, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


# --- measuring -----------------------------------------------------------------------------------


@dataclass
class SystemResults:
    name: str
    plain: list[httpload.Round] = field(default_factory=list)
    approval: list[httpload.Round] = field(default_factory=list)
    cpu_ms_per_run: list[float] = field(default_factory=list)
    cpu_ms_per_cycle: list[float] = field(default_factory=list)
    latency_first: list[float] = field(default_factory=list)  # p50 per round
    latency_finish: list[float] = field(default_factory=list)
    latency_approve: list[float] = field(default_factory=list)
    runs_done: int = 0
    memory: proctree.Memory | None = None
    extra: dict[str, list[float]] = field(default_factory=dict)

    def add_extra(self, key: str, value: float) -> None:
        self.extra.setdefault(key, []).append(value)


def timed_round(
    server: Server,
    system: httpload.System,
    results: SystemResults,
    kind: str,
    count: int,
    concurrency: int,
    on_cpu: Callable[[float], None] | None = None,
) -> httpload.Round:
    roots = server.pids(server.cpu_roots)
    cpu = proctree.cpu_seconds(roots)
    measured = httpload.drive(system, kind, count, concurrency)
    used = proctree.cpu_seconds(roots) - cpu
    server.check()
    results.runs_done += len(measured.samples)
    if measured.errors:
        raise BenchError(
            f"{server.name} {kind}: {len(measured.errors)} of {count} failed, e.g. "
            f"{measured.errors[0]}"
        )
    if on_cpu is not None:
        on_cpu(used * 1000 / max(1, len(measured.samples)))
    return measured


def postgres_backends(database: str) -> tuple[int, list[int]]:
    """(connections to the bench database, their server process ids) besides ours."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [database],
        )
        pids = [int(row[0]) for row in cursor.fetchall()]
    return len(pids), pids


def throughput_round(
    index: int, server: Server, system: httpload.System, results: SystemResults
) -> None:
    from django.conf import settings

    awaken = server.name == AWAKEN
    database = str(settings.DATABASES["default"]["NAME"])
    if awaken:
        _, before_pids = postgres_backends(database)
        pg_before = proctree.cpu_seconds(before_pids)
    plain = timed_round(
        server, system, results, "plain", RUNS, CONCURRENCY, results.cpu_ms_per_run.append
    )
    results.plain.append(plain)
    if awaken:
        connections, after_pids = postgres_backends(database)
        gone = [p for p in before_pids if p not in after_pids]
        pg_used = proctree.cpu_seconds(after_pids) - (pg_before - proctree.cpu_seconds(gone))
        results.add_extra("pg_cpu_ms", pg_used * 1000 / max(1, len(plain.samples)))
        results.add_extra("pg_connections", connections)
        beat = proctree.cpu_seconds([server.procs["beat"].pid])
        results.add_extra("beat_cpu_s", beat)
    approval = timed_round(
        server,
        system,
        results,
        "approval",
        CYCLES,
        CONCURRENCY,
        results.cpu_ms_per_cycle.append,
    )
    results.approval.append(approval)
    print(
        f"  round {index + 1} {server.name:<14} {plain.rate:7.1f} runs/s "
        f"(p50 {median([s.finish_ms for s in plain.samples]):5.0f} ms, "
        f"server CPU {results.cpu_ms_per_run[-1]:5.1f} ms/run)   "
        f"{approval.rate:6.1f} approval cycles/s   load {common.fmt_load(os.getloadavg())}",
        flush=True,
    )


def latency_round(
    index: int, server: Server, system: httpload.System, results: SystemResults
) -> None:
    plain = timed_round(server, system, results, "plain", LATENCY_RUNS, 1)
    approval = timed_round(server, system, results, "approval", LATENCY_RUNS, 1)
    results.latency_first.append(median([s.first_ms for s in plain.samples]))
    results.latency_finish.append(median([s.finish_ms for s in plain.samples]))
    results.latency_approve.append(
        median([s.approve_ms for s in approval.samples if s.approve_ms is not None])
    )
    print(
        f"  latency round {index + 1} {server.name:<14} submit->first event p50 "
        f"{results.latency_first[-1]:6.1f} ms, submit->finish p50 "
        f"{results.latency_finish[-1]:6.1f} ms, approve->finish p50 "
        f"{results.latency_approve[-1]:6.1f} ms",
        flush=True,
    )


def top_up_and_measure_memory(
    server: Server, system: httpload.System, results: SystemResults
) -> None:
    missing = MEMORY_RUNS - results.runs_done
    if missing > 0:
        timed_round(server, system, results, "plain", missing, CONCURRENCY)
    results.memory = proctree.memory(server.pids(server.memory_roots))
    parts = {name: proctree.memory(server.pids([name])) for name in server.memory_roots}
    print(
        f"  memory {server.name} after {results.runs_done} runs: RSS {results.memory.rss_mb:.0f} MB"
        f", PSS {results.memory.pss_mb:.0f} MB ("
        + ", ".join(
            f"{name} {m.processes} process{'es' if m.processes > 1 else ''} RSS {m.rss_mb:.0f}"
            f" / PSS {m.pss_mb:.0f}"
            for name, m in parts.items()
        )
        + ")",
        flush=True,
    )


FLOOR_REQUESTS = int(os.environ.get("BENCH_PEERS_FLOOR_REQUESTS", "500"))


def measure_request_floor(server: Server, port: int, token: str, results: SystemResults) -> None:
    """daphne's CPU per request for a bare Django view (`/healthz`) and for an API read
    (token auth, permission, throttle, one row: `GET /api/v1/runs/{id}`), same client and
    concurrency as the throughput rounds: what two requests per run (POST and SSE) cost
    before any of the run's own work."""

    import httpx

    base = f"http://{common.HOST}:{port}"
    headers = {"Authorization": f"Bearer {token}"}

    async def some_run_id() -> str:
        async with httpx.AsyncClient(headers=headers) as client:
            page = (await client.get(f"{base}/api/v1/runs", params={"limit": 1})).json()
            return str(page["items"][0]["run_id"])

    async def hammer(path: str) -> None:
        async with httpx.AsyncClient(headers=headers, timeout=30) as client:
            gate = asyncio.Semaphore(CONCURRENCY)

            async def one() -> None:
                async with gate:
                    response = await client.get(f"{base}{path}")
                    if response.status_code != 200:
                        raise BenchError(f"GET {path}: {response.status_code}")

            await asyncio.gather(*(one() for _ in range(FLOOR_REQUESTS)))

    run_id = asyncio.run(some_run_id())
    roots = server.pids(["daphne"])
    for key, path in (("floor_bare_ms", "/healthz"), ("floor_api_ms", f"/api/v1/runs/{run_id}")):
        cpu = proctree.cpu_seconds(roots)
        asyncio.run(hammer(path))
        results.add_extra(key, (proctree.cpu_seconds(roots) - cpu) * 1000 / FLOOR_REQUESTS)
    print(
        f"  daphne CPU per request: bare Django view {med(results.extra['floor_bare_ms']):.2f} ms,"
        f" API read {med(results.extra['floor_api_ms']):.2f} ms",
        flush=True,
    )


def run_dbos(env: BenchEnv, python: Path) -> dict[str, Any]:
    """The DBOS peer in its own process (the peers' interpreter), on its own database."""
    import psycopg
    from psycopg import sql

    _, _, admin_url = common.database_urls()
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DBOS_DATABASE))
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DBOS_DATABASE)))
    database_url = admin_url.rsplit("/", 1)[0] + "/" + DBOS_DATABASE
    options = {
        "database_url": database_url.replace("postgres://", "postgresql://", 1),
        "concurrency": CONCURRENCY,
        "rounds": ROUNDS,
        "runs": RUNS,
        "cycles": CYCLES,
        "latency_runs": LATENCY_RUNS * ROUNDS,
        "memory_runs": MEMORY_RUNS,
        "pool_size": CONCURRENCY + 4,
    }
    done = subprocess.run(
        [str(python), str(PEERS_DIR / "dbos_bench.py"), json.dumps(options)],
        capture_output=True,
        text=True,
        timeout=DBOS_TIMEOUT,
        env=peers_env(),
        cwd=env.log_dir,
    )
    for line in done.stderr.splitlines():
        if line.startswith("  DBOS round"):
            print(line, flush=True)
    result_lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not result_lines:
        (env.log_dir / "peers-dbos.log").write_text(done.stdout + done.stderr)
        raise BenchError(f"DBOS exited {done.returncode}: {done.stderr[-1500:]}")
    return dict(json.loads(result_lines[-1].removeprefix("RESULT ")))


# --- reporting -----------------------------------------------------------------------------------


def med(values: list[float]) -> float:
    return median(values) if values else float("nan")


def ratio(value: float, baseline: float) -> float:
    if baseline != baseline or not baseline:
        return float("nan")
    return value / baseline


def print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for index, row in enumerate(rows):
        print("  " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        if index == 0:
            print("  " + "-+-".join("-" * w for w in widths))


def run(env: BenchEnv) -> list[Figure]:
    common.print_header("4. Awaken Ops over HTTP vs LangGraph dev and DBOS (same run)")
    print(
        f"  {RUNS} runs and {CYCLES} approval cycles per round at concurrency {CONCURRENCY}, "
        f"{ROUNDS} rounds alternating systems; latency: {LATENCY_RUNS} runs per round at "
        f"concurrency 1; Awaken: daphne + 1 worker --pool prefork --concurrency "
        f"{WORKER_CONCURRENCY} + beat; LangGraph: langgraph dev --n-jobs-per-worker "
        f"{LANGGRAPH_JOBS}; Awaken's per-token API throttle set to {THROTTLE_RATE}",
        flush=True,
    )
    python, unavailable = peers_python()
    if python is None:
        print(f"  peers: unavailable ({unavailable})", flush=True)
    else:
        versions = subprocess.run(
            [str(python), "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        wanted = ("langgraph", "langgraph-api", "langgraph-cli", "langgraph-runtime-inmem", "dbos")
        try:
            installed = {p["name"].lower(): p["version"] for p in json.loads(versions.stdout)}
        except ValueError:
            installed = {}
        print("  peers: " + ", ".join(f"{n} {installed.get(n, '?')}" for n in wanted), flush=True)

    create_bench_agents()
    token = create_token()
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

    awaken_server, awaken_port = start_awaken(env)
    awaken = httpload.AwakenHttp(
        f"http://{common.HOST}:{awaken_port}", token, PLAIN_AGENT, APPROVAL_AGENT
    )
    systems: list[tuple[Server, httpload.System, SystemResults]] = [
        (awaken_server, awaken, SystemResults(AWAKEN))
    ]
    dbos: dict[str, Any] | None = None
    peer_errors: list[str] = []
    if python is not None:
        try:
            lg_server, lg_port = start_langgraph(env, python)
            lg = httpload.LangGraphHttp(
                f"http://{common.HOST}:{lg_port}", "bench_plain", "bench_approval"
            )
            systems.append((lg_server, lg, SystemResults(LANGGRAPH)))
        except BenchError as exc:
            peer_errors.append(f"LangGraph: {exc}")
            print(f"  peers: LangGraph unavailable ({str(exc)[:500]})", flush=True)
    try:
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
        measure_request_floor(awaken_server, awaken_port, token, systems[0][2])
    finally:
        for server, _, _ in systems:
            for proc in server.procs.values():
                env.stop(proc)
    if python is not None:
        try:
            dbos = run_dbos(env, python)
        except (BenchError, subprocess.SubprocessError, OSError) as exc:
            peer_errors.append(f"DBOS: {exc}")
            print(f"  peers: DBOS unavailable ({str(exc)[:800]})", flush=True)

    ours = systems[0][2]
    peer = systems[1][2] if len(systems) > 1 else None
    return report(ours, peer, dbos, sql_figures, unavailable or "; ".join(peer_errors))


def report(
    ours: SystemResults,
    peer: SystemResults | None,
    dbos: dict[str, Any] | None,
    sql_figures: SqlFigures,
    unavailable: str,
) -> list[Figure]:
    nan = float("nan")

    def lg(getter: Callable[[SystemResults], float]) -> float:
        return getter(peer) if peer is not None else nan

    def db(*path: str) -> float:
        value: Any = dbos
        for key in path:
            if not isinstance(value, dict) or key not in value:
                return nan
            value = value[key]
        return float(value) if value is not None else nan

    def plain_rate(r: SystemResults) -> float:
        return med([x.rate for x in r.plain])

    def approval_rate(r: SystemResults) -> float:
        return med([x.rate for x in r.approval])

    def memory_rss(r: SystemResults) -> float:
        return r.memory.rss_mb if r.memory else nan

    def memory_pss(r: SystemResults) -> float:
        return r.memory.pss_mb if r.memory else nan

    dbos_plain = med([float(x["rate"]) for x in dbos["plain"]]) if dbos else nan
    dbos_approval = med([float(x["rate"]) for x in dbos["approval"]]) if dbos else nan
    dbos_cpu = med([float(x["cpu_ms_per_op"]) for x in dbos["plain"]]) if dbos else nan
    statements, web_st, worker_st = sql_figures.per_run("statements")
    transactions, web_tx, worker_tx = sql_figures.per_run("transactions")

    def cell(value: float, unit: str = "") -> str:
        return "n/a" if value != value else f"{common.fmt(value)}{unit}"

    rows: list[tuple[str, ...]] = [
        ("figure (median of rounds)", AWAKEN, LANGGRAPH, DBOS, "goal"),
        (
            f"runs/s, {RUNS} runs at concurrency {CONCURRENCY}",
            cell(plain_rate(ours)),
            cell(lg(plain_rate)),
            cell(dbos_plain),
            ">= 1.0x LangGraph (2x)",
        ),
        (
            f"approval cycles/s at concurrency {CONCURRENCY}",
            cell(approval_rate(ours)),
            cell(lg(approval_rate)),
            cell(dbos_approval),
            ">= LangGraph",
        ),
        (
            "submit -> finish p50, concurrency 1",
            cell(med(ours.latency_finish), " ms"),
            cell(lg(lambda r: med(r.latency_finish)), " ms"),
            cell(db("latency", "finish_p50_ms"), " ms"),
            "<= 50 ms",
        ),
        (
            "submit -> first event p50",
            cell(med(ours.latency_first), " ms"),
            cell(lg(lambda r: med(r.latency_first)), " ms"),
            "n/a",
            "<= 20 ms",
        ),
        (
            "approve -> finish p50",
            cell(med(ours.latency_approve), " ms"),
            cell(lg(lambda r: med(r.latency_approve)), " ms"),
            cell(db("latency", "approve_p50_ms"), " ms"),
            "<= 50 ms",
        ),
        (
            "server CPU per run (throughput phase)",
            cell(med(ours.cpu_ms_per_run), " ms"),
            cell(lg(lambda r: med(r.cpu_ms_per_run)), " ms"),
            cell(dbos_cpu, " ms (incl. client)"),
            "<= 20 ms",
        ),
        (
            "server CPU per approval cycle",
            cell(med(ours.cpu_ms_per_cycle), " ms"),
            cell(lg(lambda r: med(r.cpu_ms_per_cycle)), " ms"),
            cell(
                med([float(x["cpu_ms_per_op"]) for x in dbos["approval"]]) if dbos else nan,
                " ms (incl. client)",
            ),
            "-",
        ),
        (
            "SQL statements per plain run",
            f"{statements:.1f} (web {web_st:.1f} + worker {worker_st:.1f})",
            "no SQL (in-memory)",
            "not measured",
            "<= 20",
        ),
        (
            "SQL transactions per plain run",
            f"{transactions:.1f} (web {web_tx:.1f} + worker {worker_tx:.1f})",
            "-",
            "not measured",
            "<= 5",
        ),
        (
            f"memory RSS after >= {MEMORY_RUNS} runs",
            cell(memory_rss(ours), " MB"),
            cell(lg(memory_rss), " MB"),
            cell(db("memory", "rss_mb"), " MB (incl. client)"),
            "<= 350 MB",
        ),
        (
            "memory PSS (same processes)",
            cell(memory_pss(ours), " MB"),
            cell(lg(memory_pss), " MB"),
            cell(db("memory", "pss_mb"), " MB"),
            "-",
        ),
    ]
    print()
    print_table(rows)
    if unavailable:
        print(f"  peers: unavailable ({unavailable})")
    notes = [
        f"  Awaken processes: daphne + worker (main + {WORKER_CONCURRENCY} children) for CPU, "
        "the same + beat for memory; LangGraph: the `langgraph dev` process tree.",
        "  PostgreSQL's own CPU is in neither column; Awaken's share, from its backends "
        f"(approx.): {cell(med(ours.extra.get('pg_cpu_ms', [])), ' ms')} per run; "
        f"connections to the bench database after a throughput round: "
        f"{', '.join(str(int(c)) for c in ours.extra.get('pg_connections', []))}.",
        "  The CPU floor under Awaken's figure: daphne spends "
        f"{cell(med(ours.extra.get('floor_bare_ms', [])), ' ms')} on a bare Django request and "
        f"{cell(med(ours.extra.get('floor_api_ms', [])), ' ms')} on an authenticated API read; "
        "a plain run takes one (a POST answered with its event stream), an approval cycle "
        "three, before the worker's part.",
        "  First event: Awaken's first SSE data message (run_start); LangGraph's first "
        "message after `metadata` (the model step's update; `metadata` only acknowledges).",
        "  DBOS runs in process: submit -> result with no HTTP and no server, its client "
        "in the same process; shown for context, not as the goals' baseline.",
    ]
    if ours.memory:
        notes.append(
            f"  Awaken memory over {ours.memory.processes} processes after "
            f"{ours.runs_done} runs"
            + (
                f"; LangGraph over {peer.memory.processes} after {peer.runs_done} runs"
                if peer and peer.memory
                else ""
            )
            + (f"; DBOS after {int(db('workflows'))} workflows" if dbos else "")
            + "."
        )
    print("\n".join(notes), flush=True)

    lg_plain, lg_approval = lg(plain_rate), lg(approval_rate)
    baseline_name = LANGGRAPH if peer is not None else "LangGraph (unavailable)"

    def figure(
        name: str,
        value: float,
        unit: str,
        baseline: float,
        goal: str,
        met: bool | None,
    ) -> Figure:
        return Figure(
            benchmark=BENCHMARK,
            name=name,
            value=value,
            unit=unit,
            baseline_name=baseline_name,
            baseline=baseline,
            baseline_unit=unit,
            ratio=ratio(value, baseline),
            goal=goal,
            met=met,
        )

    def ratio_met(value: float, baseline: float, goal: float) -> bool | None:
        r = ratio(value, baseline)
        return None if r != r else r >= goal

    ours_plain, ours_approval = plain_rate(ours), approval_rate(ours)
    figures = [
        figure(
            f"runs/s (c={CONCURRENCY}, POST -> run_finish on SSE)",
            ours_plain,
            "runs/s",
            lg_plain,
            f">= {GOAL_THROUGHPUT_RATIO:.1f}x LangGraph (2x)",
            ratio_met(ours_plain, lg_plain, GOAL_THROUGHPUT_RATIO),
        ),
        figure(
            f"approval cycles/s (c={CONCURRENCY})",
            ours_approval,
            "cycles/s",
            lg_approval,
            ">= LangGraph",
            ratio_met(ours_approval, lg_approval, GOAL_APPROVAL_RATIO),
        ),
        figure(
            "submit -> run_finish p50 (c=1)",
            med(ours.latency_finish),
            "ms",
            lg(lambda r: med(r.latency_finish)),
            f"<= {GOAL_FINISH_MS:.0f} ms",
            med(ours.latency_finish) <= GOAL_FINISH_MS,
        ),
        figure(
            "submit -> first event p50 (c=1)",
            med(ours.latency_first),
            "ms",
            lg(lambda r: med(r.latency_first)),
            f"<= {GOAL_FIRST_EVENT_MS:.0f} ms",
            med(ours.latency_first) <= GOAL_FIRST_EVENT_MS,
        ),
        figure(
            "approve -> run_finish p50 (c=1)",
            med(ours.latency_approve),
            "ms",
            lg(lambda r: med(r.latency_approve)),
            f"<= {GOAL_APPROVE_MS:.0f} ms",
            med(ours.latency_approve) <= GOAL_APPROVE_MS,
        ),
        figure(
            "server CPU per run (daphne + worker)",
            med(ours.cpu_ms_per_run),
            "ms",
            lg(lambda r: med(r.cpu_ms_per_run)),
            f"<= {GOAL_CPU_MS:.0f} ms",
            med(ours.cpu_ms_per_run) <= GOAL_CPU_MS,
        ),
        figure(
            "SQL statements per plain run (web + worker)",
            statements,
            "statements",
            nan,
            f"<= {GOAL_STATEMENTS:.0f}",
            statements <= GOAL_STATEMENTS,
        ),
        figure(
            "SQL transactions per plain run (web + worker)",
            transactions,
            "transactions",
            nan,
            f"<= {GOAL_TRANSACTIONS:.0f}",
            transactions <= GOAL_TRANSACTIONS,
        ),
        figure(
            f"RSS daphne + worker + beat after {ours.runs_done} runs",
            memory_rss(ours),
            "MB",
            lg(memory_rss),
            f"<= {GOAL_MEMORY_MB:.0f} MB (PSS {cell(memory_pss(ours))} MB)",
            memory_rss(ours) <= GOAL_MEMORY_MB,
        ),
    ]
    for sql_figure in figures[6:8]:
        sql_figure.baseline_name = "none"
    common.print_figures(figures)
    return figures


if __name__ == "__main__":
    common.standalone(run)
