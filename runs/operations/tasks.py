"""Operations' Celery tasks: ids only, explicit names, safe to run twice. Their names
keep the `runs.` prefix of the core's (the beat schedule in the settings and the
`notifications` queue's route send them by name). Registered in every process by
OperationsConfig.ready and found by the worker's autodiscovery of the installed apps."""

from __future__ import annotations

import datetime as dt
from typing import Any

from celery import shared_task
from django.conf import settings

from runs.operations.services.notify_drain import notifications_drain
from runs.operations.services.retention import prune_runs
from runs.operations.services.schedules import schedules_fire_due

# One retention tick stops starting batches after this long; the next tick continues.
# Well under the broker's visibility timeout, and a worker slot is not held for hours.
PRUNE_BUDGET_SECONDS = 300.0


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
