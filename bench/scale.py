"""Scale: every page and API list on a database of a million runs.

    make bench-scale            (or: .venv/bin/python bench/scale.py [--scale 0.05] [--reuse])

1. Loads its own PostgreSQL database (BENCH_SCALE_DATABASE_URL, default
   postgres://postgres@127.0.0.1:5432/awaken_bench_scale; dropped and recreated unless
   --reuse finds the same data set already loaded) with a team's data after ~90 days:
   1,002,504 runs on 200,002 threads, 800,004 messages, 2,065,006 run events, 20,000
   runs waiting on a pending ticket, ~74,000 tickets decided in the last 7 days, 500,000
   audit entries, ten agents (bench/scale_data.py). Then `manage.py rebuild_stats`.
2. Measures in-process (Django's test client, a superuser's session for the pages, an API
   token for /api/v1), warm, 20 requests each: p50 / p99 of the time around the request
   and the SQL query count, beside the same request's query count on a 1,000-run
   database (goal: p50 < 50 ms, p99 < 200 ms, the same count). Requests slower than
   the goal get the EXPLAIN (ANALYZE, BUFFERS) of their slowest SQL statement.
3. POST /api/v1/runs on the million-run database against a freshly migrated empty one,
   interleaved (goal: p50 ratio <= 1.3).
4. Retention while serving: `manage.py prune_runs` removes ~100,000 old runs while a
   thread keeps reading the runs list and another keeps writing runs as a worker would
   (goal: neither waits more than 200 ms above its own baseline).
5. bench/ws_fanout.py, when it exists, as a subprocess.

Connections: one in-process; three during the retention phase (reader, writer, the
prune command). The second database (<name>_empty) is dropped and recreated every time:
empty for step 3, then loaded at scale 0.001 as the reference of the query counts.
See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import html
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import scale_data  # noqa: E402
from bench.common import (  # noqa: E402
    BenchError,
    cpu_model,
    fmt_load,
    nproc,
    percentile,
    print_header,
)

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/awaken_bench_scale"
HOST = "127.0.0.1"
GOAL_P50_MS = 50.0
GOAL_P99_MS = 200.0
SAMPLES = 20
# A request that takes seconds gets fewer samples: sampling stops after this many
# seconds once it has MIN_SAMPLES (the line says how many it got).
SAMPLE_BUDGET_S = 10.0
MIN_SAMPLES = 5
DEEP_PAGES = 50
TICKET_PAGES = 10
POSTS = 30
POST_RATIO_GOAL = 1.3
REFERENCE_SCALE = 0.001
RETENTION_RUNS = 100_000  # at scale 1
RETENTION_BLOCK_MS = 200.0
RETENTION_BASELINE_S = 10.0
PRUNE_TIMEOUT_S = 20 * 60
WS_FANOUT_TIMEOUT_S = 30 * 60
EXPLAIN_LINES = 45


# --- database names, Django setup ---------------------------------------------------------


@dataclass
class Databases:
    url: str
    name: str
    empty: str
    admin_url: str


def database_names() -> Databases:
    raw = os.environ.get("BENCH_SCALE_DATABASE_URL") or DEFAULT_DATABASE_URL
    parts = urlsplit(raw)
    name = parts.path.lstrip("/") or "awaken_bench_scale"
    if "bench" not in name:
        raise BenchError(
            f"refusing to drop and recreate database {name!r}: BENCH_SCALE_DATABASE_URL "
            "must name a database whose name contains 'bench'"
        )
    return Databases(
        url=urlunsplit(parts._replace(path=f"/{name}")),
        name=name,
        empty=f"{name}_empty",
        admin_url=urlunsplit(parts._replace(path="/postgres")),
    )


def admin_execute(dbs: Databases, *statements: str) -> None:
    import psycopg

    try:
        admin = psycopg.connect(dbs.admin_url, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise BenchError(f"cannot reach PostgreSQL at {dbs.admin_url}: {exc}") from exc
    with admin:
        for statement in statements:
            admin.execute(statement)


def database_exists(dbs: Databases, name: str) -> bool:
    import psycopg

    with psycopg.connect(dbs.admin_url, autocommit=True, connect_timeout=10) as admin:
        row = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
    return row is not None


def recreate_database(dbs: Databases, name: str) -> None:
    from django.db import connection

    if connection.settings_dict["NAME"] == name:
        connection.close()
    admin_execute(
        dbs, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"'
    )


def configure_django(dbs: Databases) -> None:
    """The environment as production reads it, set before django.setup(): PostgreSQL
    without the pool (one connection, kept), no Redis (in-memory channel layer and
    broker, and no worker: submitted runs stay created), DEBUG off."""
    var_dir = Path(tempfile.gettempdir()) / "awaken-bench-scale-var"
    os.environ.update(
        {
            "DATABASE_URL": dbs.url,
            "DB_POOL": "false",
            "DB_CONN_MAX_AGE": "86400",  # one connection for the whole run
            "DJANGO_SETTINGS_MODULE": "awaken_site.settings",
            "DEBUG": "false",
            "SECRET_KEY": "bench-only-" + uuid.uuid4().hex,
            "SECURE_SSL_REDIRECT": "false",
            "SESSION_COOKIE_SECURE": "false",
            "CSRF_COOKIE_SECURE": "false",
            "AWAKEN_EMBEDDED_WORKER": "false",
            "AWAKEN_VAR_DIR": str(var_dir),
            "LOG_LEVEL": "WARNING",
            "CELERY_LOG_LEVEL": "WARNING",
            # hundreds of API requests a minute from one token are the point here
            "API_THROTTLE_RATE": "1000000/min",
            # every dashboard request computes its figures: the cost, not the cache
            "AWAKEN_DASHBOARD_CACHE_SECONDS": "0",
        }
    )
    for name in ("REDIS_URL", "CELERY_BROKER_URL"):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.core.management import call_command

    # DEBUG off serves hashed static names from collectstatic's manifest, as production
    call_command("collectstatic", interactive=False, verbosity=0)


def use_database(name: str) -> None:
    """Point Django's one connection at another database of the same server. In-process
    caches keyed by row ids are cleared: both databases hold the same configuration rows
    with the same ids, but nothing may leak from one to the other."""
    from django.contrib.contenttypes.models import ContentType
    from django.db import connection

    from agents.services import agent_version_by_id
    from runs.api.tokens import token_cache

    if connection.settings_dict["NAME"] != name:
        connection.close()
        connection.settings_dict["NAME"] = name
        ContentType.objects.clear_cache()
        agent_version_by_id.cache_clear()
        token_cache.clear()
    connection.ensure_connection()


def migrate() -> None:
    from django.core.management import call_command

    started = time.monotonic()
    call_command("migrate", interactive=False, verbosity=0)
    print(f"  migrated in {time.monotonic() - started:.1f}s", flush=True)


def rebuild_stats() -> str:
    """`manage.py rebuild_stats` recomputes the dashboard's counters, each run's open
    ticket count and each ticket's agent; the load sets the latter two itself, so an
    older tree without the command still gets consistent rows (only no counters)."""
    from django.core.management import call_command, get_commands

    if "rebuild_stats" not in get_commands():
        print("  NOTE: manage.py rebuild_stats does not exist: no dashboard counters", flush=True)
        return "none (no rebuild_stats command)"
    started = time.monotonic()
    call_command("rebuild_stats", verbosity=0, stdout=open(os.devnull, "w"))  # noqa: SIM115
    took = time.monotonic() - started
    print(f"  manage.py rebuild_stats: {took:.1f}s", flush=True)
    return f"rebuild_stats ({took:.0f}s)"


def analyze() -> None:
    from django.db import connection

    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"  ANALYZE: {time.monotonic() - started:.1f}s", flush=True)


# --- loading --------------------------------------------------------------------------------


def prepare_big(dbs: Databases, scale: float, reuse: bool) -> scale_data.Loaded:
    print_header(f"1. Data set (scale {scale:g}) in {dbs.name}")
    loaded = None
    if reuse and database_exists(dbs, dbs.name):
        use_database(dbs.name)
        loaded = scale_data.read_meta()
        if loaded is None:
            print("  --reuse: no complete load found; loading again", flush=True)
        elif loaded.scale != scale:
            print(f"  --reuse: loaded at scale {loaded.scale:g}, not {scale:g}; loading again")
            loaded = None
    if loaded is not None:
        print(
            f"  --reuse: data loaded at {loaded.t0:%Y-%m-%d %H:%M} UTC "
            f"(load took {loaded.load_seconds:.0f}s){'; PRUNED since' if loaded.pruned else ''}",
            flush=True,
        )
        migrate()  # migrations that landed since
        if loaded.stats.startswith("none"):
            loaded.stats = rebuild_stats()
            scale_data.write_meta(loaded)
        return loaded
    started = time.monotonic()
    recreate_database(dbs, dbs.name)
    use_database(dbs.name)
    migrate()
    loaded = scale_data.load(scale, special_scale=1.0)
    use_database(dbs.name)
    loaded.stats = rebuild_stats()
    analyze()
    loaded.prepare_seconds = time.monotonic() - started
    loaded.counts = scale_data.table_counts()
    scale_data.write_meta(loaded)
    return loaded


def print_counts(loaded: scale_data.Loaded) -> None:
    counts = loaded.counts or scale_data.table_counts()
    print(
        "  rows: "
        + ", ".join(f"{table.removeprefix('runs_')} {n:,}" for table, n in counts.items()),
        flush=True,
    )


# --- clients --------------------------------------------------------------------------------


@dataclass
class Target:
    """One database and the two clients that read it (session, token)."""

    label: str
    db: str
    loaded: scale_data.Loaded | None
    ui: Any = None
    api: Any = None

    def connect(self) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client

        from runs.api.tokens import token_create
        from runs.services.audit import Actor

        use_database(self.db)
        user = get_user_model().objects.get(username=scale_data.ADMIN)
        self.ui = Client(HTTP_HOST=HOST)
        self.ui.force_login(user)
        _, raw = token_create(
            user=user,
            name=f"bench-scale-{uuid.uuid4().hex[:8]}",
            actor=Actor(label="bench", source="cli"),
        )
        self.api = Client(HTTP_HOST=HOST, HTTP_AUTHORIZATION=f"Bearer {raw}")

    @property
    def fixtures(self) -> dict[str, str]:
        return self.loaded.fixtures if self.loaded else {}


# --- what is measured ---------------------------------------------------------------------


@dataclass
class Spec:
    name: str
    api: bool
    path: Callable[[Target], str | None]  # None: not offered (see `missing`)
    deep: int = 0  # follow the next cursor this many pages first
    missing: str = ""


def with_query(path: str, params: dict[str, str]) -> str:
    return f"{path}?{urlencode(params)}" if params else path


UI_FILTERS = ("status", "waiting_reason", "agent", "thread", "range", "reason", "provider")
UI_FILTERS += ("endpoint", "q")
# API query parameter for each runs-list filter, first match in the serializer wins
API_NAMES = {
    "status": ("status",),
    "waiting_reason": ("waiting_reason",),
    "agent": ("agent_id", "agent"),
    "thread": ("thread_id", "thread"),
    "since": ("created_after", "since"),
    "until": ("created_before", "until"),
    "reason": ("reason", "status_reason"),
    "provider": ("provider", "provider_id"),
    "endpoint": ("endpoint", "endpoint_id"),
    "q": ("q",),
}


def filter_values(target: Target, kind: str, *, api: bool) -> dict[str, str]:
    """UI parameter -> value for one filter of the runs list."""
    fixtures = target.fixtures
    t0 = target.loaded.t0 if target.loaded else dt.datetime.now(dt.UTC)

    def when(moment: dt.datetime) -> str:
        return moment.isoformat() if api else moment.strftime("%Y-%m-%dT%H:%M")

    return {
        "status": {"status": "waiting"},
        "waiting_reason": {"waiting_reason": "tool_permission"},
        "agent": {"agent": scale_data.FILTER_AGENT},
        "thread": {"thread": fixtures.get("filter_thread", "")},
        "range": {
            "since": when(t0 - dt.timedelta(days=30)),
            "until": when(t0 - dt.timedelta(days=23)),
        },
        "reason": {"reason": "error"},
        "provider": {"provider": scale_data.PROVIDER_OPENAI},
        "endpoint": {"endpoint": scale_data.ENDPOINT},
        "q": {"q": scale_data.COMMON_WORD},
        "q_rare": {"q": scale_data.RARE_WORD},
        "q_none": {"q": scale_data.ABSENT_WORD},
    }[kind]


def api_run_params() -> dict[str, str]:
    """UI filter parameter -> the API's name for it, for those the API offers."""
    from runs.api.serializers import RunListQuerySerializer

    offered = set(RunListQuerySerializer().fields)
    names = {}
    for ui_name, candidates in API_NAMES.items():
        for candidate in candidates:
            if candidate in offered:
                names[ui_name] = candidate
                break
    return names


def build_specs() -> list[Spec]:
    api_names = api_run_params()

    def runs_spec(kinds: tuple[str, ...], api: bool) -> Spec:
        words = {"q_rare": scale_data.RARE_WORD, "q_none": scale_data.ABSENT_WORD}
        label = "+".join(f"q {words[k]}" if k in words else k for k in kinds)
        base = "/api/v1/runs" if api else "/runs/"
        missing = []
        if api:
            for kind in kinds:
                params = filter_values(Target("", "", None), kind, api=api)
                missing += [p for p in params if p not in api_names]

        def path(target: Target) -> str | None:
            params: dict[str, str] = {}
            for kind in kinds:
                params.update(filter_values(target, kind, api=api))
            if api:
                if any(name not in api_names for name in params):
                    return None
                params = {api_names[name]: value for name, value in params.items()}
            return with_query(base, params)

        return Spec(
            f"{base} [{label}]",
            api,
            path,
            missing=f"the API has no {', '.join(sorted(set(missing)))} filter" if missing else "",
        )

    def fixed(name: str, api: bool, path: str, deep: int = 0) -> Spec:
        return Spec(name, api, lambda _t: path, deep=deep)

    specs = [
        fixed("/ (dashboard)", False, "/"),
        fixed("/dashboard/stats (live partial)", False, "/dashboard/stats"),
        fixed("/runs/ [first page]", False, "/runs/"),
        fixed(f"/runs/ [{DEEP_PAGES} pages deep]", False, "/runs/", DEEP_PAGES),
    ]
    for api in (False, True):
        if api:
            specs += [
                fixed("/api/v1/runs [first page]", True, "/api/v1/runs"),
                fixed(f"/api/v1/runs [{DEEP_PAGES} pages deep]", True, "/api/v1/runs", DEEP_PAGES),
            ]
        specs += [runs_spec((kind,), api) for kind in (*UI_FILTERS, "q_rare", "q_none")]
        specs += [runs_spec(pair, api) for pair in combinations(UI_FILTERS, 2)]
        if not api:
            specs += [
                fixed("/inbox/", False, "/inbox/"),
                fixed("/audit/", False, "/audit/"),
                fixed(f"/audit/ [{DEEP_PAGES} pages deep]", False, "/audit/", DEEP_PAGES),
                fixed("/threads/", False, "/threads/"),
                fixed(f"/threads/ [{DEEP_PAGES} pages deep]", False, "/threads/", DEEP_PAGES),
                Spec(
                    "/runs/<id>/ [20,000 events]",
                    False,
                    lambda t: f"/runs/{t.fixtures['huge_run']}/",
                ),
                Spec(
                    "/threads/<id>/ [10,000 messages, 2,500 runs]",
                    False,
                    lambda t: f"/threads/{t.fixtures['big_thread']}/",
                ),
            ]
    specs += [
        fixed("/api/v1/tickets?status=pending", True, "/api/v1/tickets?status=pending"),
        fixed(
            f"/api/v1/tickets?status=pending [{TICKET_PAGES} pages deep]",
            True,
            "/api/v1/tickets?status=pending",
            TICKET_PAGES,
        ),
        fixed("/api/v1/audit", True, "/api/v1/audit"),
        fixed(f"/api/v1/audit [{DEEP_PAGES} pages deep]", True, "/api/v1/audit", DEEP_PAGES),
        fixed("/api/v1/threads", True, "/api/v1/threads"),
        fixed(f"/api/v1/threads [{DEEP_PAGES} pages deep]", True, "/api/v1/threads", DEEP_PAGES),
        Spec(
            "/api/v1/runs/<id> [20,000 events]",
            True,
            lambda t: f"/api/v1/runs/{t.fixtures['huge_run']}",
        ),
        Spec(
            "/api/v1/runs/<id>/events [20,000 events]",
            True,
            lambda t: f"/api/v1/runs/{t.fixtures['huge_run']}/events",
        ),
        Spec(
            "/api/v1/threads/<id> [2,500 runs]",
            True,
            lambda t: f"/api/v1/threads/{t.fixtures['big_thread']}",
        ),
        Spec(
            "/api/v1/threads/<id>/messages [10,000]",
            True,
            lambda t: f"/api/v1/threads/{t.fixtures['big_thread']}/messages",
        ),
    ]
    return specs


# --- requests -------------------------------------------------------------------------------


class RequestFailed(Exception):
    pass


NEXT_LINK = re.compile(r'href="(\?[^"]*\bcursor=[^"]*)"')


def get(client: Any, path: str) -> Any:
    try:
        response = client.get(path)
    except Exception as exc:  # the view raised: the test client re-raises it
        raise RequestFailed(f"{type(exc).__name__}: {exc}") from exc
    if response.status_code != 200:
        body = response.content[:300].decode(errors="replace")
        raise RequestFailed(f"HTTP {response.status_code} for {path}: {body}")
    return response


def next_page(path: str, response: Any, api: bool) -> str | None:
    """The next page's path as the page exposes it: `next_cursor` in the API's JSON, the
    "older" link (…cursor=…) on an HTML page."""
    if api:
        cursor = response.json().get("next_cursor")
        if not cursor:
            return None
        parts = urlsplit(path)
        query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "cursor"]
        return urlunsplit(parts._replace(query=urlencode([*query, ("cursor", cursor)])))
    links = NEXT_LINK.findall(response.content.decode(errors="replace"))
    if not links:
        return None
    return urlsplit(path).path + html.unescape(links[-1])


def resolve(spec: Spec, target: Target, *, partial: bool = False) -> tuple[str | None, str]:
    """The path to measure on `target` (following cursors for a deep page) and a note.
    `partial`: a list shorter than the depth gives its last page (the small reference
    database), else a list without a cursor on its first page is not measured."""
    path = spec.path(target)
    if path is None or not spec.deep:
        return path, ""
    client = target.api if spec.api else target.ui
    for page in range(spec.deep):
        following = next_page(path, get(client, path), spec.api)
        if following is None:
            if page == 0 and not partial:
                return None, "no next cursor on the first page"
            return path, f"list ends after {page + 1} pages"
        path = following
    return path, ""


def capture(client: Any, path: str) -> tuple[list[dict[str, Any]], float]:
    """The request's SQL statements and its time, the smaller of two captures: an API
    token is verified again every few seconds and its last use written once a minute,
    which adds statements to one request now and then; a statement per row does not
    come and go."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    best: tuple[list[dict[str, Any]], float] | None = None
    for _ in range(2):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            get(client, path)
            elapsed = (time.perf_counter() - started) * 1000
        queries = list(captured.captured_queries)
        if best is None or len(queries) < len(best[0]):
            best = (queries, elapsed)
    assert best is not None
    return best


@dataclass
class Result:
    name: str
    path: str = ""
    samples_ms: list[float] = field(default_factory=list)
    queries: int | None = None
    reference_queries: int | None = None
    error: str = ""
    skipped: str = ""
    note: str = ""
    slowest_sql: str = ""
    slowest_sql_ms: float = 0.0
    sql_ms: float = 0.0
    captured_ms: float = 0.0

    @property
    def p50(self) -> float:
        return percentile(self.samples_ms, 50)

    @property
    def p99(self) -> float:
        return percentile(self.samples_ms, 99)

    def failures(self) -> list[str]:
        failed = []
        if self.p50 >= GOAL_P50_MS:
            failed.append("p50")
        if self.p99 >= GOAL_P99_MS:
            failed.append("p99")
        if self.reference_queries is not None and self.queries != self.reference_queries:
            failed.append("queries")
        return failed

    @property
    def slow(self) -> bool:
        return bool(self.samples_ms) and (self.p50 >= GOAL_P50_MS or self.p99 >= GOAL_P99_MS)

    def value(self) -> str:
        if self.error:
            return "ERROR"
        if self.skipped:
            return "skipped"
        reference = "?" if self.reference_queries is None else str(self.reference_queries)
        return (
            f"p50 {self.p50:,.1f} / p99 {self.p99:,.1f} ms, "
            f"{self.queries} queries (ref {reference}), n={len(self.samples_ms)}"
        )

    def verdict(self) -> str:
        if self.error:
            return "ERROR"
        if self.skipped:
            return "n/a"
        failed = self.failures()
        return "met" if not failed else f"NOT met ({', '.join(failed)})"


def reference_count(spec: Spec, target: Target) -> tuple[int | None, str]:
    """The query count of the same request on the 1,000-run reference database."""
    try:
        path, _ = resolve(spec, target, partial=True)
        if path is None:
            return None, ""
        client = target.api if spec.api else target.ui
        get(client, path)
        queries, _ = capture(client, path)
        return len(queries), ""
    except RequestFailed as exc:
        return None, str(exc)


def measure(spec: Spec, target: Target, samples: int) -> Result:
    result = Result(spec.name)
    try:
        path, result.note = resolve(spec, target)
        if path is None:
            result.skipped = spec.missing or result.note or "not offered"
            return result
        result.path = path
        client = target.api if spec.api else target.ui
        get(client, path)  # warm: plans, caches, the session
        queries, result.captured_ms = capture(client, path)
        result.queries = len(queries)
        result.sql_ms = sum(float(q["time"]) for q in queries) * 1000
        if queries:
            slowest = max(queries, key=lambda q: float(q["time"]))
            result.slowest_sql = slowest["sql"]
            result.slowest_sql_ms = float(slowest["time"]) * 1000
        budget_end = time.monotonic() + SAMPLE_BUDGET_S
        for _ in range(samples):
            started = time.perf_counter()
            get(client, path)
            result.samples_ms.append((time.perf_counter() - started) * 1000)
            if len(result.samples_ms) >= MIN_SAMPLES and time.monotonic() > budget_end:
                break
    except RequestFailed as exc:
        result.error = str(exc)
    return result


def explain(sql: str) -> list[str]:
    from django.db import connection

    statement = sql.lstrip()
    if not re.match(r"(?is)^(select|with)\b", statement):
        return [f"(slowest statement is not a SELECT: {statement[:120]})"]
    try:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement)
            return [row[0] for row in cursor.fetchall()]
    except Exception as exc:
        return [f"(EXPLAIN failed: {exc})"]


def print_result(result: Result) -> None:
    if result.error:
        print(f"  {result.name:<58} ERROR: {result.error[:300]}", flush=True)
        return
    if result.skipped:
        print(f"  {result.name:<58} skipped: {result.skipped}", flush=True)
        return
    reference = "?" if result.reference_queries is None else result.reference_queries
    line = (
        f"  {result.name:<58} p50 {result.p50:8.1f} ms (<{GOAL_P50_MS:.0f})"
        f"  p99 {result.p99:8.1f} ms (<{GOAL_P99_MS:.0f})"
        f"  queries {result.queries} (ref {reference})  n={len(result.samples_ms)}"
        f"  {result.verdict()}"
    )
    print(line + (f"  [{result.note}]" if result.note else ""), flush=True)
    if result.slow:
        print(
            f"      captured request: {result.captured_ms:,.1f} ms, of which SQL "
            f"{result.sql_ms:,.1f} ms in {result.queries} queries; slowest statement "
            f"{result.slowest_sql_ms:,.1f} ms:",
            flush=True,
        )
        print("      " + result.slowest_sql[:600].replace("\n", " "), flush=True)
        for line in explain(result.slowest_sql)[:EXPLAIN_LINES]:
            print("      | " + line, flush=True)


def measure_pages(big: Target, reference: Target, samples: int) -> list[Result]:
    specs = build_specs()
    print_header("2. Pages and API lists (in-process, warm)")
    print(
        f"  {len(specs)} requests; each: 1 warm-up, 1 with its queries captured, then "
        f"{samples} timed (fewer, at least {MIN_SAMPLES}, for one that takes seconds). "
        f"'ref' = the same request's query count on the {REFERENCE_SCALE:g}-scale database.",
        flush=True,
    )
    use_database(reference.db)
    references: dict[str, tuple[int | None, str]] = {}
    started = time.monotonic()
    for spec in specs:
        references[spec.name] = reference_count(spec, reference)
    print(f"  reference query counts taken in {time.monotonic() - started:.0f}s", flush=True)
    use_database(big.db)
    results = []
    for spec in specs:
        result = measure(spec, big, samples)
        result.reference_queries, reference_error = references[spec.name]
        if reference_error and not result.error:
            result.note = (result.note + "; " if result.note else "") + (
                f"reference failed: {reference_error[:120]}"
            )
        print_result(result)
        results.append(result)
    return results


# --- POST /api/v1/runs: a million runs vs none ------------------------------------------------


@dataclass
class Row:
    """One line of the final table."""

    figure: str
    value: str
    goal: str
    verdict: str


def measure_posts(big: Target, empty: Target, posts: int) -> list[Row]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    print_header("3. POST /api/v1/runs: million-run database vs freshly migrated empty one")
    body = json.dumps(
        {
            "agent_id": scale_data.POST_AGENT,
            "messages": [{"role": "user", "content": "please write a note about the invoice"}],
        }
    )

    def post(target: Target) -> float:
        use_database(target.db)  # connected before the clock starts
        started = time.perf_counter()
        response = target.api.post("/api/v1/runs", body, content_type="application/json")
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 201:
            raise BenchError(
                f"POST /api/v1/runs on {target.db}: HTTP {response.status_code} "
                f"{response.content[:300]!r}"
            )
        return elapsed

    counts = {}
    for target in (big, empty):
        for _ in range(3):
            post(target)
        with CaptureQueriesContext(connection) as captured:
            post(target)
        counts[target.label] = len(captured.captured_queries)
    samples: dict[str, list[float]] = {big.label: [], empty.label: []}
    for index in range(posts):  # interleaved, the order swapped every round
        for target in (big, empty) if index % 2 == 0 else (empty, big):
            samples[target.label].append(post(target))
    big_p50 = percentile(samples[big.label], 50)
    empty_p50 = percentile(samples[empty.label], 50)
    ratio = big_p50 / empty_p50
    for target in (big, empty):
        values = samples[target.label]
        print(
            f"  {target.label:<22} p50 {percentile(values, 50):7.1f} ms  "
            f"p99 {percentile(values, 99):7.1f} ms  queries {counts[target.label]}  n={len(values)}",
            flush=True,
        )
    met = ratio <= POST_RATIO_GOAL
    print(f"  ratio of p50s {ratio:.2f} (goal <= {POST_RATIO_GOAL})", flush=True)
    rows = [
        Row(
            "POST /api/v1/runs p50: 1M runs / empty",
            f"{big_p50:.1f} / {empty_p50:.1f} ms = {ratio:.2f}",
            f"ratio <= {POST_RATIO_GOAL}",
            "met" if met else "NOT met",
        ),
        Row(
            "POST /api/v1/runs queries: 1M runs / empty",
            f"{counts[big.label]} / {counts[empty.label]}",
            "equal",
            "met" if counts[big.label] == counts[empty.label] else "NOT met",
        ),
    ]
    return rows


# --- retention while serving ------------------------------------------------------------------


@dataclass
class Loop:
    """A thread repeating one operation and recording (phase, ms) samples; `after` runs
    untimed after each one."""

    name: str
    operation: Callable[[], None]
    phase: list[str]
    setup: Callable[[], None] | None = None
    after: Callable[[str], None] | None = None
    samples: list[tuple[str, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    pause_s: float = 0.02

    def run(self) -> None:
        from django.db import connection

        try:
            if self.setup is not None:
                self.setup()
            while not self.stop.is_set():
                phase = self.phase[0]
                started = time.perf_counter()
                try:
                    self.operation()
                except Exception as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    if len(self.errors) > 20:
                        return
                self.samples.append((phase, (time.perf_counter() - started) * 1000))
                if self.after is not None:
                    try:
                        self.after(phase)
                    except Exception as exc:
                        self.errors.append(f"watcher: {type(exc).__name__}: {exc}")
                time.sleep(self.pause_s)
        finally:
            connection.close()

    def of(self, phase: str) -> list[float]:
        return [ms for p, ms in self.samples if p == phase]


@dataclass
class WaitWatcher:
    """What the writer's backend is waiting on while the prune runs, sampled from
    pg_stat_activity by the reader's connection between its (timed) requests: on CPU,
    a lock (and the statement holding it), WAL or disk I/O."""

    writer_pid: list[int] = field(default_factory=list)
    samples: dict[str, int] = field(default_factory=dict)
    blockers: dict[str, str] = field(default_factory=dict)

    def record_writer(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self.writer_pid.append(int(cursor.fetchone()[0]))

    def sample(self, phase: str) -> None:
        from django.db import connection

        if phase != "prune" or not self.writer_pid:
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT a.wait_event_type, a.wait_event, (SELECT left(b.query, 200) FROM"
                " pg_stat_activity b WHERE b.pid = ANY(pg_blocking_pids(a.pid)) LIMIT 1)"
                " FROM pg_stat_activity a WHERE a.pid = %s AND a.state = 'active'",
                [self.writer_pid[0]],
            )
            row = cursor.fetchone()
        if row is None:
            return
        kind = f"{row[0]}:{row[1]}" if row[0] else "on CPU"
        self.samples[kind] = self.samples.get(kind, 0) + 1
        if row[2]:
            self.blockers.setdefault(kind, " ".join(row[2].split()))

    def report(self) -> None:
        total = sum(self.samples.values())
        if not total:
            print("  writer's backend: never seen active in a sample during the prune", flush=True)
            return
        parts = ", ".join(
            f"{kind} {n}" for kind, n in sorted(self.samples.items(), key=lambda kv: -kv[1])
        )
        print(f"  writer's backend while active during the prune ({total} samples): {parts}")
        for kind, query in self.blockers.items():
            print(f"    {kind} blocked by: {query}", flush=True)


def measure_retention(
    big: Target, dbs: Databases, scale: float, batch_size: int | None
) -> list[Row]:
    from django.contrib.auth import get_user_model
    from django.core.management import get_commands
    from django.db import connection, transaction
    from django.db.models.functions import Now
    from django.test import Client

    from runs.models import Run, Thread

    print_header("4. Retention while serving: prune_runs under reads and writes")
    if "prune_runs" not in get_commands():
        note = "skipped: manage.py prune_runs does not exist (yet)"
        print(f"  {note}", flush=True)
        return [Row("retention while serving", "skipped", "", "n/a (no prune_runs)")]
    if big.loaded and big.loaded.pruned:
        note = "skipped: this database was pruned by an earlier run; run without --reuse"
        print(f"  {note}", flush=True)
        return [Row("retention while serving", "skipped", "", "n/a (already pruned)")]
    use_database(big.db)
    wanted = max(1, round(RETENTION_RUNS * scale))
    # the prune goes by finished_at: the horizon that leaves ~`wanted` finished runs older
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT finished_at FROM runs_run WHERE status = 'done' AND finished_at IS NOT NULL"
            " ORDER BY finished_at OFFSET %s LIMIT 1",
            [wanted],
        )
        row = cursor.fetchone()
    now = dt.datetime.now(dt.UTC)
    oldest = row[0] if row else now
    days = max(1, round((now - oldest).total_seconds() / 86400))
    older = Run.objects.filter(
        status=Run.Status.DONE, finished_at__lt=now - dt.timedelta(days=days)
    ).count()
    print(
        f"  prune_runs --older-than-days {days} --batch-size {batch_size or 'default'}: "
        f"{older:,} runs finished before that (~{wanted:,} wanted)",
        flush=True,
    )
    before = scale_data.table_counts()
    targets = list(
        Run.objects.filter(status=Run.Status.DONE)
        .order_by("-created_at")
        .values_list("pk", "thread_id")[:100]
    )
    fixtures = big.fixtures
    for key in ("huge_run",):
        if key in fixtures:
            targets += list(Run.objects.filter(pk=fixtures[key]).values_list("pk", "thread_id"))
    targets += list(
        Run.objects.filter(thread_id=fixtures.get("big_thread"))
        .order_by("-created_at")
        .values_list("pk", "thread_id")[:1]
    )
    reader = Client(HTTP_HOST=HOST)
    reader.force_login(get_user_model().objects.get(username=scale_data.ADMIN))
    connection.close()  # this thread stays off the database while the phase runs

    def read() -> None:
        get(reader, "/runs/")

    position = [0]

    def write() -> None:
        """A worker's step in miniature: lock the run, touch it and its thread."""
        run_id, thread_id = targets[position[0] % len(targets)]
        position[0] += 1
        with transaction.atomic():
            list(Run.objects.select_for_update().filter(pk=run_id).values_list("pk"))
            Run.objects.filter(pk=run_id).update(updated_at=Now())
            Thread.objects.filter(pk=thread_id).update(updated_at=Now())

    phase = ["baseline"]
    watcher = WaitWatcher()
    loops = [
        Loop("runs list /runs/", read, phase, after=watcher.sample),
        Loop("run write (lock+update)", write, phase, setup=watcher.record_writer),
    ]
    threads = [threading.Thread(target=loop.run, name=loop.name, daemon=True) for loop in loops]
    for thread in threads:
        thread.start()
    time.sleep(RETENTION_BASELINE_S)
    log_path = Path(tempfile.mkstemp(prefix="awaken-bench-scale-prune-", suffix=".log")[1])
    command = [
        sys.executable,
        str(ROOT / "manage.py"),
        "prune_runs",
        "--older-than-days",
        str(days),
        *(["--batch-size", str(batch_size)] if batch_size else []),
    ]
    phase[0] = "prune"
    started = time.monotonic()
    with open(log_path, "w") as log:
        child = subprocess.Popen(
            command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = child.wait(timeout=PRUNE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGTERM)  # its own process group: only our child
            code = child.wait(timeout=30)
            print(f"  prune_runs did not finish in {PRUNE_TIMEOUT_S}s: stopped", flush=True)
    took = time.monotonic() - started
    phase[0] = "after"
    time.sleep(2)
    for loop in loops:
        loop.stop.set()
    for thread in threads:
        thread.join(timeout=60)
    output = log_path.read_text(errors="replace").strip().splitlines()
    print(f"  prune_runs exited {code} after {took:.1f}s; its last lines:", flush=True)
    for line in output[-15:]:
        print("    | " + line, flush=True)
    use_database(big.db)
    after = scale_data.table_counts()
    changes = []
    for table, count in before.items():
        if count >= 0 and after.get(table, -1) >= 0:
            delta = count - after[table]
            sign = "" if delta == 0 else "+" if delta < 0 else "-"
            changes.append(f"{table.removeprefix('runs_')} {sign}{abs(delta):,}")
    print("  rows: " + ", ".join(changes), flush=True)
    watcher.report()
    if big.loaded is not None:
        big.loaded.pruned = True
        big.loaded.counts = after
        scale_data.write_meta(big.loaded)
    rows = [
        Row(
            "prune_runs",
            f"exit {code}, {took:.0f}s, {before['runs_run'] - after['runs_run']:,} runs removed",
            f"~{wanted:,} runs removed, exit 0",
            "met" if code == 0 and before["runs_run"] > after["runs_run"] else "NOT met",
        )
    ]
    for loop in loops:
        baseline, during = loop.of("baseline"), loop.of("prune")
        if loop.errors:
            print(f"  {loop.name}: {len(loop.errors)} errors, first: {loop.errors[0]}", flush=True)
        if not baseline or not during:
            rows.append(Row(f"retention: {loop.name}", "no samples", "", "ERROR"))
            continue
        base_p50 = percentile(baseline, 50)
        limit = base_p50 + RETENTION_BLOCK_MS
        worst = max(during)
        over = sum(1 for ms in during if ms > limit)
        print(
            f"  {loop.name:<26} baseline p50 {base_p50:7.1f} p99 {percentile(baseline, 99):7.1f} "
            f"max {max(baseline):7.1f} ms (n={len(baseline)}) | during prune p50 "
            f"{percentile(during, 50):7.1f} p99 {percentile(during, 99):7.1f} max {worst:7.1f} ms "
            f"(n={len(during)})",
            flush=True,
        )
        rows.append(
            Row(
                f"retention: {loop.name} max during prune",
                f"{worst:,.1f} ms (p99 {percentile(during, 99):,.1f}; {over} of "
                f"{len(during)} over the limit)",
                f"<= baseline p50 + {RETENTION_BLOCK_MS:.0f} = {limit:,.0f} ms",
                "met" if worst <= limit and not loop.errors else "NOT met",
            )
        )
    return rows


# --- the websocket fan-out benchmark ----------------------------------------------------------


def run_ws_fanout(original_env: dict[str, str]) -> list[Row]:
    from django.db import connection

    print_header("5. Websocket fan-out (bench/ws_fanout.py)")
    if not (ROOT / "bench" / "ws_fanout.py").exists():
        print("  NOTE: bench/ws_fanout.py does not exist (yet): not run", flush=True)
        return [Row("websocket fan-out (bench/ws_fanout.py)", "not run", "", "n/a (missing)")]
    connection.close()
    python = ROOT / ".venv" / "bin" / "python"
    command = [str(python if python.exists() else sys.executable), "-m", "bench.ws_fanout"]
    print(f"  $ {' '.join(command)}", flush=True)
    started = time.monotonic()
    child = subprocess.Popen(
        command,
        cwd=ROOT,
        env=original_env,  # it sets up its own environment, as when run alone
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = threading.Timer(WS_FANOUT_TIMEOUT_S, lambda: os.killpg(child.pid, signal.SIGTERM))
    deadline.start()
    try:
        assert child.stdout is not None
        for line in child.stdout:
            print("  | " + line.rstrip("\n"), flush=True)
        code = child.wait()
    finally:
        deadline.cancel()
    took = time.monotonic() - started
    print(f"  bench.ws_fanout exited {code} after {took:.0f}s", flush=True)
    return [
        Row(
            "websocket fan-out (bench/ws_fanout.py)",
            f"exit {code} after {took:.0f}s (figures above)",
            "its own goals",
            "ran" if code == 0 else "ERROR",
        )
    ]


# --- summary --------------------------------------------------------------------------------


def print_table(rows: list[Row]) -> None:
    print_header("Summary")
    headers = Row("figure", "value", "goal", "met")
    table = [headers, *rows]
    widths = [
        max(len(getattr(row, name)) for row in table)
        for name in ("figure", "value", "goal", "verdict")
    ]
    for index, row in enumerate(table):
        cells = (row.figure, row.value, row.goal, row.verdict)
        print("  " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))
        if index == 0:
            print("  " + "-+-".join("-" * w for w in widths))
    met = sum(1 for row in rows if row.verdict == "met")
    not_met = sum(1 for row in rows if row.verdict.startswith("NOT"))
    errors = sum(1 for row in rows if row.verdict == "ERROR")
    print(f"\n  {met} met, {not_met} NOT met, {errors} errors, {len(rows)} figures", flush=True)


def page_rows(results: list[Result]) -> list[Row]:
    """One row per measured request; the ones not offered (an API filter that does not
    exist, a list without cursor) collapse into one row per reason."""
    goal = f"p50<{GOAL_P50_MS:.0f}, p99<{GOAL_P99_MS:.0f} ms, queries = ref"
    rows = []
    skipped: dict[str, list[str]] = {}
    for result in results:
        if result.skipped:
            skipped.setdefault(result.skipped, []).append(result.name)
            continue
        value = result.value()
        if result.error:
            value = "ERROR: " + result.error[:60]
        rows.append(Row(result.name, value, goal, result.verdict()))
    for reason, names in skipped.items():
        figure = names[0] if len(names) == 1 else f"{len(names)} requests, e.g. {names[0]}"
        rows.append(Row(figure, f"not measured: {reason}", goal, "n/a"))
    return rows


def print_machine(dbs: Databases) -> None:
    import psycopg

    cpu = cpu_model()
    with psycopg.connect(dbs.admin_url, autocommit=True, connect_timeout=10) as admin:
        server = admin.execute("SHOW server_version").fetchone()[0]
    import django

    print_header("Machine")
    print(f"  CPU: {cpu}  nproc: {nproc()}  load average: {fmt_load(os.getloadavg())}")
    print(f"  PostgreSQL {server}, Django {django.get_version()}, Python {sys.version.split()[0]}")
    print(f"  databases: {dbs.name} (measured), {dbs.empty} (empty, then the reference)")
    free = os.statvfs("/")
    print(f"  free disk on /: {free.f_bavail * free.f_frsize / 1e9:.0f} GB", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the counts (1.0)")
    parser.add_argument(
        "--reuse", action="store_true", help="keep the database when the same scale is loaded"
    )
    parser.add_argument("--samples", type=int, default=SAMPLES, help="timed requests each")
    parser.add_argument("--posts", type=int, default=POSTS, help="POSTs per database")
    parser.add_argument(
        "--prune-batch-size", type=int, default=None, help="default: the command's own"
    )
    parser.add_argument("--skip-retention", action="store_true")
    parser.add_argument("--skip-ws", action="store_true", help="do not run bench/ws_fanout.py")
    args = parser.parse_args()
    started = time.monotonic()
    load_at_start = os.getloadavg()
    original_env = dict(os.environ)
    try:
        dbs = database_names()
        configure_django(dbs)
        print_machine(dbs)
        loaded = prepare_big(dbs, args.scale, args.reuse)
        print_counts(loaded)
        print(
            f"  loaded in {loaded.prepare_seconds:.0f}s (SQL load {loaded.load_seconds:.0f}s, "
            f"counters: {loaded.stats})",
            flush=True,
        )

        print_header(f"Empty database {dbs.empty}")
        recreate_database(dbs, dbs.empty)
        use_database(dbs.empty)
        migrate()
        scale_data.ensure_config()  # the same configuration rows, with the same ids
        big = Target(
            "1M-run database" if args.scale == 1 else f"scale-{args.scale:g} db", dbs.name, loaded
        )
        empty = Target("empty database", dbs.empty, None)
        big.connect()
        empty.connect()
        rows = measure_posts(big, empty, args.posts)

        print_header(f"Reference database: {dbs.empty} loaded at scale {REFERENCE_SCALE:g}")
        use_database(dbs.empty)
        empty.loaded = scale_data.load(REFERENCE_SCALE, special_scale=REFERENCE_SCALE)
        use_database(dbs.empty)
        empty.loaded.stats = rebuild_stats()
        analyze()
        empty.connect()  # a fresh session after the load

        results = measure_pages(big, empty, args.samples)
        rows = page_rows(results) + rows
        if args.skip_retention:
            rows.append(Row("retention while serving", "skipped (--skip-retention)", "", "n/a"))
        else:
            rows += measure_retention(big, dbs, args.scale, args.prune_batch_size)
        if args.skip_ws:
            rows.append(Row("websocket fan-out", "skipped (--skip-ws)", "", "n/a"))
        else:
            rows += run_ws_fanout(original_env)
        print_table(rows)
        print(
            f"\n  data set: scale {args.scale:g}, loaded {loaded.t0:%Y-%m-%d %H:%M} UTC in "
            f"{loaded.prepare_seconds:.0f}s (SQL load {loaded.load_seconds:.0f}s); "
            f"load average at start {fmt_load(load_at_start)}, at end {fmt_load(os.getloadavg())}; "
            f"wall time {time.monotonic() - started:.0f}s",
            flush=True,
        )
        return 1 if any(row.verdict == "ERROR" for row in rows) else 0
    except BenchError as exc:
        print(f"\nbenchmark failed: {exc}", file=sys.stderr, flush=True)
        return 1
    except scale_data.LoadError as exc:
        print(f"\nload failed: {exc}", file=sys.stderr, flush=True)
        return 1
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        try:
            from django.db import connections

            connections.close_all()
        except Exception:
            pass


if __name__ == "__main__":
    sys.exit(main())
