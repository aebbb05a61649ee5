"""Executing background work (the `run_background_task` task) and its part of the sweep
(docs/background-work.md).

A worker claims a task by compare-and-swap (its `attempt` fences every later write of
that execution), holds a lease the job renews through its heartbeat, and records the
outcome in one transaction with the run row locked, waking the run when it was the last
unfinished work. Leases are set and judged by the database's clock only (`Now()`), as
for runs (`runs.services.leases`). A task message delivered twice or late finds nothing
to claim; a worker killed mid-job loses the job only: the sweep runs it again.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Exists, F, OuterRef, Q, Value
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from agents.tools.background_jobs import background_job
from common.jsonsafe import without_nul
from runs.models import BackgroundTask, Run
from runs.runtime.background import AWAITING_TASKS
from runs.services.checkpoint_input import (
    UNFINISHED,
    background_ring_on_commit,
    wake_if_work_finished,
)
from runs.services.leases import worker_identity
from runs.sql import update_returning

logger = logging.getLogger(__name__)

Status = BackgroundTask.Status
SWEEP_BATCH = 500


def _lease_until() -> Any:
    return Now() + dt.timedelta(seconds=settings.AWAKEN_LEASE_SECONDS)


def background_claim(task_id: Any, worker: str) -> BackgroundTask | None:
    """Take the task if it waits for a worker (pending) or its worker died (running, its
    lease expired, attempts left): one guarded update that answers the claimed row."""
    claimable = BackgroundTask.objects.filter(pk=task_id).filter(
        Q(status=Status.PENDING)
        | Q(
            status=Status.RUNNING,
            lease_expires_at__lt=Now(),
            attempt__lt=settings.AWAKEN_MAX_ATTEMPTS,
        )
    )
    return update_returning(
        claimable,
        {
            "status": Status.RUNNING,
            "attempt": F("attempt") + 1,
            "lease_owner": worker[:200],
            "lease_expires_at": _lease_until(),
            "started_at": Coalesce("started_at", Value(timezone.now())),
        },
    )


class Heartbeat:
    """What a job calls while it works: renews the lease (at most every third of it) by a
    guarded update on (task, attempt); False once the task was cancelled or another
    worker took it, and ever after, so the job stops."""

    def __init__(self, task_id: Any, attempt: int) -> None:
        self.task_id = task_id
        self.attempt = attempt
        self.interval = settings.AWAKEN_LEASE_SECONDS / 3
        self.renewed = time.monotonic()
        self.lost = False

    def __call__(self) -> bool:
        if self.lost:
            return False
        now = time.monotonic()
        if now - self.renewed < self.interval:
            return True
        try:
            renewed = BackgroundTask.objects.filter(
                pk=self.task_id, attempt=self.attempt, status=Status.RUNNING
            ).update(lease_expires_at=_lease_until())
        except (OperationalError, InterfaceError):
            # the database is away: go on; the lease (three renewals long) outlives a
            # short outage, and the outcome's guarded write settles the rest
            logger.warning("lease renewal failed for task %s", self.task_id, exc_info=True)
            return True
        if not renewed:
            self.lost = True
            return False
        self.renewed = now
        return True


def background_execute(task_id: Any, worker: str | None = None) -> str:
    """The body of the `run_background_task` task: claim the task, run its job, record
    the outcome. Returns what happened, for logs and tests: completed, failed, skipped
    (nothing to claim), lost (cancelled or taken over while it ran)."""
    task = background_claim(task_id, worker or worker_identity())
    if task is None:
        return "skipped"
    heartbeat = Heartbeat(task.pk, task.attempt)
    try:
        result = background_job(task.kind)(dict(task.arguments or {}), heartbeat)
    except (OperationalError, InterfaceError):
        raise  # the task stays running: the sweep runs it again once its lease expires
    except Exception as exc:
        logger.warning("background task %s (%s) failed", task.pk, task.kind, exc_info=True)
        error = f"{exc.__class__.__name__}: {exc}"
        return "failed" if background_finish(task, Status.FAILED, error=error) else "lost"
    if heartbeat.lost:
        return "lost"
    return "completed" if background_finish(task, Status.COMPLETED, result=result) else "lost"


def _json_safe(value: Any) -> Any:
    """`value` as JSON would carry it (unknown types as text), storable in PostgreSQL."""
    return without_nul(json.loads(json.dumps(value, default=str)))


def background_finish(
    task: BackgroundTask, status: str, *, result: Any = None, error: str = ""
) -> bool:
    """Record the outcome of the execution that claimed `task` (its attempt), if it
    still holds it, and wake the run when this was its last unfinished work: one
    transaction, the run row locked first (as the run's own checkpoints do)."""
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=task.run_id).first()
        if run is None:  # removed, its work with it
            return False
        finished = BackgroundTask.objects.filter(
            pk=task.pk, attempt=task.attempt, status=Status.RUNNING
        ).update(
            status=status,
            result=_json_safe(result) if status == Status.COMPLETED else None,
            error=without_nul(error),
            finished_at=now,
            lease_owner="",
            lease_expires_at=None,
        )
        if finished:
            wake_if_work_finished(run)
    return bool(finished)


# --- the sweep ------------------------------------------------------------------------------------


def background_sweep(now: dt.datetime) -> dict[str, int]:
    """Ring again for work whose doorbell was lost, run again work whose worker died
    (failing work that used up its attempts), and wake runs whose wake was lost."""
    return {
        "background_redispatched": _redispatch_lost(now),
        **_recover_expired(now),
        "background_woken": _wake_lost(),
    }


def _redispatch_lost(now: dt.datetime) -> int:
    """Pending work rung longer ago than two sweeps: its task message was lost."""
    stale = now - dt.timedelta(seconds=max(settings.AWAKEN_SWEEP_SECONDS * 2, 2))
    lost = Q(status=Status.PENDING) & (Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=stale))
    rung = 0
    for task_id in BackgroundTask.objects.filter(lost).values_list("pk", flat=True)[:SWEEP_BATCH]:
        with transaction.atomic():
            if BackgroundTask.objects.filter(lost, pk=task_id).update(dispatched_at=now):
                background_ring_on_commit(task_id)
                rung += 1
    return rung


def _recover_expired(now: dt.datetime) -> dict[str, int]:
    """Running work whose lease expired (its worker was killed): pending again and rung,
    to run again from the start; failed once it has used up its attempts."""
    counts = {"background_recovered": 0, "background_given_up": 0}
    expired = BackgroundTask.objects.filter(status=Status.RUNNING, lease_expires_at__lt=Now())
    rows = expired.values_list("pk", "run_id", "attempt")[:SWEEP_BATCH]
    for task_id, run_id, attempt in rows:
        held = expired.filter(pk=task_id, attempt=attempt)
        if attempt >= settings.AWAKEN_MAX_ATTEMPTS:
            error = (
                f"gave up after {attempt} attempts: each time its worker stopped "
                "renewing the lease (killed, or cut off)"
            )
            with transaction.atomic():
                run = Run.objects.select_for_update().get(pk=run_id)
                if held.update(
                    status=Status.FAILED,
                    error=error,
                    finished_at=now,
                    lease_owner="",
                    lease_expires_at=None,
                ):
                    counts["background_given_up"] += 1
                    wake_if_work_finished(run)
            continue
        with transaction.atomic():
            if held.update(
                status=Status.PENDING, lease_owner="", lease_expires_at=None, dispatched_at=now
            ):
                background_ring_on_commit(task_id)
                counts["background_recovered"] += 1
    return counts


def _wake_lost() -> int:
    """Runs waiting for background work that has all finished: their wake was lost."""
    unfinished = BackgroundTask.objects.filter(run_id=OuterRef("pk"), status__in=UNFINISHED)
    stuck = (
        Run.objects.filter(status=Run.Status.WAITING, status_reason=AWAITING_TASKS, due=False)
        .filter(~Exists(unfinished))
        .values_list("pk", flat=True)[:100]
    )
    woken = 0
    for run_id in list(stuck):
        with transaction.atomic():
            run = Run.objects.select_for_update().filter(pk=run_id).first()
            if run is not None and not run.due and wake_if_work_finished(run):
                woken += 1
    return woken
