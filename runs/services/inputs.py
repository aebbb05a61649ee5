"""Input for a thread whose run is busy, as upstream's input modes have it
(docs/run-control.md):

- `queue` (default): the message waits and starts the thread's next run when the open
  one ends (one run per input, in order of acceptance);
- `steer`: appended to the open run's log at its next step boundary, so the model reads
  it; queued if the run ends first;
- `interrupt_then_queue`: the open run is cancelled, the message queued behind it;
- `resume_open_run`: continues the open run while it waits (its open tickets are
  superseded, and reported).

A thread with no open run starts one at once, whatever the mode. Pending input can be
edited or retracted until delivered; its delivery is appended to the receiving run's
event log (`input_delivered`) in the transaction that delivers it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agents.models import Agent
from common.audit import SYSTEM, Actor, audit_record
from common.errors import IllegalTransition, InvalidInput, NotFound
from common.teams import check_reason, ensure_reason, ensure_writable
from runs.models import DEFAULT_PRIORITY, PendingInput, Run, Thread
from runs.realtime import broadcast_thread_changed
from runs.runtime import types as rt
from runs.services.creation import (
    new_thread_for,
    normalize_input_messages,
    run_create,
)
from runs.services.delivery import delivery_events, messages_json, thread_start_next
from runs.services.locks import lock_run, lock_thread_with_open_run, retry_lock_conflicts
from runs.services.runs import run_cancel_unchecked, run_continue

Mode = PendingInput.Mode
MODES = tuple(Mode.values)


@dataclass
class InputOutcome:
    """What became of an input: delivered at once to `run` (`created`: a new run), or
    waiting (`input.status == pending`). `superseded`: the ticket ids a resume rejected;
    `interrupted`: the run an `interrupt_then_queue` cancelled."""

    input: PendingInput
    run: Run | None = None
    created: bool = False
    superseded: list[str] = field(default_factory=list)
    interrupted: Run | None = None


def input_submit(
    *,
    agent: Agent | None,
    messages: Any,
    thread: Thread | None = None,
    run: Run | None = None,
    mode: str = Mode.QUEUE,
    priority: int = DEFAULT_PRIORITY,
    actor: Actor = SYSTEM,
    idempotency_key: str = "",
) -> InputOutcome:
    """Send `messages` to `thread` (a new one when None), or to `run`'s thread when it is
    addressed to a run (`POST /runs/{id}/inputs`): then `steer` and `resume_open_run`
    require that run to be the open one. `idempotency_key` is recorded on a run the input
    starts at once (a concurrent repeat fails on its unique index: IntegrityError)."""
    if mode not in MODES:
        raise InvalidInput(
            f"mode must be one of {', '.join(MODES)}, got {mode!r}", {"mode": [str(mode)]}
        )
    _check_priority(priority)
    new_messages = normalize_input_messages(messages)
    return _submit(agent, new_messages, thread, run, mode, priority, actor, idempotency_key)


@retry_lock_conflicts
@transaction.atomic
def _submit(
    agent: Agent | None,
    new_messages: list[rt.Message],
    thread: Thread | None,
    run: Run | None,
    mode: str,
    priority: int,
    actor: Actor,
    key: str,
) -> InputOutcome:
    if run is not None:
        thread = run.thread
    if agent is not None:
        ensure_writable(agent.team_id)
    if thread is None:
        if agent is None:
            raise InvalidInput("agent_id is required to start a thread")
        thread = new_thread_for(new_messages)
        return _start(thread, agent, new_messages, mode, priority, actor, key, new_thread=True)
    thread, open_run = _lock_thread(thread.pk)
    ensure_writable(thread.team_id)
    addressed_elsewhere = run is not None and (open_run is None or open_run.pk != run.pk)
    if addressed_elsewhere and mode == Mode.RESUME_OPEN_RUN:
        assert run is not None
        raise IllegalTransition(
            f"run {run.pk} is {run.status} ({run.status_reason or 'no reason'}): "
            "only the thread's open, waiting run can be resumed",
            {"status": run.status, "status_reason": run.status_reason},
        )
    if addressed_elsewhere and mode == Mode.STEER:
        mode = Mode.QUEUE  # steer for a run that ended: queued for the next one
    agent = agent or _thread_agent(thread, open_run)
    if open_run is None:
        if mode == Mode.RESUME_OPEN_RUN and run is not None:
            raise IllegalTransition(f"run {run.pk} is not waiting")
        if not _queued(thread):
            return _start(thread, agent, new_messages, mode, priority, actor, key)
        # older input still waits for its turn (its start was lost): it goes first
        input_ = _accept(thread, agent, new_messages, Mode.QUEUE, priority, actor)
        thread_start_next(thread.pk)
        input_.refresh_from_db()
        return InputOutcome(input=input_)
    if mode == Mode.RESUME_OPEN_RUN:
        return _resume(thread, open_run, agent, new_messages, actor)
    steers = open_run if mode == Mode.STEER else None
    input_ = _accept(thread, agent, new_messages, mode, priority, actor, steers=steers)
    outcome = InputOutcome(input=input_)
    if steers is not None:
        Run.objects.filter(pk=steers.pk).update(pending_inputs=F("pending_inputs") + 1)
    elif mode == Mode.INTERRUPT_THEN_QUEUE:
        # the new message is the reason: a team that requires one accepts it
        outcome.interrupted = run_cancel_unchecked(
            run=open_run, actor=actor, reason="interrupted by new input"
        )
        input_.refresh_from_db()  # the cancel may have delivered it already
        if input_.status == PendingInput.Status.DELIVERED:
            outcome.run, outcome.created = input_.delivered_run, True
    return outcome


def _check_priority(priority: int) -> None:
    if not isinstance(priority, int) or not 0 <= priority <= 255:
        raise InvalidInput(
            f"priority must be an integer from 0 (high) to 255 (low), got {priority!r}",
            {"priority": [str(priority)]},
        )


def _lock_thread(thread_id: Any) -> tuple[Thread, Run | None]:
    """Lock the thread's open run, then the thread (the lock order: runs.services.locks)."""
    return lock_thread_with_open_run(thread_id)


def _queued(thread: Thread) -> bool:
    return PendingInput.objects.filter(
        thread=thread, status=PendingInput.Status.PENDING, run__isnull=True
    ).exists()


def _thread_agent(thread: Thread, open_run: Run | None) -> Agent:
    """The agent new input to a thread runs with: its open run's, else its latest run's."""
    source = open_run or (
        Run.objects.filter(thread=thread).select_related("agent").order_by("-created_at").first()
    )
    if source is None:
        raise InvalidInput(
            "agent_id is required: the thread has no run to take the agent from",
            {"agent_id": ["This field is required."]},
        )
    return source.agent


def _accept(
    thread: Thread,
    agent: Agent,
    messages: list[rt.Message],
    mode: str,
    priority: int,
    actor: Actor,
    *,
    save: bool = True,
    new_thread: bool = False,
    steers: Run | None = None,
) -> PendingInput:
    """The input's record, next in the (locked) thread's order of acceptance; saved and
    audited as waiting unless `save` is False (a run takes it at once). A `new_thread`
    is not inserted yet: its counter is written with it. `steers`: the run a steer input
    is for."""
    if not new_thread:
        Thread.objects.filter(pk=thread.pk).update(input_seq=F("input_seq") + 1)
    thread.input_seq = (thread.input_seq or 0) + 1
    input_ = PendingInput(
        thread=thread,
        seq=thread.input_seq,
        mode=mode,
        messages=messages_json(messages),
        agent=agent,
        priority=priority,
        actor=actor.user_or_none,
        actor_label=actor.name[:200],
        run=steers,
    )
    if save:
        input_.save(force_insert=True)
        inputs_changed_on_commit(thread.pk, thread.team_id)
        audit_record(
            actor=actor,
            action="input.queue",
            target_type="thread",
            target_id=thread.pk,
            after={"input": str(input_.pk), "mode": mode, "text": input_.text},
        )
    return input_


def _start(
    thread: Thread,
    agent: Agent,
    messages: list[rt.Message],
    mode: str,
    priority: int,
    actor: Actor,
    key: str,
    *,
    new_thread: bool = False,
) -> InputOutcome:
    """No open run: the input starts one now."""
    input_ = _accept(
        thread, agent, messages, mode, priority, actor, save=False, new_thread=new_thread
    )
    run = run_create(
        thread,
        agent,
        messages,
        actor,
        new_thread=new_thread,
        idempotency_key=key,
        priority=priority,
        submission_events=delivery_events(input_, PendingInput.Boundary.NEW_RUN),
    )
    return InputOutcome(input=input_, run=run, created=True)


def _resume(
    thread: Thread, open_run: Run, agent: Agent, messages: list[rt.Message], actor: Actor
) -> InputOutcome:
    if open_run.status != Run.Status.WAITING:
        raise IllegalTransition(
            f"run {open_run.pk} is {open_run.status}, not waiting: send the message with "
            "mode queue (after it), steer (into it) or interrupt_then_queue (instead of it)",
            {"run_id": str(open_run.pk), "status": open_run.status},
        )
    input_ = _accept(
        thread, agent, messages, Mode.RESUME_OPEN_RUN, open_run.priority, actor, save=False
    )
    run, superseded = run_continue(
        open_run,
        thread,
        messages,
        actor,
        submission_events=delivery_events(input_, PendingInput.Boundary.RESUME_INPUT),
    )
    return InputOutcome(input=input_, run=run, superseded=superseded)


# --- pending input: edit, retract, interrupt -------------------------------------------------------


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
        _check_priority(priority)
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
