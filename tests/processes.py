"""Child processes for tests that need real servers: wait helpers, free ports and a
process-group wrapper that logs to a file."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]


def wait_for(
    predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.05
) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def wait_for_async(
    predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.02
) -> object:
    """`wait_for` inside an event loop: the loop keeps running while it waits."""

    async def until_true() -> object:
        while not (value := predicate()):
            await asyncio.sleep(interval)
        return value

    try:
        return await asyncio.wait_for(until_true(), timeout)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Proc:
    """A child process in its own process group (session), logging to a file. Used by the
    tests and by bench/."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.popen = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, chars: int = 3000) -> str:
        return self.log()[-chars:]

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive():
            os.killpg(self.popen.pid, sig)
            self.popen.wait(timeout=20)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after `grace` seconds; then SIGKILL what
        is left of the group (children of a prefork worker can outlive their parent)."""
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.kill()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        if not self._log.closed:
            self._log.close()


# --- servers against the test database (tests/browser; the same command lines as
# tests/integration/conftest.py) ------------------------------------------------------------


def database_url(db: dict[str, object]) -> str:
    """A DATABASE_URL that points a child process at this database (`connection.settings_dict`)."""
    if str(db["ENGINE"]).endswith("sqlite3"):
        return f"sqlite:///{Path(str(db['NAME'])).resolve()}"
    user = quote(str(db.get("USER") or ""), safe="")
    password = f":{quote(str(db['PASSWORD']), safe='')}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"


def service_command(
    kind: str, *, name: str = "", port: int = 0, concurrency: int = 4, pool: str | None = None
) -> tuple[list[str], str]:
    """The command line of a `worker` (runs: the default queue; the product's executor,
    a threads pool, unless `pool` says prefork), `notify` (the notifications queue, a
    threads pool: the Procfile's), `daphne` or `serve` process and the log line that says
    it is ready."""
    if kind in ("worker", "notify"):
        queue = "celery" if kind == "worker" else "notifications"
        pool = pool or "threads"
        args = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "awaken_site",
            "worker",
            "--pool",
            pool,
            "--concurrency",
            str(concurrency),
            "--queues",
            queue,
            "--loglevel",
            "INFO",
            "--hostname",
            f"{name or kind}@%h",
            "--without-gossip",
            "--without-mingle",
        ]
        return args, "ready."
    if kind == "daphne":
        args = [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "awaken_site.asgi:application",
        ]
        return args, "Listening on TCP address"
    if kind == "serve":
        args = [
            sys.executable,
            "manage.py",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        return args, "Listening on TCP address"
    raise ValueError(kind)


def wait_ready(proc: Proc, ready: str, timeout: float = 40) -> Proc:
    """Wait until `ready` is in the process's log; fail with the log's tail if it exits."""
    try:
        wait_for(
            lambda: ready in proc.log() or proc.popen.poll() is not None,
            timeout,
            f"{proc.name} to start",
        )
    except AssertionError:
        raise AssertionError(f"{proc.name} did not start:\n{proc.log()[-3000:]}") from None
    if proc.popen.poll() is not None:
        raise AssertionError(f"{proc.name} exited:\n{proc.log()[-3000:]}")
    return proc


def http_ok(url: str, timeout: float = 1.0) -> bool:
    """True when a GET of `url` answers 200."""
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy
        with opener.open(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False
