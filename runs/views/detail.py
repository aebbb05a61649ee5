"""Run detail page, the partials the live stream refreshes, and the earlier pages of the
run's and the thread's logs."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from agents.pricing import cost_label, run_cost_usd
from runs import selectors
from runs.models import BackgroundTask, Run, Thread
from runs.permissions import (
    VIEW,
    VIEW_THREAD,
    capabilities,
    may_see,
    require,
    visible_or_404,
)
from runs.runtime.background import BACKGROUND_KEY
from runs.ticket_forms import edit_fields
from runs.views.forms import FormError, render_form_error
from runs.views.htmx import is_htmx
from runs.views.thread_control import run_steer_inputs

# What each partial of the run page reads: a live refresh of the header need not read the
# timeline and the transcript too.
PARTIAL_SECTIONS = {
    "run_header": frozenset({"header"}),
    "run_tickets": frozenset({"tickets"}),
    "run_transcript": frozenset({"transcript"}),
    "run_timeline": frozenset({"timeline"}),
}


def seq_param(request: HttpRequest, name: str) -> int | None:
    """A `?before_seq=` / `?from_seq=` bound; anything but a positive integer is no bound."""
    raw = request.GET.get(name, "")
    if not raw.isdigit() or len(raw) > 18:
        return None
    value = int(raw)
    return value if value > 0 else None


def run_page_context(
    request: HttpRequest,
    run_id: Any,
    sections: frozenset[str] = selectors.RUN_SECTIONS,
    *,
    events_before: int | None = None,
    messages_before: int | None = None,
    messages_from: int | None = None,
) -> dict[str, Any]:
    detail = selectors.run_detail(
        run_id,
        sections=sections,
        events_before=events_before,
        messages_before=messages_before,
        messages_from=messages_from,
    )
    if detail is None or not may_see(request.user, detail.run):
        raise Http404("no such run")
    for ticket in detail.open_tickets:
        ticket.edit_fields = edit_fields(ticket)  # type: ignore[attr-defined]
    return {
        "d": detail,
        "run": detail.run,
        "cost": cost_label(run_cost_usd(detail.run)),
        "can": capabilities(request.user, detail.run),  # the role in the run's team
        "nav": "runs",
        # run control: the steer input waiting for the run's next step (the header shows it)
        "steer_inputs": run_steer_inputs(detail.run) if "header" in sections else [],
    }


# background tasks the run page lists (a run starts a few; the API lists them all)
BACKGROUND_SHOWN = 50


def run_background_tasks(run: Run) -> list[BackgroundTask]:
    """The run's background work, oldest first: one query, none for a run whose state
    never listed any."""
    if not ((run.state or {}).get("extensions") or {}).get(BACKGROUND_KEY):
        return []
    return list(
        BackgroundTask.objects.filter(run_id=run.pk).order_by("created_at")[:BACKGROUND_SHOWN]
    )


def run_page_full_context(request: HttpRequest, run_id: Any) -> dict[str, Any]:
    """Everything the run page shows (404 for a run the user may not see); its forks card
    is the replays app's (`{% run_forks_card %}`)."""
    context = run_page_context(request, run_id)
    context["background_tasks"] = run_background_tasks(context["run"])
    context["background_shown"] = BACKGROUND_SHOWN
    return context


def run_form_error(request: HttpRequest, error: FormError, run_id: Any) -> HttpResponse:
    """A run page form's error: its tickets panel for the htmx forms there (the card
    stays, with its buttons), the whole page for a plain form post."""
    if is_htmx(request) and request.headers.get("HX-Target") == "run-tickets":
        context = run_page_context(request, run_id, PARTIAL_SECTIONS["run_tickets"])
        template = "runs/partials/run_tickets.html"
        # a card gone (decided meanwhile): the outcome that stays until dismissed
        return render_form_error(request, template, context, error, unshown="flash")
    context = run_page_full_context(request, run_id)
    return render_form_error(request, "runs/run_detail.html", context, error)


@require(VIEW, "view runs")
def run_page(request: HttpRequest, run_id: Any) -> HttpResponse:
    return render(request, "runs/run_detail.html", run_page_full_context(request, run_id))


@require(VIEW, "view runs")
def run_partial(request: HttpRequest, run_id: Any, template: str) -> HttpResponse:
    """One panel of the run page (header, tickets, transcript, timeline), re-fetched live.
    The timeline and the transcript take `?before_seq=` (the page before the first row
    shown, for "show earlier"); the transcript also `?from_seq=`, which the run page sets
    to its first message so a live refresh keeps every message the page had."""
    before = seq_param(request, "before_seq")
    context = run_page_context(
        request,
        run_id,
        PARTIAL_SECTIONS[template],
        events_before=before if template == "run_timeline" else None,
        messages_before=before if template == "run_transcript" else None,
        messages_from=seq_param(request, "from_seq") if template == "run_transcript" else None,
    )
    return render(request, f"runs/partials/{template}.html", context)


@require(VIEW, "view threads")
def thread_messages(request: HttpRequest, thread_id: Any) -> HttpResponse:
    """An earlier page of the thread page's transcript (`?before_seq=`)."""
    thread = Thread.objects.filter(pk=thread_id).only("pk", "team_id").first()
    visible_or_404(request.user, thread, VIEW_THREAD)
    window = selectors.thread_messages_page(thread_id, before_seq=seq_param(request, "before_seq"))
    if window is None:
        raise Http404("no such thread")
    return render(
        request,
        "runs/partials/thread_messages.html",
        {"thread_id": thread_id, "thread_messages": window},
    )
