"""Creating runs: accepted input messages, the thread's log, and a new run with the first
events of its log (used by submissions, queued input and schedules)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import timezone

from agents.models import Agent, AgentVersion
from agents.pricing import price_snapshot
from agents.selectors import agent_version_current
from common import limits
from common.audit import Actor, audit_record
from common.errors import InvalidInput
from common.jsonsafe import unstorable_in
from common.writes import WriteBatch
from runs.message_rows import message_to_row
from runs.models import DEFAULT_PRIORITY, Message, Run, Thread
from runs.runtime import types as rt
from runs.services import stats
from runs.services.dispatch import enqueue_on_commit
from runs.services.events import events_append, run_start_event, thread_projection

MAX_MESSAGES = 50
INPUT_ROLES = ("user", "assistant", "system")


def normalize_input_messages(messages: Any) -> list[rt.Message]:
    """Accept a string or [{role, content}] where content is a string or text blocks,
    each message's text at most AWAKEN_MAX_MESSAGE_CHARS long (common/limits.py)."""
    plain = isinstance(messages, str)
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
        what = "the message" if plain else f"{where}.content"
        limits.check_chars(text, limits.message_chars(), f"{where}.content", what)
        result.append(rt.Message(role=rt.Role(role), content=blocks))
    return result


def append_to_thread(
    thread: Thread, messages: list[rt.Message], batch: WriteBatch | None = None
) -> list[str]:
    """Append user input to the locked thread's log (queued in `batch` if given) and raise
    `thread.message_count` (the caller saves it); returns the new message ids."""
    start = thread.message_count
    rows = [message_to_row(thread.pk, start + i + 1, m) for i, m in enumerate(messages)]
    if batch is not None:
        batch.insert(rows)
    else:
        Message.objects.bulk_create(rows)
    thread.message_count = start + len(messages)
    return [m.id for m in messages if m.id]


def input_for(thread: Thread, trigger_ids: list[str]) -> dict[str, Any]:
    return rt.RunMessageInput(
        thread_id=str(thread.pk),
        range=rt.MessageSeqRange.new(1, thread.message_count),
        trigger_message_ids=trigger_ids,
    ).to_json()


def thread_open_run(thread: Thread) -> Run | None:
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


def new_thread_for(messages: list[rt.Message], team_id: int | None = None) -> Thread:
    """An unsaved thread titled after the first user message (`run_create` inserts it);
    `team_id`: its agent's team (else the default team is looked up, and the thread joins
    its first run's agent's team anyway: `thread_join_team`)."""
    title = next((m.text() for m in messages if m.role is rt.Role.USER), "")[:80]
    return Thread(title=title) if team_id is None else Thread(title=title, team_id=team_id)


def thread_join_team(thread: Thread, agent: Agent, *, new_thread: bool) -> None:
    """A thread belongs to the team of the agent of its first run; a run of another
    team's agent on it is refused (its members could not see the thread)."""
    if thread.team_id == agent.team_id:
        return
    if new_thread or thread.latest_run_id is None:
        thread.team_id = agent.team_id
        if not new_thread:
            Thread.objects.filter(pk=thread.pk).update(team_id=agent.team_id)
        return
    raise InvalidInput(
        f"thread {thread.pk} belongs to another team than agent {agent.slug!r}; "
        "start the run on a new thread"
    )


def _prices(agent: Agent, version: AgentVersion) -> dict[str, Any]:
    """`price_snapshot` of the version's model, from the agent's model row when the caller
    read it with the agent (the API joins it) and it is that model: no query."""
    model = agent.model if Agent.model.is_cached(agent) else None
    if model is None or model.slug != (version.spec or {}).get("model_id"):
        return price_snapshot(version.spec)
    return {
        "input_price_per_million_usd": model.input_price_per_million_usd,
        "output_price_per_million_usd": model.output_price_per_million_usd,
    }


def _user_request(actor: Actor, trigger_ids: list[str]) -> dict[str, Any]:
    """The run's request snapshot: a user's, with the messages it starts with."""
    return rt.RunRequestSnapshot(
        origin="User",
        sender_id=actor.name,
        input_message_ids=trigger_ids,
        input_message_count=len(trigger_ids),
    ).to_json()


def _insert_with_thread(run: Run, thread: Thread, new_thread: bool, batch: WriteBatch) -> None:
    """Queue the run, then the new thread pointing at it (foreign keys are checked at
    commit: the thread may come last), or update the thread's count and projection."""
    batch.insert([run])
    if new_thread:
        thread.latest_run_id = thread.open_run_id = run.pk
        batch.insert([thread])
    else:
        Thread.objects.filter(pk=thread.pk).update(
            message_count=thread.message_count, **thread_projection(run)
        )


def _audit_start(run: Run, actor: Actor, new_messages: list[rt.Message], batch: WriteBatch) -> None:
    """The `run.start` audit entry: agent, thread, the messages and a mode other than
    foreground."""
    audit_record(
        actor=actor,
        action="run.start",
        target_type="run",
        target_id=run.pk,
        run=run,
        after={
            "agent": run.agent.slug,
            "thread": str(run.thread_id),
            "messages": [m.text() for m in new_messages],
            **({"run_mode": run.run_mode} if run.run_mode != "foreground" else {}),
        },
        batch=batch,
    )


def run_create(
    thread: Thread,
    agent: Agent,
    new_messages: list[rt.Message],
    actor: Actor,
    *,
    new_thread: bool = False,
    idempotency_key: str = "",
    priority: int = DEFAULT_PRIORITY,
    run_mode: str = "foreground",
    schedule: Any = None,
    submission_events: Callable[[Run, list[str]], list[dict[str, Any]]] | None = None,
    version: AgentVersion | None = None,
    **provenance: Any,
) -> Run:
    """A new run of `agent` on `thread` (locked by the caller, or `new_thread` not yet
    inserted) that starts with `new_messages`, appended to the thread's log; due at once.
    Its log begins with its `run_start` (and what `submission_events(run, message_ids)`
    adds, such as the delivery of a pending input), committed with it. It pins `version`
    (forks and replays choose one, a draft snapshot included), else the latest published
    one; `provenance` sets fields such as `forked_from` and `fork_step`."""
    version = version or agent_version_current(agent=agent)
    thread_join_team(thread, agent, new_thread=new_thread)
    with WriteBatch() as batch:  # one statement on PostgreSQL (common/writes.py)
        run = _run_insert(
            thread,
            agent,
            version,
            new_messages,
            actor,
            batch,
            new_thread=new_thread,
            idempotency_key=idempotency_key,
            priority=priority,
            run_mode=run_mode,
            schedule=schedule,
            submission_events=submission_events,
            provenance=provenance,
        )
    enqueue_on_commit(run.pk)
    return run


def _run_insert(
    thread: Thread,
    agent: Agent,
    version: AgentVersion,
    new_messages: list[rt.Message],
    actor: Actor,
    batch: WriteBatch,
    *,
    new_thread: bool,
    idempotency_key: str,
    priority: int,
    run_mode: str,
    schedule: Any,
    submission_events: Callable[[Run, list[str]], list[dict[str, Any]]] | None,
    provenance: dict[str, Any],
) -> Run:
    """`run_create`'s writes, queued in `batch`: the input messages, the run, the thread,
    the run's first events, its audit entry and the hourly counter."""
    trigger_ids = append_to_thread(thread, new_messages, batch)
    run = Run(
        thread=thread,
        agent=agent,
        agent_version=version,
        **_prices(agent, version),
        status=Run.Status.CREATED,
        due=True,
        dispatched_at=timezone.now(),
        priority=priority,
        run_mode=run_mode,
        schedule=schedule,
        idempotency_key=idempotency_key,
        idempotency_scope=idempotency_scope(actor) if idempotency_key else "",
        request=_user_request(actor, trigger_ids),
        input=input_for(thread, trigger_ids),
        **provenance,
    )
    # The first events commit with the run, so a client following it sees it begin at
    # once; the worker's first checkpoint leaves its own run_start out (OrmCheckpointStore).
    events = [run_start_event(run)]
    if submission_events is not None:
        events += submission_events(run, trigger_ids)
    run.last_event_seq = len(events)  # the counter is written with the row
    _insert_with_thread(run, thread, new_thread, batch)
    run.last_event_seq = 0
    events_append(run, events, save_counter=False, batch=batch)
    _audit_start(run, actor, new_messages, batch)
    stats.run_created(run, batch)
    return run
