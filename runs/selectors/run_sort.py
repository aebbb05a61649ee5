"""The runs list sorted by duration, longest first.

Only finished runs have a duration to sort by (a running run's grows while the page is
read). On PostgreSQL the expression index `run_duration_idx` (runs migration 0021) holds
(finished_at - started_at, id) of the finished runs in this order, so a page reads about
`size` index entries however many runs there are; a filter narrows that scan (the runs
of a status, an agent). The query's expression is written as the index's is, or the
planner would not match them.

With a creation range (the list's since/until) walking `run_duration_idx` and skipping the
runs outside the range costs the number of longer runs created elsewhere, which has no
bound (48k skipped index entries for a week's range of a million runs in bench/scale.py):
the planner cannot know how durations and creation times correlate. So the range is read
hour by hour: `run_hour_longest_idx` (runs migration 0026) holds the finished runs by
their creation hour (UTC), longest first within an hour, with the columns a page's
filters read; for each hour of the range (a LATERAL join over `generate_series`) the
`size` longest are read from it, and the longest `size` of those are the page, fetched by
id in the same statement. A week costs 168 short index reads, about 8,000 entries, where
reading the whole range cost 60,000 (a top-N sort over `run_created_span_idx`, runs
migration 0023). A range longer than `HOURLY_UP_TO` (or open at its start) still reads the
range that way; inside that query the order is written so that the duration index does
not match it (`_SCAN_ORDER`), or the planner would walk it.

A page link names a row by its duration and id. It is written as `encode_cursor` writes
the other lists' (a moment and an id), the duration as that long after DURATION_EPOCH, so
the links of every runs list are read and checked the same way."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Any

from django.db import connection
from django.db.models import BooleanField, DurationField, ExpressionWrapper, F, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.utils import timezone

from runs.models import Run
from runs.selectors.base import Page, Position, decode_position, encode_cursor

LONGEST = "longest"  # the runs list's `sort` value
DURATION_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
# Ranges up to this long are read hour by hour (above); longer ones are read whole.
HOURLY_UP_TO = dt.timedelta(days=31)
# The hour `run_hour_longest_idx` files a run under, written as the index's expression is
HOUR_SQL = "date_trunc('hour', runs_run.created_at AT TIME ZONE 'UTC')"


def _ran_for() -> ExpressionWrapper:
    return ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())


def _scan_key() -> ExpressionWrapper:
    """The duration, written so that `run_duration_idx` does not match it."""
    return ExpressionWrapper(
        F("finished_at") - F("started_at") + Value(dt.timedelta(0)), output_field=DurationField()
    )


def _cursor(run: Run, *, newer: bool = False) -> str:
    return encode_cursor(DURATION_EPOCH + run.ran_for, run.pk, newer=newer)  # type: ignore[attr-defined]


def _beyond(runs: Any, length: dt.timedelta, pk: str, *, longer: bool) -> Any:
    """Runs strictly after (shorter) or before (`longer`) the row (length, pk), written
    `d <= c AND (d < c OR id < p)` so the index is entered at the row (runs.selectors.base
    `_beyond`)."""
    if longer:
        return runs.filter(ran_for__gte=length).filter(Q(ran_for__gt=length) | Q(pk__gt=pk))
    return runs.filter(ran_for__lte=length).filter(Q(ran_for__lt=length) | Q(pk__lt=pk))


def longest_page(
    runs: QuerySet[Run],
    cursor: str | None,
    size: int,
    *,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
) -> Page:
    """A page of the finished `runs`, longest first, then newest id; each run's
    `ran_for` is set; runs that have not finished, or never started (cancelled while
    queued), are left out. The same paging as runs.selectors.base.keyset_by.
    `since`/`until`: `runs` are narrowed to that creation range, which is read first
    (see above)."""
    runs = runs.filter(finished_at__isnull=False, started_at__isnull=False)
    rows = _Rows(runs, in_range=bool(since or until), hours=_hours(since, until))
    return _page(rows, decode_position(cursor) if cursor else None, size)


def _hours(since: dt.datetime | None, until: dt.datetime | None) -> tuple[Any, Any] | None:
    """The first and last creation hour (UTC, naive, as the index files them) of a range
    read hour by hour; None: read it whole."""
    if since is None or connection.vendor != "postgresql":
        return None
    until = until or timezone.now()
    if until <= since or until - since > HOURLY_UP_TO:
        return None
    first = since.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0, tzinfo=None)
    last = (until - dt.timedelta(microseconds=1)).astimezone(dt.UTC)
    return first, last.replace(minute=0, second=0, microsecond=0, tzinfo=None)


@dataclass(frozen=True)
class _Rows:
    """The finished runs of a page's query, past a row (length, pk) if `beyond` is set."""

    runs: Any
    in_range: bool
    hours: tuple[Any, Any] | None = None  # read hour by hour (`_hours`)
    beyond: tuple[dt.timedelta, Any, bool] | None = None

    def past(self, length: dt.timedelta, pk: Any, *, longer: bool) -> _Rows:
        return replace(self, beyond=(length, pk, longer))

    def _keyed(self, key: ExpressionWrapper) -> Any:
        runs = self.runs.annotate(ran_for=key)
        if self.beyond is None:
            return runs
        length, pk, longer = self.beyond
        return _beyond(runs, length, pk, longer=longer)

    def first(self, limit: int, *, longest: bool = True) -> list[Run]:
        """The first `limit` rows, longest first (or shortest first)."""
        order = ("-ran_for", "-pk") if longest else ("ran_for", "pk")
        if not self.in_range:
            return list(self._keyed(_ran_for()).order_by(*order)[:limit])
        if self.hours is None:
            ids: Any = self._keyed(_scan_key()).order_by(*order).values("pk")[:limit]
        else:
            ids = self._hourly(limit, longest)
        return list(self.runs.annotate(ran_for=_ran_for()).filter(pk__in=ids).order_by(*order))

    def _hourly(self, limit: int, longest: bool) -> RawSQL:
        """The ids of the first `limit` rows, read hour by hour (see above)."""
        order = ("-ran_for", "-pk") if longest else ("ran_for", "pk")
        in_hour = RawSQL(f"{HOUR_SQL} = hours.hour", (), output_field=BooleanField())
        hour = self._keyed(_ran_for()).filter(in_hour).order_by(*order)
        sql, params = hour.values("pk", "ran_for")[:limit].query.sql_with_params()
        direction = "DESC" if longest else "ASC"
        return RawSQL(
            "SELECT top.pk FROM generate_series(%s::timestamp, %s::timestamp, "
            f"interval '1 hour') AS hours(hour) CROSS JOIN LATERAL ({sql}) AS top "
            f"ORDER BY top.ran_for {direction}, top.pk {direction} LIMIT %s",
            (*self.hours, *params, limit),  # type: ignore[misc]
        )


def _page(runs: _Rows, position: Position | None, size: int) -> Page:
    if position is None:
        rows = runs.first(size + 1)
        more = len(rows) > size
        rows = rows[:size]
        return Page(rows, _cursor(rows[-1]) if more and rows else None)
    length = position.at - DURATION_EPOCH
    if not position.newer:
        rows = runs.past(length, position.pk, longer=False).first(size + 1)
        more = len(rows) > size
        rows = rows[:size]
        back = _cursor(rows[0], newer=True) if rows else None
        return Page(rows, _cursor(rows[-1]) if more and rows else None, back, first=False)
    rows = runs.past(length, position.pk, longer=True).first(size + 1, longest=False)
    if len(rows) <= size:  # the head of the list is in reach: the first page
        return _page(runs, None, size)
    rows = list(reversed(rows[:size]))
    return Page(rows, _cursor(rows[-1]), _cursor(rows[0], newer=True), first=False)
