"""Pending input: a thread's input that waits for its turn can be edited or retracted
until delivered; a thread can be interrupted (its open run and waiting input cancelled).
Input is sent by the submission command (runs.services.submission, accepted by
runs.services.submission_flow), in the modes of docs/run-control.md.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from common.audit import SYSTEM, Actor, audit_record
from common.errors import IllegalTransition, NotFound
from common.teams import check_reason, ensure_reason, ensure_writable
from runs.models import PendingInput, Run, Thread
from runs.realtime import broadcast_thread_changed
from runs.services.creation import normalize_input_messages
from runs.services.delivery import messages_json
from runs.services.locks import lock_run, lock_thread_with_open_run, retry_lock_conflicts
from runs.services.runs import run_cancel_unchecked
from runs.services.submission import priority_check


def _lock_thread(thread_id: Any) -> tuple[Thread, Run | None]:
    """Lock the thread's open run, then the thread (the lock order: runs.services.locks)."""
    return lock_thread_with_open_run(thread_id)


def _pending(input_id: Any) -> PendingInput:
    """The pending input, locked after the run it steers (a checkpoint delivering it
    locks the run first, then the input)."""
    steers = PendingInput.objects.filter(pk=input_id).values_list("run_id", flat=True).first()
    if steers is not None:
        lock_run(steers)
    input_ = PendingInput.objects.select_for_update(no_key=True).filter(pk=input_id).first()
    if input_ is None:
        raise NotFound(f"input {input_id} not found")
    ensure_writable(
        Thread.objects.filter(pk=input_.thread_id).values_list("team_id", flat=True).first()
    )
    if input_.status != PendingInput.Status.PENDING:
        raise IllegalTransition(
            f"input {input_.pk} is {input_.status} already; only pending input can change",
            {"status": input_.status},
        )
    return input_


@retry_lock_conflicts
@transaction.atomic
def input_edit(
    *, input_id: Any, messages: Any = None, priority: int | None = None, actor: Actor = SYSTEM
) -> PendingInput:
    """Change a pending input's messages or priority (until it is delivered)."""
    if priority is not None:
        priority_check(priority)
    input_ = _pending(input_id)
    before = {"text": input_.text, "priority": input_.priority}
    if messages is not None:
        input_.messages = messages_json(normalize_input_messages(messages))
    if priority is not None:
        input_.priority = priority
    input_.updated_at = timezone.now()
    input_.save(update_fields=["messages", "priority", "updated_at"])
    inputs_changed_on_commit(input_.thread_id)
    audit_record(
        actor=actor,
        action="input.edit",
        target_type="input",
        target_id=input_.pk,
        before=before,
        after={"text": input_.text, "priority": input_.priority},
    )
    return input_


@retry_lock_conflicts
@transaction.atomic
def input_retract(*, input_id: Any, actor: Actor = SYSTEM) -> PendingInput:
    """Withdraw a pending input: it will never be delivered."""
    input_ = _pending(input_id)
    _close(input_, PendingInput.Status.RETRACTED)
    inputs_changed_on_commit(input_.thread_id)
    audit_record(
        actor=actor,
        action="input.retract",
        target_type="input",
        target_id=input_.pk,
        before={"text": input_.text, "mode": input_.mode},
    )
    return input_


def inputs_changed_on_commit(thread_id: Any, team_id: int | None = None) -> None:
    """Once this commits, the open pages of the thread refetch its pending input: a
    change that appends no run event reaches them no other way (other processes' pages
    through the channel layer, or runs/watcher.py reading the audit entry)."""

    def announce() -> None:
        team = team_id
        if team is None:
            team = Thread.objects.filter(pk=thread_id).values_list("team_id", flat=True).first()
        broadcast_thread_changed(thread_id, team)

    transaction.on_commit(announce, robust=True)


def _close(input_: PendingInput, status: str) -> None:
    if input_.run_id is not None:  # a steer input the run no longer has to take
        Run.objects.filter(pk=input_.run_id, pending_inputs__gt=0).update(
            pending_inputs=F("pending_inputs") - 1
        )
    input_.status = status
    input_.run = None
    input_.closed_at = input_.updated_at = timezone.now()
    input_.save(update_fields=["status", "run", "closed_at", "updated_at"])


@retry_lock_conflicts
@transaction.atomic
def thread_interrupt(*, thread: Thread, actor: Actor = SYSTEM, reason: str = "") -> dict[str, Any]:
    """Cancel the thread's open run and every input still waiting, in one action. Refused
    while the thread's team is frozen, and without `reason` when it cancels a run of a
    team that requires one."""
    check_reason(reason)  # too long is refused even with no run to cancel
    thread, open_run = _lock_thread(thread.pk)
    ensure_writable(thread.team_id)
    if open_run is not None:
        ensure_reason(thread.team_id, reason, "cancel a run")
    cancelled = []
    for input_ in PendingInput.objects.select_for_update(no_key=True).filter(
        thread=thread, status=PendingInput.Status.PENDING
    ):
        _close(input_, PendingInput.Status.CANCELLED)
        cancelled.append(str(input_.pk))
    if cancelled:
        inputs_changed_on_commit(thread.pk, thread.team_id)
    if open_run is not None:
        open_run = run_cancel_unchecked(run=open_run, actor=actor, reason=reason)
    audit_record(
        actor=actor,
        action="thread.interrupt",
        target_type="thread",
        target_id=thread.pk,
        after={
            "run": str(open_run.pk) if open_run else None,
            "cancelled_inputs": cancelled,
        },
    )
    return {"run": open_run, "cancelled_inputs": cancelled}
