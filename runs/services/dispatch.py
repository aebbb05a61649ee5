"""Ringing the doorbell: enqueue `advance_run` after commit. Losing it loses nothing —
the sweep re-dispatches due runs from the database."""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app
from django.db import transaction
from django.utils import timezone

from runs.models import Run

logger = logging.getLogger(__name__)


def _enqueue(run_id: str, task: str = "runs.advance_run") -> None:
    # The task by its name: runs.tasks imports the services, not the other way round.
    try:
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
    """The enqueue alone, for a caller that wrote the run's `dispatched_at` itself."""
    transaction.on_commit(lambda: _enqueue(str(run_id)), robust=True)


def enqueue_task_on_commit(task: str, row_id: Any) -> None:
    """Ring another task's doorbell (ids only) once the current transaction commits."""
    transaction.on_commit(lambda: _enqueue(str(row_id), task), robust=True)
