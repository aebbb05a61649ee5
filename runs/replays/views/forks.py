"""Forking a run from its page: the fork form (re-rendered as the operator picks a step
boundary or a message to edit) and the fork itself, which lands on the new run's page."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from common.access import allowed_unfrozen, frozen_team_of
from common.audit import request_actor
from runs.models import Run
from runs.permissions import FORK, denied, forbidden, require, visible_or_404
from runs.replays.selectors.forks import fork_panel, run_forks
from runs.replays.services.forks import run_fork
from runs.views.detail import run_page_full_context
from runs.views.forms import FormError, page_action, render_form_error

# forks the run page links to (the API lists them all)
FORKS_SHOWN = 20


def fork_context(request: HttpRequest, run: Run, **panel: Any) -> dict[str, Any]:
    """The run page's forks card: provenance, the run's forks and, for those who may start
    runs, the fork form (`panel`: `fork_panel`'s choices)."""
    forks = run_forks(run)
    return {
        "forks": list(forks[:FORKS_SHOWN]),
        "forks_count": forks.count(),
        # a frozen team's form is shown with its button disabled and why
        "fork": fork_panel(run, **panel) if allowed_unfrozen(request.user, FORK, run) else None,
        "fork_frozen": frozen_team_of(request.user, run),
        "fork_open": bool(panel),
        "compare_url": reverse("runs:run-compare"),
    }


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
    """The fork form for `?step=` with `?edit_seq=` chosen (its textarea prefilled); for a
    frozen team it shows why its button is disabled."""
    run = get_object_or_404(Run.objects.select_related("agent", "agent_version"), pk=run_id)
    visible_or_404(request.user, run)
    if not allowed_unfrozen(request.user, FORK, run):
        return forbidden(request, "fork runs in this team")
    panel = fork_panel(
        run,
        step=_number(request.GET.get("step", "")),
        edit_seq=_number(request.GET.get("edit_seq", "")),
        version=request.GET.get("version", ""),
    )
    context = {"run": run, "fork": panel, "fork_frozen": frozen_team_of(request.user, run)}
    return render(request, "runs/partials/run_fork_form.html", context)


def _fork_error(request: HttpRequest, error: FormError, run_id: Any) -> HttpResponse:
    """The run page with the fork form open, what was chosen kept and the reason."""
    context = run_page_full_context(request, run_id)
    context["fork_choices"] = {  # the forks card (templatetags/fork_tags.py) opens the form
        "step": _number(error.value("step")),
        "edit_seq": _number(error.value("edit_seq")),
        "version": error.value("version"),
        "edit_text": error.value("edit_text"),
        "error": error.text,
    }
    error.shown = allowed_unfrozen(request.user, FORK, context["run"])  # the fork form says it
    return render_form_error(request, "runs/run_detail.html", context, error)


@require_POST
@page_action(_fork_error)
@require(FORK, "fork runs")
def fork(request: HttpRequest, run_id: Any) -> HttpResponse:
    """Fork the run (`step`, `version`, optional `edit_seq` and `edit_text`); bad input
    shows the run page again with the form open and the reason (HTTP 400; 409 while the
    team is frozen)."""
    run = get_object_or_404(Run.objects.select_related("agent"), pk=run_id)
    if (refused := denied(request, FORK, run, "fork runs in this team")) is not None:
        return refused
    raw_seq = request.POST.get("edit_seq", "")
    step = _number_or_raw(request.POST.get("step", ""))
    edit = {"seq": _number_or_raw(raw_seq), "text": request.POST.get("edit_text", "")}
    new = run_fork(
        run=run,
        step=step,
        version=request.POST.get("version", ""),
        edit=edit if raw_seq else None,
        actor=request_actor(request, "ui"),
    )
    messages.success(request, f"Forked at step {new.fork_step} as run {new.pk}.")
    return redirect("runs:run-detail", run_id=new.pk)
