"""Accepting a submission (runs.services.submission): the one way input becomes a run.

`submission_accept` locks the thread's open run and the thread (the lock order:
runs.services.locks) once, then, by the command's mode:

- START (the run API's): a thread without an open run starts one; a waiting open run is
  continued by the input (same run id); a working one refuses it;
- an input mode (docs/run-control.md): `queue` waits for the thread's next run, `steer`
  goes into the open run at its next step, `interrupt_then_queue` cancels the open run
  first, `resume_open_run` continues the waiting open run (its open tickets superseded).
  A thread with no open run starts one at once, whatever the mode.

- NEW_RUN (schedules, forks, replays): a new run on a new thread, or on a thread without
  an open run; a thread whose open run is still there refuses it (ThreadBusy).

A repeat of the submitter's idempotency key answers the run the key started.
`submission_accept_within` accepts a command in the caller's transaction (forks, replays
and schedules write more in it); queued input starts its run through `submission_start`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from agents.models import Agent
from common.audit import SYSTEM, Actor, audit_record
from common.errors import IllegalTransition, InvalidInput
from common.teams import ensure_writable, ensure_writable_as_read
from runs.models import DEFAULT_PRIORITY, PendingInput, Run, Thread, Ticket
from runs.runtime import types as rt
from runs.services.creation import append_to_thread, input_for, run_for_idempotency_key
from runs.services.delivery import delivery_events, messages_json, thread_start_next
from runs.services.dispatch import run_dispatch
from runs.services.events import events_append
from runs.services.inputs import inputs_changed_on_commit
from runs.services.locks import lock_thread_with_open_run, retry_lock_conflicts
from runs.services.runs import run_cancel_unchecked
from runs.services.submission import NEW_RUN, START, Mode, Submission, ThreadBusy
from runs.services.submission_start import submission_new_thread, submission_start
from runs.services.tickets import decision_submit

SubmissionEvents = Callable[[Run, list[str]], list[dict[str, Any]]]


@dataclass
class SubmissionOutcome:
    """What became of a submission: delivered at once to `run` (`created`: a new run), or
    waiting (`input.status == pending`). `input`: the input's record (None for START, and
    for `repeat`: the run an idempotency key started before); `superseded`: the ticket ids
    a resume rejected; `interrupted`: the run an `interrupt_then_queue` cancelled."""

    input: PendingInput | None = None
    run: Run | None = None
    created: bool = False
    repeat: bool = False
    superseded: list[str] = field(default_factory=list)
    interrupted: Run | None = None


InputOutcome = SubmissionOutcome  # its name where input modes were the only way in


def submission_accept(cmd: Submission) -> SubmissionOutcome:
    """Accept the command in its own transaction (run again on a lock conflict). A
    concurrent request with the same idempotency key that won the race answers as a
    repeat; any other IntegrityError propagates."""
    try:
        return _accept(cmd)
    except IntegrityError:
        if not cmd.idempotency_key:
            raise
        existing = run_for_idempotency_key(actor=cmd.actor, key=cmd.idempotency_key)
        if existing is None:
            raise
        return SubmissionOutcome(run=existing, repeat=True)


@retry_lock_conflicts
@transaction.atomic
def _accept(cmd: Submission) -> SubmissionOutcome:
    return submission_accept_within(cmd)


def submission_accept_within(cmd: Submission) -> SubmissionOutcome:
    """Accept the command in the caller's transaction (no savepoint, no retry of its own:
    the caller's transaction is the one to run again)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("submission_accept_within runs in the caller's transaction")
    agent = cmd.agent if cmd.agent is None or isinstance(cmd.agent, Agent) else cmd.agent()
    if cmd.idempotency_key:
        existing = run_for_idempotency_key(actor=cmd.actor, key=cmd.idempotency_key)
        if existing is not None:
            return SubmissionOutcome(run=existing, repeat=True)
    if agent is not None and cmd.origin.team_guard:
        if Agent.team.is_cached(agent):  # read with the agent (the API joins it)
            ensure_writable_as_read(agent.team)
        else:
            ensure_writable(agent.team_id)
    thread = cmd.run.thread if cmd.run is not None else cmd.thread
    if thread is None:
        if agent is None:
            raise InvalidInput("agent_id is required to start a thread")
        new = submission_new_thread(cmd, agent)  # inserted with its run
        mode = None if cmd.mode in (START, NEW_RUN) else cmd.mode
        return _start(cmd, new, agent, mode, new_thread=True)
    if cmd.mode == NEW_RUN:
        assert agent is not None  # Submission.build_new_run requires it
        return _new_run(cmd, thread, agent)
    thread, open_run = lock_thread_with_open_run(thread.pk)
    ensure_writable(thread.team_id)
    if cmd.mode == START:
        assert agent is not None  # Submission.build requires it
        return _start_or_continue(cmd, thread, open_run, agent)
    return _input(cmd, thread, open_run, agent)


def _new_run(cmd: Submission, thread: Thread, agent: Agent) -> SubmissionOutcome:
    """NEW_RUN on an existing thread: a new run when it has no open run; a thread deleted
    since the caller read it gives way to a new one."""
    try:
        thread, open_run = lock_thread_with_open_run(thread.pk)
    except Thread.DoesNotExist:
        return _start(cmd, submission_new_thread(cmd, agent), agent, None, new_thread=True)
    if cmd.origin.team_guard:
        ensure_writable(thread.team_id)
    if open_run is not None:
        raise ThreadBusy(
            f"previous run still open on thread {thread.pk} ({open_run.status} run {open_run.pk})",
            {"thread": str(thread.pk), "run_id": str(open_run.pk)},
        )
    return _start(cmd, thread, agent, None)


def _start_or_continue(
    cmd: Submission, thread: Thread, open_run: Run | None, agent: Agent
) -> SubmissionOutcome:
    if open_run is None:
        return _start(cmd, thread, agent, None)
    if open_run.status == Run.Status.WAITING:
        run, _ = run_continue(open_run, thread, cmd.message_list, cmd.actor)
        return SubmissionOutcome(run=run)
    raise IllegalTransition(
        f"thread {thread.pk} already has a {open_run.status} run ({open_run.pk}); "
        "wait for it to finish, cancel it, or send the message as input to the thread "
        "(mode queue, steer or interrupt_then_queue)",
        {"run_id": str(open_run.pk), "status": open_run.status},
    )


def _input(
    cmd: Submission, thread: Thread, open_run: Run | None, agent: Agent | None
) -> SubmissionOutcome:
    run, mode = cmd.run, cmd.mode
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
            return _start(cmd, thread, agent, mode)
        # older input still waits for its turn (its start was lost): it goes first
        input_ = _record(cmd, thread, agent, Mode.QUEUE)
        thread_start_next(thread.pk)
        input_.refresh_from_db()
        return SubmissionOutcome(input=input_)
    if mode == Mode.RESUME_OPEN_RUN:
        return _resume(cmd, thread, open_run, agent)
    steers = open_run if mode == Mode.STEER else None
    input_ = _record(cmd, thread, agent, mode, steers=steers)
    outcome = SubmissionOutcome(input=input_)
    if steers is not None:
        Run.objects.filter(pk=steers.pk).update(pending_inputs=F("pending_inputs") + 1)
    elif mode == Mode.INTERRUPT_THEN_QUEUE:
        # the new message is the reason: a team that requires one accepts it
        outcome.interrupted = run_cancel_unchecked(
            run=open_run, actor=cmd.actor, reason="interrupted by new input"
        )
        input_.refresh_from_db()  # the cancel may have delivered it already
        if input_.status == PendingInput.Status.DELIVERED:
            outcome.run, outcome.created = input_.delivered_run, True
    return outcome


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


def _record(
    cmd: Submission,
    thread: Thread,
    agent: Agent,
    mode: str,
    *,
    priority: int | None = None,
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
        messages=messages_json(cmd.message_list),
        agent=agent,
        priority=cmd.priority if priority is None else priority,
        actor=cmd.actor.user_or_none,
        actor_label=cmd.actor.name[:200],
        run=steers,
    )
    if save:
        input_.save(force_insert=True)
        inputs_changed_on_commit(thread.pk, thread.team_id)
        audit_record(
            actor=cmd.actor,
            action="input.queue",
            target_type="thread",
            target_id=thread.pk,
            after={"input": str(input_.pk), "mode": mode, "text": input_.text},
        )
    return input_


def _start(
    cmd: Submission, thread: Thread, agent: Agent, mode: str | None, *, new_thread: bool = False
) -> SubmissionOutcome:
    """No open run: the submission starts one now. An input (`mode`) is recorded as
    delivered to it at once, in its first events; START's is not recorded."""
    input_ = None
    events: SubmissionEvents | None = None
    if mode is not None:
        input_ = _record(cmd, thread, agent, mode, save=False, new_thread=new_thread)
        events = delivery_events(input_, PendingInput.Boundary.NEW_RUN)
    run = submission_start(cmd, thread, agent, new_thread=new_thread, events=events)
    return SubmissionOutcome(input=input_, run=run, created=True)


def _resume(cmd: Submission, thread: Thread, open_run: Run, agent: Agent) -> SubmissionOutcome:
    if open_run.status != Run.Status.WAITING:
        raise IllegalTransition(
            f"run {open_run.pk} is {open_run.status}, not waiting: send the message with "
            "mode queue (after it), steer (into it) or interrupt_then_queue (instead of it)",
            {"run_id": str(open_run.pk), "status": open_run.status},
        )
    input_ = _record(
        cmd, thread, agent, Mode.RESUME_OPEN_RUN, priority=open_run.priority, save=False
    )
    run, superseded = run_continue(
        open_run,
        thread,
        cmd.message_list,
        cmd.actor,
        submission_events=delivery_events(input_, PendingInput.Boundary.RESUME_INPUT),
    )
    return SubmissionOutcome(input=input_, run=run, superseded=superseded)


def run_continue(
    run: Run,
    thread: Thread,
    messages: list[rt.Message],
    actor: Actor,
    submission_events: SubmissionEvents | None = None,
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


# --- the services' names callers and tests know ------------------------------------------------


def run_start(
    *,
    agent: Agent,
    messages: Any,
    thread: Thread | None = None,
    idempotency_key: str = "",
    actor: Actor = SYSTEM,
    priority: int = DEFAULT_PRIORITY,
) -> Run:
    """Start a run on a new or existing thread (START). A message to a thread whose open
    run waits continues that run (same run id) instead of starting another."""
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
    """`run_start`, and whether it created a run: False for a repeat of the submitter's
    idempotency key and for input that continued a waiting run (the API answers 200)."""
    cmd = Submission.build_start(
        agent=agent,
        messages=messages,
        thread=thread,
        priority=priority,
        idempotency_key=idempotency_key,
        actor=actor,
    )
    outcome = submission_accept(cmd)
    assert outcome.run is not None  # START never leaves input waiting
    return outcome.run, outcome.created


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
) -> SubmissionOutcome:
    """Send `messages` to `thread` (a new one when None), or to `run`'s thread when it is
    addressed to a run: then `steer` and `resume_open_run` require that run to be the
    open one."""
    cmd = Submission.build(
        agent=agent,
        messages=messages,
        thread=thread,
        run=run,
        mode=mode,
        priority=priority,
        idempotency_key=idempotency_key,
        actor=actor,
    )
    return submission_accept(cmd)
