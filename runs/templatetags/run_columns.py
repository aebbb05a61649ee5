"""The runs list's figures per row: how long a run ran, its tokens and its cost. Each is
read from the row's own columns (no query per row)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import template
from django.utils import timezone

from agents.pricing import cost_label, run_cost_usd
from runs.templatetags.runs_extras import duration

register = template.Library()


def run_length(run: Any) -> dt.timedelta | None:
    """From its first start to its end, or to now while it is not done; None before it
    started."""
    if run.started_at is None:
        return None
    return max((run.finished_at or timezone.now()) - run.started_at, dt.timedelta(0))


@register.filter
def run_duration(run: Any) -> str:
    """How long it ran ("2.4 s", "3 min 5 s"); a dash for a run that never started."""
    return duration(run_length(run))


@register.filter
def run_tokens(run: Any) -> str:
    """Input and output tokens together, grouped by thousands: "12,345"."""
    return f"{(run.input_tokens or 0) + (run.output_tokens or 0):,}"


@register.filter
def run_tokens_detail(run: Any) -> str:
    return f"{run.input_tokens or 0:,} in / {run.output_tokens or 0:,} out"


@register.filter
def run_cost(run: Any) -> str:
    """ "$0.0123" at the prices the run kept from its creation; "—" when its model had no
    price."""
    return cost_label(run_cost_usd(run))
