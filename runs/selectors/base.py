"""What the page selectors share: keyset pages of lists, bounded windows of the logs
and related rows, and the ids a filter names."""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from agents.models import Agent

PAGE_SIZE = 50


# --- keyset pagination ------------------------------------------------------------------------------


NEWER = "newer"  # a cursor's mark for "the page before this row" (see keyset_by)


def encode_cursor(created_at: dt.datetime, pk: Any, *, newer: bool = False) -> str:
    """A page link's position: a row's sort key and id; `newer` asks for the rows before
    that row in the list's order (the previous page) instead of those after it."""
    raw = json.dumps([created_at.isoformat(), str(pk), *([NEWER] if newer else [])])
    return base64.urlsafe_b64encode(raw.encode()).decode()


@dataclass(frozen=True)
class Position:
    at: dt.datetime
    pk: str
    newer: bool = False


def decode_position(cursor: str) -> Position | None:
    """The position a cursor names, None when it is not one of encode_cursor's."""
    try:
        values = json.loads(base64.urlsafe_b64decode(cursor.encode()).decode())
        if not isinstance(values, list) or len(values) not in (2, 3):
            return None
        if len(values) == 3 and values[2] != NEWER:
            return None
        created, pk = values[0], values[1]
        if not isinstance(created, str) or not isinstance(pk, str | int):
            return None
        return Position(dt.datetime.fromisoformat(created), str(pk), len(values) == 3)
    except (ValueError, TypeError):
        return None


def decode_cursor(cursor: str) -> tuple[dt.datetime, str] | None:
    position = decode_position(cursor)
    return None if position is None else (position.at, position.pk)


def cursor_problem(cursor: str, *, uuid_pk: bool) -> str | None:
    """Why `cursor` is not a page link of a list whose ids are UUIDs (`uuid_pk`) or
    integers, or None when it is one. The pages and the API refuse the same cursors."""
    position = decode_position(cursor)
    valid = position is not None and position.at.tzinfo is not None
    if valid and position is not None:
        try:
            if uuid_pk:
                uuid.UUID(position.pk)
            else:
                int(position.pk)
        except ValueError:
            valid = False
    return None if valid else "is not a page link of this list"


@dataclass
class Page:
    items: list[Any]
    next_cursor: str | None
    prev_cursor: str | None = None  # the page before this one (None on the first)
    first: bool = True  # the page starts at the head of the list


def keyset_page(
    queryset: QuerySet, cursor: str | None, size: int = PAGE_SIZE, *, oldest_first: bool = False
) -> Page:
    """Newest first by (created_at, pk) (oldest first if asked); see keyset_by."""
    return keyset_by(queryset, "created_at", cursor, size, ascending=oldest_first)


def _beyond(queryset: QuerySet, field: str, position: Position, *, greater: bool) -> QuerySet:
    """Rows strictly beyond `position` in (field, pk) order, upwards or downwards. The bound
    is written `f <= c AND (f < c OR pk < p)` so the index on (field, pk) is entered at the
    position, not scanned up to it."""
    at, pk = position.at, position.pk
    if greater:
        return queryset.filter(**{f"{field}__gte": at}).filter(
            Q(**{f"{field}__gt": at}) | Q(pk__gt=pk)
        )
    return queryset.filter(**{f"{field}__lte": at}).filter(Q(**{f"{field}__lt": at}) | Q(pk__lt=pk))


def keyset_by(
    queryset: QuerySet, field: str, cursor: str | None, size: int, *, ascending: bool
) -> Page:
    """A page of `queryset` ordered by (field, pk), descending unless `ascending`. A cursor
    names a row: the page is the `size` rows after it, or with a `newer` cursor the `size`
    rows before it (read backwards, shown in list order). Positions are rows, not offsets,
    so rows added at the head of the list never shift a page. A previous page that would
    reach the head is the first page itself (full, and its links are those of the first)."""
    position = decode_position(cursor) if cursor else None
    forward = ("" if ascending else "-") + field, ("" if ascending else "-") + "pk"
    if position is None:
        rows = list(queryset.order_by(*forward)[: size + 1])
        more = len(rows) > size
        rows = rows[:size]
        return Page(rows, _cursor(rows[-1], field) if more and rows else None)
    if not position.newer:
        rows = list(
            _beyond(queryset, field, position, greater=ascending).order_by(*forward)[: size + 1]
        )
        more = len(rows) > size
        rows = rows[:size]
        back = _cursor(rows[0], field, newer=True) if rows else None  # past the end: none
        return Page(rows, _cursor(rows[-1], field) if more and rows else None, back, first=False)
    backward = ("-" if ascending else "") + field, ("-" if ascending else "") + "pk"
    before = _beyond(queryset, field, position, greater=not ascending)
    rows = list(before.order_by(*backward)[: size + 1])
    if len(rows) <= size:  # the head of the list is in reach: the first page
        return keyset_by(queryset, field, None, size, ascending=ascending)
    rows = list(reversed(rows[:size]))
    return Page(rows, _cursor(rows[-1], field), _cursor(rows[0], field, newer=True), first=False)


def _cursor(row: Any, field: str, *, newer: bool = False) -> str:
    return encode_cursor(getattr(row, field), row.pk, newer=newer)


# --- bounded lists of the run and thread pages -----------------------------------------------------

TIMELINE_PAGE = 200  # a run's events shown at once; earlier ones on demand
TRANSCRIPT_PAGE = 100  # a thread's messages shown at once; earlier ones on demand
TRANSCRIPT_LIVE = 3 * TRANSCRIPT_PAGE  # at most, in a live refresh of the run page's transcript
RELATED_PAGE = 50  # children, retries, tickets of a run; runs of a thread


class Rows(list[Any]):
    """Rows a page shows, oldest first, with `more` set when rows were left out (for a log:
    rows older than the first one here). A list, so templates and callers iterate it as
    before. For a log window, `before_seq` and `from_seq` are the range it was read from."""

    def __init__(
        self,
        rows: Any = (),
        *,
        more: bool = False,
        before_seq: int | None = None,
        from_seq: int | None = None,
    ) -> None:
        super().__init__(rows)
        self.more = more
        self.before_seq = before_seq
        self.from_seq = from_seq

    @property
    def first_seq(self) -> int | None:
        """Where the page before this one ends: its `?before_seq=`."""
        return self[0].seq if self else None


def seq_window(
    rows: QuerySet,
    *,
    size: int,
    before_seq: int | None = None,
    from_seq: int | None = None,
) -> Rows:
    """The newest `size` rows of an append-only log (events of a run, messages of a
    thread: unique on (owner, seq), so this reads size + 1 index entries backwards) with
    from_seq <= seq < before_seq. One row more than shown tells whether older ones exist."""
    if before_seq is not None:
        rows = rows.filter(seq__lt=before_seq)
    if from_seq is not None:
        rows = rows.filter(seq__gte=from_seq)
    newest = list(rows.order_by("-seq")[: size + 1])
    return Rows(
        reversed(newest[:size]),
        more=len(newest) > size,
        before_seq=before_seq,
        from_seq=from_seq,
    )


def newest_rows(rows: QuerySet, size: int = RELATED_PAGE) -> Rows:
    """The newest `size` rows by (created_at, pk), shown oldest first."""
    newest = list(rows.order_by("-created_at", "-pk")[: size + 1])
    return Rows(reversed(newest[:size]), more=len(newest) > size)


# --- ids named by filters ---------------------------------------------------------------------------


def uuid_or_none(value: str) -> Any:
    try:
        return uuid.UUID(value.strip())
    except (ValueError, AttributeError):
        return None


def agent_id_for_slug(slug: str) -> int:
    return Agent.objects.filter(slug=slug).values_list("pk", flat=True).first() or 0


def agent_filter_options(agent_ids: list[int] | None = None) -> tuple[list[str], list[str]]:
    """The agents and tools the runs list's and the inbox's filters offer: the agents (of
    the user's teams: `agent_ids`, None for all) and the tools their configuration offers
    (not a scan of the runs or tickets)."""
    agents: list[str] = []
    tools: set[str] = set()
    rows = Agent.objects.order_by("slug")
    if agent_ids is not None:
        rows = rows.filter(pk__in=agent_ids)
    for slug, agent_tools in rows.values_list("slug", "tools"):
        agents.append(slug)
        tools.update(str(name) for name in agent_tools or [])
    return agents, sorted(tools)
