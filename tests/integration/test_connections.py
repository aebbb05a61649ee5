"""The database connection pool under load, against a real daphne on PostgreSQL: many
concurrent API clients plus hundreds of open SSE streams stay within the process's pool
(DB_POOL_MAX_SIZE) and see no error; a request that cannot get a connection in time is
a 503 with Retry-After."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import httpx
import psycopg
from django.contrib.auth.models import User
from django.db import connection

from runs.models import Run
from runs.services.submission_flow import run_start
from tests.factories import call, scripted_agent, token_for, waiting_run
from tests.processes import database_url, free_port, wait_for

POOL_MAX = 8
API_CLIENTS = 64
SSE_STREAMS = 200
LOAD_SECONDS = 15.0
APP_NAME = "awaken-pool-test-daphne"


class ConnectionWatch:
    """Samples how many PostgreSQL sessions daphne holds (its PGAPPNAME), from a
    connection of its own."""

    def __init__(self) -> None:
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> ConnectionWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        url = database_url(connection.settings_dict)
        with psycopg.connect(url, autocommit=True) as conn:
            while not self._stop.wait(0.05):
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND application_name = %s",
                    [APP_NAME],
                ).fetchone()
                self.samples.append(int(row[0]) if row else 0)


def daphne(processes: Any, service_env: dict[str, str], **env: str) -> str:
    port = free_port()
    service_env.update(
        {
            "PGAPPNAME": APP_NAME,  # libpq: names daphne's sessions in pg_stat_activity
            "API_THROTTLE_RATE": "1000000/min",
            "DB_POOL_MAX_SIZE": str(POOL_MAX),
            **env,
        }
    )
    processes("daphne", port=port)
    return f"http://127.0.0.1:{port}"


def test_api_clients_and_sse_streams_stay_within_the_pool(processes, service_env):
    base = daphne(processes, service_env)
    runs = [waiting_run(f"note {i}") for i in range(5)]
    assert all(run.status == Run.Status.WAITING for run in runs)
    headers = {"Authorization": f"Bearer {token_for(User.objects.create_superuser('loader'))}"}
    stop = threading.Event()
    statuses: Counter[Any] = Counter()
    errors: list[str] = []
    lock = threading.Lock()

    async def follow(client: httpx.AsyncClient, run: Run, opened: list[int]) -> None:
        url = f"{base}/api/v1/runs/{run.pk}/events/stream"
        params = {"after_seq": "0", "follow": "true"}
        async with client.stream("GET", url, params=params, headers=headers) as response:
            if response.status_code != 200:
                raise AssertionError(f"SSE {response.status_code}")
            opened.append(1)
            async for _ in response.aiter_bytes():
                pass
        if not stop.is_set():
            raise AssertionError("an SSE stream ended early")

    sse_state: dict[str, Any] = {"opened": [], "errors": []}

    def sse_clients() -> None:
        async def main() -> None:
            limits = httpx.Limits(max_connections=SSE_STREAMS + 10)
            timeout = httpx.Timeout(30.0, read=None)
            async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
                tasks = [
                    asyncio.create_task(follow(client, runs[i % len(runs)], sse_state["opened"]))
                    for i in range(SSE_STREAMS)
                ]
                while not stop.is_set():
                    await asyncio.sleep(0.1)
                    for task in tasks:
                        if task.done() and task.exception() is not None:
                            sse_state["errors"].append(repr(task.exception()))
                            stop.set()
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run(main())

    def api_client(n: int) -> None:
        run = runs[n % len(runs)]
        with httpx.Client(base_url=base, headers=headers, timeout=30.0) as client:
            paths = [
                "/api/v1/runs?limit=5",
                f"/api/v1/runs/{run.pk}",
                f"/api/v1/runs/{run.pk}/events",
            ]
            i = 0
            while not stop.is_set():
                try:
                    status = client.get(paths[i % len(paths)]).status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                with lock:
                    statuses[status] += 1
                    if status != 200:
                        errors.append(f"{paths[i % len(paths)]}: {status}")
                i += 1

    with ConnectionWatch() as watch:
        sse = threading.Thread(target=sse_clients, daemon=True)
        sse.start()
        wait_for(
            lambda: len(sse_state["opened"]) == SSE_STREAMS or sse_state["errors"],
            60,
            "the SSE streams to open",
        )
        clients = [
            threading.Thread(target=api_client, args=(n,), daemon=True) for n in range(API_CLIENTS)
        ]
        for client in clients:
            client.start()
        time.sleep(LOAD_SECONDS)
        stop.set()
        for client in clients:
            client.join(30)
        sse.join(30)

    assert not sse_state["errors"], sse_state["errors"][:5]
    assert not errors, (statuses, errors[:10])
    assert statuses[200] > API_CLIENTS, statuses
    assert watch.samples and max(watch.samples) <= POOL_MAX, max(watch.samples)
    print(
        f"\n{statuses[200]} API requests in {LOAD_SECONDS:.0f} s with {SSE_STREAMS} SSE streams; "
        f"daphne's connections: max {max(watch.samples)}, pool {POOL_MAX}"
    )


def test_no_connection_within_the_timeout_is_a_503(processes, service_env):
    """A pool of one, held by another request's slow query: the next request waits
    DB_POOL_TIMEOUT seconds, then gets 503 with Retry-After instead of hanging."""
    base = daphne(processes, service_env, DB_POOL_MAX_SIZE="1", DB_POOL_TIMEOUT="1")
    headers = {"Authorization": f"Bearer {token_for(User.objects.create_superuser('waiter'))}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30.0) as client:
        assert client.get("/api/v1/runs").status_code == 200  # the pool's one connection
        url = database_url(connection.settings_dict)
        with psycopg.connect(url, autocommit=True) as locker:
            locker.execute("BEGIN")
            locker.execute("LOCK TABLE runs_run IN ACCESS EXCLUSIVE MODE")
            blocked: dict[str, Any] = {}

            def held() -> None:  # its query waits on the lock, holding the connection
                blocked["status"] = client.get("/api/v1/runs").status_code

            first = threading.Thread(target=held)
            first.start()
            time.sleep(0.5)
            started = time.monotonic()
            with httpx.Client(base_url=base, headers=headers, timeout=30.0) as other:
                response = other.get("/api/v1/runs")
            waited = time.monotonic() - started
            locker.execute("ROLLBACK")
        first.join(30)
    assert response.status_code == 503, (response.status_code, response.text[:300])
    assert response.headers["Retry-After"] == "2"
    assert response.json()["error"]["code"] == "database_unavailable"
    assert 0.9 <= waited < 5, waited
    assert blocked["status"] == 200


def test_a_worker_keeps_its_pool_across_runs(processes, service_env):
    """The worker opens its pool at its first task and keeps it: later runs reuse its
    connections instead of opening new ones (Celery's Django fixup would close the pool
    around every task), and runs in flight share it: never more than its size."""
    service_env.update(
        {"PGAPPNAME": "awaken-pool-test-worker", "DB_POOL_MIN_SIZE": "1", "DB_POOL_MAX_SIZE": "3"}
    )
    processes("worker", concurrency=10)

    def backends() -> set[int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = %s",
                ["awaken-pool-test-worker"],
            )
            return {int(row[0]) for row in cursor.fetchall()}

    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("calculator", {"expression": "1+1"})]}, {"text": "2"}]
    )

    def batch(size: int) -> set[int]:
        runs = [run_start(agent=agent, messages=f"add {i}") for i in range(size)]
        seen: set[int] = set()

        def finished() -> bool:
            seen.update(backends())
            return (
                not Run.objects.filter(pk__in=[r.pk for r in runs]).exclude(status="done").exists()
            )

        wait_for(finished, 60, "the runs to finish")
        return seen | backends()

    before = backends()  # tasks left in the queue by earlier tests may have run already
    first = batch(10) | before
    assert 0 < len(first) <= 3, first  # the pool's size, whatever the runs in flight
    time.sleep(0.5)
    kept = backends()
    assert kept and kept <= first  # the pools outlive their tasks
    second = batch(10)
    assert second <= first, (first, second)  # no new connection for these runs
