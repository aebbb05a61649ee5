"""What waits: runs with a pending ticket of a tool, waiting longer than N minutes, and
the runs list sorted by how long they have waited (docs/teamwork.md).

A run with a pending ticket is waiting, so the runs are read through
`run_status_recent_idx (status, created_at, id)`, and the ticket is found by an EXISTS
that PostgreSQL answers from `ticket_inbox_tool_idx (tool_name, created_at, id) WHERE
status = 'pending'` (or per run, through the pending-ticket constraint on (run, ...))."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet, Subquery
from django.utils import timezone

from runs.models import Run, Ticket
from runs.selectors.base import Page, keyset_by

LONGEST_WAITING = "longest_waiting"  # the runs list's sort by the oldest matching ticket
LONGEST_WAITING_HELP = "longest_waiting (with a waiting filter): the oldest matching ticket first."
WAITED_HELP = "Waiting longer than this many minutes (on a ticket of the tool filter, if any)."
MAX_MINUTES = 60 * 24 * 365  # the largest "waiting longer than": a year


def pending_tickets_of_run(tool: str, longer_than: int | None) -> QuerySet[Ticket]:
    """The pending tickets (of `tool`, older than `longer_than` minutes) of the outer run."""
    tickets = Ticket.objects.filter(run_id=OuterRef("pk"), status=Ticket.Status.PENDING)
    if tool:
        tickets = tickets.filter(tool_name=tool)
    if longer_than is not None:
        tickets = tickets.filter(created_at__lt=timezone.now() - dt.timedelta(minutes=longer_than))
    return tickets


def runs_waiting(runs: QuerySet[Run], tool: str, longer_than: int | None) -> QuerySet[Run]:
    """Runs waiting on a pending ticket of `tool` (any tool when empty) created more than
    `longer_than` minutes ago (any age when None)."""
    waiting = pending_tickets_of_run(tool, longer_than)
    return runs.filter(status=Run.Status.WAITING).filter(Exists(waiting))


def longest_waiting_page(
    runs: QuerySet[Run], tool: str, longer_than: int | None, cursor: str | None, size: int
) -> Page:
    """`runs` (already filtered to those waiting) ordered by their oldest matching ticket,
    oldest first; the cursor is that ticket's time and the run id. Each run's `waiting_since`
    is set."""
    oldest = pending_tickets_of_run(tool, longer_than).order_by("created_at")
    runs = runs.annotate(waiting_since=Subquery(oldest.values("created_at")[:1]))
    return keyset_by(runs, "waiting_since", cursor, size, ascending=True)


def parse_minutes(raw: Any) -> int | None:
    """A "waiting longer than" of a page's query string: whole minutes, 0 to a year;
    anything else is no filter."""
    text = str(raw or "").strip()
    if not text.isdigit() or len(text) > 7:
        return None
    minutes = int(text)
    return minutes if minutes <= MAX_MINUTES else None
