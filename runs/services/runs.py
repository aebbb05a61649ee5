"""Starting, continuing, cancelling and retrying runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models.functions import Now
from django.utils import timezone

from agents.models import Agent
from agents.pricing import price_snapshot
from common.audit import SYSTEM, Actor, audit_record
from common.errors import IllegalTransition, InvalidInput
from common.teams import by_operator, ensure_reason, ensure_writable, ensure_writable_as_read
from runs import metrics
from runs.models import DEFAULT_PRIORITY, Run, Thread, Ticket, ToolCall
from runs.runtime import types as rt
from runs.runtime.loop import end_without_activation
from runs.services import stats
from runs.services.creation import (
    append_to_thread,
    input_for,
    new_thread_for,
    normalize_input_messages,
    run_create,
    run_for_idempotency_key,
    thread_open_run,
)
from runs.services.delivery import thread_deliver_next
from runs.services.dispatch import run_dispatch
from runs.services.events import (
    apply_thread_projection,
    events_append,
    run_identity,
)
from runs.services.inbox import background_cancel
from runs.services.locks import lock_thread_of, lock_thread_with_open_run, retry_lock_conflicts
from runs.services.remote import abort_remote_on_commit
from runs.services.replay_flow import REPLAY_MODE, replay_run_ended
from runs.services.tickets import decision_submit, tickets_close_open

__all__ = ["normalize_input_messages", "run_for_idempotency_key"]  # their old home


def run_start(
    *,
    agent: Agent,
    messages: Any,
    thread: Thread | None = None,
    idempotency_key: str = "",
    actor: Actor = SYSTEM,
    priority: int = DEFAULT_PRIORITY,
) -> Run:
    """Start a run on a new or existing thread. A message to a thread whose open run
    waits continues that run (same run id) instead of starting another."""
    run, _ = run_start_or_reuse(
        agent=agent,
        messages=messages,
        thread=thread,
        idempotency_key=idempotency_key,
        actor=actor,
        priority=priority,
    )
    return run


def run_start_or_reuse(
    *,
    agent: Agent | Callable[[], Agent],
    messages: Any,
    thread: Thread | None = None,
    idempotency_key: str = "",
    actor: Actor = SYSTEM,
    priority: int = DEFAULT_PRIORITY,
) -> tuple[Run, bool]:
    """`run_start`, and whether it created a run. It reuses one (False) for a repeat of
    the submitter's idempotency key (also one that lost the race to a concurrent request
    with the same key) and for input that continued a waiting run; the API answers those
    200 rather than 201. `agent` may be its lookup, made in the submission's transaction
    (the API's: the agent's read is not a transaction of its own)."""
    try:
        return _submit(agent, messages, thread, idempotency_key, actor, priority)
    except IntegrityError:
        if not idempotency_key:
            raise
        existing = run_for_idempotency_key(actor=actor, key=idempotency_key)
        if existing is None:
            raise
        return existing, False


@retry_lock_conflicts
@transaction.atomic
def _submit(
    agent: Agent | Callable[[], Agent],
    messages: Any,
    thread: Thread | None,
    idempotency_key: str,
    actor: Actor,
    priority: int,
) -> tuple[Run, bool]:
    if not isinstance(agent, Agent):
        agent = agent()
    if idempotency_key:
        existing = run_for_idempotency_key(actor=actor, key=idempotency_key)
        if existing is not None:
            return existing, False
    if Agent.team.is_cached(agent):  # read with the agent (the API joins it)
        ensure_writable_as_read(agent.team)
    else:
        ensure_writable(agent.team_id)
    if thread is not None:
        ensure_writable(thread.team_id)
    new_messages = normalize_input_messages(messages)
    new_thread = thread is None
    if thread is None:  # inserted below, once its run pointers are known
        thread = new_thread_for(new_messages, agent.team_id)
        open_run = None
    else:  # its open run first, then the thread (runs.services.locks)
        thread, open_run = lock_thread_with_open_run(thread.pk)
    if open_run is not None:
        if open_run.status == Run.Status.WAITING:
            run, _ = run_continue(open_run, thread, new_messages, actor)
            return run, False
        raise IllegalTransition(
            f"thread {thread.pk} already has a {open_run.status} run ({open_run.pk}); "
            "wait for it to finish, cancel it, or send the message as input to the thread "
            "(mode queue, steer or interrupt_then_queue)",
            {"run_id": str(open_run.pk), "status": open_run.status},
        )
    run = run_create(
        thread,
        agent,
        new_messages,
        actor,
        new_thread=new_thread,
        idempotency_key=idempotency_key,
        priority=priority,
    )
    return run, True


def run_continue(
    run: Run,
    thread: Thread,
    messages: list[rt.Message],
    actor: Actor,
    submission_events: Callable[[Run, list[str]], list[dict[str, Any]]] | None = None,
) -> tuple[Run, list[str]]:
    """New input for a waiting run (the thread locked by the caller): open tickets are
    superseded (rejected by the system, so the model hears about it), the input is
    appended and the run resumes. Returns the run and the superseded tickets' ids."""
    run = Run.objects.select_for_update(no_key=True).get(pk=run.pk)
    superseded = []
    for ticket in Ticket.objects.filter(run=run, status=Ticket.Status.PENDING):
        decision_submit(
            ticket=ticket,
            action="reject",
            comment="superseded by a new user message",
            dispatch=False,
        )
        superseded.append(str(ticket.pk))
    trigger_ids = append_to_thread(thread, messages)
    Thread.objects.filter(pk=thread.pk).update(
        message_count=thread.message_count, updated_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(
        input=input_for(thread, trigger_ids), due=True, updated_at=timezone.now()
    )
    if submission_events is not None:
        run.refresh_from_db(fields=["last_event_seq"])
        events_append(run, submission_events(run, trigger_ids))
    run_dispatch(run.pk)
    run.refresh_from_db()
    audit_record(
        actor=actor,
        action="run.continue",
        target_type="run",
        target_id=run.pk,
        run=run,
        after={
            "messages": [m.text() for m in messages],
            **({"superseded_tickets": superseded} if superseded else {}),
        },
    )
    return run, superseded


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
    abort_remote_on_commit(run)
    tickets_close_open(run, now)
    background_cancel(run, now)
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
    stats.run_finished(run)
    metrics.run_ended(run)
    events_append(run, end_events, now=now)
    thread_deliver_next(run, apply_thread_projection(run))
    if run.run_mode == REPLAY_MODE:
        replay_run_ended(run.pk)  # its set's next replays start


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
    if not 0 <= priority <= 255:
        raise InvalidInput(
            f"priority must be between 0 (high) and 255 (low), got {priority}",
            {"priority": [str(priority)]},
        )
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
