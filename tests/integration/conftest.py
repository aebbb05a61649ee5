"""Real processes for the distributed mode: `celery worker`, `celery beat` and `daphne`
subprocesses against PostgreSQL and Redis.

Needs DATABASE_URL (PostgreSQL) and REDIS_URL; skipped otherwise, unless
AWAKEN_REQUIRE_INTEGRATION=1 (CI), which makes the session fail instead (tests/conftest.py). Tests that restart
Redis also need AWAKEN_TEST_REDIS_RESTARTABLE=1: they must own that Redis.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from django.conf import settings
from django.db import connection

from tests.processes import ROOT, Proc, database_url, service_command, wait_for, wait_ready

LEASE_SECONDS = "2"
SWEEP_SECONDS = "0.5"


def _missing() -> str | None:
    if connection.vendor != "postgresql":
        return "integration tests need DATABASE_URL pointing at PostgreSQL"
    if not settings.REDIS_URL:
        return "integration tests need REDIS_URL"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _missing()
    for item in items:
        if "tests/integration" not in str(item.fspath):
            continue
        item.add_marker(pytest.mark.integration)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


class SupervisedProc(Proc):
    """Started again when it exits on its own, as a process supervisor (systemd
    `Restart=always`, Kubernetes) does in production. Celery 5.7's worker can exit with
    "Unrecoverable error" when Redis goes away under load (a kombu bug seen here)."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log_dir: Path) -> None:
        super().__init__(name, args, env, log_dir)
        self.args, self.env = args, env
        self.restarts = 0
        self._stopping = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while not self._stopping.wait(0.5):
            if self.popen.poll() is not None:
                self.restarts += 1
                self.popen = subprocess.Popen(
                    self.args,
                    cwd=ROOT,
                    env=self.env,
                    stdout=self._log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )

    def stop(self) -> None:
        self._stopping.set()
        super().stop()


@pytest.fixture
def service_env(transactional_db: None) -> dict[str, str]:
    """Environment for child processes: the test database, short leases, fast sweep."""
    return {
        **os.environ,
        "DATABASE_URL": database_url(connection.settings_dict),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "AWAKEN_LEASE_SECONDS": LEASE_SECONDS,
        "AWAKEN_SWEEP_SECONDS": SWEEP_SECONDS,
        "AWAKEN_EMBEDDED_WORKER": "false",
        "DB_POOL": "true",  # as in production (the test process itself runs without)
        "DJANGO_SETTINGS_MODULE": "awaken_site.settings",
        "PYTHONUNBUFFERED": "1",
        "LOG_LEVEL": "INFO",
        "CELERY_LOG_LEVEL": "INFO",
    }


@pytest.fixture
def processes(service_env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    """Start named worker/beat/daphne processes; all are stopped at the end of the test."""
    started: list[Proc] = []

    def start(kind: str, name: str | None = None, **options: Any) -> Proc:
        name = name or f"{kind}{len(started) + 1}"
        if kind == "beat":
            args = [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "awaken_site",
                "beat",
                "--loglevel",
                "INFO",
                "--schedule",
                str(tmp_path / "beat-schedule"),
            ]
            ready = "beat: Starting"
        else:
            args, ready = service_command(
                kind,
                name=name,
                port=int(options.get("port", 0)),
                concurrency=int(options.get("concurrency", 4)),
                pool=options.get("pool"),
            )
        kind_of_proc = SupervisedProc if options.get("supervised") else Proc
        proc = kind_of_proc(name, args, service_env, tmp_path)
        started.append(proc)
        return wait_ready(proc, ready)

    yield start
    for proc in reversed(started):
        proc.stop()


def redis_restart() -> None:
    """Restart the Redis of REDIS_URL with nothing kept (the tests own it)."""
    if os.environ.get("AWAKEN_TEST_REDIS_RESTARTABLE") != "1":
        pytest.skip("set AWAKEN_TEST_REDIS_RESTARTABLE=1 to let tests restart this Redis")
    url = urlparse(settings.REDIS_URL)
    port = str(url.port or 6379)
    host = url.hostname or "127.0.0.1"
    subprocess.run(
        ["redis-cli", "-h", host, "-p", port, "shutdown", "nosave"],
        check=False,
        capture_output=True,
    )
    wait_for(
        lambda: (
            subprocess.run(
                ["redis-cli", "-h", host, "-p", port, "ping"], capture_output=True
            ).returncode
            != 0
        ),
        10,
        "redis to stop",
    )
    time.sleep(1.0)
    subprocess.run(
        [
            "redis-server",
            "--bind",
            host,
            "--port",
            port,
            "--daemonize",
            "yes",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        check=True,
        capture_output=True,
    )
    wait_for(
        lambda: (
            subprocess.run(
                ["redis-cli", "-h", host, "-p", port, "ping"], capture_output=True
            ).stdout.strip()
            == b"PONG"
        ),
        10,
        "redis to come back",
    )
