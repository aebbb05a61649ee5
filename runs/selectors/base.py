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


def encode_cursor(created_at: dt.datetime, pk: Any) -> str:
    raw = json.dumps([created_at.isoformat(), str(pk)])
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_cursor(cursor: str) -> tuple[dt.datetime, str] | None:
    try:
        created, pk = json.loads(base64.urlsafe_b64decode(cursor.encode()).decode())
        return dt.datetime.fromisoformat(created), str(pk)
    except (ValueError, TypeError):
        return None


@dataclass
class Page:
    items: list[Any]
    next_cursor: str | None


def keyset_page(
    queryset: QuerySet, cursor: str | None, size: int = PAGE_SIZE, *, oldest_first: bool = False
) -> Page:
    """Newest first by (created_at, pk) (oldest first if asked); the cursor is the last
    row shown. The bound is written `created_at <= c AND (created_at < c OR pk < p)` so
    the index on (created_at, pk) is entered at the cursor, not scanned up to it."""
    if cursor:
        position = decode_cursor(cursor)
        if position is not None:
            created, pk = position
            if oldest_first:
                queryset = queryset.filter(created_at__gte=created).filter(
                    Q(created_at__gt=created) | Q(pk__gt=pk)
                )
            else:
                queryset = queryset.filter(created_at__lte=created).filter(
                    Q(created_at__lt=created) | Q(pk__lt=pk)
                )
    order = ("created_at", "pk") if oldest_first else ("-created_at", "-pk")
    rows = list(queryset.order_by(*order)[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    return Page(rows, encode_cursor(rows[-1].created_at, rows[-1].pk) if more and rows else None)


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
