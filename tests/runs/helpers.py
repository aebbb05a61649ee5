from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from runs.models import Run, RunEvent
from runs.runtime.events import TERMINAL_EVENT_TYPES
from runs.services.execution import run_advance


def drive(run: Run, *, limit: int = 10) -> Run:
    """Play the worker: advance the run until nothing is due."""
    for _ in range(limit):
        run.refresh_from_db()
        if not run.due:
            break
        run_advance(run_id=run.pk, worker="test-worker")
    run.refresh_from_db()
    return run


def event_types(run: Run, after: int = 0) -> list[str]:
    return list(
        RunEvent.objects.filter(run=run, seq__gt=after)
        .order_by("seq")
        .values_list("event_type", flat=True)
    )


def events(run: Run, kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in RunEvent.objects.filter(run=run, event_type=kind).order_by("seq")]


def assert_gap_free(run: Run) -> None:
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    run.refresh_from_db()
    assert run.last_event_seq == len(seqs)


def expire_lease(run: Run) -> None:
    """What time does to a dead worker's lease."""
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - dt.timedelta(seconds=1))


def activations(run: Run) -> list[list[str]]:
    """The run's event types, one list per activation (each from its `run_start`)."""
    split: list[list[str]] = []
    for kind in event_types(run):
        if kind == "run_start" or not split:
            split.append([])
        split[-1].append(kind)
    return split


def assert_activations_closed(run: Run) -> None:
    """Every `run_start` in the log is followed by a closing event before the next one (an
    interrupted activation's is an `error` with code `activation_interrupted`)."""
    for activation in activations(run):
        assert activation[0] == "run_start", activation
        assert any(kind in TERMINAL_EVENT_TYPES for kind in activation), activation


def schedule_form(agent: Any, **fields: Any) -> dict[str, Any]:
    """A valid schedule form, as the admin and the schedules page post it."""
    return {
        "name": "morning report",
        "agent": agent.pk,
        "message": "report on the night",
        "kind": "cron",
        "cron": "0 9 * * 1-5",
        "interval_seconds": "",
        "timezone": "Europe/Berlin",
        "thread_policy": "new",
        "catch_up": "skip",
        "priority": 128,
        "enabled": "on",
        **fields,
    }
