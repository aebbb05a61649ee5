"""Template helpers. Everything they return is escaped by the template engine."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from functools import lru_cache
from typing import Any

from django import template
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html, format_html_join
from django.utils.timesince import timesince, timeuntil

from runs import wording
from runs.models import OperatorPreference
from runs.runtime.tool_batch import PERMISSION_ACTION
from runs.runtime.types import ToolCallResumeMode

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@register.filter
def short_id(value: Any) -> str:
    """The random tail of a UUID v7: its head is a timestamp shared by neighbours."""
    return str(value)[-8:]


@register.filter
def duration(value: dt.timedelta | None) -> str:
    if value is None:
        return "–"
    seconds = int(value.total_seconds())
    if seconds < 60:
        return f"{value.total_seconds():.1f} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


# Waiting reasons as an operator reads them: runs/wording.py, the one table of wording.
WAITING_LABELS = wording.WAITING_LABELS


@register.filter
def waiting_label(value: Any) -> str:
    return wording.waiting_label(value)


# A background task's status as a badge, in the colours of the run statuses.
TASK_BADGES = {
    "pending": "status-created",
    "running": "status-running",
    "completed": "status-done",
    "failed": "status-done failed",
    "cancelled": "status-done failed",
}


@register.filter
def task_badge(status: Any) -> str:
    return TASK_BADGES.get(str(status), "")


@register.filter
def result_text(value: Any) -> str:
    """A job's result as text: a string as it is, anything else as compact JSON."""
    return value if isinstance(value, str) else compact_json(value)


@register.filter
def event_summary(event: dict[str, Any]) -> str:
    kind = event.get("event_type")
    if kind in ("text_delta", "reasoning_delta"):
        return str(event.get("delta", ""))[:200]
    if kind == "tool_call_ready":
        return f"{event.get('name')}({compact_json(event.get('arguments'))[:160]})"
    if kind == "tool_call_done":
        result = event.get("result") or {}
        outcome = wording.say(event.get("outcome"), "outcome")
        return f"{event.get('id')} {outcome}: {str(result.get('message') or compact_json(result.get('data')))[:160]}"
    if kind == "tool_call_resumed":
        return f"{event.get('target_id')}: {compact_json(event.get('result'))[:160]}"
    if kind == "inference_complete":
        usage = event.get("usage") or {}
        return f"{event.get('model')} · {event.get('duration_ms')} ms · {usage.get('total_tokens', '–')} tokens"
    if kind == "run_finish":
        termination = event.get("termination") or {}
        value = termination.get("value")
        said = wording.say(termination.get("type"), "termination")
        reason = (event.get("result") or {}).get("status_reason")
        if termination.get("type") == "suspended" and reason and reason != "suspended":
            said = wording.waiting_label(reason)  # e.g. a budget, not a decision, holds it
        return f"{said} {compact_json(value) if value is not None else ''}".strip()
    if kind == "ticket_decided":
        decision = event.get("decision") or {}
        action = wording.say(decision.get("action"), "decision")
        return f"{event.get('tool_name')}: {action} by {decision.get('actor')}"
    if kind == "error":
        return str(event.get("message", ""))
    if kind == "input_delivered":
        text = " ".join(
            str(block.get("text", ""))
            for message in event.get("messages") or []
            if isinstance(message, dict)
            for block in message.get("content") or []
            if isinstance(block, dict)
        )
        mode = wording.say(event.get("mode"), "input_mode")
        return f"{mode} input {wording.say(event.get('boundary'), 'boundary')}: {text[:160]}"
    if kind == "tool_call_start":
        return f"{event.get('name')} ({event.get('id')})"
    if kind == "background_task_started":
        return f"{event.get('label') or event.get('kind')} ({event.get('task_id')})"[:200]
    if kind == "background_task_delivered":
        return f"{event.get('task_id')} {event.get('status')}"
    return ""


# --- times ---------------------------------------------------------------------------------------


def _moment(value: Any) -> dt.datetime | None:
    """A datetime, or the ISO text of one (the event frames carry text)."""
    if isinstance(value, str):
        try:
            value = parse_datetime(value)
        except ValueError:
            return None
    if not isinstance(value, dt.datetime):
        return None
    return timezone.make_aware(value) if timezone.is_naive(value) else value


def absolute_time(value: dt.datetime) -> str:
    """The absolute time as an operator reads it: the site's time zone, with its name."""
    return _absolute(timezone.localtime(value))


def _absolute(local: dt.datetime) -> str:
    """absolute_time of a moment already in the site's time zone."""
    return local.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def short_age(delta: dt.timedelta) -> str:
    """A compact length of time: "45 s", "3 min", "2 h 5 min", "3 d 4 h"."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


# How a person chose to see moments (runs.models.OperatorPreference): relative ("3 minutes
# ago"), absolute in their browser's time zone (static/js/time_display.js rewrites the
# text; without JavaScript the site's zone, named), or absolute in UTC. It applies to the
# styles that show a moment ("at", "ago") and, for local and UTC, to the time of day
# ("clock", "hms"); lengths of time ("age", "short", "until") read the same in any zone.
RELATIVE, LOCAL, UTC = "relative", "local", "utc"
TIME_DISPLAYS = (RELATIVE, LOCAL, UTC)
MOMENT_STYLES = ("at", "ago")
CLOCK_STYLES = ("clock", "hms")


def relative_time(moment: dt.datetime, now: dt.datetime | None = None) -> str:
    """A moment relative to now: "3 minutes ago", or "in 3 minutes" if still to come."""
    now = now or timezone.now()
    if moment > now:
        return f"in {timeuntil(moment, now)}"
    return f"{timesince(moment, now)} ago"


def _time_text(
    moment: dt.datetime, style: str, local: dt.datetime, absolute: str, display: str = RELATIVE
) -> str:
    """`moment` in `style` as `display` shows it; `local` is it in the site's time zone,
    `absolute` its absolute_time (a timeline renders hundreds: each is worked out once)."""
    if display == UTC and style in MOMENT_STYLES + CLOCK_STYLES:
        local = moment.astimezone(dt.UTC)
        if style in MOMENT_STYLES:
            return _absolute(local)
    if style == "clock":
        return local.strftime("%H:%M:%S.%f")[:12]
    if style == "hms":
        return local.strftime("%H:%M:%S")
    if style in MOMENT_STYLES:
        return relative_time(moment) if display == RELATIVE else absolute
    if style not in ("age", "short", "until"):
        return absolute
    now = timezone.now()
    if style == "age":
        return timesince(moment, now)
    if style == "short":
        return short_age(now - moment)
    return f"in {timeuntil(moment, now)}" if moment > now else "overdue"


def time_display_of(request: Any) -> str:
    """The time display `request`'s user chose (RELATIVE without a choice or a user),
    read once per request."""
    if request is None:
        return RELATIVE
    known = getattr(request, "_time_display", None)
    if known is not None:
        return str(known)
    user = getattr(request, "user", None)
    display = RELATIVE
    if user is not None and user.is_authenticated:
        chosen = (
            OperatorPreference.objects.filter(user_id=user.pk)
            .values_list("time_display", flat=True)
            .first()
        )
        display = chosen if chosen in TIME_DISPLAYS else RELATIVE
    request._time_display = display
    return display


@register.simple_tag(takes_context=True)
def time_display(context: Any) -> str:
    """`{% time_display %}`: the page's time display (relative, local or utc)."""
    return time_display_of(context.get("request"))


def time_html(value: Any, style: str = "at", empty: str = "–", display: str = RELATIVE) -> str:
    """The <time> element `when` renders, for a given display (a row rendered once for
    every viewer, such as a live timeline row, uses RELATIVE: the page's script shows it
    as its viewer chose)."""
    moment = _moment(value)
    if moment is None:
        return format_html("{}", empty)
    local = timezone.localtime(moment)
    absolute = _absolute(local)
    return format_html(
        '<time data-time="{}" data-shown="{}" datetime="{}" title="{}">{}</time>',
        style,
        display,
        moment.isoformat(),
        absolute,
        _time_text(moment, style, local, absolute, display),
    )


@register.simple_tag(takes_context=True)
def when(context: Any, value: Any, style: str = "at", empty: str = "–") -> str:
    """`{% when t.created_at "ago" %}`: a time as a <time> element whose title is its
    absolute value (hover shows it) and whose datetime attribute is its ISO form. Styles:
    "at" (a moment), "ago" (a moment, "3 minutes ago" in the relative display), "age"
    ("3 minutes", how long since), "short" ("3 min"), "until" ("in 3 minutes" or
    "overdue"), "clock" ("14:03:22.120") and "hms" ("14:03:22"). The viewer's time display
    (time_display_of) decides how moments read. No time renders `empty`, escaped."""
    return time_html(value, style, empty, time_display_of(context.get("request")))


# --- what a waiting run waits for ----------------------------------------------------------------

RESPOND_ONLY = ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT.value
WAITING_DETAIL_CHARS = 300  # of the question a header shows


def waiting_kind(ticket: Any) -> str:
    """What a pending ticket waits for, in a few words: an answer (ask_human and the other
    tools whose decision is their result), a child run, an approval, or a decision."""
    if getattr(ticket, "child_run_id", None):
        return "Waiting for a child run"
    if ticket.resume_mode == RESPOND_ONLY:
        return "Waiting for an answer"
    if ticket.reason == PERMISSION_ACTION:
        return "Waiting for approval"
    return "Waiting for a decision"


@register.simple_tag
def waiting_text(run: Any, ticket: Any = None) -> str:
    """The run header's waiting reason from its oldest open ticket, e.g. "Waiting for an
    answer: Which room?" or "Waiting for approval: write_note"; without a ticket, from the
    run's waiting reason. Plain text: the template escapes it."""
    if ticket is None:
        return waiting_label(getattr(run, "waiting_reason", ""))
    kind = waiting_kind(ticket)
    if getattr(ticket, "child_run_id", None):
        detail = f"{ticket.tool_name} ({short_id(ticket.child_run_id)})"
    elif ticket.resume_mode == RESPOND_ONLY and ticket.message:
        detail = ticket.message
    else:
        detail = ticket.tool_name
    if len(detail) > WAITING_DETAIL_CHARS:
        detail = detail[: WAITING_DETAIL_CHARS - 1] + "…"
    return f"{kind}: {detail}"


# --- a run's timeline ------------------------------------------------------------------------

EVENT_ROW = (
    '<div class="ev" id="ev-{}" data-seq="{}">\n'
    '  <span class="mono muted">{}</span>\n'
    '  <span class="mono small muted">{}</span>\n'
    '  <details><summary><b title="{}">{}</b> '
    '<span class="small">{}</span></summary><pre>{}</pre></details>\n'
    "</div>\n"
)


@register.simple_tag
def event_row(event: dict[str, Any]) -> str:
    """`{% event_row frame %}`: one timeline row of an event frame (its payload with its
    seq and created_at), escaped; a value the frame lacks shows as nothing. The run page
    (`event_rows`) and the live stream (runs/partials/event_row.html) render rows here:
    one format_html per row instead of a template per row, for a page of hundreds."""
    seq = event.get("seq", "")
    return format_html(
        EVENT_ROW,
        seq,
        seq,
        seq,
        time_html(event.get("created_at", ""), "clock"),
        event.get("event_type", ""),
        wording.say(event.get("event_type", ""), "event"),
        event_summary(event),
        pretty_json(event),
    )


@register.simple_tag
def event_rows(events: Any) -> str:
    """`{% event_rows d.events %}`: the rows of RunEvent rows, oldest first."""
    return format_html_join("", "{}", ((event_row(event.as_frame()),) for event in events))


# --- the links of a page of rows -------------------------------------------------------------

STAND_IN = uuid.UUID(int=0)


@lru_cache(maxsize=128)
def _route(name: str, prefix: str, urlconf: Any) -> str:
    return reverse(name, args=[STAND_IN], urlconf=urlconf)


@register.simple_tag
def row_url(name: str, pk: Any) -> str:
    """`{% row_url "runs:ticket-claim" t.pk %}`: what `{% url %}` gives for a route whose one
    argument is a row's UUID, from the route reversed once with a stand-in (a page of rows
    links each row to the same few routes). Not a UUID: ValueError."""
    ident = pk if isinstance(pk, uuid.UUID) else uuid.UUID(str(pk))
    return _route(name, get_script_prefix(), get_urlconf()).replace(str(STAND_IN), str(ident))
