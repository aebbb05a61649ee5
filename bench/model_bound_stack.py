"""The systems bench/model_bound.py measures and what it watches while they run: Awaken's
distributed mode as the README runs it (daphne, ONE run worker on the `celery` queue, the
notification worker, beat) on the bench database and the private Redis; its bench agent on
an OpenAI provider pointed at the model server; a sampler of PostgreSQL connections and of
the worker's memory; the runs' outcomes read back from the database.

Django is imported inside the functions (it needs django.setup(), see bench/common.py)."""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from bench import common, proctree
from bench.common import BenchEnv
from bench.peers_servers import Server
from bench.peers_settings import ASGI_APP, AWAKEN, THROTTLE_RATE

MODEL_AGENT = "bench-model-agent"
PROVIDER = "bench-model-server"
UPSTREAM_MODEL = "bench-model"
# a process's connection pool ran dry: one line per occurrence (the last line of the
# exception's traceback as Django raises it, or the 503 middleware's log line)
POOL_ERRORS = ("OperationalError: couldn't get a connection", "no database connection for")
# daphne processes (`manage.py serve --processes N`, each on its own core) for the one worker
WEB_PROCESSES = int(os.environ.get("BENCH_MB_WEB_PROCESSES", "1"))
DAPHNE_BACKLOG = int(os.environ.get("BENCH_MB_DAPHNE_BACKLOG", "2048"))  # 0: the Procfile's


def create_model_agent(base_url: str) -> None:
    """An OpenAI-compatible provider on the model server, its model and an agent with the
    calculator (auto-allowed), published like any agent."""
    from agents.models import Agent, Model, ModelProvider
    from agents.services.agents import agent_publish
    from common.audit import Actor

    provider, _ = ModelProvider.objects.update_or_create(
        slug=PROVIDER,
        defaults={
            "name": "Bench model server",
            "kind": ModelProvider.Kind.OPENAI,
            "base_url": base_url,
            "timeout_seconds": 120,
        },
    )
    model, _ = Model.objects.update_or_create(
        slug="bench-model-server-model",
        defaults={"provider": provider, "upstream_model": UPSTREAM_MODEL},
    )
    agent, _ = Agent.objects.update_or_create(
        slug=MODEL_AGENT,
        defaults={
            "name": MODEL_AGENT,
            "model": model,
            "system_prompt": "You are a calculator agent.",
            "tools": ["calculator"],
            "permission": {"default_behavior": "allow", "rules": []},
        },
    )
    agent_publish(agent=agent, actor=Actor(label="bench", source="cli"))


@dataclass
class AwakenStack:
    server: Server
    port: int
    pools: dict[str, tuple[int, int]]  # process -> (pools, connections per pool)

    @property
    def configured_connections(self) -> int:
        return sum(count * size for count, size in self.pools.values())

    def pools_text(self) -> str:
        return (
            " + ".join(f"{name} {count}x{size}" for name, (count, size) in self.pools.items())
            + f" = {self.configured_connections}"
        )


def start_awaken(
    env: BenchEnv, in_flight: int, worker_pool: int | None, web_pool: int | None = None
) -> AwakenStack:
    """daphne, the run worker (`celery -A awaken_site worker --queues celery`: its pool and
    concurrency come from the settings, AWAKEN_RUNS_IN_FLIGHT in its environment), the
    notification worker and beat, as the Procfile runs them."""
    port = common.free_port()
    celery = [common.PYTHON, "-m", "celery", "-A", "awaken_site"]
    shared = {"AWAKEN_PROVIDERS_ALLOW_PRIVATE": "127.0.0.1", "API_THROTTLE_RATE": THROTTLE_RATE}
    worker_env = {**shared, "AWAKEN_RUNS_IN_FLIGHT": str(in_flight)}
    if worker_pool:
        worker_env["DB_POOL_MAX_SIZE"] = str(worker_pool)
    web_env = {**shared, "DB_POOL_MAX_SIZE": str(web_pool)} if web_pool else shared
    daphne = env.spawn(
        "mb-daphne", daphne_command(port), env=web_env, ready=lambda p: common.port_open(port)
    )
    quiet = ["--loglevel", "WARNING", "--without-gossip", "--without-mingle"]
    worker = env.spawn(
        "mb-worker",
        [
            *celery,
            "worker",
            "--pool",
            "threads",
            "--queues",
            "celery",
            "--hostname",
            "bench-mb@%h",
            *quiet,
        ],
        env=worker_env,
        ready=lambda p: worker_banner(p.log()) is not None,
        timeout=60,
    )
    notify, beat = start_notify_and_beat(env, celery, quiet, shared)
    procs = {"daphne": daphne, "worker": worker, "notify": notify, "beat": beat}
    server = Server(AWAKEN, procs, ["daphne", "worker"], ["daphne", "worker", "beat"])
    concurrency, pool_kind = worker_banner(worker.log()) or (1, "?")
    default = default_pool_size()
    worker_processes = concurrency if pool_kind == "prefork" else 1
    pools = {
        "daphne": (WEB_PROCESSES, web_pool or default),
        "worker": (worker_processes, worker_pool or default),
        "notify": (1, default),
        "beat": (1, default),
    }
    print(
        f"  Awaken: daphne x{WEB_PROCESSES}, worker ({pool_kind} pool, concurrency {concurrency}, "
        f"AWAKEN_RUNS_IN_FLIGHT={in_flight}), notify worker, beat",
        flush=True,
    )
    return AwakenStack(server, port, pools)


def start_notify_and_beat(
    env: BenchEnv, celery: list[str], quiet: list[str], shared: dict[str, str]
) -> tuple[Any, Any]:
    """The notification worker and beat, as the Procfile runs them."""
    notify_args = ["notifications", "--hostname", "bench-mb-notify@%h", *quiet]
    notify = env.spawn(
        "mb-notify",
        [*celery, "worker", *("--pool", "threads", "--concurrency", "4", "--queues"), *notify_args],
        env=shared,
    )
    beat = env.spawn(
        "mb-beat",
        [*celery, "beat", "--loglevel", "WARNING", "--schedule", str(env.log_dir / "mb-beat")],
        env=shared,
    )
    return notify, beat


def daphne_command(port: int) -> list[str]:
    """daphne as the Procfile runs it, with a longer listen backlog, or `manage.py serve`
    when the bench asks for several web processes."""
    # The Procfile's `-b/-p` listen with Twisted's default backlog of 50: 1,000 clients
    # connecting at once overflow it and get their connections reset. The bench gives
    # daphne the backlog uvicorn (LangGraph's server) has by default, 2048.
    listen = ["-b", common.HOST, "-p", str(port)]
    if DAPHNE_BACKLOG:
        listen = ["-e", f"tcp:port={port}:interface={common.HOST}:backlog={DAPHNE_BACKLOG}"]
    command = [common.PYTHON, "-m", "daphne", "--verbosity", "0", *listen, ASGI_APP]
    if WEB_PROCESSES > 1:  # the README's "Several daphne processes on one address"
        command = [common.PYTHON, "manage.py", "serve", "--host", common.HOST, "--port"]
        command += [str(port), "--processes", str(WEB_PROCESSES), "--no-worker"]
    return command


def worker_banner(log: str) -> tuple[int, str] | None:
    """(concurrency, pool) from the worker's start-up banner, once it printed it."""
    found = re.search(r"concurrency:\s*(\d+)\s*\((\w+)\)", log)
    return None if found is None else (int(found.group(1)), found.group(2))


def default_pool_size() -> int:
    from django.conf import settings

    options = settings.DATABASES["default"].get("OPTIONS", {})
    pool = options.get("pool")
    return int(pool.get("max_size", 8)) if isinstance(pool, dict) else 1


def pool_errors(proc: common.Proc) -> list[str]:
    return [line for line in proc.log().splitlines() if any(e in line for e in POOL_ERRORS)]


# --- watching a round -------------------------------------------------------------------------


@dataclass
class Watch:
    """What the sampler saw during a round: PostgreSQL connections to the bench database,
    and the worker tree's RSS (MB)."""

    pg_max: int = 0
    rss_before: float = 0.0
    rss_max: float = 0.0
    samples: int = 0
    errors: list[str] = field(default_factory=list)


class Sampler:
    """A thread that samples every `interval` s while a round runs; its own connection."""

    def __init__(self, database_url: str, worker_pid: int | None, interval: float = 0.1) -> None:
        self.database_url = database_url
        self.database = database_url.rsplit("/", 1)[1]
        self.worker_pid = worker_pid
        self.interval = interval
        self.watch = Watch()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watch:
        if self.worker_pid is not None:
            self.watch.rss_before = proctree.memory([self.worker_pid]).rss_mb
            self.watch.rss_max = self.watch.rss_before
        self._thread.start()
        return self.watch

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        try:
            with psycopg.connect(self.database_url, autocommit=True, connect_timeout=5) as conn:
                while not self._stop.is_set():
                    self._sample(conn)
                    self._stop.wait(self.interval)
        except psycopg.Error as exc:
            self.watch.errors.append(str(exc))

    def _sample(self, conn: Any) -> None:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [self.database],
        ).fetchone()
        self.watch.pg_max = max(self.watch.pg_max, int(row[0]))
        if self.worker_pid is not None:
            rss = proctree.memory([self.worker_pid]).rss_mb
            self.watch.rss_max = max(self.watch.rss_max, rss)
        self.watch.samples += 1


# --- the runs' outcomes -----------------------------------------------------------------------


def outcomes(since: Any) -> dict[str, int]:
    """status_reason -> count, over the bench agent's runs created since `since`."""
    from django.db.models import Count

    from runs.models import Run

    rows = (
        Run.objects.filter(agent__slug=MODEL_AGENT, created_at__gte=since)
        .values("status", "status_reason")
        .annotate(n=Count("pk"))
    )
    return {f"{r['status']}:{r['status_reason'] or '-'}": int(r["n"]) for r in rows}


def database_now() -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def pss_parts(stack: AwakenStack) -> tuple[proctree.Memory, dict[str, proctree.Memory]]:
    names = ["daphne", "worker", "beat"]
    total = proctree.memory(stack.server.pids(names))
    return total, {name: proctree.memory(stack.server.pids([name])) for name in names}


def wait_idle(timeout: float = 30.0) -> None:
    """Until no run of the bench agent is left unfinished (a round ends on the client's
    side when the last stream closed; the database may still be catching up)."""
    from runs.models import Run

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Run.objects.filter(agent__slug=MODEL_AGENT, finished_at__isnull=True).exists():
            return
        time.sleep(0.2)


def env_flag(name: str, default: str = "1") -> bool:
    return os.environ.get(name, default) != "0"
