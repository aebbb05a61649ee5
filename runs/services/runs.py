"""Cancelling, retrying and re-prioritizing runs (starting and continuing them:
runs.services.submission_flow)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from agents.pricing import price_snapshot
from common.audit import SYSTEM, Actor, audit_record
from common.errors import IllegalTransition
from common.teams import by_operator, ensure_reason, ensure_writable
from runs.models import Run, Thread, ToolCall
from runs.runtime import types as rt
from runs.runtime.loop import end_without_activation
from runs.services import stats
from runs.services.creation import (
    input_for,
    normalize_input_messages,
    run_for_idempotency_key,
    thread_open_run,
)
from runs.services.dispatch import run_dispatch
from runs.services.events import (
    apply_thread_projection,
    events_append,
    run_identity,
)
from runs.services.locks import lock_thread_of, retry_lock_conflicts
from runs.services.run_end import CANCELLED, RunEnded, run_end_effects, run_is_replay
from runs.services.submission import priority_check
from runs.services.tickets import tickets_close_open

__all__ = ["normalize_input_messages", "run_for_idempotency_key"]  # their old home


@retry_lock_conflicts
@transaction.atomic
def run_cancel(*, run: Run, actor: Actor = SYSTEM, reason: str = "") -> Run:
    """Cancel means done: a run nobody executes ends `cancelled` now; a running
    one is asked to stop cooperatively. Open tickets close, child runs are cancelled.
    An operator's cancel is refused while the run's team is frozen, and without a
    `reason` when the team requires one (child runs follow their parent unchecked)."""
    if by_operator(actor):
        team_id = Run.objects.filter(pk=run.pk).values_list("agent__team_id", flat=True).first()
        ensure_writable(team_id)
        ensure_reason(team_id, reason, "cancel a run")
    return run_cancel_unchecked(run=run, actor=actor, reason=reason)


@transaction.atomic
def run_cancel_unchecked(*, run: Run, actor: Actor = SYSTEM, reason: str = "") -> Run:
    """`run_cancel` without the team's guards (its caller checked them, or cascades).
    The run and its thread are locked before the child runs it cascades to (the lock
    order: runs.services.locks)."""
    run = Run.objects.select_for_update(no_key=True).get(pk=run.pk)
    if run.status == Run.Status.DONE:
        raise IllegalTransition(
            f"run {run.pk} already finished ({run.status_reason or 'done'})",
            {"status": run.status, "status_reason": run.status_reason},
        )
    lock_thread_of(run)
    children = Run.objects.filter(parent_run=run).exclude(status=Run.Status.DONE)
    for child in children.order_by("pk"):
        run_cancel_unchecked(run=child, actor=actor)
    audit_record(
        actor=actor,
        action="run.cancel",
        target_type="run",
        target_id=run.pk,
        run=run,
        before={"status": run.status, "status_reason": run.status_reason},
        comment=(reason or "").strip(),
    )
    now = timezone.now()
    # a worker holds it (its lease, by the database's clock, is live): it stops the run
    held = Run.objects.filter(pk=run.pk, lease_expires_at__gt=Now()).exclude(lease_owner="")
    if held.update(cancel_requested_at=now):
        run.cancel_requested_at = now
        return run
    _finish_cancelled(run, now)
    return run


def _finish_cancelled(run: Run, now: Any) -> None:
    tickets_close_open(run, now)
    ToolCall.objects.filter(
        run=run, status__in=[ToolCall.Status.SUSPENDED, ToolCall.Status.RESUMING]
    ).update(status=ToolCall.Status.CANCELLED, updated_at=now)
    termination = rt.TerminationReason.cancelled()
    # the state and the log end as the loop's own cancellation leaves them
    state, end_events = end_without_activation(
        run_identity(run), rt.PersistedState.from_json(run.state), termination
    )
    run.state = state.to_json()
    run.status = Run.Status.DONE
    run.status_reason = "cancelled"
    run.termination_reason = termination.to_json()
    run.waiting = None
    run.due = False
    run.cancel_requested_at = run.cancel_requested_at or now
    run.finished_at = now
    run.updated_at = now
    run.save(
        update_fields=[
            "state",
            "status",
            "status_reason",
            "termination_reason",
            "waiting",
            "due",
            "cancel_requested_at",
            "finished_at",
            "updated_at",
            "open_tickets",
        ]
    )
    events_append(run, end_events, now=now)
    inputs_accepted = apply_thread_projection(run)
    # what follows its end, as after any (runs.services.run_end): counters, background
    # work, the thread's next input, the replay's set, the remote task, ...
    run_end_effects(
        RunEnded(
            run=run,
            how=CANCELLED,
            now=now,
            replay=run_is_replay(run),
            inputs_accepted=inputs_accepted,
        )
    )


@retry_lock_conflicts
@transaction.atomic
def run_retry(*, run: Run, actor: Actor = SYSTEM) -> Run:
    """A failed run starts again from its last checkpoint: a new run on the same thread,
    pinned to the same agent version (a done run is never reopened)."""
    run = Run.objects.select_for_update(no_key=True).get(pk=run.pk)
    ensure_writable(run.agent.team_id)
    if not run.is_failed:
        raise IllegalTransition(
            "only failed runs (error, timeout or stopped) can be retried; "
            f"this one is {run.status} ({run.status_reason or 'no reason'})"
        )
    thread = Thread.objects.select_for_update(no_key=True).get(pk=run.thread_id)
    busy = thread_open_run(thread)
    if busy is not None:
        raise IllegalTransition(
            f"thread already has an open run ({busy.pk})", {"run_id": str(busy.pk)}
        )
    retry = Run.objects.create(
        thread=thread,
        agent_id=run.agent_id,
        agent_version_id=run.agent_version_id,
        **price_snapshot(run.agent_version.spec),
        parent_run_id=run.parent_run_id,
        parent_tool_call_id=run.parent_tool_call_id,
        origin=run.origin,
        retry_of=run,
        priority=run.priority,
        status=Run.Status.CREATED,
        due=True,
        request=rt.RunRequestSnapshot(origin="Internal").to_json(),
        input=input_for(thread, []),
    )
    apply_thread_projection(retry)
    audit_record(
        actor=actor,
        action="run.retry",
        target_type="run",
        target_id=run.pk,
        run=retry,
        before={"run": str(run.pk), "status_reason": run.status_reason},
        after={"run": str(retry.pk)},
    )
    run_dispatch(retry.pk)
    stats.run_created(retry)
    return retry


def run_request_cancel_flag(run_id: Any) -> bool:
    return Run.objects.filter(pk=run_id, cancel_requested_at__isnull=False).exists()


@transaction.atomic
def run_set_priority(*, run: Run, priority: int, actor: Actor = SYSTEM) -> Run:
    """Change the priority of a run no worker has taken yet (created and due)."""
    priority = priority_check(priority)
    ensure_writable(run.agent.team_id)
    before = run.priority
    updated = Run.objects.filter(
        pk=run.pk, status=Run.Status.CREATED, lease_expires_at__isnull=True
    ).update(priority=priority)
    if not updated:
        current = Run.objects.filter(pk=run.pk).values_list("status", flat=True).first()
        raise IllegalTransition(
            f"run {run.pk} is {current}: only a queued run (created, not taken by a worker "
            "yet) can change priority",
            {"status": current},
        )
    run.priority = priority
    audit_record(
        actor=actor,
        action="run.priority",
        target_type="run",
        target_id=run.pk,
        run=run,
        before={"priority": before},
        after={"priority": priority},
    )
    return run
