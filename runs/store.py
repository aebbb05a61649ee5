"""ORM adapters of the runtime's ports: the checkpoint store and the live event sink.

A checkpoint is one transaction: it locks the run row, checks the worker still holds the
run (attempt fencing), appends only the new messages guarded by the thread's committed
message count, updates the run row, upserts changed tool calls, opens tickets for newly
suspended calls and appends the events with gap-free per-run seq. Broadcast happens on
commit. What follows in the same transaction is declared elsewhere: the effects of new
tickets and of the run's end (runs.services.run_end), which this adapter only calls.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

from django.db import transaction
from django.db.models import DurationField, F
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from common.jsonsafe import without_nul
from common.writes import WriteBatch
from runs import metrics, tracing
from runs.message_rows import message_from_row, message_to_row
from runs.models import Message, Run, Thread, Ticket, ToolCall
from runs.realtime import broadcast_live
from runs.runtime import types as rt
from runs.runtime.background import BACKGROUND_KEY
from runs.runtime.events import DELTA_EVENT_TYPES, Event
from runs.runtime.ports import Checkpoint, LeaseLostError, VersionConflictError
from runs.services import run_end, stats
from runs.services.checkpoint_input import background_record, steer_deliver, wake_if_work_finished
from runs.services.events import (
    AGENT_TEAM,
    RUN_ROW_FIELDS,
    apply_thread_projection,
    events_append,
    seqs_reserved,
    thread_write,
)
from runs.services.locks import retry_lock_conflicts
from runs.services.ticket_open import tickets_open
from runs.sql import Param, Params, prepared_update, release_connection


def _ts(value: dt.datetime | None) -> int | None:
    return int(value.timestamp()) if value else None


def _dt(value: int | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(value, tz=dt.UTC) if value else None


def load_messages(thread_id: Any) -> list[rt.Message]:
    # one plain query: a server-side cursor (iterator) costs two more round trips per load
    rows = Message.objects.filter(thread_id=thread_id).order_by("seq")
    return [message_from_row(row) for row in rows]


def record_from_row(run: Run) -> rt.RunRecord:
    termination = run.termination_reason
    waiting = None
    if run.waiting:
        waiting = rt.RunWaitingState(
            reason=rt.WaitingReason(run.waiting["reason"]),
            ticket_ids=list(run.waiting.get("ticket_ids") or []),
            since_dispatch_id=run.waiting.get("since_dispatch_id"),
            message=run.waiting.get("message"),
        )
    return rt.RunRecord(
        run_id=str(run.id),
        thread_id=str(run.thread_id),
        agent_id=run.agent.slug,
        parent_run_id=str(run.parent_run_id) if run.parent_run_id else None,
        request=rt.RunRequestSnapshot.from_json(run.request),
        input=rt.RunMessageInput.from_json(run.input),
        output=rt.RunMessageOutput.from_json(run.output),
        status=rt.RunStatus(run.status),
        status_reason=run.status_reason or None,
        termination_reason=rt.TerminationReason.from_json(termination) if termination else None,
        final_output=run.final_output,
        error_payload=run.error_payload,
        dispatch_id=run.dispatch_id or None,
        session_id=run.session_id or None,
        transport_request_id=run.transport_request_id or None,
        waiting=waiting,
        created_at=_ts(run.created_at) or 0,
        started_at=_ts(run.started_at),
        finished_at=_ts(run.finished_at),
        updated_at=_ts(run.updated_at) or 0,
        steps=run.steps,
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        state=rt.PersistedState.from_json(run.state),
    )


def record_to_json(record: rt.RunRecord) -> dict[str, Any]:
    """The RunRecord as upstream serializes it (times in unix seconds)."""
    return {
        "run_id": record.run_id,
        "thread_id": record.thread_id,
        "agent_id": record.agent_id,
        "parent_run_id": record.parent_run_id,
        "request": record.request.to_json() if record.request else None,
        "input": record.input.to_json() if record.input else None,
        "output": record.output.to_json() if record.output else None,
        "status": record.status.value,
        "status_reason": record.status_reason,
        "termination_reason": record.termination_reason.to_json()
        if record.termination_reason
        else None,
        "final_output": record.final_output,
        "error_payload": record.error_payload,
        "dispatch_id": record.dispatch_id,
        "session_id": record.session_id,
        "transport_request_id": record.transport_request_id,
        "waiting": record.waiting.to_json() if record.waiting else None,
        "outcome": record.outcome,
        "created_at": record.created_at,
        "started_at": record.started_at,
        "finished_at": record.finished_at,
        "updated_at": record.updated_at,
        "steps": record.steps,
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "state": record.state.to_json() if record.state else None,
    }


def tool_call_state_from_row(row: ToolCall) -> rt.ToolCallState:
    return rt.ToolCallState(
        call_id=row.call_id,
        tool_name=row.tool_name,
        arguments=row.arguments,
        status=rt.ToolCallStatus(row.status),
        updated_at=int(row.updated_at.timestamp() * 1000),
        resume_mode=rt.ToolCallResumeMode(row.resume_mode),
        suspension_id=row.suspension_id or None,
        suspension_reason=row.suspension_reason or None,
        resume_input=rt.ToolCallResume.from_json(row.resume_input),
    )


def load_open_tool_calls(run_id: Any) -> dict[str, rt.ToolCallState]:
    """The calls an activation must know about: suspended, decided but not yet replayed."""
    rows = ToolCall.objects.filter(run_id=run_id).exclude(
        status__in=[ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED, ToolCall.Status.NEW]
    )
    states = {}
    for row in rows:
        if row.status == ToolCall.Status.CANCELLED and row.resume_input is None:
            continue
        states[row.call_id] = tool_call_state_from_row(row)
    return states


# the run's columns a checkpoint sets from its record, each from the parameter of its name
RECORD_FIELDS = (
    "status",
    "status_reason",
    "termination_reason",
    "final_output",
    "error_payload",
    "waiting",
    "input",
    "output",
    "steps",
    "input_tokens",
    "output_tokens",
    "state",
    "updated_at",
)


def _run_write(done: bool, lease: bool, fenced: bool) -> tuple[Any, dict[str, Any]]:
    """A checkpoint's update of its run, with `Param`s (runs.sql.prepared_update).
    `fenced`: only while this claim holds the lease (a sweep that took the run back for a
    late renewal cleared it: nothing more is written). `lease`: renewed, by the database's
    clock like every lease (runs.services.leases)."""
    p = Params(Run)
    held = Run.objects.filter(pk=p.id)
    if fenced:
        held = held.filter(attempt=p.attempt, lease_expires_at__isnull=False)
    values: dict[str, Any] = {name: getattr(p, name) for name in RECORD_FIELDS}
    values["started_at"] = Coalesce(F("started_at"), p.started_at)  # unless the row has one
    values["last_event_seq"] = F("last_event_seq") + p("seqs", "last_event_seq")
    if done:  # a finished run holds no lease: releasing it afterwards has nothing to do
        # kept when already set: a finish is counted once (see `checkpoint`)
        values.update(
            finished_at=Coalesce(F("finished_at"), p.finished_at),
            lease_owner="",
            lease_expires_at=None,
            due=False,
        )
    else:
        values["finished_at"] = None
        if lease:
            values["lease_expires_at"] = Now() + Param("lease", DurationField())
    return held, values


class OrmCheckpointStore:
    """`announced`: the run's log already holds the `run_start` this activation emits
    first (the submission committed it, so a client sees the run begin at once); the
    first checkpoint leaves it out instead of writing it twice. `timer`: the live sink's,
    which knows how long each tool call took. `replay`: the run replays a past run
    (docs/replays.md): its tickets are decided by its set's policy in the checkpoint that
    opens them, it notifies nobody, and its end starts the set's next replays."""

    def __init__(
        self,
        run_id: Any,
        attempt: int | None,
        lease_seconds: float | None = None,
        *,
        announced: bool = False,
        timer: metrics.ActivationTimer | None = None,
        trace: tracing.ActivationTrace | None = None,
        replay: bool = False,
    ) -> None:
        self.run_id = run_id
        self.replay = replay
        self.attempt = attempt
        self.lease_seconds = lease_seconds
        self.announced = announced
        self.timer = timer
        self.trace = trace or tracing.ActivationTrace(None, None)

    def load_run(self, run_id: str) -> rt.RunRecord | None:
        run = Run.objects.select_related("agent").filter(pk=run_id).first()
        return record_from_row(run) if run else None

    def checkpoint(self, checkpoint: Checkpoint) -> list[rt.Message] | None:
        """One transaction of four or five statements, none of them growing with the thread:
        the run row (which locks it, fences the attempt and reserves the events' seqs),
        the thread (message-count guard and run pointers), the new messages, the changed
        tool calls and the events. Then, only when there is something to do: background
        work started or received, the thread's next input once the run is done (no query on a
        thread that never accepted input: the thread's update returns its count), steer
        input at a step boundary (returned, committed), a wake for a run whose background
        work finished while it ran."""
        now = timezone.now()
        events = checkpoint.events
        if self.announced and events and events[0]["event_type"] == "run_start":
            events = events[1:]
        fields = self._record_fields(checkpoint.record, now)
        with self.trace.checkpoint():
            delivered = self._commit(checkpoint, events, fields, now)
        release_connection()  # nothing is held while the run waits on its model next
        if self.timer is not None:  # committed: the finished calls' durations are written
            for state in checkpoint.tool_calls:
                if state.status in (rt.ToolCallStatus.SUCCEEDED, rt.ToolCallStatus.FAILED):
                    self.timer.tool_ms.pop(state.call_id, None)
        if checkpoint.events:  # the activation's run_start is behind us
            self.announced = False
        return delivered

    @retry_lock_conflicts
    def _commit(
        self,
        checkpoint: Checkpoint,
        events: list[Event],
        fields: dict[str, Any],
        now: dt.datetime,
    ) -> list[rt.Message] | None:
        """The checkpoint's transaction (run again, whole, if PostgreSQL ends it for a lock
        conflict: a checkpoint is never lost to one). The run row first, then the thread
        (the lock order: runs.services.locks). The writes after those two updates go as
        one statement on PostgreSQL (common/writes.py), sent before the commit."""
        finishing = checkpoint.record.status is rt.RunStatus.DONE
        with transaction.atomic(), WriteBatch() as batch:
            run = self._write_run(fields, len(events), finishing)
            if run is None:
                raise LeaseLostError(f"run {self.run_id} was claimed by another worker")
            # the thread row is written once: message count guard and run pointers together
            inputs_accepted = self._append_messages(checkpoint, run, batch)
            tools, opened = self._save_tool_calls(run, checkpoint, now, batch)
            events_append(run, events, now=now, save_counter=False, batch=batch)
            if opened or self.replay:  # (a replay's policy decides every checkpoint's)
                run_end.tickets_opened_effects(run_end.TicketsOpened(run, opened, now, self.replay))
            if checkpoint.background_starts or checkpoint.background_delivered:
                background_record(
                    run, checkpoint.background_starts, checkpoint.background_delivered, now
                )
            delivered = None
            if finishing:  # the run's end: what follows it (runs.services.run_end)
                record, first = checkpoint.record, run.finished_at == now  # not done before
                state = record.state
                ended = run_end.RunEnded(
                    run=run,
                    how=run_end.FINISHED,
                    now=now,
                    first=first,
                    replay=self.replay,
                    error_payload=record.error_payload,
                    inputs_accepted=inputs_accepted,
                    # its unfinished work ends with it (a run that never started any has none)
                    background_work=bool(
                        state is not None and state.extensions.get(BACKGROUND_KEY)
                    ),
                    agent=record.agent_id,
                    started_at=_dt(record.started_at),
                    tool_usage=tools,  # counted with the run's (effect_count_finished)
                    batch=batch,
                )
                run_end.run_end_effects(ended)
                if first:
                    tools = Counter()
            elif checkpoint.accepts_input and run.pending_inputs:
                count = checkpoint.expected_message_count + len(checkpoint.new_messages)
                delivered = steer_deliver(run, count)
            else:
                wake_if_work_finished(run)
            stats.apply_usage(tools, batch)  # last: the finished tool calls' counters, if any
        return delivered

    def _write_run(self, fields: dict[str, Any], seqs: int, done: bool) -> Run | None:
        """The run row from the checkpoint's record (`fields`), which locks it, fences the
        claim and reserves `seqs` events' seqs: one prepared statement (runs.sql)."""
        fenced = self.attempt is not None
        lease = not done and bool(self.lease_seconds)
        run = prepared_update(
            ("checkpoint", done, lease, fenced),
            lambda: _run_write(done, lease, fenced),
            {
                **fields,
                "id": self.run_id,
                "attempt": self.attempt,
                "seqs": seqs,
                "lease": dt.timedelta(seconds=self.lease_seconds or 0),
            },
            RUN_ROW_FIELDS,
            extra=AGENT_TEAM,
        )
        return seqs_reserved(run, seqs)

    def _append_messages(self, checkpoint: Checkpoint, run: Run, batch: WriteBatch) -> int | None:
        """Write the run's thread pointers; with new messages, append them (queued in
        `batch`), guarded by the thread's committed message count in the same statement
        as the pointers. Returns the thread's `input_seq` (for `thread_deliver_next`)."""
        count = len(checkpoint.new_messages)
        if not count:
            return apply_thread_projection(run)
        expected = checkpoint.expected_message_count
        updated = thread_write(run, expected=expected, added=count)
        if updated is None:
            actual = (
                Thread.objects.filter(pk=checkpoint.thread_id)
                .values_list("message_count", flat=True)
                .first()
            )
            raise VersionConflictError(expected, actual)
        batch.insert(
            message_to_row(checkpoint.thread_id, expected + offset + 1, message)
            for offset, message in enumerate(checkpoint.new_messages)
        )
        return updated.input_seq

    def _record_fields(self, record: rt.RunRecord, now: dt.datetime) -> dict[str, Any]:
        """The values of `_run_write`'s parameters that the record gives."""
        fields: dict[str, Any] = {
            "status": record.status.value,
            "status_reason": record.status_reason or "",
            "termination_reason": (
                record.termination_reason.to_json() if record.termination_reason else None
            ),
            "final_output": record.final_output,
            "error_payload": record.error_payload,
            "waiting": record.waiting.to_json() if record.waiting else None,
            "input": record.input.to_json() if record.input else None,
            "output": record.output.to_json() if record.output else None,
            "steps": record.steps,
            "input_tokens": record.input_tokens,
            "output_tokens": record.output_tokens,
            "state": record.state.to_json() if record.state else None,
            "started_at": _dt(record.started_at) or now,  # unless the row has one
            "finished_at": now,
            "updated_at": now,
        }
        return {name: without_nul(value) for name, value in fields.items()}

    def _save_tool_calls(
        self, run: Run, checkpoint: Checkpoint, now: dt.datetime, batch: WriteBatch
    ) -> tuple[Counter[stats.UsageKey], list[Ticket]]:
        """Upsert the changed calls in one statement (a call's step and creation time are
        kept; queued in `batch` unless a ticket needs their ids) and open a ticket for each
        newly suspended one. Returns the usage counters
        of the calls that finished (succeeded or failed), for the caller to write last,
        and the tickets opened."""
        states = checkpoint.tool_calls
        usage: Counter[stats.UsageKey] = Counter()
        if not states:
            return usage, []
        rows: dict[str, ToolCall] = {}
        for state in states:
            rows[state.call_id] = ToolCall(
                run=run,
                call_id=state.call_id,
                step_index=checkpoint.step_index,
                created_at=now,
                tool_name=state.tool_name,
                arguments=without_nul(state.arguments),
                status=state.status.value,
                resume_mode=state.resume_mode.value,
                suspension_id=state.suspension_id or "",
                suspension_reason=state.suspension_reason or "",
                resume_input=without_nul(state.resume_input.to_json())
                if state.resume_input
                else None,
                updated_at=now,
            )
        for row in rows.values():
            if row.status in (ToolCall.Status.SUCCEEDED, ToolCall.Status.FAILED):
                row.duration_ms = self.timer.tool_ms.get(row.call_id) if self.timer else None
                failed = row.status == ToolCall.Status.FAILED
                usage += stats.tool_usage(now, run.agent_id, row.tool_name, failed, row.duration_ms)
        suspended = [s for s in states if s.status is rt.ToolCallStatus.SUSPENDED]
        key, changed = ["run", "call_id"], list(TOOL_CALL_FIELDS)
        if not suspended:
            batch.insert(
                rows.values(), update_conflicts=True, unique_fields=key, update_fields=changed
            )
            return usage, []
        ToolCall.objects.bulk_create(  # the tickets need the calls' keys: now
            list(rows.values()), update_conflicts=True, unique_fields=key, update_fields=changed
        )
        return usage, tickets_open(run, suspended, rows, checkpoint.events, now)


TOOL_CALL_FIELDS = (
    "tool_name",
    "arguments",
    "status",
    "resume_mode",
    "suspension_id",
    "suspension_reason",
    "resume_input",
    "duration_ms",
    "updated_at",
)


class OrmLiveSink:
    """Forwards token deltas to the run's group as they stream; everything else is
    broadcast from the database log when its checkpoint commits. It also times the
    activation's steps, inference and tool calls for the metrics (runs.metrics), and
    hands each event to the activation's trace (runs.tracing), which makes spans of them."""

    def __init__(
        self, run_id: Any, agent: str = "", trace: tracing.ActivationTrace | None = None
    ) -> None:
        self.run_id = run_id
        self.timer = metrics.ActivationTimer(agent)
        self.trace = trace

    def emit(self, event: Event) -> None:
        self.timer.observe(event)
        if self.trace is not None:
            self.trace.observe(event)
        if event["event_type"] in DELTA_EVENT_TYPES:
            broadcast_live(self.run_id, event)
