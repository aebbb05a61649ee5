"""The runs list sorted by duration, longest first.

Only finished runs have a duration to sort by (a running run's grows while the page is
read). On PostgreSQL the expression index `run_duration_idx` (runs migration 0021) holds
(finished_at - started_at, id) of the finished runs in this order, so a page reads about
`size` index entries however many runs there are; a filter narrows that scan (the runs
of a status, an agent). The query's expression is written as the index's is, or the
planner would not match them.

A page link names a row by its duration and id. It is written as `encode_cursor` writes
the other lists' (a moment and an id), the duration as that long after DURATION_EPOCH, so
the links of every runs list are read and checked the same way."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import DurationField, ExpressionWrapper, F, Q, QuerySet

from runs.models import Run
from runs.selectors.base import Page, Position, decode_position, encode_cursor

LONGEST = "longest"  # the runs list's `sort` value
DURATION_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


def _ran_for() -> ExpressionWrapper:
    return ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())


def _cursor(run: Run, *, newer: bool = False) -> str:
    return encode_cursor(DURATION_EPOCH + run.ran_for, run.pk, newer=newer)  # type: ignore[attr-defined]


def _beyond(runs: Any, length: dt.timedelta, pk: str, *, longer: bool) -> Any:
    """Runs strictly after (shorter) or before (`longer`) the row (length, pk), written
    `d <= c AND (d < c OR id < p)` so the index is entered at the row (runs.selectors.base
    `_beyond`)."""
    if longer:
        return runs.filter(ran_for__gte=length).filter(Q(ran_for__gt=length) | Q(pk__gt=pk))
    return runs.filter(ran_for__lte=length).filter(Q(ran_for__lt=length) | Q(pk__lt=pk))


def longest_page(runs: QuerySet[Run], cursor: str | None, size: int) -> Page:
    """A page of the finished `runs`, longest first, then newest id; each run's
    `ran_for` is set; runs that have not finished, or never started (cancelled while
    queued), are left out. The same paging as runs.selectors.base.keyset_by."""
    runs = runs.filter(finished_at__isnull=False, started_at__isnull=False).annotate(
        ran_for=_ran_for()
    )
    return _page(runs, decode_position(cursor) if cursor else None, size)


def _page(runs: Any, position: Position | None, size: int) -> Page:
    forward = ("-ran_for", "-pk")
    if position is None:
        rows = list(runs.order_by(*forward)[: size + 1])
        more = len(rows) > size
        rows = rows[:size]
        return Page(rows, _cursor(rows[-1]) if more and rows else None)
    length = position.at - DURATION_EPOCH
    if not position.newer:
        rows = list(_beyond(runs, length, position.pk, longer=False).order_by(*forward)[: size + 1])
        more = len(rows) > size
        rows = rows[:size]
        back = _cursor(rows[0], newer=True) if rows else None
        return Page(rows, _cursor(rows[-1]) if more and rows else None, back, first=False)
    before = _beyond(runs, length, position.pk, longer=True).order_by("ran_for", "pk")
    rows = list(before[: size + 1])
    if len(rows) <= size:  # the head of the list is in reach: the first page
        return _page(runs, None, size)
    rows = list(reversed(rows[:size]))
    return Page(rows, _cursor(rows[-1]), _cursor(rows[0], newer=True), first=False)
