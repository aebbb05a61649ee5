"""Claim, release and assign a ticket from the approvals inbox or the run page: POST only,
CSRF protected, the decide permission checked here. An htmx request gets back the panel
it came from (the inbox list, or the run's tickets panel when the form says
`from=run`); a plain form post is redirected to that page."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from common.teams import ensure_not_frozen_only
from runs.decisions.services.claims import (
    CLAIM_MINUTES,
    assignee_named,
    may_release_any,
    ticket_assign,
    ticket_claim,
    ticket_release,
)
from runs.decisions.views.inbox import InboxFilters, inbox_list_context, inbox_url
from runs.decisions.views.inbox import _page_context as inbox_page_context
from runs.models import Ticket
from runs.permissions import DECIDE, require, visible_or_404
from runs.views.actions import actor_for
from runs.views.detail import PARTIAL_SECTIONS, run_form_error, run_page_context
from runs.views.forms import FormError, page_action, render_form_error
from runs.views.htmx import is_htmx


def _ticket(request: HttpRequest, ticket_id: Any) -> Ticket:
    """The ticket, if the user's role in its team may decide (another team's: 404; a
    frozen team's: 409 team_frozen)."""
    ticket = get_object_or_404(
        Ticket.objects.select_related("run__agent", "claimed_by", "assigned_to"), pk=ticket_id
    )
    visible_or_404(request.user, ticket.run)
    if not request.user.has_perm(DECIDE, ticket.run):
        ensure_not_frozen_only(request.user, DECIDE, ticket.run)
        raise PermissionDenied("your role in this team may not decide tickets")
    return ticket


def _claim_error(request: HttpRequest, error: FormError, ticket_id: Any) -> HttpResponse:
    """From the run page: the tickets panel (or page) with the error in the form; from
    the inbox: the list, and the refusal said below it."""
    ticket = get_object_or_404(Ticket.objects.select_related("run__agent"), pk=ticket_id)
    visible_or_404(request.user, ticket.run)  # another team's: 404, as an unknown id
    if error.values.get("from") == "run":
        return run_form_error(request, error, ticket.run_id)
    params = QueryDict(mutable=True)
    params.update(error.values)  # as sent, but without a NUL a query could not take
    filters = InboxFilters.from_params(params)
    if not is_htmx(request):
        context = inbox_page_context(request, filters)
        return render_form_error(request, "runs/inbox.html", context, error)
    return _inbox_answer(request, filters, "error", error.text, error.status)


@require_POST
@page_action(_claim_error)
@require(DECIDE, "claim tickets")
def claim(request: HttpRequest, ticket_id: Any) -> HttpResponse:
    ticket = _ticket(request, ticket_id)
    ticket_claim(ticket, actor_for(request))
    return _answer(
        request, ticket, "success", f"You are on {ticket.tool_name} for {CLAIM_MINUTES} min."
    )


@require_POST
@page_action(_claim_error)
@require(DECIDE, "release tickets")
def release(request: HttpRequest, ticket_id: Any) -> HttpResponse:
    ticket = _ticket(request, ticket_id)
    ticket_release(ticket, actor_for(request), force=may_release_any(request.user))
    return _answer(request, ticket, "success", f"Released {ticket.tool_name}.")


@require_POST
@page_action(_claim_error)
@require(DECIDE, "assign tickets")
def assign(request: HttpRequest, ticket_id: Any) -> HttpResponse:
    """The assignee is the username in `assignee-<ticket id>` (the inbox row's select,
    posted with the whole list form) or in `assignee`; empty: nobody."""
    ticket = _ticket(request, ticket_id)
    username = request.POST.get(f"assignee-{ticket.pk}", request.POST.get("assignee", ""))
    assignee = assignee_named(username.strip())
    ticket_assign(ticket, assignee, actor_for(request))
    who = assignee.get_username() if assignee is not None else "nobody"
    return _answer(request, ticket, "success", f"Assigned {ticket.tool_name} to {who}.")


def _answer(
    request: HttpRequest, ticket: Ticket, level: str, text: str, status: int = 200
) -> HttpResponse:
    if request.POST.get("from") == "run":
        if is_htmx(request):
            context = run_page_context(request, ticket.run_id, PARTIAL_SECTIONS["run_tickets"])
            context["flash"] = {"level": level, "text": text}
            return render(request, "runs/partials/run_tickets.html", context, status=status)
        messages.add_message(request, messages.ERROR if status >= 400 else messages.SUCCESS, text)
        return redirect("runs:run-detail", run_id=ticket.run_id)
    return _inbox_answer(request, InboxFilters.from_params(request.POST), level, text, status)


def _inbox_answer(
    request: HttpRequest, filters: InboxFilters, level: str, text: str, status: int = 200
) -> HttpResponse:
    if is_htmx(request):
        html = render_to_string(
            "runs/partials/inbox_list.html", inbox_list_context(request, filters), request=request
        )
        if level == "error":  # the list shows the outcome of a success; a refusal is said
            flash = {"level": level, "text": text}
            html += render_to_string("runs/partials/claim_flash.html", flash, request=request)
        return HttpResponse(html, status=status)
    messages.add_message(request, messages.ERROR if status >= 400 else messages.SUCCESS, text)
    return redirect(inbox_url(filters))
