"""The daphne process under test in bench/ws_fanout.py, counting the SQL statements it
runs, and the websocket clients' process the rounds start and collect: the driver's side
of the websocket fan-out benchmark, with no figures of its own.

Django and the application are imported inside functions only (see bench/common.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import common, proctree
from bench.common import BenchEnv, BenchError

# daphne as in production, plus a count of the SQL statements it runs, written to
# BENCH_STATEMENTS_FILE on SIGUSR1. Application code is unchanged.
DAPHNE_LAUNCHER = r"""
import os, signal, sys
import django
django.setup()
from django.db.backends.signals import connection_created
statements = [0]
def count(execute, sql, params, many, context):
    statements[0] += 1
    return execute(sql, params, many, context)
def hook(sender, connection, **kwargs):
    if count not in connection.execute_wrappers:
        connection.execute_wrappers.append(count)
connection_created.connect(hook)
def report(signum, frame):
    with open(os.environ["BENCH_STATEMENTS_FILE"] + ".tmp", "w") as out:
        out.write(str(statements[0]))
    os.replace(os.environ["BENCH_STATEMENTS_FILE"] + ".tmp", os.environ["BENCH_STATEMENTS_FILE"])
signal.signal(signal.SIGUSR1, report)
from daphne.cli import CommandLineInterface
CommandLineInterface().run(sys.argv[1:])
"""


@dataclass
class Daphne:
    proc: Any
    port: int
    statements_file: Path

    def statements(self) -> int:
        """SQL statements daphne has run so far (asked for with SIGUSR1)."""
        self.statements_file.unlink(missing_ok=True)
        os.kill(self.proc.pid, signal.SIGUSR1)
        common.wait_for(self.statements_file.exists, 10, "daphne's statement count")
        return int(self.statements_file.read_text())

    def cpu(self) -> float:
        return proctree.cpu_seconds([self.proc.pid])


def start_daphne(env: BenchEnv) -> Daphne:
    port = common.free_port()
    statements_file = env.log_dir / "daphne-statements"
    proc = env.spawn(
        "daphne",
        [
            common.PYTHON,
            "-c",
            DAPHNE_LAUNCHER,
            "--verbosity",
            "0",
            "-b",
            common.HOST,
            "-p",
            str(port),
            "awaken_site.asgi:application",
        ],
        env={"BENCH_STATEMENTS_FILE": str(statements_file)},
        ready=lambda p: common.port_open(port),
        timeout=40,
    )
    return Daphne(proc, port, statements_file)


def spawn_clients(env: BenchEnv, name: str, config: dict[str, Any]) -> tuple[Any, Path]:
    config_path = env.log_dir / f"{name}.config.json"
    out = env.log_dir / f"{name}.json"
    config_path.write_text(json.dumps({**config, "out": str(out)}))
    proc = env.spawn(
        name,
        [common.PYTHON, "-m", "bench.ws_fanout", "--clients", str(config_path)],
        ready=lambda p: "READY" in p.log_tail(300),
        timeout=120,
    )
    ok, failed = re.search(r"READY (\d+) (\d+)", proc.log()).groups()  # type: ignore[union-attr]
    print(f"  {name}: {ok} clients connected, {failed} failed", flush=True)
    return proc, out


def collect(env: BenchEnv, proc: Any, out: Path, timeout: float) -> dict[str, Any]:
    common.wait_for(lambda: not proc.alive(), timeout, f"{proc.name} to finish", 0.1)
    env.stop(proc)
    if not out.exists():
        raise BenchError(f"{proc.name} wrote no results:\n{proc.log_tail()}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def login_cookie() -> str:
    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.create_superuser(f"bench-watcher-{uuid.uuid4().hex[:6]}", password=None)
    browser = Client()
    browser.force_login(user)
    return f"sessionid={browser.cookies['sessionid'].value}"


def paced(count: int, rate: float, emit: Any) -> int:
    """emit(i) at `rate` per second; returns how many started over an interval late."""
    interval, late = 1.0 / rate, 0
    start = time.monotonic()
    for index in range(count):
        delay = start + index * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -interval:
            late += 1
        emit(index)
    return late
