"""The runs list's figures per row: how long a run ran, its tokens and its cost. Each is
read from the row's own columns (no query per row)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import template
from django.template.defaultfilters import pluralize, truncatechars
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from agents.pricing import cost_label, run_cost_usd
from runs.templatetags.runs_extras import duration, row_url, short_id, time_display_of, time_html
from runs.templatetags.wording_tags import run_status, run_status_technical

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


# --- a row of the runs list, rendered in Python -------------------------------------------
# A page of 50 rows through the template engine (an include, a badge include and some forty
# nodes a row) took more than half of the list's time at a million runs; the same markup
# written here takes a fraction. `runs/partials/run_row.html` (the live row a socket
# refetches) and `runs/partials/status_badge.html` render through these too.

ROW = """<tr id="run-row-{}">
  <td><input type="checkbox" name="run" form="run-bulk" data-bulk-pick data-compare-pick \
value="{}"{} aria-label="select run {}"></td>
  <td>{}</td>
  <td>{}</td>
  <td>{} <span class="muted small">v{}</span></td>
  <td class="small">{} <a class="mono muted" href="{}">{}</a></td>
  <td>{}</td>
  <td class="num run-duration" title="{}">{}</td>
  <td class="num run-tokens" title="{}">{}</td>
  <td class="num run-cost" title="at its model's prices when the run was created">{}</td>
  <td>{}</td>
  <td class="small muted">{}</td>
</tr>
"""
DURATION_TITLES = (
    "from its start to its end",
    "so far: it has not finished",
    "it has not started",
)


@register.simple_tag
def status_badge(run: Any, check_rejected: Any = False) -> SafeString:
    """A run's status in plain words, its technical value on hover."""
    failed = " failed" if run.is_failed else ""
    return format_html(
        '<span class="badge status-{}{}" title="{}">{}</span>',
        run.status,
        failed,
        run_status_technical(run),
        run_status(run, bool(check_rejected)),
    )


def _links(run: Any, detail: str) -> SafeString:
    """The run's id, and its parent and children when it has them."""
    links = [format_html('<a class="mono" href="{}">{}</a>', detail, short_id(run.pk))]
    if run.parent_run_id:
        links.append(
            format_html(
                '<br><span class="small run-parent">child of <a class="mono" href="{}" '
                'title="the run that delegated to this one">{}</a></span>',
                row_url("runs:run-detail", run.parent_run_id),
                short_id(run.parent_run_id),
            )
        )
    children = getattr(run, "child_count", 0)
    if children:
        links.append(
            format_html(
                '<br><a class="small run-children" href="{}" title="listed in the run\'s '
                'header">{} child run{}</a>',
                detail,
                children,
                pluralize(children),
            )
        )
    return mark_safe("".join(links))


def _tickets(run: Any, display: str) -> SafeString:
    """Its open tickets, and what it waits on the longest."""
    found = []
    if run.open_tickets:
        found.append(
            format_html('<span class="badge status-waiting">{} open</span>', run.open_tickets)
        )
    if getattr(run, "waits_tool", None):
        found.append(
            format_html(
                '<div class="small run-waits">waits: <b>{}</b>, {}</div>',
                run.waits_tool,
                time_html(run.waits_since, "short", "–", display),
            )
        )
    return mark_safe("".join(found))


@register.simple_tag(takes_context=True)
def run_row(context: Any, run: Any) -> SafeString:
    """One row of the runs list (`selected`: the ids ticked before a bulk action)."""
    pk = str(run.pk)
    selected = context.get("selected")
    display = time_display_of(context.get("request"))
    started, finished = run.started_at, run.finished_at
    return format_html(
        ROW,
        pk,
        pk,
        mark_safe(" checked") if selected and pk in selected else "",
        short_id(pk),
        _links(run, row_url("runs:run-detail", run.pk)),
        status_badge(run),
        run.agent.slug,
        run.agent_version.number if run.agent_version_id else "",
        truncatechars(run.thread.title, 60),
        row_url("runs:thread-detail", run.thread_id),
        short_id(run.thread_id),
        run.steps,
        DURATION_TITLES[0 if finished else 1 if started else 2],
        run_duration(run),
        run_tokens_detail(run),
        run_tokens(run),
        run_cost(run),
        _tickets(run, display),
        time_html(run.created_at, "ago", "–", display),
    )
