"""The dashboard's counters (`HourlyStat`), kept in the transaction of the change they count.

A run counts once, in the hour it was created, under its outcome: `run:open` until it
finishes, then `run:completed`, `run:failed`, `run:cancelled` or `run:blocked`. A ticket
counts once, in the hour it closed, under the bucket of how long it waited. Each change
is one upsert (`count = count + delta`), written last in its transaction so the counter
row is locked only until the commit; rows are written in key order, so two transactions
never wait on each other's rows in opposite orders.

The usage counters (`HourlyUsage`: runs, tokens, cost and durations per agent and model,
tool calls and their latencies per tool) count a run in the hour it finished and a tool
call in the hour its checkpoint recorded it finished: one more upsert, always after the
`HourlyStat` one in the same transaction, its rows in key order too (docs/stats.md).

`rebuild()` recomputes everything from the rows (after a bulk load or a restore).
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, OuterRef
from django.db.models.functions import TruncHour

from agents.pricing import cost_usd
from agents.selectors import agent_version_by_id
from common.writes import WriteBatch
from runs.models import HourlyStat, HourlyUsage, Run, Ticket, ToolCall

OUTCOMES = ["completed", "failed", "cancelled", "blocked", "open"]

# How long a ticket waited for its decision, as the dashboard groups it.
WAIT_BUCKETS: list[tuple[str, int | None]] = [
    ("< 1 min", 60),
    ("1–5 min", 300),
    ("5–30 min", 1800),
    ("30 min–2 h", 7200),
    ("> 2 h", None),
]

Key = tuple[dt.datetime, int, str]  # hour, agent id, metric

# The hour under which the `run:` counters also keep their all-time totals.
ALL_TIME = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def outcome(status: str, reason: str) -> str:
    if status != Run.Status.DONE:
        return "open"
    if reason in ("natural", "behavior_requested"):
        return "completed"
    if reason == "cancelled":
        return "cancelled"
    if reason.startswith("blocked:"):
        return "blocked"
    return "failed"


def wait_bucket(seconds: float) -> int:
    for index, (_, limit) in enumerate(WAIT_BUCKETS):
        if limit is None or seconds < limit:
            return index
    return len(WAIT_BUCKETS) - 1


def hour_of(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)


def apply(deltas: Counter[Key], batch: WriteBatch | None = None) -> None:
    """Add each delta to its counter (and a run's to its all-time total), in one statement
    (queued in `batch` if given)."""
    merged = Counter(deltas)
    for (_, agent_id, metric), delta in deltas.items():
        if metric.startswith("run:"):
            merged[(ALL_TIME, agent_id, metric)] += delta
    rows = sorted((key, delta) for key, delta in merged.items() if delta)
    if not rows:
        return
    table = connection.ops.quote_name(HourlyStat._meta.db_table)
    values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
    params: list[Any] = []
    for (hour, agent_id, metric), delta in rows:
        params += [connection.ops.adapt_datetimefield_value(hour), agent_id, metric, delta]
    sql = (
        f"INSERT INTO {table} (hour, agent_id, metric, count) VALUES {values} "
        f"ON CONFLICT (hour, agent_id, metric) "
        f"DO UPDATE SET count = {table}.count + EXCLUDED.count"
    )
    _write(sql, params, batch)


def _write(sql: str, params: list[Any], batch: WriteBatch | None) -> None:
    if batch is not None:
        batch.add(sql, params)
        return
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def run_created(run: Run, batch: WriteBatch | None = None) -> None:
    apply(Counter({(hour_of(run.created_at), run.agent_id, "run:open"): 1}), batch)


def run_finished(
    run: Run, tools: Counter[UsageKey] | None = None, batch: WriteBatch | None = None
) -> None:
    """The run just became done (the caller's guarded update says it was not before);
    `tools`: usage deltas of tool calls finished in the same transaction, written in the
    same statement; `batch`: both statements queued there."""
    hour = hour_of(run.created_at)
    apply(
        Counter(
            {
                (hour, run.agent_id, "run:open"): -1,
                (hour, run.agent_id, f"run:{outcome(run.status, run.status_reason)}"): 1,
            }
        ),
        batch,
    )
    usage = run_usage(run, model_of(run.agent_version_id))
    usage.update(tools or Counter())
    apply_usage(usage, batch)


# --- usage: runs, tokens, cost, durations; tool calls and latencies -----------------------

UsageKey = tuple[dt.datetime, int, str, str, str]  # hour, agent id, kind, name, metric

# Durations by log-spaced bucket: bucket 0 holds those under DURATION_FLOOR seconds,
# bucket k >= 1 those in [FLOOR * 2**((k-1)/4), FLOOR * 2**(k/4)), the last bucket
# everything longer (about 27 days and more). A percentile is reported as the geometric
# middle of its bucket: within 2**(1/8) - 1 (about 9 %) of the exact value.
DURATION_FLOOR = 0.1
BUCKETS_PER_DOUBLING = 4
DURATION_BUCKETS = 100
NANO = Decimal(1_000_000_000)


def duration_bucket(seconds: float) -> int:
    if seconds < DURATION_FLOOR:
        return 0
    index = math.floor(BUCKETS_PER_DOUBLING * math.log2(seconds / DURATION_FLOOR)) + 1
    return min(index, DURATION_BUCKETS - 1)


def bucket_seconds(index: int) -> float:
    """What a percentile falling in bucket `index` reports: its geometric middle (half
    the floor for bucket 0, the lower edge for the open-ended last one)."""
    if index <= 0:
        return DURATION_FLOOR / 2
    if index >= DURATION_BUCKETS - 1:
        return DURATION_FLOOR * 2 ** ((DURATION_BUCKETS - 2) / BUCKETS_PER_DOUBLING)
    return DURATION_FLOOR * 2 ** ((2 * index - 1) / (2 * BUCKETS_PER_DOUBLING))


def percentile(buckets: dict[int, int], fraction: float) -> float | None:
    """The nearest-rank percentile of the durations counted in `buckets` (bucket index:
    count), as its bucket reports it; None without any."""
    total = sum(buckets.values())
    if total <= 0:
        return None
    rank = max(math.ceil(fraction * total), 1)
    seen = 0
    for index in sorted(buckets):
        seen += buckets[index]
        if seen >= rank:
            return round(bucket_seconds(index), 3)
    return round(bucket_seconds(max(buckets)), 3)


def model_of(version_id: int | None) -> str:
    """The model slug a pinned agent version names ('' for none: a remote agent)."""
    if not version_id:
        return ""
    model = (agent_version_by_id(version_id).spec or {}).get("model_id")
    return str(model)[:200] if isinstance(model, str) else ""


def cost_nano_usd(
    input_tokens: int, output_tokens: int, input_price: Any, output_price: Any
) -> int:
    cost = cost_usd(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        input_price=input_price,
        output_price=output_price,
    )
    return int((cost * NANO).to_integral_value(ROUND_HALF_UP)) if cost is not None else 0


def run_usage(run: Run, model: str) -> Counter[UsageKey]:
    """A finished run's usage counters, under its agent and under its model."""
    assert run.finished_at is not None
    hour = hour_of(run.finished_at)
    seconds = (run.finished_at - (run.started_at or run.created_at)).total_seconds()
    figures = {
        "runs": 1,
        "succeeded": int(outcome(run.status, run.status_reason) == "completed"),
        "in_tokens": run.input_tokens,
        "out_tokens": run.output_tokens,
        "cost_nusd": cost_nano_usd(
            run.input_tokens,
            run.output_tokens,
            run.input_price_per_million_usd,
            run.output_price_per_million_usd,
        ),
        f"dur:{duration_bucket(max(seconds, 0.0))}": 1,
    }
    deltas: Counter[UsageKey] = Counter()
    for kind, name in ((HourlyUsage.Kind.AGENT, ""), (HourlyUsage.Kind.MODEL, model)):
        for metric, value in figures.items():
            deltas[(hour, run.agent_id, str(kind), name, metric)] += value
    return deltas


def tool_usage(
    moment: dt.datetime, agent_id: int, tool: str, failed: bool, duration_ms: int | None
) -> Counter[UsageKey]:
    """A finished tool call's counters; its latency only when it was timed."""
    hour, name = hour_of(moment), tool[:200]
    deltas: Counter[UsageKey] = Counter()
    for metric, value in (("calls", 1), ("failed", int(failed))):
        deltas[(hour, agent_id, HourlyUsage.Kind.TOOL.value, name, metric)] += value
    if duration_ms is not None:
        bucket = duration_bucket(duration_ms / 1000)
        deltas[(hour, agent_id, HourlyUsage.Kind.TOOL.value, name, f"dur:{bucket}")] += 1
    return deltas


def apply_usage(deltas: Counter[UsageKey], batch: WriteBatch | None = None) -> None:
    """Add each delta to its usage counter in one statement, rows in key order (queued in
    `batch` if given)."""
    rows = sorted((key, delta) for key, delta in deltas.items() if delta)
    if not rows:
        return
    table = connection.ops.quote_name(HourlyUsage._meta.db_table)
    values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(rows))
    params: list[Any] = []
    for (hour, agent_id, kind, name, metric), delta in rows:
        params += [
            connection.ops.adapt_datetimefield_value(hour),
            agent_id,
            kind,
            name,
            metric,
            delta,
        ]
    sql = (
        f"INSERT INTO {table} (hour, agent_id, kind, name, metric, count) VALUES {values} "
        f"ON CONFLICT (hour, agent_id, kind, name, metric) "
        f"DO UPDATE SET count = {table}.count + EXCLUDED.count"
    )
    _write(sql, params, batch)


def usage_counts() -> Counter[UsageKey]:
    """The usage counters recomputed from the rows: finished runs and finished tool calls
    (a pass over each; maintenance, not requests)."""
    counts: Counter[UsageKey] = Counter()
    fields = (
        "agent_id",
        "agent_version_id",
        "status",
        "status_reason",
        "created_at",
        "started_at",
        "finished_at",
        "input_tokens",
        "output_tokens",
        "input_price_per_million_usd",
        "output_price_per_million_usd",
    )
    done = Run.objects.filter(status=Run.Status.DONE, finished_at__isnull=False)
    models: dict[int, str] = {}
    for values in done.values_list(*fields).iterator():
        run = Run(**dict(zip(fields, values, strict=True)))
        if run.agent_version_id not in models:
            models[run.agent_version_id] = model_of(run.agent_version_id)
        counts.update(run_usage(run, models[run.agent_version_id]))
    calls = ToolCall.objects.filter(
        status__in=[ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED]
    ).values_list("updated_at", "run__agent_id", "tool_name", "status", "duration_ms")
    for moment, agent_id, tool, status, duration_ms in calls.iterator():
        counts.update(tool_usage(moment, agent_id, tool, status == "failed", duration_ms))
    return counts


def tickets_closed(tickets: Iterable[tuple[dt.datetime, int | None]], now: dt.datetime) -> None:
    """Tickets (created_at, agent id) that closed at `now`."""
    deltas: Counter[Key] = Counter()
    for created_at, agent_id in tickets:
        if agent_id is not None:
            bucket = wait_bucket((now - created_at).total_seconds())
            deltas[(hour_of(now), agent_id, f"wait:{bucket}")] += 1
    apply(deltas)


def removal(run_ids: list[Any]) -> Counter[Key]:
    """What deleting these runs takes off the counters: read while the rows exist, and
    `apply` it last in the deleting transaction (the counter rows stay locked from the
    upsert to the commit, and workers finishing runs update them too)."""
    deltas: Counter[Key] = Counter()
    rows = Run.objects.filter(pk__in=run_ids).values_list(
        "created_at", "agent_id", "status", "status_reason"
    )
    for created_at, agent_id, status, reason in rows:
        deltas[(hour_of(created_at), agent_id, f"run:{outcome(status, reason)}")] -= 1
    return deltas


def _rebuild_ticket_links(run_model: Any, ticket_model: Any) -> None:
    """Every ticket's agent (its run's) and every run's `open_tickets` (its pending
    tickets), from the rows."""
    ticket_model.objects.filter(agent__isnull=True).update(
        agent_id=run_model.objects.filter(pk=OuterRef("run_id")).values("agent_id")[:1]
    )
    run_model.objects.exclude(open_tickets=0).update(open_tickets=0)
    pending = (
        ticket_model.objects.filter(status=Ticket.Status.PENDING)
        .values("run_id")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for row in pending.iterator():
        run_model.objects.filter(pk=row["run_id"]).update(open_tickets=row["n"])


@transaction.atomic
def rebuild(apps: Any = None) -> int:
    """Recompute every counter, every run's `open_tickets` and every ticket's agent from
    the rows; returns the number of counter rows. Seconds per million runs: maintenance
    (`manage.py rebuild_stats`, the migration that introduced them), not requests.
    `apps`: a migration's historical app registry."""
    run_model, ticket_model, stat_model = (
        (Run, Ticket, HourlyStat)
        if apps is None
        else tuple(apps.get_model("runs", name) for name in ("Run", "Ticket", "HourlyStat"))
    )
    _rebuild_ticket_links(run_model, ticket_model)
    counts: Counter[Key] = Counter()
    runs = (
        run_model.objects.annotate(hour=TruncHour("created_at", tzinfo=dt.UTC))
        .values_list("hour", "agent_id", "status", "status_reason")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for hour, agent_id, status, reason, n in runs.iterator():
        metric = f"run:{outcome(status, reason)}"
        counts[(hour_of(hour), agent_id, metric)] += n
        counts[(ALL_TIME, agent_id, metric)] += n
    closed = ticket_model.objects.filter(closed_at__isnull=False, agent__isnull=False).values_list(
        "created_at", "closed_at", "agent_id"
    )
    for created_at, closed_at, agent_id in closed.iterator():
        bucket = wait_bucket((closed_at - created_at).total_seconds())
        counts[(hour_of(closed_at), agent_id, f"wait:{bucket}")] += 1
    stat_model.objects.all().delete()
    stat_model.objects.bulk_create(
        [
            stat_model(hour=hour, agent_id=agent_id, metric=metric, count=n)
            for (hour, agent_id, metric), n in sorted(counts.items())
            if n
        ],
        batch_size=5000,
    )
    if apps is not None:  # the migration that introduced the counters predates usage
        return len(counts)
    usage = usage_counts()
    HourlyUsage.objects.all().delete()
    HourlyUsage.objects.bulk_create(
        [
            HourlyUsage(hour=hour, agent_id=agent_id, kind=kind, name=name, metric=metric, count=n)
            for (hour, agent_id, kind, name, metric), n in sorted(usage.items())
            if n
        ],
        batch_size=5000,
    )
    return len(counts) + len(usage)
