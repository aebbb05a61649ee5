"""The runs list, its rows, the threads list and the thread page."""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from common.access import visible_teams
from runs import selectors
from runs.models import DEFAULT_PRIORITY, PendingInput, Run, Ticket
from runs.permissions import (
    START,
    VIEW,
    VIEW_THREAD,
    capabilities,
    may_see,
    require,
    visible_agent_ids,
    visible_or_404,
)
from runs.selectors.waiting import LONGEST_WAITING, parse_minutes
from runs.views.control import input_modes, inputs_context
from runs.views.saved_views import saved_views_context


def _when(raw: str) -> dt.datetime | None:
    if not raw:
        return None
    value = parse_datetime(raw) or parse_datetime(raw + "T00:00:00")
    if value is not None and timezone.is_naive(value):
        value = timezone.make_aware(value)
    return value


def run_filters(params: QueryDict) -> selectors.RunFilters:
    """The runs list's filters from its query string (its CSV export reads the same)."""
    return selectors.RunFilters(
        status=params.get("status", ""),
        waiting_reason=params.get("waiting_reason", ""),
        agent=params.get("agent", ""),
        thread=params.get("thread", ""),
        since=_when(params.get("since", "")),
        until=_when(params.get("until", "")),
        q=params.get("q", "").strip(),
        provider=params.get("provider", "").strip(),
        endpoint=params.get("endpoint", "").strip(),
        reason=params.get("reason", "").strip(),
        waiting_tool=params.get("waiting_tool", "").strip(),
        waiting_longer_than=parse_minutes(params.get("waiting_longer_than")),
        sort=params.get("sort", "").strip(),
    )


@require(VIEW, "view runs")
def run_list(request: HttpRequest) -> HttpResponse:
    params = request.GET
    filters = run_filters(params)
    filters.agent_ids = visible_agent_ids(request.user)  # the user's teams' runs only
    agents, tools = selectors.inbox_filter_options(filters.agent_ids)  # agents, their tools
    cursor = params.get("cursor") or None
    page = selectors.run_list(filters=filters, cursor=cursor)
    selectors.list_row_extras(page.items)  # what each row waits on, its children: one query
    query = params.copy()
    query.pop("cursor", None)
    return render(
        request,
        "runs/run_list.html",
        {
            "nav": "runs",
            "page": page,
            "filters": filters,
            "params": params,
            "query": query.urlencode(),
            "first_page": cursor is None,
            "statuses": Run.Status.values,
            "waiting_reasons": selectors.WAITING_REASONS,
            "agents": agents,
            "tools": tools,
            "longest_waiting": LONGEST_WAITING,
            **saved_views_context(request, "runs"),
            # set from the dashboard's health panel; kept when the form is resubmitted
            "extra_filters": [
                (name, value)
                for name, value in [
                    ("provider", filters.provider),
                    ("endpoint", filters.endpoint),
                    ("reason", filters.reason),
                ]
                if value
            ],
        },
    )


@require(VIEW, "view runs")
def run_row(request: HttpRequest, run_id: Any) -> HttpResponse:
    run = visible_or_404(request.user, selectors.run_row(run_id))
    return render(request, "runs/partials/run_row.html", {"run": run})


@require(VIEW, "view threads")
def thread_list(request: HttpRequest) -> HttpResponse:
    page = selectors.thread_list(
        cursor=request.GET.get("cursor") or None,
        q=request.GET.get("q", "").strip(),
        teams=visible_teams(request.user, VIEW_THREAD),
    )
    return render(
        request,
        "runs/thread_list.html",
        {
            "nav": "threads",
            "page": page,
            "q": request.GET.get("q", ""),
            "agents": selectors.agents_for_composer(visible_teams(request.user, START)),
            "can": capabilities(request.user),
        },
    )


SUPERSEDE_SHOWN = 20  # tickets listed by name; the confirmation covers all of them


@dataclass
class Supersede:
    """The open tickets a message to the thread rejects ("superseded by a new user
    message"): those of its waiting run. `token` names exactly that set, so a confirmation
    given for it does not cover a ticket opened since."""

    run: Run
    tickets: list[Ticket]  # the first SUPERSEDE_SHOWN
    count: int
    token: str

    @property
    def more(self) -> int:
        return self.count - len(self.tickets)


def supersede_token(run_id: Any, ticket_ids: list[Any]) -> str:
    names = ",".join(sorted(str(ident) for ident in ticket_ids))
    return hashlib.sha256(f"{run_id}:{names}".encode()).hexdigest()[:32]


def tickets_superseded(run: Run | None) -> Supersede | None:
    """What sending a message now would reject; None when it rejects nothing."""
    if run is None or run.status != Run.Status.WAITING:
        return None
    pending = Ticket.objects.filter(run=run, status=Ticket.Status.PENDING)
    ids = list(pending.values_list("pk", flat=True))
    if not ids:
        return None
    shown = list(pending.order_by("created_at", "pk")[:SUPERSEDE_SHOWN])
    return Supersede(run=run, tickets=shown, count=len(ids), token=supersede_token(run.pk, ids))


def thread_page_context(request: HttpRequest, thread_id: Any) -> dict[str, Any]:
    found = selectors.thread_detail(thread_id)
    if found is None or not may_see(request.user, found[0], VIEW_THREAD):
        raise Http404("no such thread")
    thread, messages, runs = found
    open_run = (
        thread.open_run if thread.open_run and thread.open_run.status != Run.Status.DONE else None
    )
    can = capabilities(request.user, thread)
    return {
        "nav": "threads",
        "thread": thread,
        "thread_messages": messages,
        "runs": runs,
        "open_run": open_run,
        "supersede": tickets_superseded(open_run) if can["start"] else None,
        "agents": selectors.agents_for_composer(visible_teams(request.user, START)),
        "default_agent": (
            open_run.agent.slug if open_run else (runs[-1].agent.slug if runs else "")
        ),
        "can": can,
        # run control: the composer's modes, the pending-input panel
        **inputs_context(thread, can, open_run),
        "input_modes": input_modes(open_run, can),
        "mode": PendingInput.Mode.QUEUE,
        "priority": DEFAULT_PRIORITY,
    }


@require(VIEW, "view threads")
def thread_page(request: HttpRequest, thread_id: Any) -> HttpResponse:
    return render(request, "runs/thread_detail.html", thread_page_context(request, thread_id))
