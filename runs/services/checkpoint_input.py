"""What a checkpoint does besides the record (runs.store): deliver steer input at a step
boundary, record background work a step started or an activation received, wake a run
whose background work is all finished, and hand a thread that a run left its next queued
input. All in the checkpoint's transaction, with the run row locked."""

from __future__ import annotations

import datetime as dt
from typing import Any
from uuid import UUID

from django.db.models import F
from django.utils import timezone

from common.jsonsafe import without_nul
from runs.message_rows import message_to_row
from runs.models import BackgroundTask, Message, PendingInput, Run, Thread
from runs.runtime import types as rt
from runs.runtime.background import AWAITING_TASKS
from runs.runtime.ports import BackgroundResult, BackgroundStart, VersionConflictError
from runs.services.delivery import delivered_event, mark_delivered, messages_from_json
from runs.services.dispatch import enqueue_task_on_commit, run_dispatch
from runs.services.events import events_append

UNFINISHED = (BackgroundTask.Status.PENDING, BackgroundTask.Status.RUNNING)


def steer_deliver(run: Run, message_count: int) -> list[rt.Message]:
    """Append the steer input waiting for `run` to its thread's log (after
    `message_count`, the checkpoint's committed count), each recorded delivered at
    `next_step` with its `input_delivered` event. Returns the messages appended."""
    inputs = list(
        PendingInput.objects.select_for_update(no_key=True)
        .filter(run_id=run.pk, status=PendingInput.Status.PENDING)
        .order_by("seq")
    )
    Run.objects.filter(pk=run.pk).update(pending_inputs=0)
    run.pending_inputs = 0
    if not inputs:
        return []
    delivered: list[rt.Message] = []
    per_input: list[tuple[PendingInput, list[rt.Message]]] = []
    for input_ in inputs:
        messages = messages_from_json(input_.messages)
        per_input.append((input_, messages))
        delivered.extend(messages)
    updated = Thread.objects.filter(pk=run.thread_id, message_count=message_count).update(
        message_count=F("message_count") + len(delivered)
    )
    if not updated:
        raise VersionConflictError(message_count)
    Message.objects.bulk_create(
        [
            message_to_row(run.thread_id, message_count + offset + 1, message)
            for offset, message in enumerate(delivered)
        ]
    )
    events = []
    for input_, messages in per_input:
        ids = [m.id or "" for m in messages]
        mark_delivered(input_, run, PendingInput.Boundary.NEXT_STEP, ids)
        events.append(delivered_event(input_, PendingInput.Boundary.NEXT_STEP, ids))
    events_append(run, events)
    return delivered


def background_record(
    run: Run, starts: list[BackgroundStart], delivered: list[str], now: dt.datetime
) -> None:
    """Insert the work a step started (each rung once committed) and mark the finished
    work whose results this activation took in."""
    if starts:
        BackgroundTask.objects.bulk_create(
            [
                BackgroundTask(
                    id=UUID(start.task_id),
                    run_id=run.pk,
                    tool_call_id=start.call_id,
                    kind=start.kind,
                    label=start.label[:300],
                    arguments=without_nul(start.arguments),
                    created_at=now,
                    dispatched_at=now,
                )
                for start in starts
            ]
        )
        for start in starts:
            background_ring_on_commit(start.task_id)
    if delivered:
        BackgroundTask.objects.filter(pk__in=delivered, run_id=run.pk).update(delivered_at=now)


def background_ring_on_commit(task_id: Any) -> None:
    enqueue_task_on_commit("runs.run_background_task", task_id)


def wake_if_work_finished(run: Run) -> bool:
    """A run waiting for background work (its row locked by the caller) whose work has
    all finished is due again. Called where the run starts waiting and where work
    finishes: both lock the run row first, so one of them sees the other's commit."""
    if run.status != Run.Status.WAITING or run.status_reason != AWAITING_TASKS:
        return False
    if BackgroundTask.objects.filter(run_id=run.pk, status__in=UNFINISHED).exists():
        return False
    Run.objects.filter(pk=run.pk).update(due=True, updated_at=timezone.now())
    run_dispatch(run.pk)
    return True


def background_results(run_id: Any) -> list[BackgroundResult]:
    """The finished work a run's next activation receives (not yet delivered)."""
    rows = BackgroundTask.objects.filter(
        run_id=run_id,
        delivered_at__isnull=True,
        status__in=[
            BackgroundTask.Status.COMPLETED,
            BackgroundTask.Status.FAILED,
            BackgroundTask.Status.CANCELLED,
        ],
    ).order_by("created_at")
    return [
        BackgroundResult(
            task_id=str(row.pk),
            kind=row.kind,
            label=row.label,
            status=row.status,
            result=row.result,
            error=row.error,
        )
        for row in rows
    ]


def background_cancel(run: Run, now: dt.datetime) -> int:
    """A run that ends (cancelled, failed) takes its unfinished work with it; a worker
    executing it stops at its next heartbeat."""
    return BackgroundTask.objects.filter(run_id=run.pk, status__in=UNFINISHED).update(
        status=BackgroundTask.Status.CANCELLED, finished_at=now, lease_expires_at=None
    )
