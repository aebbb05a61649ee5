"""The runs list sorted by duration, longest first.

Only finished runs have a duration to sort by (a running run's grows while the page is
read). On PostgreSQL the expression index `run_duration_idx` (runs migration 0021) holds
(finished_at - started_at, id) of the finished runs in this order, so a page reads about
`size` index entries however many runs there are; a filter narrows that scan (the runs
of a status, an agent). The query's expression is written as the index's is, or the
planner would not match them.

With a creation range (the list's since/until) the runs in the range are read first:
`run_created_span_idx` (runs migration 0023) holds (created_at) with each finished run's
start, end, id and agent, so the range's entries are read from the index alone and the
longest `size` kept (a top-N sort); the page then fetches those rows by id, in the same
statement. Walking `run_duration_idx` and skipping the runs outside the range costs the
number of longer runs created elsewhere, which has no bound (48k skipped index entries
for a week's range of a million runs in bench/scale.py); reading the range costs the
runs in it, read in index order without the table. Inside the range query the order is
written so that the duration index does not match it (`_SCAN_ORDER`): the planner,
which cannot know how durations and creation times correlate, would otherwise walk it.

A page link names a row by its duration and id. It is written as `encode_cursor` writes
the other lists' (a moment and an id), the duration as that long after DURATION_EPOCH, so
the links of every runs list are read and checked the same way."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Any

from django.db.models import DurationField, ExpressionWrapper, F, Q, QuerySet, Value

from runs.models import Run
from runs.selectors.base import Page, Position, decode_position, encode_cursor

LONGEST = "longest"  # the runs list's `sort` value
DURATION_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


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
    runs: QuerySet[Run], cursor: str | None, size: int, *, in_range: bool = False
) -> Page:
    """A page of the finished `runs`, longest first, then newest id; each run's
    `ran_for` is set; runs that have not finished, or never started (cancelled while
    queued), are left out. The same paging as runs.selectors.base.keyset_by.
    `in_range`: `runs` are narrowed to a creation range, read first (see above)."""
    runs = runs.filter(finished_at__isnull=False, started_at__isnull=False)
    return _page(_Rows(runs, in_range), decode_position(cursor) if cursor else None, size)


@dataclass(frozen=True)
class _Rows:
    """The finished runs of a page's query, past a row (length, pk) if `beyond` is set."""

    runs: Any
    in_range: bool
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
        ids = self._keyed(_scan_key()).order_by(*order).values("pk")[:limit]
        return list(self.runs.annotate(ran_for=_ran_for()).filter(pk__in=ids).order_by(*order))


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
