"""Bulk cancel and bulk retry from the runs list (runs.services.run_bulk): the selected
runs' checkboxes belong to the list's bulk form; the answer is the list again with what
became of each run above it, or the confirmation the teams ask for."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_POST

from common.access import allowed_unfrozen
from common.errors import ConfirmationRequired, InvalidInput
from runs.models import Run
from runs.permissions import forbidden
from runs.services.run_bulk import MAX_BULK, RUN_ACTIONS, bulk_run_action, unique_run_ids
from runs.views.actions import actor_for
from runs.views.forms import FormError, page_action, render_form_error
from runs.views.lists import run_list_context


def _list_params(request: HttpRequest) -> QueryDict:
    """The runs list's filters the form was sent from (its `query`)."""
    return QueryDict(request.POST.get("query", "")[:4000])


def _selected(request: HttpRequest) -> list[str]:
    return [str(ident) for ident in unique_run_ids(request.POST.getlist("run"))[:MAX_BULK]]


def _page(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    context = run_list_context(request, _list_params(request))
    return {**context, "selected": _selected(request), **extra}


def bulk_error(request: HttpRequest, error: FormError) -> HttpResponse:
    """The list with the error inside its bulk form, the selection and reason kept."""
    return render_form_error(request, "runs/run_list.html", _page(request), error)


def _confirmation(request: HttpRequest, action: str, exc: ConfirmationRequired) -> HttpResponse:
    ids = _selected(request)
    shown = {str(run.pk): run for run in Run.objects.filter(pk__in=ids).select_related("agent")}
    confirm = {
        "action": action,
        "runs": [shown[ident] for ident in ids if ident in shown],
        "count": exc.details.get("count"),
        "threshold": exc.details.get("threshold"),
        "reason": request.POST.get("reason", ""),
    }
    return render(request, "runs/run_list.html", _page(request, bulk_confirm=confirm))


@require_POST
@page_action(bulk_error)
def bulk_runs(request: HttpRequest) -> HttpResponse:
    """Cancel or retry the selected runs (`run`, `action`, `reason`, `confirm`). Above a
    team's bulk threshold the first POST answers the confirmation; each run is then done,
    already done, or refused, and the list says which and why."""
    action = request.POST.get("action", "")
    if action not in RUN_ACTIONS:
        raise InvalidInput("Choose cancel or retry.", {"field": "action"})
    perm = RUN_ACTIONS[action][0]
    if not allowed_unfrozen(request.user, perm):
        return forbidden(request, f"{action} runs")
    try:
        outcome = bulk_run_action(
            request.POST.getlist("run"),
            action,
            request.POST.get("reason", ""),
            actor_for(request),
            confirm=request.POST.get("confirm") == "1",
        )
    except ConfirmationRequired as exc:
        return _confirmation(request, action, exc)
    return render(request, "runs/run_list.html", _page(request, bulk_result=outcome, selected=[]))
