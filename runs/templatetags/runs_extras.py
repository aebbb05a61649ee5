"""Template helpers. Everything they return is escaped by the template engine."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django import template

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


# Waiting reasons (and the status reasons behind them) as an operator reads them; the
# others are shown as they are.
WAITING_LABELS = {
    "background_tasks": "Waiting for background tasks",
    "awaiting_tasks": "Waiting for background tasks",
}


@register.filter
def waiting_label(value: Any) -> str:
    return WAITING_LABELS.get(str(value or ""), str(value or ""))


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
        return f"{event.get('id')} {event.get('outcome')}: {str(result.get('message') or compact_json(result.get('data')))[:160]}"
    if kind == "tool_call_resumed":
        return f"{event.get('target_id')}: {compact_json(event.get('result'))[:160]}"
    if kind == "inference_complete":
        usage = event.get("usage") or {}
        return f"{event.get('model')} · {event.get('duration_ms')} ms · {usage.get('total_tokens', '–')} tokens"
    if kind == "run_finish":
        termination = event.get("termination") or {}
        return f"{termination.get('type')} {compact_json(termination.get('value')) if termination.get('value') is not None else ''}".strip()
    if kind == "ticket_decided":
        decision = event.get("decision") or {}
        return f"{event.get('tool_name')}: {decision.get('action')} by {decision.get('actor')}"
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
        return f"{event.get('mode')} input at {event.get('boundary')}: {text[:160]}"
    if kind == "tool_call_start":
        return f"{event.get('name')} ({event.get('id')})"
    if kind == "background_task_started":
        return f"{event.get('label') or event.get('kind')} ({event.get('task_id')})"[:200]
    if kind == "background_task_delivered":
        return f"{event.get('task_id')} {event.get('status')}"
    return ""
