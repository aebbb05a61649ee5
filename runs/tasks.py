"""Celery tasks: ids only, explicit names, safe to run twice."""

from __future__ import annotations

import datetime as dt
from typing import Any

from celery import shared_task
from django.conf import settings

from runs.operations.services.notifications import notifications_drain
from runs.operations.services.retention import prune_runs
from runs.operations.services.schedules import schedules_fire_due
from runs.services.background import background_execute
from runs.services.execution import run_advance, runs_sweep
from runs.services.remote import run_abort_remote

# One retention tick stops starting batches after this long; the next tick continues.
# Well under the broker's visibility timeout, and a worker slot is not held for hours.
PRUNE_BUDGET_SECONDS = 300.0


@shared_task(name="runs.advance_run", acks_late=True, ignore_result=True)
def advance_run(run_id: str) -> str:
    return run_advance(run_id=run_id)


@shared_task(name="runs.sweep", ignore_result=True)
def sweep() -> dict[str, int]:
    return runs_sweep()


@shared_task(name="runs.abort_remote", ignore_result=True)
def abort_remote(run_id: str) -> str | None:
    """Cancel the remote (A2A) task of a run that ended outside a worker."""
    return run_abort_remote(run_id=run_id)


@shared_task(name="runs.prune_old_runs", ignore_result=True)
def prune_old_runs() -> dict[str, Any] | None:
    """Daily retention (beat): remove the run trees finished more than
    AWAKEN_RETENTION_DAYS days ago; does nothing while that setting is 0."""
    days = settings.AWAKEN_RETENTION_DAYS
    if days <= 0:
        return None
    result = prune_runs(older_than=dt.timedelta(days=days), max_seconds=PRUNE_BUDGET_SECONDS)
    return result.counts()


@shared_task(name="runs.fire_schedules", ignore_result=True)
def fire_schedules() -> dict[str, int]:
    """The schedules' one-second tick (beat): fire every slot that has come, each once."""
    return schedules_fire_due()


@shared_task(name="runs.deliver_notifications", ignore_result=True)
def deliver_notifications() -> dict[str, int]:
    """Send the due notifications (kicked after an event commits, ticked by beat); safe
    to run concurrently: each delivery is taken under a lease."""
    return notifications_drain()


@shared_task(name="runs.run_background_task", acks_late=True, ignore_result=True)
def run_background_task(task_id: str) -> str:
    """Execute background work a tool started (safe to run twice: a repeat finds
    nothing to claim)."""
    return background_execute(task_id)
