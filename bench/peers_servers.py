"""The systems bench/peers_compare.py measures, each started in its own process: Awaken
(daphne, one prefork worker, beat), LangGraph's `langgraph dev` in a scratch copy of
bench/peers/langgraph/, and the DBOS peer (bench/peers/dbos_bench.py, the peers'
interpreter, its own database), which measures itself and reports its figures."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql

from bench import common
from bench.common import BenchEnv, BenchError
from bench.peers_env import peers_env
from bench.peers_settings import (
    ASGI_APP,
    AWAKEN,
    CONCURRENCY,
    CYCLES,
    DBOS_DATABASE,
    DBOS_TIMEOUT,
    LANGGRAPH,
    LANGGRAPH_JOBS,
    LATENCY_RUNS,
    MEMORY_RUNS,
    PEERS_DIR,
    ROUNDS,
    RUNS,
    THROTTLE_RATE,
    WORKER_CONCURRENCY,
)


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


def start_langgraph(
    env: BenchEnv,
    python: Path,
    jobs: int = LANGGRAPH_JOBS,
    extra_env: dict[str, str] | None = None,
    label: str = LANGGRAPH,
) -> tuple[Server, int]:
    """`langgraph dev --n-jobs-per-worker <jobs>` in a scratch copy of bench/peers/langgraph
    (it writes its in-memory state's snapshots under the working directory)."""
    workdir = env.log_dir / f"langgraph-{common.free_port()}"
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
        str(jobs),
        "--server-log-level",
        "WARNING",
    ]
    proc = common.Proc(
        f"peers-langgraph-{jobs}jobs-{port}",
        args,
        {**peers_env(), **(extra_env or {})},
        env.log_dir,
    )
    env.procs.append(proc)

    def ready() -> bool:
        if not proc.alive():
            raise BenchError(f"langgraph dev exited:\n{proc.log_tail()}")
        return common.port_open(port) and _http_ok(f"http://{common.HOST}:{port}/ok")

    common.wait_for(ready, 90, "langgraph dev to start", interval=0.2)
    return Server(label, {"server": proc}, ["server"], ["server"]), port


def _http_ok(url: str) -> bool:

    try:
        return httpx.get(url, timeout=1.0, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def run_dbos(env: BenchEnv, python: Path) -> dict[str, Any]:
    """The DBOS peer in its own process (the peers' interpreter), on its own database."""
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
