"""The scale benchmark's databases and Django: the measured database and its `_empty`
twin (names, drop and recreate), the environment set before django.setup(), switching
Django's one connection between the two, and preparing the data set (loaded, or reused
with --reuse).

Django and the application are imported inside the functions: they need django.setup(),
which configure_django() runs after setting the environment."""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

from bench import scale_data
from bench.common import BenchError, cpu_model, fmt_load, nproc, print_header

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/awaken_bench_scale"
REFERENCE_SCALE = 0.001  # the `_empty` database's load, the reference of the query counts


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
    try:
        admin = psycopg.connect(dbs.admin_url, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise BenchError(f"cannot reach PostgreSQL at {dbs.admin_url}: {exc}") from exc
    with admin:
        for statement in statements:
            admin.execute(statement)


def database_exists(dbs: Databases, name: str) -> bool:
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

    from agents.selectors import agent_version_by_id
    from common.api.tokens import token_cache

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


def group_failures() -> None:
    """`manage.py group_failures` groups the loaded failed runs (the load writes runs, not
    their failure groups); skipped on an older tree without the command."""
    from django.core.management import call_command, get_commands

    if "group_failures" not in get_commands():
        print("  NOTE: manage.py group_failures does not exist: no failure groups", flush=True)
        return
    started = time.monotonic()
    call_command("group_failures", verbosity=0, stdout=open(os.devnull, "w"))  # noqa: SIM115
    print(f"  manage.py group_failures: {time.monotonic() - started:.1f}s", flush=True)


def analyze(vacuum: bool = False) -> None:
    """ANALYZE, or VACUUM (ANALYZE) as autovacuum would after the rows settle: the pages
    count through index-only scans (the open runs, the pending tickets), which read the
    table for every row a VACUUM has not marked visible since it changed (`rebuild_stats`
    rewrites every waiting run's ticket count after the load's own VACUUM; a server with
    autovacuum off never marks them)."""
    from django.db import connection

    statement = "VACUUM (ANALYZE)" if vacuum else "ANALYZE"
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(statement)
    print(f"  {statement}: {time.monotonic() - started:.1f}s", flush=True)


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
        group_failures()  # those loaded before the command existed (none again after)
        analyze(vacuum=True)  # what earlier runs wrote (and a load older than this VACUUM)
        return loaded
    started = time.monotonic()
    recreate_database(dbs, dbs.name)
    use_database(dbs.name)
    migrate()
    loaded = scale_data.load(scale, special_scale=1.0)
    use_database(dbs.name)
    loaded.stats = rebuild_stats()
    group_failures()
    analyze(vacuum=True)
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


def prepare_empty(dbs: Databases) -> None:
    """The `_empty` twin, freshly migrated, with the same configuration rows (same ids)."""
    print_header(f"Empty database {dbs.empty}")
    recreate_database(dbs, dbs.empty)
    use_database(dbs.empty)
    migrate()
    scale_data.ensure_config()  # the same configuration rows, with the same ids


def print_machine(dbs: Databases) -> None:
    import django

    cpu = cpu_model()
    with psycopg.connect(dbs.admin_url, autocommit=True, connect_timeout=10) as admin:
        server = admin.execute("SHOW server_version").fetchone()[0]
    print_header("Machine")
    print(f"  CPU: {cpu}  nproc: {nproc()}  load average: {fmt_load(os.getloadavg())}")
    print(f"  PostgreSQL {server}, Django {django.get_version()}, Python {sys.version.split()[0]}")
    print(f"  databases: {dbs.name} (measured), {dbs.empty} (empty, then the reference)")
    free = os.statvfs("/")
    print(f"  free disk on /: {free.f_bavail * free.f_frsize / 1e9:.0f} GB", flush=True)
