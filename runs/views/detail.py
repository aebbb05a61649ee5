"""Run detail page and the partials the live stream refreshes."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from agents.pricing import cost_label, run_cost_usd
from runs import selectors
from runs.permissions import VIEW, capabilities, require
from runs.ticket_forms import edit_fields


def _context(request: HttpRequest, run_id: Any) -> dict[str, Any]:
    detail = selectors.run_detail(run_id)
    if detail is None:
        raise Http404("no such run")
    for ticket in detail.open_tickets:
        ticket.edit_fields = edit_fields(ticket)  # type: ignore[attr-defined]
    return {
        "d": detail,
        "run": detail.run,
        "cost": cost_label(run_cost_usd(detail.run)),
        "can": capabilities(request.user),
        "nav": "runs",
    }


@require(VIEW, "view runs")
def run_page(request: HttpRequest, run_id: Any) -> HttpResponse:
    return render(request, "runs/run_detail.html", _context(request, run_id))


@require(VIEW, "view runs")
def run_partial(request: HttpRequest, run_id: Any, template: str) -> HttpResponse:
    """One panel of the run page (header, tickets, transcript, timeline), re-fetched live."""
    return render(request, f"runs/partials/{template}.html", _context(request, run_id))
