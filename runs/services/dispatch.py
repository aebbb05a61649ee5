"""Ringing the doorbell: enqueue `advance_run` after commit. Losing it loses nothing —
the sweep re-dispatches due runs from the database."""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app
from django.db import transaction
from django.utils import timezone

from runs import tracing
from runs.models import Run

logger = logging.getLogger(__name__)


def _enqueue(
    run_id: str, task: str = "runs.advance_run", trace: dict[str, str] | None = None
) -> None:
    # The task by its name: runs.tasks imports the services, not the other way round.
    # `trace`: the trace context of the request that asked (runs.tracing), as headers.
    try:
        if trace:
            current_app.tasks[task].apply_async((run_id,), headers=trace)
        else:
            current_app.tasks[task].delay(run_id)
    except Exception:  # broker down: the sweep will find the row
        logger.warning(
            "could not enqueue %s(%s); the sweep will retry", task, run_id, exc_info=True
        )


def run_dispatch(run_id: Any) -> None:
    """Enqueue the run once the current transaction commits (immediately outside one)."""
    Run.objects.filter(pk=run_id).update(dispatched_at=timezone.now())
    enqueue_on_commit(run_id)


def enqueue_on_commit(run_id: Any) -> None:
    """The enqueue alone, for a caller that wrote the run's `dispatched_at` itself. The
    trace context is taken now: the request's span may be over when the commit comes."""
    trace = tracing.carrier()
    if trace:
        transaction.on_commit(lambda: _enqueue(str(run_id), trace=trace), robust=True)
    else:  # tracing off (or no trace): the plain enqueue
        transaction.on_commit(lambda: _enqueue(str(run_id)), robust=True)


def enqueue_task_on_commit(task: str, row_id: Any) -> None:
    """Ring another task's doorbell (ids only) once the current transaction commits."""
    transaction.on_commit(lambda: _enqueue(str(row_id), task), robust=True)
