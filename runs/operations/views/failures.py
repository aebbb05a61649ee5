"""The failure groups page (docs/failure-groups.md): failed runs grouped by fingerprint,
one state at a time (open by default), each group with its count, first and last
occurrence, the agents affected and a link to its runs; and resolving, ignoring or
reopening a group (operators of its team, `operations.change_failuregroup`; audited; refused
while the team is frozen, the buttons then shown disabled with why)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from common.access import allowed_unfrozen, frozen_teams_among, visible_teams
from common.audit import request_actor
from common.errors import InvalidInput
from runs import wording
from runs.operations.models.failures import FailureGroup
from runs.operations.selectors.failures import STATES, failure_group_page
from runs.operations.services.failures import TRANSITIONS, failure_group_set_state
from runs.permissions import denied, require
from runs.selectors.filters import QueryFilters, filter_errors_context
from runs.views.forms import FormError, filter_page, page_action, render_form_error

VIEW_GROUPS = "operations.view_failuregroup"
CHANGE_GROUPS = "operations.change_failuregroup"
DONE = {
    "resolve": "Resolved: it opens again if it fails again.",
    "ignore": "Ignored: it is still counted, but stays out of the open list and the dashboard.",
    "reopen": "Reopened.",
}


STATE_LABELS = {"open": "Open", "resolved": "Resolved", "ignored": "Ignored"}
SOURCE_KINDS = {
    "provider": "provider",
    "endpoint": "remote endpoint",
    "tool": "tool",
    "model": "model",
}


def with_labels(group: FailureGroup) -> None:
    """What the page says for the group's technical values (shown on hover)."""
    kind, _, name = group.source.partition(":")
    labels = {
        "source_label": f"at {SOURCE_KINDS.get(kind, kind)} {name}" if name else "",
        "error_label": wording.run_status_text("done", group.error_type),
        "state_label": STATE_LABELS.get(group.state, group.state),
    }
    for attribute, label in labels.items():
        setattr(group, attribute, label)


def failures_context(request: HttpRequest, params: Any = None) -> dict[str, Any]:
    read = QueryFilters(request.GET if params is None else params)
    state = read.choice("state", "State", STATES) or "open"
    cursor = read.cursor()
    user = request.user
    page = failure_group_page(visible_teams(user, VIEW_GROUPS), state, cursor)
    frozen = frozen_teams_among(user, page.items)
    for group in page.items:
        group.can_change = allowed_unfrozen(user, CHANGE_GROUPS, group)
        group.frozen = frozen.get(group.team_id)
        with_labels(group)
    return {
        "nav": "failures",
        "page": page,
        "state": state,
        "states": STATES,
        "query": f"state={state}",
        "runs_url": reverse("runs:run-list"),
        **filter_errors_context(read.errors),
    }


@filter_page
@require(VIEW_GROUPS, "see failure groups")
def failure_list(request: HttpRequest) -> HttpResponse:
    context = failures_context(request)
    status = 400 if context["filter_errors"] else 200
    return render(request, "runs/failures.html", context, status=status)


def _state_error(request: HttpRequest, error: FormError, group_id: Any) -> HttpResponse:
    """The page (of the state the form came from) with the error inside the group's form."""
    params = request.GET.copy()
    params.setdefault("state", request.POST.get("from_state", "open"))
    context = failures_context(request, params)
    return render_form_error(request, "runs/failures.html", context, error)


@require_POST
@page_action(_state_error)
@require(CHANGE_GROUPS, "change failure groups")
def failure_set_state(request: HttpRequest, group_id: Any) -> HttpResponse:
    group = get_object_or_404(FailureGroup, pk=group_id)
    action = request.POST.get("action", "")
    if action not in TRANSITIONS:
        raise InvalidInput(f"unknown action {action!r}: resolve, ignore or reopen")
    if (
        refused := denied(request, CHANGE_GROUPS, group, "change this team's failures")
    ) is not None:
        return refused
    failure_group_set_state(group=group, action=action, actor=request_actor(request, "ui"))
    messages.success(request, f"{group.title[:80]} — {DONE[action]}")
    state = request.POST.get("from_state", "open")
    back = f"{reverse('runs:failures')}?state={state if state in STATES else 'open'}"
    return redirect(back)
