"""Channel-layer group names and broadcasts. The layer is at-most-once: it is a hint to
refresh, the database event log is the truth (SPEC §3)."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

DASHBOARD_GROUP = "dashboard"


def run_group(run_id: Any) -> str:
    return f"run.{run_id}"


def _send(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # never let a broadcast failure touch the committed state
        logger.warning("broadcast to %s failed", group, exc_info=True)


def broadcast_events(run_id: Any, frames: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """Called on commit: the persisted events of a run, then a one-line summary for lists."""
    if frames:
        _send(run_group(run_id), {"type": "run.events", "events": frames})
    _send(DASHBOARD_GROUP, {"type": "run.changed", "run": summary})


def broadcast_live(run_id: Any, event: dict[str, Any]) -> None:
    """A token delta before it is persisted; carries no seq."""
    _send(run_group(run_id), {"type": "run.live", "event": event})


def render_event_row(frame: dict[str, Any]) -> str:
    """One timeline row, from the same partial the run page renders (escaped)."""
    from django.template.loader import render_to_string

    return render_to_string("runs/partials/event_row.html", {"event": frame})
