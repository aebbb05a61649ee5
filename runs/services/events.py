"""Appending to a run's durable event log and the thread projection.

Callers hold the run row lock (`select_for_update` inside `atomic`), so the per-run seq
is gap-free: the counter and the rows commit together or not at all.
"""

from __future__ import annotations

import datetime as dt
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from runs.models import Run, RunEvent, Thread
from runs.realtime import broadcast_events
from runs.runtime.types import RunStatus


def run_summary(run: Run) -> dict[str, Any]:
    return {
        "id": str(run.id),
        "thread_id": str(run.thread_id),
        "status": run.status,
        "status_reason": run.status_reason,
        "waiting_reason": run.waiting_reason,
        "steps": run.steps,
        "last_event_seq": run.last_event_seq,
        "updated_at": run.updated_at.isoformat(),
    }


def events_append(
    run: Run, events: list[dict[str, Any]], *, now: dt.datetime | None = None
) -> list[RunEvent]:
    """Append events after the run's last seq and broadcast them once committed.

    The run row must be locked by the caller; it is saved here with the new counter.
    """
    now = now or timezone.now()
    start = run.last_event_seq
    rows = [
        RunEvent(
            run=run,
            seq=start + index + 1,
            event_type=event["event_type"],
            payload=event,
            created_at=now,
        )
        for index, event in enumerate(events)
    ]
    if rows:
        RunEvent.objects.bulk_create(rows)
        run.last_event_seq = start + len(rows)
        Run.objects.filter(pk=run.pk).update(last_event_seq=run.last_event_seq)
    frames = [row.as_frame() for row in rows]
    transaction.on_commit(partial(broadcast_events, run.pk, frames, run_summary(run)))
    return rows


def apply_thread_projection(run: Run) -> None:
    """REFERENCE §2.6: latest/active/open run pointers follow the run's status."""
    thread_id = run.thread_id
    updates: dict[str, Any] = {"latest_run": run, "updated_at": timezone.now()}
    if run.status == RunStatus.CREATED:
        updates.update(active_run=None, open_run=run)
    elif run.status == RunStatus.RUNNING:
        updates.update(active_run=run, open_run=run)
    elif run.status == RunStatus.WAITING:
        updates.update(active_run=None, open_run=run)
    Thread.objects.filter(pk=thread_id).update(**updates)
    if run.status == RunStatus.DONE:
        Thread.objects.filter(pk=thread_id, active_run=run).update(active_run=None)
        Thread.objects.filter(pk=thread_id, open_run=run).update(open_run=None)
