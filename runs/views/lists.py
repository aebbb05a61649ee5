"""The runs list, its rows, the threads list and the thread page."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render

from common.access import allowed_unfrozen, visible_teams
from runs import selectors
from runs.models import DEFAULT_PRIORITY, PendingInput, Run, Ticket
from runs.permissions import (
    CANCEL,
    RETRY,
    START,
    VIEW,
    VIEW_THREAD,
    capabilities,
    may_see,
    require,
    visible_agent_ids,
    visible_or_404,
)
from runs.selectors.base import agent_filter_options
from runs.selectors.filters import (
    NAME_MAX_CHARS,
    REASON_MAX_CHARS,
    SEARCH_MAX_CHARS,
    SLUG_MAX_CHARS,
    QueryFilters,
    filter_errors_context,
)
from runs.selectors.run_sort import LONGEST
from runs.selectors.waiting import LONGEST_WAITING
from runs.views.forms import filter_page
from runs.views.thread_control import input_modes, inputs_context
from runs.views.thread_tickets import thread_tickets_context

RUN_SORTS = ("newest", LONGEST_WAITING, LONGEST)  # "" is newest first too
RUNS_PAGE = selectors.PAGE_SIZE


def read_run_filters(params: QueryDict) -> tuple[selectors.RunFilters, dict[str, str]]:
    """The runs list's filters from its query string (its CSV export reads the same), and
    what was wrong with those left out (parameter -> message)."""
    read = QueryFilters(params)
    filters = selectors.RunFilters(
        status=read.choice("status", "Status", Run.Status.values),
        waiting_reason=read.choice("waiting_reason", "Waiting reason", selectors.WAITING_REASONS),
        agent=read.text("agent", "Agent", max_chars=SLUG_MAX_CHARS),
        thread=read.ident("thread", "Thread"),
        since=read.when("since", "From"),
        until=read.when("until", "To"),
        q=read.text("q", "Search", max_chars=SEARCH_MAX_CHARS),
        provider=read.text("provider", "Provider", max_chars=SLUG_MAX_CHARS),
        endpoint=read.text("endpoint", "Endpoint", max_chars=SLUG_MAX_CHARS),
        reason=read.text("reason", "Reason", max_chars=REASON_MAX_CHARS),
        failure_group=read.ident("failure_group", "Failure group"),
        waiting_tool=read.text("waiting_tool", "Waiting on tool", max_chars=NAME_MAX_CHARS),
        waiting_longer_than=read.minutes("waiting_longer_than", "for longer than"),
        sort=read.choice("sort", "Sort", RUN_SORTS),
    )
    return filters, read.errors


def run_filters(params: QueryDict) -> selectors.RunFilters:
    """The filters of `params` that are valid (read_run_filters without the errors)."""
    return read_run_filters(params)[0]


@filter_page
@require(VIEW, "view runs")
def run_list(request: HttpRequest) -> HttpResponse:
    return run_list_response(request)


def run_list_response(request: HttpRequest) -> HttpResponse:
    """The runs list; 400 with the list and what was wrong above it when a filter (or the
    page link) is bad (its CSV export answers the same for bad filters)."""
    context = run_list_context(request)
    status = 400 if context["filter_errors"] else 200
    return render(request, "runs/run_list.html", context, status=status)


def run_list_context(request: HttpRequest, params: QueryDict | None = None) -> dict[str, Any]:
    """What the runs list shows for the filters of `params` (`request.GET` by default; a
    bulk action's form sends the list's query along)."""
    params = request.GET if params is None else params
    filters, problems = read_run_filters(params)
    read = QueryFilters(params)
    cursor = read.cursor()
    problems = {**problems, **read.errors}
    filters.agent_ids = visible_agent_ids(request.user)  # the user's teams' runs only
    agents, tools = agent_filter_options(filters.agent_ids)  # agents, their tools
    page = selectors.run_list(
        filters=filters, cursor=cursor, size=RUNS_PAGE, rows=selectors.runs_for_rows()
    )
    selectors.list_row_extras(page.items)  # what each row waits on, its children: one query
    query = params.copy()
    query.pop("cursor", None)
    sort_query = query.copy()  # the column headers' sort links set their own
    sort_query.pop("sort", None)
    return {
        "nav": "runs",
        "page": page,
        "filters": filters,
        "params": params,
        "query": query.urlencode(),
        "sort_query": sort_query.urlencode(),
        "first_page": page.first,
        "statuses": Run.Status.values,
        "waiting_reasons": selectors.WAITING_REASONS,
        "agents": agents,
        "tools": tools,
        "longest_waiting": LONGEST_WAITING,
        "longest": LONGEST,
        "can_bulk": {  # offered where the role allows it (a frozen team's runs: refused)
            "cancel": allowed_unfrozen(request.user, CANCEL),
            "retry": allowed_unfrozen(request.user, RETRY),
        },
        **filter_errors_context(problems),
        # set from the dashboard's health panel; kept when the form is resubmitted
        "extra_filters": [
            (name, value)
            for name, value in [
                ("provider", params.get("provider", "")),
                ("endpoint", params.get("endpoint", "")),
                ("reason", params.get("reason", "")),
                ("failure_group", params.get("failure_group", "")),
            ]
            if value
        ],
    }


@require(VIEW, "view runs")
def run_row(request: HttpRequest, run_id: Any) -> HttpResponse:
    run = visible_or_404(request.user, selectors.run_row(run_id))
    return render(request, "runs/partials/run_row.html", {"run": run})


@filter_page
@require(VIEW, "view threads")
def thread_list(request: HttpRequest) -> HttpResponse:
    read = QueryFilters(request.GET)
    page = selectors.thread_list(
        cursor=read.cursor(),
        q=read.text("q", "Search", max_chars=SEARCH_MAX_CHARS),
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
            **filter_errors_context(read.errors),
        },
        status=400 if read.errors else 200,
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
        # the open run's tickets, decided on the page (runs/views/thread_tickets.py)
        **thread_tickets_context(request, open_run),
        "mode": PendingInput.Mode.QUEUE,
        "priority": DEFAULT_PRIORITY,
    }


@require(VIEW, "view threads")
def thread_page(request: HttpRequest, thread_id: Any) -> HttpResponse:
    return render(request, "runs/thread_detail.html", thread_page_context(request, thread_id))
