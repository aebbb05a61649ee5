"""Decide by policy, on the inbox: a filter (agent, tool, argument pattern, waiting
longer than N minutes) → a preview listing exactly the matching tickets → approve or
reject all of them (the previewed ids, each re-checked at decision time) → a summary:
decided, conflicts (decided first by someone else: who), errors."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from common.errors import ConfirmationRequired, InvalidInput, ServiceError
from runs.decisions.services.bulk import (
    BULK_ACTIONS,
    MAX_BULK,
    TicketPolicy,
    bulk_decide,
    tickets_matching,
)
from runs.decisions.views.inbox import RESPOND_ONLY, InboxFilters, _page_context
from runs.permissions import DECIDE, require
from runs.selectors.waiting import parse_minutes
from runs.views.actions import actor_for
from runs.views.forms import FormError, page_action, shown_data
from runs.views.htmx import is_htmx


def policy_from(params: QueryDict) -> TicketPolicy:
    """The policy of the form; a "waiting longer than" that is not whole minutes is refused."""
    raw_minutes = params.get("waiting_longer_than", "").strip()
    minutes = parse_minutes(raw_minutes)
    if raw_minutes and minutes is None:
        raise InvalidInput("Waiting longer than: give whole minutes (0 to a year).")
    return TicketPolicy(
        agent=params.get("agent", "").strip(),
        tool=params.get("tool", "").strip(),
        arguments_pattern=params.get("arguments_pattern", "").strip()[:1000],
        waiting_longer_than=minutes,
    )


def _form_values(params: QueryDict) -> dict[str, str]:
    names = ("agent", "tool", "arguments_pattern", "waiting_longer_than")
    return {name: params.get(name, "").strip()[:1000] for name in names}


def _answer(
    request: HttpRequest, out: dict[str, Any], status: int = 200, data: QueryDict | None = None
) -> HttpResponse:
    """htmx: what goes under the form (#inbox-policy-out); without JavaScript, the inbox
    page with the panel open and it in place."""
    values = _form_values(request.POST if data is None else data)
    out = {**out, "policy": values, "respond_only": RESPOND_ONLY}
    if is_htmx(request):
        return render(request, "runs/partials/inbox_policy_out.html", out, status=status)
    context = {**_page_context(request, InboxFilters()), **out, "policy_open": True}
    return render(request, "runs/inbox.html", context, status=status)


def _bulk_confirm(request: HttpRequest, exc: ConfirmationRequired) -> dict[str, Any]:
    """What the confirm step (runs/partials/bulk_confirm.html) resends, with confirm."""
    return {
        **exc.details,
        "action": request.POST.get("action", ""),
        "comment": request.POST.get("comment", "").strip(),
        "tickets": request.POST.getlist("ticket"),
    }


def _policy_error(request: HttpRequest, error: FormError) -> HttpResponse:
    """Bad input (a NUL character included) said under the form, the form as sent."""
    out = {"policy_error": error.text}
    return _answer(request, out, status=error.status, data=shown_data(request.POST))


@require_POST
@page_action(_policy_error)
@require(DECIDE, "decide tickets")
def policy_decide(request: HttpRequest) -> HttpResponse:
    """First POST: the preview of what the policy matches. POST with confirm=1 and the
    previewed ticket ids: decide those (not what the policy would match by now)."""
    try:
        policy = policy_from(request.POST)
        if request.POST.get("confirm") != "1":
            tickets = tickets_matching(policy, limit=MAX_BULK + 1, user=request.user)
            preview = {"tickets": tickets[:MAX_BULK], "more": len(tickets) > MAX_BULK}
            return _answer(request, {"preview": preview})
        action = request.POST.get("action", "")
        if action not in BULK_ACTIONS:
            raise InvalidInput("Choose approve or reject.")
        outcome = bulk_decide(
            request.POST.getlist("ticket"),
            action,
            request.POST.get("comment", "").strip(),
            actor_for(request),
            policy=policy,
            confirm=request.POST.get("confirm_bulk") == "1",
        )
    except ConfirmationRequired as exc:
        return _answer(request, {"bulk_confirm": _bulk_confirm(request, exc)}, status=400)
    except InvalidInput as exc:
        return _answer(request, {"policy_error": exc.message}, status=400)
    except ServiceError as exc:  # a frozen team
        return _answer(request, {"policy_error": exc.message}, status=exc.status)
    if is_htmx(request):
        return _answer(request, {"outcome": outcome})
    levels = {"success": messages.SUCCESS, "warning": messages.WARNING, "error": messages.ERROR}
    messages.add_message(request, levels[outcome.level], outcome.summary)
    return redirect(reverse("runs:inbox"))
