"""Shared machinery for the benchmarks: a private PostgreSQL database and Redis server,
child processes that are always killed, Django setup, fixtures, statistics and printing.

Import order matters: nothing here imports Django at module level. `BenchEnv.start()`
sets DATABASE_URL/REDIS_URL (and the rest of the environment) in `os.environ` before it
calls `django.setup()`, so a benchmark imports application modules only inside functions
that run after `start()`.

Everything listens on 127.0.0.1 only, and every wait has a deadline.
"""

from __future__ import annotations

import atexit
import json
import os
import platform
import shutil
import signal
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import redis
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.processes import Proc  # noqa: E402  (a child process in its own group)

PYTHON = sys.executable
HOST = "127.0.0.1"
DEFAULT_DATABASE_URL = f"postgres://postgres@{HOST}:5432/awaken_bench"
DEFAULT_DATABASE_NAME = "awaken_bench"
SCRATCH_PREFIX = "awaken-bench-"


class BenchError(RuntimeError):
    """A benchmark could not produce a valid figure (timeout, wrong result, dead process)."""


# --- time, waiting ---------------------------------------------------------------------------


def wait_for(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05
) -> Any:
    """Poll `predicate` until it returns something truthy; BenchError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise BenchError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.2):
            return True
    except OSError:
        return False


def nproc() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 4


# --- statistics ------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100), like numpy's default."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (rank - low))


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


# --- the environment: database, Redis, Django, children -------------------------------------


def database_urls() -> tuple[str, str, str]:
    """(bench database URL, its name, maintenance URL on the same server).

    BENCH_DATABASE_URL may name the server only (postgres://user@host:port) or the
    database too; the database is dropped and recreated, so its name must contain
    'bench'.
    """
    raw = os.environ.get("BENCH_DATABASE_URL") or DEFAULT_DATABASE_URL
    parts = urlsplit(raw)
    name = parts.path.lstrip("/") or DEFAULT_DATABASE_NAME
    if "bench" not in name:
        raise BenchError(
            f"refusing to drop and recreate database {name!r}: "
            "BENCH_DATABASE_URL must name a database whose name contains 'bench'"
        )
    bench_url = urlunsplit(parts._replace(path=f"/{name}"))
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    return bench_url, name, admin_url


def recreate_database() -> str:
    bench_url, name, admin_url = database_urls()
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise BenchError(f"cannot reach PostgreSQL at {admin_url}: {exc}") from exc
    with admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return bench_url


class BenchEnv:
    """Owns everything a benchmark run starts. `close()` is idempotent and also runs at exit
    and on SIGTERM/SIGHUP, so no worker, daphne or redis-server outlives the driver."""

    def __init__(self) -> None:
        self.log_dir = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
        self.procs: list[Proc] = []
        self.redis_proc: Proc | None = None
        self.redis_url = ""
        self.database_url = ""
        self.child_env: dict[str, str] = {}
        self.started = time.monotonic()
        self.load_at_start = os.getloadavg()
        self.keep_logs = os.environ.get("BENCH_KEEP_LOGS") == "1"
        self._closed = False

    # setup -----------------------------------------------------------------------------------

    def start(self) -> BenchEnv:
        atexit.register(self.close)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _raise_system_exit)
        print(f"[setup] logs in {self.log_dir}", flush=True)
        self.database_url = recreate_database()
        print(f"[setup] database {redact(self.database_url)} recreated", flush=True)
        self.redis_url = self._start_redis()
        print(f"[setup] private redis-server at {self.redis_url}", flush=True)
        settings_env = {
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "CELERY_BROKER_URL": self.redis_url,
            "DJANGO_SETTINGS_MODULE": "awaken_site.settings",
            # production-like: no query log, no debug toolbar paths
            "DEBUG": "false",
            "SECRET_KEY": "bench-only-" + uuid.uuid4().hex,
            "SECURE_SSL_REDIRECT": "false",
            "SESSION_COOKIE_SECURE": "false",
            "CSRF_COOKIE_SECURE": "false",
            "AWAKEN_EMBEDDED_WORKER": "false",
            "AWAKEN_VAR_DIR": str(self.log_dir / "var"),
            "LOG_LEVEL": "WARNING",
            "CELERY_LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
        os.environ.update(settings_env)
        self.child_env = {**os.environ, **settings_env}
        import django

        django.setup()
        from django.core.management import call_command

        started = time.monotonic()
        call_command("migrate", interactive=False, verbosity=0)
        print(f"[setup] migrated in {time.monotonic() - started:.1f}s", flush=True)
        return self

    def _start_redis(self) -> str:
        binary = shutil.which("redis-server")
        if binary is None:
            raise BenchError("redis-server is not on PATH")
        for _ in range(3):  # the free port can be taken between probe and bind
            port = free_port()
            proc = Proc(
                f"redis-{port}",
                [
                    binary,
                    "--bind",
                    HOST,
                    "--port",
                    str(port),
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                    "--maxmemory-policy",
                    "noeviction",
                ],
                dict(os.environ),
                self.log_dir,
            )
            self.redis_proc = proc
            url = f"redis://{HOST}:{port}/0"

            def up(proc: Proc = proc, url: str = url) -> bool:
                return self._redis_ping(url) or not proc.alive()

            try:
                wait_for(up, 10, "redis-server")
            except BenchError:
                proc.stop()
                continue
            if proc.alive():
                return url
            proc.stop()
        raise BenchError("could not start a private redis-server")

    @staticmethod
    def _redis_ping(url: str) -> bool:
        try:
            return bool(redis.Redis.from_url(url, socket_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def redis(self) -> Any:
        return redis.Redis.from_url(self.redis_url)

    # children --------------------------------------------------------------------------------

    def spawn(
        self,
        name: str,
        args: list[str],
        *,
        env: dict[str, str] | None = None,
        ready: Callable[[Proc], bool] | None = None,
        timeout: float = 40.0,
    ) -> Proc:
        """Start a child; if `ready` is given, wait (bounded) until it says so."""
        proc = Proc(name, args, {**self.child_env, **(env or {})}, self.log_dir)
        self.procs.append(proc)
        if ready is not None:
            try:
                wait_for(lambda: ready(proc) or not proc.alive(), timeout, f"{name} to start")
            except BenchError:
                raise BenchError(f"{name} did not start:\n{proc.log_tail()}") from None
            if not proc.alive():
                raise BenchError(f"{name} exited:\n{proc.log_tail()}")
        return proc

    def stop(self, proc: Proc) -> None:
        proc.stop()
        if proc in self.procs:
            self.procs.remove(proc)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # Django never set up, or the server is gone
            pass
        if self.redis_proc is not None:
            self.redis_proc.stop()
        if self.keep_logs and any(self.log_dir.iterdir()):
            print(f"[teardown] process logs kept in {self.log_dir}", flush=True)
        else:
            shutil.rmtree(self.log_dir, ignore_errors=True)


def _raise_system_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


@contextmanager
def bench_environment() -> Iterator[BenchEnv]:
    env = BenchEnv()
    try:
        env.start()
        print_machine_facts(env)
        yield env
    except BaseException:
        env.keep_logs = True  # the worker/daphne logs explain most failures
        raise
    finally:
        env.close()


def celery_settings() -> dict[str, Any]:
    """The project's CELERY_* settings as Celery option names (for the no-op baseline app)."""
    from django.conf import settings

    options = {}
    for name in dir(settings):
        if name.startswith("CELERY_") and name != "CELERY_BEAT_SCHEDULE":
            options[name.removeprefix("CELERY_").lower()] = getattr(settings, name)
    return json.loads(json.dumps(options))


# --- reporting -------------------------------------------------------------------------------


@dataclass
class Figure:
    """One headline number beside its same-run baseline."""

    benchmark: str
    name: str
    value: float
    unit: str
    baseline_name: str
    baseline: float
    baseline_unit: str
    ratio: float
    goal: str
    met: bool | None  # None: no verdict (context only, or its baseline is unavailable)
    notes: list[str] = field(default_factory=list)

    def verdict(self) -> str:
        return "n/a" if self.met is None else "MET" if self.met else "NOT MET"

    def line(self) -> str:
        return (
            f"{self.name}: {fmt(self.value)} {self.unit}"
            f"  | baseline {self.baseline_name}: {fmt(self.baseline)} {self.baseline_unit}"
            f"  | ratio {fmt_ratio(self.ratio)}  | goal {self.goal}: {self.verdict()}"
        )


def fmt_ratio(value: float) -> str:
    return "n/a" if value != value else f"{value:.3f}"


def fmt(value: float) -> str:
    if value != value:  # NaN
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def print_header(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 76 - len(title)), flush=True)


def print_figures(figures: list[Figure]) -> None:
    for figure in figures:
        print("  >> " + figure.line(), flush=True)


def print_summary(figures: list[Figure], env: BenchEnv) -> None:
    print_header("Summary")
    headers = ("benchmark", "figure", "baseline (same run)", "ratio", "goal", "met")
    rows = [
        (
            f.benchmark,
            f"{f.name} = {fmt(f.value)} {f.unit}",
            f"{f.baseline_name} = {fmt(f.baseline)} {f.baseline_unit}",
            fmt_ratio(f.ratio),
            f.goal,
            {True: "yes", False: "NO", None: "n/a"}[f.met],
        )
        for f in figures
    ]
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    print("  " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  " + "-+-".join("-" * w for w in widths))
    for row in rows:
        print("  " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    load = os.getloadavg()
    print(
        f"\n  load average at start {fmt_load(env.load_at_start)}, at end {fmt_load(load)}; "
        f"wall time {time.monotonic() - env.started:.0f}s",
        flush=True,
    )


def fmt_load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.2f}" for x in load)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "?"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def machine_facts(env: BenchEnv) -> dict[str, str]:
    facts = {
        "cpu": cpu_model(),
        "nproc": str(nproc()),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }
    for package in (
        "django",
        "celery",
        "kombu",
        "channels",
        "channels-redis",
        "daphne",
        "redis",
        "psycopg",
        "websockets",
    ):
        facts[package] = _version(package)
    try:
        facts["redis-server"] = str(env.redis().info("server").get("redis_version", "?"))
    except Exception:
        facts["redis-server"] = "?"
    try:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            facts["postgresql"] = str(cursor.fetchone()[0])
    except Exception:
        facts["postgresql"] = "?"
    facts["loadavg"] = fmt_load(os.getloadavg())
    return facts


def print_machine_facts(env: BenchEnv) -> None:
    facts = machine_facts(env)
    print_header("Machine")
    print(f"  CPU: {facts.pop('cpu')}  nproc: {facts.pop('nproc')}  kernel: {facts.pop('kernel')}")
    print(f"  load average (1/5/15 min): {facts.pop('loadavg')}")
    print("  versions: " + ", ".join(f"{k} {v}" for k, v in facts.items()), flush=True)


def standalone(run: Callable[[BenchEnv], list[Figure]]) -> None:
    """`python bench/<name>.py`: set up, run one benchmark, print its summary."""
    try:
        with bench_environment() as env:
            figures = run(env)
            print_summary(figures, env)
    except BenchError as exc:
        print(f"\nbenchmark failed: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)
