"""The approvals inbox and the tickets API's lists."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Now
from django.utils import timezone

from runs.message_rows import message_text
from runs.models import Message, Ticket
from runs.selectors.base import PAGE_SIZE, Page, agent_id_for_slug, keyset_page


def _tickets_for(
    tickets: QuerySet[Ticket],
    agent: str,
    tool: str,
    waiting_longer_than: int | None = None,
    agent_ids: list[int] | None = None,
) -> QuerySet[Ticket]:
    """The agent, tool and age filters of the inbox and the tickets API (age: created more
    than `waiting_longer_than` minutes ago, a bound on the indexes' created_at), and the
    user's teams (`agent_ids`: their agents; None: every team)."""
    if agent_ids is not None:
        tickets = tickets.filter(agent_id__in=agent_ids)
    if waiting_longer_than is not None:
        cutoff = timezone.now() - dt.timedelta(minutes=waiting_longer_than)
        tickets = tickets.filter(created_at__lt=cutoff)
    if agent:
        tickets = tickets.filter(agent_id=agent_id_for_slug(agent))
    if tool:
        tickets = tickets.filter(tool_name=tool)
    return tickets


WHO = ("all", "mine", "unassigned")


def _tickets_of(tickets: QuerySet[Ticket], who: str, user: Any) -> QuerySet[Ticket]:
    """`who`: "mine" (assigned to `user`, or claimed by them and not lapsed: the
    (assigned_to, created_at, id) index and the claimed_by index), "unassigned"
    (assigned to nobody, the same index) or anything else for all."""
    if who == "mine":
        if user is None or not getattr(user, "is_authenticated", False):
            return tickets.none()
        return tickets.filter(Q(assigned_to=user) | Q(claimed_by=user, claimed_until__gt=Now()))
    if who == "unassigned":
        return tickets.filter(assigned_to__isnull=True)
    return tickets


# What a listed pending ticket reads (the inbox rows, the API's TicketSerializer): the
# ticket's own columns, and of its relations only these. A run's state, requests and
# outputs, an agent's configuration and a call's arguments are large JSON documents that
# no row shows: left unread, a page of 50 tickets is built several ms faster.
LISTED_TICKET_FIELDS = (
    *(field.name for field in Ticket._meta.concrete_fields),
    "run__id",
    "run__agent_id",
    "run__parent_run_id",
    "run__agent__id",
    "run__agent__slug",
    "run__agent__team_id",
    "tool_call__id",
    "tool_call__call_id",
    "claimed_by__id",
    "claimed_by__username",
    "assigned_to__id",
    "assigned_to__username",
)


def inbox_tickets(
    *,
    agent: str = "",
    tool: str = "",
    cursor: str | None = None,
    size: int = PAGE_SIZE,
    waiting_longer_than: int | None = None,
    newest_first: bool = False,
    who: str = "all",
    user: Any = None,
    agent_ids: list[int] | None = None,
) -> Page:
    """Pending tickets, oldest first (or newest first), over the (partial) inbox indexes."""
    pending = (
        Ticket.objects.for_operators()
        .select_related("run__agent", "tool_call", "claimed_by", "assigned_to")
        .only(*LISTED_TICKET_FIELDS)
    )
    tickets = _tickets_of(
        _tickets_for(pending, agent, tool, waiting_longer_than, agent_ids), who, user
    )
    return keyset_page(tickets, cursor, size, oldest_first=not newest_first)


def ticket_list(
    *,
    status: str,
    agent: str = "",
    tool: str = "",
    cursor: str | None = None,
    size: int,
    waiting_longer_than: int | None = None,
    who: str = "all",
    user: Any = None,
    agent_ids: list[int] | None = None,
) -> Page:
    """The API's tickets: pending ones as the inbox lists them, closed ones newest first."""
    if status == Ticket.Status.PENDING:
        return inbox_tickets(
            agent=agent,
            tool=tool,
            cursor=cursor,
            size=size,
            waiting_longer_than=waiting_longer_than,
            who=who,
            user=user,
            agent_ids=agent_ids,
        )
    # a replay's tickets (decided by its set's policy as they open) are nobody's
    closed = (
        Ticket.objects.filter(status=status)
        .exclude(run__run_mode="replay")
        .select_related("run__agent", "tool_call", "decision", "claimed_by", "assigned_to")
    )
    tickets = _tickets_of(
        _tickets_for(closed, agent, tool, waiting_longer_than, agent_ids), who, user
    )
    return keyset_page(tickets, cursor, size)


def inbox_count(
    *,
    agent: str = "",
    tool: str = "",
    waiting_longer_than: int | None = None,
    who: str = "all",
    user: Any = None,
    agent_ids: list[int] | None = None,
) -> int:
    tickets = _tickets_for(
        Ticket.objects.for_operators(), agent, tool, waiting_longer_than, agent_ids
    )
    return _tickets_of(tickets, who, user).count()


REQUEST_CHARS = 500  # of the user request an inbox row shows


def ticket_requests(tickets: list[Ticket]) -> dict[Any, str]:
    """The user request behind each ticket: the last user message of its run's thread
    committed before the ticket opened (for a child run, what its parent asked it), by
    ticket id, at most REQUEST_CHARS characters. One query for all the tickets of a page:
    for each, the thread's messages are read backwards from the newest over the unique
    (thread, seq) index until a user message, which a waiting run reaches at once."""
    if not tickets:
        return {}
    last_user = (
        Message.objects.filter(
            thread_id=OuterRef("run__thread_id"),
            role=Message.Role.USER,
            created_at__lte=OuterRef("created_at"),
        )
        .order_by("-seq")
        .values("content")[:1]
    )
    rows = (
        Ticket.objects.filter(pk__in=[ticket.pk for ticket in tickets])
        .annotate(request=Subquery(last_user))
        .values_list("pk", "request")
    )
    requests = {}
    for pk, content in rows:
        text = message_text(content).strip()
        if text:
            requests[pk] = text[:REQUEST_CHARS]
    return requests
