"""The lookups of a path's id for the API's views: the row when the request's user may see
it and do there what the view requires (404 for no such row or another team's, 403 for
a role that does not allow it)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.request import Request

from agents.models import Agent
from agents.selectors import agents_with_latest_version
from common.api.base import get_or_not_found
from common.errors import Forbidden, NotFound
from common.teams import ensure_not_frozen_only
from runs.models import PendingInput, Run, Thread, Ticket


def allowed(request: Request, obj: Any, what: str, value: Any, **details: Any) -> Any:
    """`obj` when the request's user may see it and, in its team, do what the view requires
    for the request's method. Another team's object is not found, in the words of an
    unknown id (`details` as its lookup gives them: its existence is not confirmed); a
    visible one the role there does not allow is 403."""
    user = request.user
    if not user.has_perm(VIEW_PERMS.get(type(obj), "runs.view_run"), obj):
        raise NotFound(f"{what} {value} not found", details or None)
    view = (getattr(request, "parser_context", None) or {}).get("view")
    perm = getattr(view, "required_perms", {}).get(request.method) if view else None
    if perm and not user.has_perm(perm, obj):
        ensure_not_frozen_only(user, perm, obj)  # frozen: 409 team_frozen, not 403
        raise Forbidden(f"your role in this {what}'s team does not allow this")
    return obj


VIEW_PERMS: dict[type, str] = {
    Thread: "runs.view_thread",
    Ticket: "runs.view_ticket",
    PendingInput: "runs.view_pendinginput",
}


def get_run(run_id: Any, request: Request) -> Run:
    run = get_or_not_found(Run.objects.select_related("agent", "agent_version"), "run", run_id)
    return allowed(request, run, "run", run_id)


def get_thread(thread_id: Any, request: Request) -> Thread:
    return allowed(
        request, get_or_not_found(Thread.objects.all(), "thread", thread_id), "thread", thread_id
    )


def get_agent(slug: str, request: Request | None = None) -> Agent:
    """The agent; with `request`, only one of the user's teams where the request's action
    (starting a run) is allowed."""
    # its team's freeze and its model's prices, for run_start
    agents = agents_with_latest_version().select_related("team", "model")
    agent = get_or_not_found(agents, "agent", slug, by="slug", agent_id=slug)
    return agent if request is None else allowed(request, agent, "agent", slug, agent_id=slug)


def get_ticket(ticket_id: Any, request: Request) -> Ticket:
    ticket = get_or_not_found(tickets_query(), "ticket", ticket_id)
    return allowed(request, ticket, "ticket", ticket_id)


def tickets_query() -> QuerySet[Ticket]:
    return Ticket.objects.select_related(
        "run__agent", "tool_call", "decision", "claimed_by", "assigned_to"
    )
