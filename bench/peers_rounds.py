"""The rounds bench/peers_compare.py drives on each HTTP system, through the one client of
bench/httpload.py: throughput (runs and approval cycles at concurrency 16, with the
servers' CPU per run), latency (concurrency 1), memory after the top-up to 1,000 runs,
and daphne's CPU floor per request.

Django is imported inside the functions that read the bench database (its name, its
backends): it needs django.setup(), which runs after the environment is set (see
bench/common.py)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from bench import common, httpload, proctree
from bench.common import BenchError, median
from bench.peers_servers import Server
from bench.peers_settings import (
    AWAKEN,
    CONCURRENCY,
    CYCLES,
    FLOOR_REQUESTS,
    LATENCY_RUNS,
    MEMORY_RUNS,
    RUNS,
)


def med(values: list[float]) -> float:
    return median(values) if values else float("nan")


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
        f"  round {index + 1} {server.name:<22} {plain.rate:7.1f} runs/s "
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
        f"  latency round {index + 1} {server.name:<22} submit->first event p50 "
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


def measure_request_floor(server: Server, port: int, token: str, results: SystemResults) -> None:
    """daphne's CPU per request for a bare Django view (`/healthz`) and for an API read
    (token auth, permission, throttle, one row: `GET /api/v1/runs/{id}`), same client and
    concurrency as the throughput rounds: what two requests per run (POST and SSE) cost
    before any of the run's own work."""
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
