"""Appending to a run's durable event log and the thread projection.

Callers hold the run row lock (`select_for_update` inside `atomic`), so the per-run seq
is gap-free: the counter and the rows commit together or not at all.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import transaction
from django.db.models import Case, F, QuerySet, When
from django.utils import timezone

from common.jsonsafe import without_nul
from common.writes import WriteBatch
from runs.models import Run, RunEvent, Thread
from runs.realtime import broadcast_events
from runs.runtime import events as ev
from runs.runtime.loop import RunIdentity
from runs.runtime.types import RunStatus
from runs.sql import Params, prepared_update, update_returning


def run_summary(run: Run) -> dict[str, Any]:
    return {
        "id": str(run.id),
        "thread_id": str(run.thread_id),
        "status": run.status,
        "status_reason": run.status_reason,
        "waiting_reason": run.waiting_reason,
        "steps": run.steps,
        "last_event_seq": run.last_event_seq,
        "updated_at": run.updated_at.isoformat(),
        "team_id": team_of(run),  # the lists' sockets pass a change on by it
    }


# the run's agent's team, returned with the run row (`update_returning(extra=...)`)
AGENT_TEAM = {
    "agent_team_id": "(SELECT team_id FROM agents_agent WHERE agents_agent.id = runs_run.agent_id)"
}


def team_of(run: Run) -> Any:
    """The team of the run's agent: returned with its row, else from its agent."""
    team = getattr(run, "agent_team_id", None)
    return team if team is not None else run.agent.team_id


def run_identity(run: Run) -> RunIdentity:
    """Who the run is, as its `run_start` events say."""
    parent = run.parent_run if run.parent_run_id else None
    return RunIdentity(
        thread_id=str(run.thread_id),
        run_id=str(run.pk),
        agent_id=run.agent.slug,
        parent_run_id=str(run.parent_run_id) if run.parent_run_id else None,
        parent_thread_id=str(parent.thread_id) if parent else None,
        parent_tool_call_id=run.parent_tool_call_id or None,
        origin=run.origin,
        run_mode="resume" if run.steps else (run.run_mode or "foreground"),
    )


def run_start_event(run: Run) -> dict[str, Any]:
    """The `run_start` of a run's first activation, as the worker's loop emits it."""
    identity = run_identity(run)
    return ev.run_start(
        identity.thread_id, identity.run_id, identity.parent_run_id, identity.to_json()
    )


# what an event append needs back from the run row (thread, tickets, lists' summary,
# and the usage counters of a run that finishes)
RUN_ROW_FIELDS = (
    "thread_id",
    "agent",
    "created_at",
    "started_at",
    "finished_at",
    "input_tokens",
    "output_tokens",
    "input_price_per_million_usd",
    "output_price_per_million_usd",
    "open_tickets",
    "agent_version_id",
    "status",
    "status_reason",
    "waiting",
    "steps",
    "last_event_seq",
    "updated_at",
    "pending_inputs",
)


def run_reserving_seqs(runs: QuerySet[Run], count: int, values: dict[str, Any]) -> Run | None:
    """Apply `values` to the one run `runs` matches, which locks its row, and reserve the
    seqs of `count` events in the same statement. The row comes back with
    `last_event_seq` before them, for `events_append(..., save_counter=False)`; None
    when nothing matched (the run is gone, or a guard in `runs` failed)."""
    run = update_returning(
        runs,
        {**values, "last_event_seq": F("last_event_seq") + count},
        RUN_ROW_FIELDS,
        extra=AGENT_TEAM,
    )
    return seqs_reserved(run, count)


def seqs_reserved(run: Run | None, count: int) -> Run | None:
    """The run row an update that added `count` to its `last_event_seq` returned, with
    `last_event_seq` as it was before (where the reserved seqs start)."""
    if run is not None:
        run.last_event_seq -= count
    return run


def events_append(
    run: Run,
    events: list[dict[str, Any]],
    *,
    now: dt.datetime | None = None,
    save_counter: bool = True,
    batch: WriteBatch | None = None,
) -> list[RunEvent]:
    """Append events after the run's last seq and broadcast them once committed.

    The run row must be locked by the caller. The new counter is saved here unless the
    caller writes `last_event_seq` in its own update of the row (`save_counter=False`).
    `batch`: the rows are queued there (common/writes.py) instead of inserted at once.
    """
    now = now or timezone.now()
    start = run.last_event_seq
    events = without_nul(events)
    rows = [
        RunEvent(
            run=run,
            seq=start + index + 1,
            event_type=event["event_type"],
            payload=event,
            created_at=now,
        )
        for index, event in enumerate(events)
    ]
    if rows:
        if batch is not None:
            batch.insert(rows)
        else:
            RunEvent.objects.bulk_create(rows)
        run.last_event_seq = start + len(rows)
        if save_counter:
            Run.objects.filter(pk=run.pk).update(last_event_seq=run.last_event_seq)
    frames = [row.as_frame() for row in rows]
    transaction.on_commit(lambda: broadcast_events(run.pk, frames, run_summary(run)))
    return rows


# Appended to a run's log between its activations (after one ended, before the next):
# decisions, and input that continues a waiting run (`input_delivered` at `resume_input`;
# the one that starts a new run follows its `run_start`, inside the first activation).
BETWEEN_ACTIVATIONS_EVENT_TYPES = frozenset({"ticket_decided"})
RESUME_INPUT = "resume_input"


def activation_close_interrupted(run: Run, message: str) -> bool:
    """Close the activation a worker left open in the log when it stopped before the
    activation's end: an `error` (code `activation_interrupted`) after its last event,
    so the next activation's `run_start` follows a closed one. True if it was open.

    `run` is a running run whose row the caller locked in this transaction (the recovery
    that makes it claimable again), with its `last_event_seq`. Open means the log's last
    event is neither an activation's end nor one that comes after it; one indexed read.
    An activation that never checkpointed left nothing of its own, so nothing is closed
    (except the first one, whose `run_start` the submission wrote for it)."""
    if run.status != RunStatus.RUNNING or not run.last_event_seq:
        return False
    last = (
        RunEvent.objects.filter(run_id=run.pk, seq=run.last_event_seq)
        .values_list("event_type", "payload__boundary")
        .first()
    )
    if last is None:
        return False
    event_type, boundary = last
    if (
        event_type in ev.TERMINAL_EVENT_TYPES
        or event_type in BETWEEN_ACTIVATIONS_EVENT_TYPES
        or (event_type == "input_delivered" and boundary == RESUME_INPUT)
    ):
        return False
    events_append(run, [ev.activation_interrupted(message)])
    return True


def thread_projection(run: Run) -> dict[str, Any]:
    """The thread's latest/active/open run pointers for the run's status (docs/run-model.md)."""
    updates: dict[str, Any] = {"latest_run": run.pk, "updated_at": timezone.now()}
    if run.status == RunStatus.CREATED:
        updates.update(active_run=None, open_run=run.pk)
    elif run.status == RunStatus.RUNNING:
        updates.update(active_run=run.pk, open_run=run.pk)
    elif run.status == RunStatus.WAITING:
        updates.update(active_run=None, open_run=run.pk)
    else:  # done: clear the pointers only where they still point at this run
        updates.update(_done_pointers(run.pk))
    return updates


def _done_pointers(run: Any) -> dict[str, Any]:
    return {
        "active_run": Case(When(active_run=run, then=None), default=F("active_run")),
        "open_run": Case(When(open_run=run, then=None), default=F("open_run")),
    }


def _thread_write(status: str, guarded: bool) -> tuple[QuerySet[Thread], dict[str, Any]]:
    """`thread_projection` as a prepared statement (runs.sql.prepared_update): the run's
    pointers for a run in `status`; `guarded`: the message-count guard and the messages
    added, in the same statement."""
    p = Params(Thread)
    run = p("run", "latest_run")
    threads = Thread.objects.filter(pk=p.id)
    values: dict[str, Any] = {"latest_run": run, "updated_at": p.updated_at}
    if status == RunStatus.RUNNING:
        values.update(active_run=run, open_run=run)
    elif status == RunStatus.DONE:
        values.update(_done_pointers(run))
    else:  # created, waiting
        values.update(active_run=None, open_run=run)
    if guarded:
        threads = threads.filter(message_count=p("expected", "message_count"))
        values["message_count"] = F("message_count") + p("added", "message_count")
    return threads, values


def thread_write(run: Run, *, expected: int | None = None, added: int = 0) -> Thread | None:
    """Write the run's thread pointers (`thread_projection`), and with `expected` add
    `added` messages to the thread's count, guarded by it. The thread with its
    `input_seq` (inputs it ever accepted); None when the thread is gone or the guard
    failed."""
    status = run.status if run.status in _POINTER_SHAPES else RunStatus.WAITING
    guarded = expected is not None
    return prepared_update(
        ("thread_write", status, guarded),
        lambda: _thread_write(status, guarded),
        {
            "id": run.thread_id,
            "run": run.pk,
            "updated_at": timezone.now(),
            "expected": expected,
            "added": added,
        },
        ["input_seq"],
    )


# the run statuses whose pointers differ (created and waiting write the same)
_POINTER_SHAPES = frozenset({RunStatus.RUNNING, RunStatus.DONE})


def apply_thread_projection(run: Run) -> int | None:
    """Write the run's thread pointers; the thread's `input_seq` (inputs it ever accepted:
    none, no input can be queued on it), None when the thread is gone."""
    thread = thread_write(run)
    return None if thread is None else thread.input_seq
