"""Forking a run from its page: the fork form (re-rendered as the operator picks a step
boundary or a message to edit) and the fork itself, which lands on the new run's page."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from common.audit import request_actor
from common.errors import ServiceError
from runs.models import Run
from runs.permissions import FORK, denied, require
from runs.selectors.forks import fork_panel
from runs.services.forks import run_fork
from runs.views.detail import (
    BACKGROUND_SHOWN,
    fork_context,
    run_background_tasks,
    run_page_context,
)


def _number(raw: str) -> int | None:
    return int(raw) if raw.isdigit() and len(raw) <= 9 else None


def _number_or_raw(raw: str) -> Any:
    """A form field for the service: its number, or the text (which the service refuses
    with a message that quotes it)."""
    number = _number(raw)
    return number if number is not None else raw


@require_GET
@require(FORK, "fork runs")
def fork_form(request: HttpRequest, run_id: Any) -> HttpResponse:
    """The fork form for `?step=` with `?edit_seq=` chosen (its textarea prefilled)."""
    run = get_object_or_404(Run.objects.select_related("agent", "agent_version"), pk=run_id)
    if (refused := denied(request, FORK, run, "fork runs in this team")) is not None:
        return refused
    panel = fork_panel(
        run,
        step=_number(request.GET.get("step", "")),
        edit_seq=_number(request.GET.get("edit_seq", "")),
        version=request.GET.get("version", ""),
    )
    return render(request, "runs/partials/run_fork_form.html", {"run": run, "fork": panel})


@require_POST
@require(FORK, "fork runs")
def fork(request: HttpRequest, run_id: Any) -> HttpResponse:
    """Fork the run (`step`, `version`, optional `edit_seq` and `edit_text`); bad input
    shows the run page again with the form open and the reason (HTTP 400)."""
    run = get_object_or_404(Run.objects.select_related("agent"), pk=run_id)
    if (refused := denied(request, FORK, run, "fork runs in this team")) is not None:
        return refused
    raw_seq = request.POST.get("edit_seq", "")
    edit_text = request.POST.get("edit_text", "")
    step = _number_or_raw(request.POST.get("step", ""))
    version = request.POST.get("version", "")
    edit = {"seq": _number_or_raw(raw_seq), "text": edit_text} if raw_seq else None
    try:
        new = run_fork(
            run=run, step=step, version=version, edit=edit, actor=request_actor(request, "ui")
        )
    except ServiceError as exc:
        context = run_page_context(request, run.pk)
        context.update(
            fork_context(
                request,
                context["run"],
                step=_number(str(step)),
                edit_seq=_number(raw_seq),
                version=version,
                edit_text=edit_text,
                error=exc.message,
            )
        )
        context["background_tasks"] = run_background_tasks(context["run"])
        context["background_shown"] = BACKGROUND_SHOWN
        return render(request, "runs/run_detail.html", context, status=400)
    messages.success(request, f"Forked at step {new.fork_step} as run {new.pk}.")
    return redirect("runs:run-detail", run_id=new.pk)
