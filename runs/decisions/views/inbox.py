"""Approvals inbox: every waiting ticket across runs, oldest first, filtered by agent and
tool, with bulk approve/reject behind a server-side confirmation step."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from common.access import allowed_unfrozen, frozen_teams_among
from common.errors import InvalidInput, ServiceError
from common.models import Team
from runs.decisions.selectors.inbox import (
    inbox_count,
    inbox_tickets,
    ticket_requests,
)
from runs.decisions.services.bulk import MAX_BULK, bulk_guard
from runs.decisions.services.claims import deciders
from runs.models import Ticket
from runs.permissions import (
    DECIDE,
    VIEW,
    VIEW_TICKET,
    capabilities,
    denied,
    may_see,
    require,
    visible_agent_ids,
)
from runs.runtime.types import ToolCallResumeMode
from runs.selectors.base import agent_filter_options
from runs.selectors.filters import (
    NAME_MAX_CHARS,
    SLUG_MAX_CHARS,
    QueryFilters,
    filter_errors_context,
)
from runs.services.tickets import decision_submit
from runs.templatetags.runs_extras import short_id
from runs.ticket_forms import parse_answer
from runs.views.actions import actor_for
from runs.views.forms import (
    NUL,
    SHOWN_NUL,
    FormError,
    filter_page,
    page_action,
    render_form_error,
)
from runs.views.htmx import is_htmx
from runs.wording import DECISION_DONE, decision_done

BULK_ACTIONS = {action: DECISION_DONE[action].lower() for action in ("approve", "reject")}
# what a row's own buttons do: Approve, Reject, and Answer for a question
ROW_ACTIONS = {action: DECISION_DONE[action].lower() for action in ("approve", "reject", "respond")}
RESPOND_ONLY = ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT.value


@dataclass
class InboxFilters:
    agent: str = ""
    tool: str = ""
    waiting_longer_than: int | None = None  # minutes
    sort: str = ""  # "" oldest first, "newest"
    who: str = ""  # "" all, "mine" (assigned to or claimed by me), "unassigned"

    @classmethod
    def read(cls, params: QueryDict) -> tuple[InboxFilters, dict[str, str]]:
        """The filters of `params`, and what was wrong with those left out."""
        read = QueryFilters(params)
        filters = cls(
            agent=read.text("agent", "Agent", max_chars=SLUG_MAX_CHARS),
            tool=read.text("tool", "Tool", max_chars=NAME_MAX_CHARS),
            waiting_longer_than=read.minutes("waiting_longer_than", "Waiting longer than"),
            sort=read.choice("sort", "Sort", ["newest"]),
            who=read.choice("who", "Who", ["all", "mine", "unassigned"]).replace("all", ""),
        )
        read.cursor()
        return filters, read.errors

    @classmethod
    def from_params(cls, params: QueryDict) -> InboxFilters:
        """The valid filters of `params` (a form's hidden fields: made from valid ones)."""
        return cls.read(params)[0]

    @property
    def query(self) -> str:
        query = QueryDict(mutable=True)
        if self.agent:
            query["agent"] = self.agent
        if self.tool:
            query["tool"] = self.tool
        if self.waiting_longer_than is not None:
            query["waiting_longer_than"] = str(self.waiting_longer_than)
        if self.sort:
            query["sort"] = self.sort
        if self.who:
            query["who"] = self.who
        return query.urlencode()

    @property
    def query_suffix(self) -> str:
        """The query string of the filters, "?agent=…", or nothing."""
        return f"?{self.query}" if self.query else ""

    @property
    def active(self) -> bool:
        return bool(self.agent or self.tool or self.waiting_longer_than is not None or self.who)


@dataclass
class Failure:
    ticket: Ticket | None
    ident: str
    why: str

    def __str__(self) -> str:
        name = self.ticket.tool_name if self.ticket else "ticket"
        return f"{name} {short_id(self.ident)}: {self.why}"


@dataclass
class BulkResult:
    action: str
    done: list[Ticket] = field(default_factory=list)
    failed: list[Failure] = field(default_factory=list)

    @property
    def verb(self) -> str:
        return ROW_ACTIONS[self.action]

    @property
    def summary(self) -> str:
        text = f"{len(self.done)} {self.verb}"
        if self.failed:
            text += f"; {len(self.failed)} failed: " + "; ".join(str(f) for f in self.failed)
        return text + "."

    @property
    def level(self) -> str:
        if not self.failed:
            return "success"
        return "warning" if self.done else "error"


INBOX_PAGE = 50  # tickets a page lists (about 2 KiB of markup each); the next link pages on


def key_undo_seconds() -> float:
    """How long a keyboard approval or rejection waits for an undo before it is sent
    (static/js/inbox_keys.js); 0 sends it at once."""
    return max(0.0, min(float(settings.AWAKEN_KEY_UNDO_SECONDS), 60.0))


def inbox_capabilities(user: Any) -> dict[str, Any]:
    """What the inbox offers: the decide controls also to a user whose teams are all
    frozen (each frozen team's rows show them disabled, saying why)."""
    can = capabilities(user)
    can["decide"] = can["decide"] or allowed_unfrozen(user, DECIDE)
    return can


def inbox_list_context(request: HttpRequest, filters: InboxFilters) -> dict[str, Any]:
    cursor = QueryFilters(request.GET).cursor()  # a bad one: the first page (read() says so)
    agent_ids = visible_agent_ids(request.user, VIEW_TICKET)  # the user's teams only
    page = inbox_tickets(
        agent=filters.agent,
        tool=filters.tool,
        cursor=cursor,
        size=INBOX_PAGE,
        waiting_longer_than=filters.waiting_longer_than,
        newest_first=filters.sort == "newest",
        who=filters.who,
        user=request.user,
        agent_ids=agent_ids,
    )
    requests = ticket_requests(page.items)  # one query for the page's tickets
    # a frozen team's rows show the freeze (the run's agent is read with the ticket)
    frozen = frozen_teams_among(request.user, [ticket.run.agent for ticket in page.items])
    # the teams that require a reason to reject: the row's Reject asks for it inline
    team_ids = {ticket.run.agent.team_id for ticket in page.items}
    reasons = dict(
        Team.objects.filter(pk__in=team_ids, reason_required=True).values_list("pk", "name")
    )
    for ticket in page.items:
        ticket.request_text = requests.get(ticket.pk, "")
        ticket.frozen_team = frozen.get(ticket.run.agent.team_id)
        ticket.reason_required = ticket.run.agent.team_id in reasons
        ticket.team_name = reasons.get(ticket.run.agent.team_id, "")
    return {
        "tickets": page.items,
        "next_cursor": page.next_cursor,
        "first_page": page.first,
        "waiting": inbox_count(
            agent=filters.agent,
            tool=filters.tool,
            waiting_longer_than=filters.waiting_longer_than,
            who=filters.who,
            user=request.user,
            agent_ids=agent_ids,
        ),
        "filters": filters,
        "can": inbox_capabilities(request.user),
        "respond_only": RESPOND_ONLY,
        "now": timezone.now(),
        "deciders": deciders(),  # the assign select's options: read only if shown
    }


def _page_context(request: HttpRequest, filters: InboxFilters) -> dict[str, Any]:
    agents, tools = agent_filter_options(visible_agent_ids(request.user, VIEW_TICKET))
    # keep a filter value the options no longer hold (its last ticket was just decided)
    if filters.agent and filters.agent not in agents:
        agents.append(filters.agent)
    if filters.tool and filters.tool not in tools:
        tools.append(filters.tool)
    undo = key_undo_seconds()
    return {
        **inbox_list_context(request, filters),
        "nav": "inbox",
        "undo_seconds": undo,
        "undo_seconds_text": f"{undo:g}",  # "5", "2.5"
        "agents": agents,
        "tools": tools,
    }


def inbox_url(filters: InboxFilters) -> str:
    url = reverse("runs:inbox")
    return f"{url}?{filters.query}" if filters.query else url


@filter_page
@require(VIEW, "view runs")
def inbox(request: HttpRequest) -> HttpResponse:
    """400 with the page and what was wrong above the list for a bad filter."""
    filters, errors = InboxFilters.read(request.GET)
    context = {**_page_context(request, filters), **filter_errors_context(errors)}
    return render(request, "runs/inbox.html", context, status=400 if errors else 200)


@filter_page
@require(VIEW, "view runs")
def inbox_list(request: HttpRequest) -> HttpResponse:
    filters, errors = InboxFilters.read(request.GET)
    context = {**inbox_list_context(request, filters), **filter_errors_context(errors)}
    return render(request, "runs/partials/inbox_list.html", context, status=400 if errors else 200)


def _raw_ids(request: HttpRequest) -> list[str]:
    return request.POST.getlist("ticket")


def _selected_ids(request: HttpRequest) -> list[uuid.UUID]:
    ids: list[uuid.UUID] = []
    for raw in _raw_ids(request):
        try:
            ident = uuid.UUID(raw.strip())
        except (ValueError, AttributeError):
            continue
        if ident not in ids:
            ids.append(ident)
    return ids


def _found(request: HttpRequest, ids: list[uuid.UUID]) -> dict[uuid.UUID, Ticket]:
    return {  # another team's tickets are as unknown ones ("no such ticket")
        ticket.pk: ticket
        for ticket in Ticket.objects.filter(pk__in=ids).select_related("run__agent", "tool_call")
        if may_see(request.user, ticket.run)
    }


def bulk_error(request: HttpRequest, error: FormError) -> HttpResponse:
    """The error inside the form that was sent, the selection and the reason kept: the
    confirmation's form (htmx: swapped into #inbox-confirm) or the list's bulk form
    (htmx: the list, swapped into #inbox-list); without JavaScript, the inbox page."""
    filters = InboxFilters.from_params(request.POST)  # a NUL in one: left out
    action = request.POST.get("action", "")
    confirm = None
    if request.POST.get("confirm") == "1" and action in BULK_ACTIONS:
        ids = _selected_ids(request)
        confirm = _confirm_context(action, ids, _found(request, ids[:MAX_BULK]))
    kept = {"selected": [raw.replace(NUL, SHOWN_NUL) for raw in _raw_ids(request)]}
    if is_htmx(request) and confirm is not None:
        context = {"confirm": confirm, "filters": filters, **kept}
        response = render_form_error(request, "runs/partials/inbox_confirm.html", context, error)
        target = "#inbox-confirm"
    elif is_htmx(request):
        context = {**inbox_list_context(request, filters), **kept}
        response = render_form_error(request, "runs/partials/inbox_list.html", context, error)
        target = "#inbox-list"
    else:
        context = {**_page_context(request, filters), "confirm": confirm, **kept}
        return render_form_error(request, "runs/inbox.html", context, error)
    response["HX-Retarget"] = target
    response["HX-Reswap"] = "innerHTML"
    return response


@require_POST
@page_action(bulk_error)
@require(DECIDE, "decide tickets")
def bulk_decide(request: HttpRequest) -> HttpResponse:
    """First POST: a confirmation listing the selected tickets. POST with confirm=1: decide
    each ticket in its own transaction; failures are reported, the rest go through. What
    is refused (no action, no selection, a frozen team's ticket: 409 team_frozen) is said
    inside the form that was sent (`bulk_error`)."""
    filters = InboxFilters.from_params(request.POST)
    action = request.POST.get("action", "")
    if action not in BULK_ACTIONS:
        raise InvalidInput("Choose approve or reject.", {"field": "action"})
    ids = _selected_ids(request)
    if not ids:
        raise InvalidInput("Select at least one ticket.", {"field": "ticket"})
    if len(ids) > MAX_BULK:
        raise InvalidInput(f"Decide at most {MAX_BULK} tickets at once.", {"field": "ticket"})
    found = _found(request, ids)
    if request.POST.get("confirm") != "1":
        return _confirmation(request, filters, action, ids, found)

    comment = request.POST.get("comment", "").strip()
    # the teams' guards (a frozen team: 409 team_frozen); this form's own confirm step is
    # the confirmation
    bulk_guard(found.values(), action, comment, confirmed=True)
    result = BulkResult(action=action)
    for ident in ids:
        ticket = found.get(ident)
        if ticket is None:
            result.failed.append(Failure(None, str(ident), "no such ticket"))
            continue
        if not request.user.has_perm(DECIDE, ticket.run):  # the role in its team
            result.failed.append(Failure(ticket, str(ticket.pk), "your role in its team may not"))
            continue
        try:
            with transaction.atomic():
                decision_submit(
                    ticket=ticket, action=action, comment=comment, actor=actor_for(request)
                )
        except ServiceError as exc:
            result.failed.append(Failure(ticket, str(ticket.pk), exc.message))
        else:
            result.done.append(ticket)

    if is_htmx(request):
        context = {**inbox_list_context(request, filters), "result": result}
        return render(request, "runs/partials/inbox_list.html", context)
    levels = {"success": messages.SUCCESS, "warning": messages.WARNING, "error": messages.ERROR}
    messages.add_message(request, levels[result.level], result.summary)
    return redirect(inbox_url(filters))


def _confirm_context(
    action: str, ids: list[uuid.UUID], found: dict[uuid.UUID, Ticket]
) -> dict[str, Any]:
    pending = [
        found[ident]
        for ident in ids
        if ident in found and found[ident].status == Ticket.Status.PENDING
    ]
    pending.sort(key=lambda ticket: (ticket.created_at, ticket.pk))
    return {
        "action": action,
        "tickets": pending,
        "gone": len(ids) - len(pending),
        "respond_only": RESPOND_ONLY,
    }


def _confirmation(
    request: HttpRequest,
    filters: InboxFilters,
    action: str,
    ids: list[uuid.UUID],
    found: dict[uuid.UUID, Ticket],
) -> HttpResponse:
    confirm = _confirm_context(action, ids, found)
    if is_htmx(request):
        context = {"confirm": confirm, "filters": filters}
        return render(request, "runs/partials/inbox_confirm.html", context)
    # without JavaScript: the whole page with the confirmation on top
    context = {**_page_context(request, filters), "confirm": confirm}
    return render(request, "runs/inbox.html", context)


# --- one row's own buttons --------------------------------------------------------------------


def row_error(request: HttpRequest, error: FormError, ticket_id: Any) -> HttpResponse:
    """A row decision refused: the error inside that row's form (htmx: the list swapped
    into #inbox-list), the answer or reason kept; without JavaScript, the inbox page."""
    filters = InboxFilters.from_params(request.GET)
    if is_htmx(request):
        context = inbox_list_context(request, filters)
        response = render_form_error(request, "runs/partials/inbox_list.html", context, error)
        response["HX-Retarget"] = "#inbox-list"
        response["HX-Reswap"] = "innerHTML"
        return response
    return render_form_error(request, "runs/inbox.html", _page_context(request, filters), error)


@require_POST
@page_action(row_error)
@require(DECIDE, "decide tickets")
def row_decide(request: HttpRequest, ticket_id: Any) -> HttpResponse:
    """Approve, reject or answer one ticket from its inbox row, through the decide service
    with the teams' guards of the inbox (a frozen team, a required reason); the list comes
    back with the outcome above it (htmx), or the inbox page with it as a message. The
    list's filters are in the query string."""
    filters = InboxFilters.from_params(request.GET)
    action = request.POST.get("action", "")
    if action not in ROW_ACTIONS:
        raise InvalidInput("Choose approve, reject or answer.", {"field": "action"})
    ticket = _found(request, [ticket_id]).get(ticket_id)
    if ticket is None:  # unknown, or another team's: the same answer
        raise Http404("No such ticket: it may have been removed.")
    refused = denied(request, DECIDE, ticket.run, "decide tickets in this team")
    if refused is not None:
        return refused
    comment = request.POST.get("comment", "").strip()
    payload = parse_answer(request.POST.get("answer", "")) if action == "respond" else None
    bulk_guard([ticket], action, comment, confirmed=True)  # one ticket: nothing to confirm
    with transaction.atomic():
        decision_submit(
            ticket=ticket, action=action, payload=payload, comment=comment, actor=actor_for(request)
        )
    result = BulkResult(action=action, done=[ticket])
    if is_htmx(request):
        context = {**inbox_list_context(request, filters), "result": result}
        return render(request, "runs/partials/inbox_list.html", context)
    messages.success(request, decision_done(action, ticket.tool_name))
    return redirect(inbox_url(filters))
