"""The operator's heaviest pages through daphne, for the scale benchmark: the dashboard and
its stats partial, the inbox, the run page of the 20,000-event run and the admin change
lists of tickets and audit entries, requested over HTTP (one kept-alive connection, a
superuser's session cookie) from a `daphne awaken_site.asgi:application` serving the
million-run database as production does (the connection pool on, DEBUG off). Each: 3
warm-ups, then timed requests (time to the last byte of the body); p50 / p99 and the
body's size. Goal as in-process: p50 < 50 ms, p99 < 200 ms.

Django is imported inside the functions: it needs django.setup(), which runs after the
environment is set (see bench/scale_setup.py)."""

from __future__ import annotations

import http.client
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import BenchError, percentile, print_header, wait_for
from bench.scale_pages import GOAL_P50_MS, GOAL_P99_MS
from bench.scale_report import Row
from bench.scale_specs import HOST, Target
from tests.processes import Proc, free_port, service_command

WARMUPS = 3
START_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 30.0


@dataclass
class Page:
    name: str
    path: Callable[[Target], str]


PAGES = (
    Page("/ (dashboard)", lambda _t: "/"),
    Page("/dashboard/stats (live partial)", lambda _t: "/dashboard/stats"),
    Page("/inbox/", lambda _t: "/inbox/"),
    Page("/runs/<id>/ [20,000 events]", lambda t: f"/runs/{t.fixtures['huge_run']}/"),
    Page("/admin/runs/ticket/ (change list)", lambda _t: "/admin/runs/ticket/"),
    Page("/admin/common/auditentry/ (change list)", lambda _t: "/admin/common/auditentry/"),
)


@dataclass
class Timed:
    name: str
    path: str
    samples_ms: list[float] = field(default_factory=list)
    size: int = 0
    error: str = ""

    @property
    def p50(self) -> float:
        return percentile(self.samples_ms, 50)

    @property
    def p99(self) -> float:
        return percentile(self.samples_ms, 99)

    def verdict(self) -> str:
        if self.error:
            return "ERROR"
        failed = [
            name
            for name, value, goal in (
                ("p50", self.p50, GOAL_P50_MS),
                ("p99", self.p99, GOAL_P99_MS),
            )
            if value >= goal
        ]
        return "met" if not failed else f"NOT met ({', '.join(failed)})"

    def row(self) -> Row:
        value = (
            f"ERROR: {self.error[:60]}"
            if self.error
            else f"p50 {self.p50:,.1f} / p99 {self.p99:,.1f} ms, "
            f"{self.size / 1024:,.0f} KiB, n={len(self.samples_ms)}"
        )
        goal = f"p50<{GOAL_P50_MS:.0f}, p99<{GOAL_P99_MS:.0f} ms"
        return Row(f"daphne {self.name}", value, goal, self.verdict())


def daphne_env(target: Target) -> dict[str, str]:
    """This process' environment (set before django.setup()) as production runs it: the
    connection pool instead of one kept connection."""
    from django.db import connection

    env = dict(os.environ)
    settings = connection.settings_dict
    env["DATABASE_URL"] = (
        f"postgres://{settings['USER']}"
        + (f":{settings['PASSWORD']}" if settings.get("PASSWORD") else "")
        + f"@{settings['HOST'] or HOST}:{settings['PORT'] or 5432}/{target.db}"
    )
    env.pop("DB_CONN_MAX_AGE", None)
    env["DB_POOL"] = "true"
    return env


def fetch(conn: http.client.HTTPConnection, path: str, cookie: str) -> tuple[float, int]:
    """(ms to the body's last byte, body bytes) of one GET; BenchError unless 200."""
    started = time.perf_counter()
    conn.request("GET", path, headers={"Host": HOST, "Cookie": cookie})
    response = conn.getresponse()
    body = response.read()
    elapsed = (time.perf_counter() - started) * 1000
    if response.status != 200:
        raise BenchError(f"HTTP {response.status} for {path}: {body[:200]!r}")
    return elapsed, len(body)


def measure_page(
    conn: http.client.HTTPConnection, page: Page, target: Target, cookie: str, samples: int
) -> Timed:
    timed = Timed(page.name, page.path(target))
    try:
        for _ in range(WARMUPS):
            fetch(conn, timed.path, cookie)
        for _ in range(samples):
            elapsed, timed.size = fetch(conn, timed.path, cookie)
            timed.samples_ms.append(elapsed)
    except (BenchError, OSError, http.client.HTTPException) as exc:
        timed.error = str(exc) or type(exc).__name__
    return timed


def measure_daphne(big: Target, samples: int) -> list[Row]:
    """Starts daphne on the measured database, times PAGES, stops it."""
    print_header("2b. The heaviest pages through daphne (HTTP, one kept-alive connection)")
    cookie = f"sessionid={big.ui.cookies['sessionid'].value}"
    port = free_port()
    args, _ = service_command("daphne", port=port)
    log_dir = Path(tempfile.mkdtemp(prefix="awaken-bench-scale-daphne-"))
    daphne = Proc("daphne", args, daphne_env(big), log_dir)
    timed: list[Timed] = []
    try:
        wait_for(lambda: _answers(port) or not daphne.alive(), START_TIMEOUT_S, "daphne to listen")
        if not daphne.alive():
            raise BenchError(f"daphne exited:\n{daphne.log_tail()}")
        conn = http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S)
        try:
            for page in PAGES:
                result = measure_page(conn, page, big, cookie, samples)
                if result.error:  # a fresh connection for the next page
                    conn.close()
                    conn = http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S)
                    print(f"  {page.name:<44} ERROR: {result.error[:300]}", flush=True)
                else:
                    print(
                        f"  {page.name:<44} p50 {result.p50:8.1f} ms (<{GOAL_P50_MS:.0f})"
                        f"  p99 {result.p99:8.1f} ms (<{GOAL_P99_MS:.0f})"
                        f"  {result.size / 1024:7,.1f} KiB  n={len(result.samples_ms)}"
                        f"  {result.verdict()}",
                        flush=True,
                    )
                timed.append(result)
        finally:
            conn.close()
    finally:
        daphne.stop()
    return [result.row() for result in timed]


def _answers(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection(HOST, port, timeout=2)
        conn.request("GET", "/healthz", headers={"Host": HOST})
        conn.getresponse().read()
        conn.close()
        return True
    except OSError:
        return False
