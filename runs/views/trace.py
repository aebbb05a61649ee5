"""The run page's trace tab: the run's spans (runs/selectors/trace.py) as a nested tree
with a waterfall, loaded when the tab is first shown and again when the run's events
arrive (static/js/run_trace.js)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from agents.pricing import cost_label
from runs.models import Run
from runs.permissions import VIEW, may_see, require, visible_or_404
from runs.selectors.trace_layout import clamp_steps, layout
from runs.selectors.trace_load import run_trace, span_events, trace_root
from runs.selectors.trace_spans import Span, Trace

EVENTS_SHOWN = 10  # of one span (a span points to two or three)


def _children_totals(root: Span) -> dict[str, Any] | None:
    """What the nested child runs (every level) add: tokens and cost."""
    found = False
    prompt = completion = 0
    cost: Decimal | None = None
    stack = list(root.children)
    while stack:
        span = stack.pop()
        stack.extend(span.children)
        if span.kind != "child":
            continue
        found = True
        prompt += span.input_tokens or 0
        completion += span.output_tokens or 0
        if span.cost is not None:
            cost = (cost or Decimal(0)) + span.cost
    if not found:
        return None
    return {
        "input_tokens": prompt,
        "output_tokens": completion,
        "cost": cost_label(cost) if cost is not None else "",
    }


def trace_context(run_id: Any, trace: Trace, steps: int) -> dict[str, Any]:
    now = timezone.now()
    shown = layout(trace, steps=steps, now=now)
    return {
        "run_id": run_id,
        "trace": trace,
        "layout": shown,
        "cost": cost_label(trace.cost),
        "children_totals": _children_totals(trace.root),
        "next_steps": shown.steps_shown + clamp_steps(None),
        "running": trace.root.end is None,
    }


def _visible_run(request: HttpRequest, run_id: Any) -> Run:
    run = Run.objects.select_related("agent").only("id", "agent__team_id").filter(pk=run_id)
    return visible_or_404(request.user, next(iter(run.order_by()[:1]), None))


def steps_param(request: HttpRequest) -> int:
    raw = request.GET.get("steps", "")
    return clamp_steps(int(raw) if raw.isdigit() and len(raw) < 7 else None)


@require(VIEW, "view runs")
def run_trace_partial(request: HttpRequest, run_id: Any) -> HttpResponse:
    """The trace of a run (`?steps=`: how many of its steps to show)."""
    root = trace_root(run_id)
    if root is None or not may_see(request.user, root["agent__team_id"]):
        raise Http404("not found")
    steps = steps_param(request)
    trace = run_trace(root["id"], steps=steps, root=root)
    assert trace is not None
    context = trace_context(root["id"], trace, steps)
    return render(request, "runs/partials/run_trace.html", context)


@require(VIEW, "view runs")
def run_trace_events(request: HttpRequest, run_id: Any) -> HttpResponse:
    """The events of one span of the trace (`?seq=` each), when it is opened."""
    found = _visible_run(request, run_id)
    seqs = [int(raw) for raw in request.GET.getlist("seq")[:EVENTS_SHOWN] if raw.isdigit()]
    events = span_events(found.pk, seqs)
    return render(request, "runs/partials/run_trace_events.html", {"events": events})
