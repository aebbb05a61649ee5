"""The dashboard's counters (`HourlyStat`), kept in the transaction of the change they count.

A run counts once, in the hour it was created, under its outcome: `run:open` until it
finishes, then `run:completed`, `run:failed`, `run:cancelled` or `run:blocked`. A ticket
counts once, in the hour it closed, under the bucket of how long it waited. Each change
is one upsert (`count = count + delta`), written last in its transaction so the counter
row is locked only until the commit; rows are written in key order, so two transactions
never wait on each other's rows in opposite orders.

`rebuild()` recomputes everything from the rows (after a bulk load or a restore).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, OuterRef
from django.db.models.functions import TruncHour

from runs.models import HourlyStat, Run, Ticket

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


def apply(deltas: Counter[Key]) -> None:
    """Add each delta to its counter (and a run's to its all-time total), in one statement."""
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
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (hour, agent_id, metric, count) VALUES {values} "
            f"ON CONFLICT (hour, agent_id, metric) "
            f"DO UPDATE SET count = {table}.count + EXCLUDED.count",
            params,
        )


def run_created(run: Run) -> None:
    apply(Counter({(hour_of(run.created_at), run.agent_id, "run:open"): 1}))


def run_finished(run: Run) -> None:
    """The run just became done (the caller's guarded update says it was not before)."""
    hour = hour_of(run.created_at)
    apply(
        Counter(
            {
                (hour, run.agent_id, "run:open"): -1,
                (hour, run.agent_id, f"run:{outcome(run.status, run.status_reason)}"): 1,
            }
        )
    )


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
    return len(counts)
