"""The trace view's rows (runs/selectors/trace_layout.py), written in Python: a long
run's trace has hundreds of rows, and a template per row would cost more than the rest
of the page. Every value goes through format_html (escaped); widths and positions are
SVG attributes, never style attributes (the strict CSP)."""

from __future__ import annotations

import json
from decimal import Decimal
from html import escape as _e
from typing import Any

from django import template
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from agents.pricing import cost_label
from runs.selectors.trace_layout import Layout, Row
from runs.selectors.trace_spans import Span
from runs.wording import say

register = template.Library()

KIND_WORDS = {
    "run": "Run",
    "child": "Child run",
    "activation": "",
    "step": "",
    "inference": "Model call",
    "tool": "Tool call",
    "ticket": "Ticket",
    "error": "Error",
}
STATUS_WORDS = {  # a span's outcome, on its badge ("ok" has none)
    "failed": "Failed",
    "waiting": "Waiting",
    "paused": "Ended, waiting",
    "running": "Running",
    "interrupted": "Interrupted",
    "cancelled": "Cancelled",
    "rejected": "Rejected",
    "more": "Continues",
}
PAYLOAD_CHARS = 6000  # of one event's JSON a span shows
DEPTH_CLASSES = 8


def seconds_text(value: float | None) -> str:
    """ "340 ms", "1.2 s", "3 min 20 s", "2 h 5 min"."""
    if value is None:
        return "still running"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.1f} s"
    minutes, seconds = divmod(int(value), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


@register.filter
def trace_seconds(value: float | None) -> str:
    return seconds_text(value)


def tokens_text(prompt: int | None, completion: int | None) -> str:
    if prompt is None and completion is None:
        return ""
    return f"{prompt or 0:,} in · {completion or 0:,} out"


def _cost(value: Decimal | None) -> str:
    return "" if value is None else cost_label(value)


def payload_html(event: dict[str, Any], seq: int) -> SafeString:
    """One event's JSON, cut at PAYLOAD_CHARS (the run's export has it whole)."""
    text = json.dumps(event, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    more = len(text) - PAYLOAD_CHARS
    kind = str(event.get("event_type") or "event")
    return format_html(
        '<div class="payload"><p class="small"><b title="{}">{}</b> <span class="muted">#{}</span>'
        "</p><pre>{}</pre>{}</div>",
        kind,
        say(kind, "event"),
        seq,
        text[:PAYLOAD_CHARS],
        format_html('<p class="muted small">{} more characters in the run\'s export</p>', more)
        if more > 0
        else "",
    )


@register.simple_tag
def trace_payloads(events: list[tuple[int, dict[str, Any]]]) -> SafeString:
    return mark_safe("".join(payload_html(payload, seq) for seq, payload in events))


def _events(span: Span, depth: int, url: str) -> str:
    """A closed disclosure of the span's events, fetched when opened (run_trace.js)."""
    if not span.seqs:
        return ""
    query = "&amp;".join(f"seq={seq}" for seq in span.seqs)
    count = len(span.seqs)
    return (
        f'<details class="events d{depth}" data-events-url="{_e(url)}?{query}">'
        f"<summary>{count} event{'' if count == 1 else 's'}</summary>"
        '<div class="events-body"><p class="muted small">Loading…</p></div></details>'
    )


def _row(row: Row, url: str) -> str:
    """One span's opening: its row and the start of its body (its events, then the spans
    inside it). Plain f-strings over html.escape: hundreds of rows per page, and every
    text goes through _e; the numbers are the server's own."""
    span = row.span
    depth = min(row.depth, DEPTH_CLASSES)
    kind_word = KIND_WORDS.get(span.kind, "")
    duration = seconds_text(row.seconds)
    if span.estimated and row.seconds is not None:
        duration = "≈ " + duration
    name = _e(span.name)
    if span.link:
        name = f'<a href="{_e(span.link)}">{name}</a>'
    kind_html = f'<span class="span-kind">{_e(kind_word)}</span> ' if kind_word else ""
    status_html = ""
    if span.status not in ("ok", ""):
        status = STATUS_WORDS.get(span.status, span.status)
        status_html = f' <span class="badge span-status">{_e(status)}</span>'
    note_html = ""
    if span.note:
        title = f' title="{_e(span.technical)}"' if span.technical else ""
        note_html = f' <span class="span-note"{title}>{_e(span.note)}</span>'
    key = _e(span.key)
    return (
        f'<details class="span k-{_e(span.kind)} s-{_e(span.status or "none")}" '
        f'id="span-{key}"{" open" if row.open else ""}><summary class="span-row">'
        f'<span class="span-label d{depth}">{kind_html}<span class="span-name">{name}</span>'
        f"{status_html}{note_html}</span>"
        f'<span class="span-figs"><span>+{_e(seconds_text(row.offset))}</span> '
        f'<span class="span-dur">{_e(duration)}</span>'
        f"<span>{_e(tokens_text(span.input_tokens, span.output_tokens))}</span>"
        f"<span>{_e(_cost(span.cost))}</span></span>"
        f'<svg class="span-bar" aria-hidden="true" focusable="false"><rect class="bar" '
        f'x="{row.left:g}%" y="4" width="{row.width:g}%" height="10" rx="2"></rect></svg>'
        f'<a class="span-link" href="#span-{key}" aria-label="Link to this span">#</a>'
        f'</summary><div class="span-body">{_events(span, depth, url)}'
    )


@register.simple_tag
def trace_rows(layout: Layout) -> SafeString:
    """The spans as nested <details> (a span's children inside its body), in tree order."""
    parts: list[str] = []
    depths: list[int] = []  # of the spans still open
    urls: dict[str, str] = {}  # each run's events URL
    for row in layout.rows:
        while depths and depths[-1] >= row.depth:
            depths.pop()
            parts.append("</div></details>")
        run_id = row.span.run_id
        if run_id not in urls:
            urls[run_id] = reverse("runs:run-trace-events", args=[run_id])
        parts.append(_row(row, urls[run_id]))
        depths.append(row.depth)
    parts.append("</div></details>" * len(depths))
    return mark_safe("".join(parts))


@register.simple_tag
def trace_axis(layout: Layout) -> SafeString:
    """The time axis over the bars: 0, a quarter, half … the trace's length."""
    ticks = "".join(
        format_html(
            '<text x="{}%" y="12" text-anchor="{}">{}</text>',
            f"{pct:g}",
            "start" if pct == 0 else "end" if pct == 100 else "middle",
            seconds_text(seconds) if pct else "0",
        )
        for pct, seconds in layout.ticks
    )
    return format_html(
        '<svg class="trace-axis" aria-hidden="true" focusable="false">{}</svg>', mark_safe(ticks)
    )
