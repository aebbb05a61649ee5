"""Starting, continuing, cancelling and retrying runs."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models.functions import Now
from django.utils import timezone

from agents.models import Agent
from agents.pricing import price_snapshot
from agents.selectors import agent_version_current
from common.audit import SYSTEM, Actor, audit_record
from common.errors import IllegalTransition, InvalidInput
from common.jsonsafe import unstorable_in
from runs.models import Message, Run, Thread, Ticket, ToolCall
from runs.runtime import types as rt
from runs.runtime.loop import end_without_activation
from runs.services import stats
from runs.services.dispatch import enqueue_on_commit, run_dispatch
from runs.services.events import (
    apply_thread_projection,
    events_append,
    run_identity,
    run_start_event,
    thread_projection,
)
from runs.services.remote import abort_remote_on_commit
from runs.services.tickets import decision_submit, tickets_close_open
from runs.store import message_to_row

MAX_MESSAGE_CHARS = 100_000
MAX_MESSAGES = 50
INPUT_ROLES = ("user", "assistant", "system")


def normalize_input_messages(messages: Any) -> list[rt.Message]:
    """Accept a string or [{role, content}] where content is a string or text blocks."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not isinstance(messages, list) or not messages:
        raise InvalidInput("messages must be a non-empty list of {role, content}")
    if len(messages) > MAX_MESSAGES:
        raise InvalidInput(f"at most {MAX_MESSAGES} messages per request")
    result = []
    for index, item in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(item, dict):
            raise InvalidInput(f"{where} must be an object with role and content")
        role = item.get("role", "user")
        if role not in INPUT_ROLES:
            raise InvalidInput(
                f"{where}.role must be one of {', '.join(INPUT_ROLES)}, got {role!r}"
            )
        content = item.get("content")
        if isinstance(content, str):
            blocks = [{"type": "text", "text": content}]
        elif isinstance(content, list) and all(
            isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
            for b in content
        ):
            blocks = [{"type": "text", "text": b["text"]} for b in content]
        else:
            raise InvalidInput(f"{where}.content must be a string or a list of text blocks")
        text = "".join(b["text"] for b in blocks)
        unstorable = unstorable_in(text)
        if unstorable:
            raise InvalidInput(f"{where}.content contains {unstorable}")
        if not text.strip():
            raise InvalidInput(f"{where}.content is empty")
        if len(text) > MAX_MESSAGE_CHARS:
            raise InvalidInput(f"{where}.content is longer than {MAX_MESSAGE_CHARS} characters")
        result.append(rt.Message(role=rt.Role(role), content=blocks))
    return result


def _append_to_thread(thread: Thread, messages: list[rt.Message]) -> list[str]:
    """Append user input to the locked thread's log and raise `thread.message_count`
    (the caller saves it); returns the new message ids."""
    start = thread.message_count
    Message.objects.bulk_create(
        [message_to_row(thread.pk, start + i + 1, m) for i, m in enumerate(messages)]
    )
    thread.message_count = start + len(messages)
    return [m.id for m in messages if m.id]


def _input_for(thread: Thread, trigger_ids: list[str]) -> dict[str, Any]:
    return rt.RunMessageInput(
        thread_id=str(thread.pk),
        range=rt.MessageSeqRange.new(1, thread.message_count),
        trigger_message_ids=trigger_ids,
    ).to_json()


def _open_run(thread: Thread) -> Run | None:
    if thread.open_run_id is None:
        return None
    return Run.objects.filter(pk=thread.open_run_id).exclude(status=Run.Status.DONE).first()


def idempotency_scope(actor: Actor) -> str:
    """Idempotency keys are per submitter: two clients' "order-1" are different runs."""
    user = actor.user_or_none
    return f"user:{user.pk}" if user is not None else ""


def run_for_idempotency_key(*, actor: Actor, key: str) -> Run | None:
    """The run this submitter already started with `key`, if any."""
    return Run.objects.filter(
        idempotency_scope=idempotency_scope(actor), idempotency_key=key
    ).first()


def run_start(
    *,
    agent: Agent,
    messages: Any,
    thread: Thread | None = None,
    idempotency_key: str = "",
    actor: Actor = SYSTEM,
) -> Run:
    """Start a run on a new or existing thread. A message to a thread whose open run
    waits continues that run (same run id) instead of starting another."""
    run, _ = run_start_or_reuse(
        agent=agent, messages=messages, thread=thread, idempotency_key=idempotency_key, actor=actor
    )
    return run


def run_start_or_reuse(
    *,
    agent: Agent,
    messages: Any,
    thread: Thread | None = None,
    idempotency_key: str = "",
    actor: Actor = SYSTEM,
) -> tuple[Run, bool]:
    """`run_start`, and whether it created a run. It reuses one (False) for a repeat of
    the submitter's idempotency key (also one that lost the race to a concurrent request
    with the same key) and for input that continued a waiting run; the API answers those
    200 rather than 201."""
    try:
        return _submit(agent, messages, thread, idempotency_key, actor)
    except IntegrityError:
        if not idempotency_key:
            raise
        existing = run_for_idempotency_key(actor=actor, key=idempotency_key)
        if existing is None:
            raise
        return existing, False


@transaction.atomic
def _submit(
    agent: Agent, messages: Any, thread: Thread | None, idempotency_key: str, actor: Actor
) -> tuple[Run, bool]:
    if idempotency_key:
        existing = run_for_idempotency_key(actor=actor, key=idempotency_key)
        if existing is not None:
            return existing, False
    new_messages = normalize_input_messages(messages)
    new_thread = thread is None
    if thread is None:  # inserted below, once its run pointers are known
        title = next((m.text() for m in new_messages if m.role is rt.Role.USER), "")[:80]
        thread = Thread(title=title)
        open_run = None
    else:
        thread = Thread.objects.select_for_update().get(pk=thread.pk)
        open_run = _open_run(thread)
    if open_run is not None:
        if open_run.status == Run.Status.WAITING:
            run = _run_continue(open_run, thread, new_messages)
            audit_record(
                actor=actor,
                action="run.continue",
                target_type="run",
                target_id=run.pk,
                run=run,
                after={"messages": [m.text() for m in new_messages]},
            )
            return run, False
        raise IllegalTransition(
            f"thread {thread.pk} already has a {open_run.status} run ({open_run.pk}); "
            "wait for it to finish or cancel it",
            {"run_id": str(open_run.pk), "status": open_run.status},
        )
    version = agent_version_current(agent=agent)
    trigger_ids = _append_to_thread(thread, new_messages)
    run = Run.objects.create(
        thread=thread,
        agent=agent,
        agent_version=version,
        **price_snapshot(version.spec),
        status=Run.Status.CREATED,
        due=True,
        dispatched_at=timezone.now(),
        idempotency_key=idempotency_key,
        idempotency_scope=idempotency_scope(actor) if idempotency_key else "",
        request=rt.RunRequestSnapshot(
            origin="User",
            sender_id=actor.name,
            input_message_ids=trigger_ids,
            input_message_count=len(trigger_ids),
        ).to_json(),
        input=_input_for(thread, trigger_ids),
        last_event_seq=1,  # its run_start, appended below
    )
    if new_thread:  # foreign keys are checked at commit: the thread may come last
        thread.latest_run_id = thread.open_run_id = run.pk
        thread.save(force_insert=True)
    else:
        Thread.objects.filter(pk=thread.pk).update(
            message_count=thread.message_count, **thread_projection(run)
        )
    # The first event commits with the run, so a client following it sees it begin at
    # once; the worker's first checkpoint leaves its own copy out (OrmCheckpointStore).
    run.last_event_seq = 0
    events_append(run, [run_start_event(run)], save_counter=False)
    audit_record(
        actor=actor,
        action="run.start",
        target_type="run",
        target_id=run.pk,
        run=run,
        after={
            "agent": agent.slug,
            "thread": str(thread.pk),
            "messages": [m.text() for m in new_messages],
        },
    )
    enqueue_on_commit(run.pk)
    stats.run_created(run)
    return run, True


def _run_continue(run: Run, thread: Thread, messages: list[rt.Message]) -> Run:
    """New input for a waiting run: open tickets are superseded (rejected by the system,
    so the model hears about it), the input is appended and the run resumes."""
    run = Run.objects.select_for_update().get(pk=run.pk)
    for ticket in Ticket.objects.filter(run=run, status=Ticket.Status.PENDING):
        decision_submit(
            ticket=ticket,
            action="reject",
            comment="superseded by a new user message",
            dispatch=False,
        )
    trigger_ids = _append_to_thread(thread, messages)
    Thread.objects.filter(pk=thread.pk).update(
        message_count=thread.message_count, updated_at=timezone.now()
    )
    Run.objects.filter(pk=run.pk).update(
        input=_input_for(thread, trigger_ids), due=True, updated_at=timezone.now()
    )
    run_dispatch(run.pk)
    run.refresh_from_db()
    return run


@transaction.atomic
def run_cancel(*, run: Run, actor: Actor = SYSTEM) -> Run:
    """Cancel means done: a run nobody executes ends `cancelled` now; a running
    one is asked to stop cooperatively. Open tickets close, child runs are cancelled."""
    run = Run.objects.select_for_update().get(pk=run.pk)
    if run.status == Run.Status.DONE:
        raise IllegalTransition(
            f"run {run.pk} already finished ({run.status_reason or 'done'})",
            {"status": run.status, "status_reason": run.status_reason},
        )
    for child in Run.objects.filter(parent_run=run).exclude(status=Run.Status.DONE):
        run_cancel(run=child, actor=actor)
    audit_record(
        actor=actor,
        action="run.cancel",
        target_type="run",
        target_id=run.pk,
        run=run,
        before={"status": run.status, "status_reason": run.status_reason},
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
    events_append(run, end_events, now=now)
    apply_thread_projection(run)


@transaction.atomic
def run_retry(*, run: Run, actor: Actor = SYSTEM) -> Run:
    """A failed run starts again from its last checkpoint: a new run on the same thread,
    pinned to the same agent version (a done run is never reopened)."""
    run = Run.objects.select_for_update().get(pk=run.pk)
    if not run.is_failed:
        raise IllegalTransition(
            "only failed runs (error, timeout or stopped) can be retried; "
            f"this one is {run.status} ({run.status_reason or 'no reason'})"
        )
    thread = Thread.objects.select_for_update().get(pk=run.thread_id)
    busy = _open_run(thread)
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
        status=Run.Status.CREATED,
        due=True,
        request=rt.RunRequestSnapshot(origin="Internal").to_json(),
        input=_input_for(thread, []),
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
