"""Plain words on the pages (runs/wording.py), the technical value on hover:
`{{ run|run_status }}`, `{% plain value "task" %}` (a <span> whose title is the raw value),
`{{ value|say:"event" }}`, `{{ ticket|ticket_kind }}`, `{{ m.text|transcript_text }}`.
Everything returned is escaped."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from runs import wording
from runs.models import Decision

register = template.Library()

REASON_CHARS = 60  # of a free-text reason (an error's, a block's) a badge shows


def _rejected(run: Any) -> bool:
    """Whether the run ended on its own after one of its tickets was rejected: set by
    the page (`run.rejected_decision`), else read for a finished run (one query)."""
    known = getattr(run, "rejected_decision", None)
    if known is not None:
        return bool(known)
    if getattr(run, "status", "") != "done" or getattr(run, "status_reason", "") != "natural":
        return False
    run.rejected_decision = Decision.objects.filter(
        ticket__run_id=run.pk, action=Decision.Action.REJECT
    ).exists()
    return bool(run.rejected_decision)


@register.filter
def run_status(run: Any, check_rejected: bool = False) -> str:
    """`{{ run|run_status }}`: "Waiting for a decision", "Finished", "Failed — …";
    `{{ run|run_status:True }}` also says "— action rejected" (one query for a run
    that finished on its own)."""
    rejected = _rejected(run) if check_rejected else bool(getattr(run, "rejected_decision", False))
    text = wording.run_status_text(run.status, run.status_reason, rejected=rejected)
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


@register.filter
def run_status_technical(run: Any) -> str:
    """`{{ run|run_status_technical }}`: "done · natural", for a title attribute."""
    return wording.run_status_technical(run.status, run.status_reason)


@register.filter
def say(value: Any, kind: str) -> str:
    """`{{ task.status|say:"task" }}`: a value of a kind of runs/wording.py TABLES."""
    return wording.say(value, kind)


@register.simple_tag
def plain(value: Any, kind: str, css: str = "") -> SafeString:
    """`{% plain task.status "task" "badge" %}`: the value in plain words in a <span>
    whose title is the value itself (hover shows it)."""
    return format_html(
        '<span{} title="{}">{}</span>',
        format_html(' class="{}"', css) if css else "",
        value,
        wording.say(value, kind),
    )


@register.filter
def ticket_kind(ticket: Any) -> str:
    return wording.ticket_kind(ticket)


@register.filter
def ticket_outcome(ticket: Any) -> str:
    return wording.ticket_outcome(ticket)


@register.filter
def transcript_text(text: str) -> str:
    return wording.transcript_text(text)
