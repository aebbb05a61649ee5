"""The scale load, step by step: session settings, secondary indexes off, the plan, every
table derived from it, indexes back, `VACUUM (ANALYZE)`.

Only Django's connection is used (one connection), imported inside the functions: it
needs django.setup(), which runs after the environment is set (see bench/common.py)."""

from __future__ import annotations

import datetime as dt
import time

from bench.scale_data.approvals import (
    insert_audit,
    insert_decisions,
    insert_tickets,
    insert_tool_calls,
)
from bench.scale_data.config_rows import ensure_config
from bench.scale_data.context import LoadContext
from bench.scale_data.conversations import (
    insert_events,
    insert_messages,
    insert_runs,
    insert_threads,
)
from bench.scale_data.dataset import LOADED_TABLES, Loaded, LoadError, Sizes
from bench.scale_data.plan import (
    plan_agents,
    plan_run_outcomes,
    plan_runs,
    plan_threads,
    prepare_session,
)
from bench.scale_data.sql import (
    DroppedDefinitions,
    drop_secondary_indexes,
    execute,
    restore_indexes,
    scalar,
)


def load(scale: float, special_scale: float, log_prefix: str = "  ") -> Loaded:
    """Bulk-load the data set into the (migrated, otherwise empty) database Django is
    connected to. Returns what the measurements need (times, ids)."""
    from django.db import connection, transaction

    sizes = Sizes.for_scale(scale, special_scale)
    config = ensure_config()
    started_all = time.monotonic()
    t0 = dt.datetime.now(dt.UTC).replace(microsecond=0)
    ctx = LoadContext(sizes, t0, config, log_prefix)
    if transaction.get_autocommit() is False:
        raise LoadError("the load runs in autocommit mode")
    print(
        f"{log_prefix}sizes: {sizes.threads:,} threads, {sizes.runs:,} regular runs, "
        f"big thread {sizes.big_thread_runs:,} runs, huge run {sizes.huge_run_events:,} events",
        flush=True,
    )
    prepare_session()
    dropped = drop_indexes(ctx)
    for plan in (plan_agents, plan_threads, plan_runs, plan_run_outcomes):
        plan(ctx)
    for insert in (insert_threads, insert_runs, insert_messages, insert_events):
        insert(ctx)
    for insert in (insert_tool_calls, insert_tickets, insert_decisions, insert_audit):
        insert(ctx)
    execute("RESET session_replication_role")
    restore_indexes(dropped, ctx.log)
    fixtures = read_fixtures(ctx)
    finish(ctx)
    connection.close()  # the temporary functions go with the session
    return Loaded(
        t0=t0, scale=scale, load_seconds=time.monotonic() - started_all, fixtures=fixtures
    )


def drop_indexes(ctx: LoadContext) -> DroppedDefinitions:
    started = time.monotonic()
    dropped = drop_secondary_indexes()
    ctx.log(
        f"dropped {len(dropped.indexes)} indexes and {len(dropped.constraints)} unique "
        "constraints for the load",
        started,
    )
    return dropped


def read_fixtures(ctx: LoadContext) -> dict[str, str]:
    """The ids of the special objects the measurements request, from the plan."""
    nt, big_t, huge_t = ctx.sizes.threads, ctx.big_thread, ctx.huge_thread
    return {
        "huge_run": str(scalar("SELECT id FROM bench_runs WHERE kind = 'huge'")),
        "huge_thread": str(scalar(f"SELECT id FROM bench_threads WHERE t = {huge_t}")),
        "big_thread": str(scalar(f"SELECT id FROM bench_threads WHERE t = {big_t}")),
        "filter_thread": str(scalar(f"SELECT id FROM bench_threads WHERE t = {nt // 2}")),
        "small_run": str(scalar("SELECT id FROM bench_runs WHERE kind = 'huge_prev' AND k = 0")),
    }


def finish(ctx: LoadContext) -> None:
    """The plan tables dropped, the loaded tables vacuumed and analyzed, the session's
    settings reset."""
    for table in ("bench_runs", "bench_threads", "bench_agents"):
        execute(f"DROP TABLE {table}")
    for table in LOADED_TABLES:
        started = time.monotonic()
        execute(f"VACUUM (ANALYZE) {table}")
        ctx.log(f"vacuum analyze {table}", started)
    execute("RESET maintenance_work_mem")
    execute("RESET synchronous_commit")
