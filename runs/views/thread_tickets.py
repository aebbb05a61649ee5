"""The thread page's ticket card: the open tickets of the thread's waiting run, decided
there as on the run page (runs/templates/runs/partials/run_tickets.html posts to the ticket's
decide action, whose htmx answer is that card again)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from runs.models import Run
from runs.views.detail import PARTIAL_SECTIONS, run_page_context


def thread_tickets_context(request: HttpRequest, open_run: Run | None) -> dict[str, Any]:
    """`ticket_detail`, `ticket_run` and `ticket_can` for the card, or nothing while the
    thread has no run waiting on a ticket."""
    if open_run is None or open_run.status != Run.Status.WAITING or not open_run.open_tickets:
        return {}
    context = run_page_context(request, open_run.pk, PARTIAL_SECTIONS["run_tickets"])
    if not context["d"].open_tickets:
        return {}
    return {
        "ticket_detail": context["d"],
        "ticket_run": context["run"],
        "ticket_can": context["can"],
    }
