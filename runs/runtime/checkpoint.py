"""The run record and checkpoint an activation writes, built the same way for every backend.

The loop checkpoints after each step and at its end; a remote (A2A) activation checkpoints
once at its end. Both hand `activation_checkpoint` where the run stands (`RunProgress`)
and what the activation added since its last checkpoint (messages, tool calls, events).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from . import events as ev
from .events import Event
from .identity import RunIdentity
from .materialize import materialize_message_log
from .ports import Checkpoint
from .types import (
    Message,
    PersistedState,
    RunMessageInput,
    RunMessageOutput,
    RunRecord,
    RunStatus,
    RunWaitingTicket,
    TerminationReason,
    ToolCallState,
    waiting_state_from_lifecycle,
)


@dataclass
class RunProgress:
    """Where a run stands at a checkpoint.

    `termination`, `final_output` and `error_payload` reach the record only once the run
    is done. `created_at` / `started_at` of 0 / None mean "now" (the record's own time)."""

    status: RunStatus
    status_reason: str | None
    steps: int
    state: PersistedState
    created_at: int = 0
    started_at: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    waiting_tickets: list[RunWaitingTicket] = field(default_factory=list)
    waiting_since: str | None = None  # the record's waiting.since_dispatch_id
    termination: TerminationReason | None = None
    final_output: str | None = None
    error_payload: Any = None


def error_payload_of(termination: TerminationReason) -> dict[str, Any] | None:
    """The error payload a run that ends with `termination` records (errors only)."""
    if termination.type == TerminationReason.ERROR:
        return {"message": termination.value}
    return None


@dataclass
class ActivationLog:
    """What an activation holds of its run's thread: the messages (the committed ones
    first), the run's previous record and how many messages were its input."""

    identity: RunIdentity
    messages: list[Message]
    previous: RunRecord | None
    input_message_count: int
    committed_count: int


def run_record_of(
    log: ActivationLog,
    progress: RunProgress,
    input_: RunMessageInput | None,
    output: RunMessageOutput | None,
) -> RunRecord:
    """The run record `progress` describes, with the materialized input and output; the
    outcome fields only once the run is done."""
    identity = log.identity
    done = progress.status is RunStatus.DONE
    now = int(time.time())
    return RunRecord(
        run_id=identity.run_id,
        thread_id=identity.thread_id,
        agent_id=identity.agent_id,
        parent_run_id=identity.parent_run_id,
        request=log.previous.request if log.previous else None,
        input=input_,
        output=output,
        status=progress.status,
        status_reason=progress.status_reason,
        termination_reason=progress.termination if done else None,
        final_output=progress.final_output if done else None,
        error_payload=progress.error_payload if done else None,
        dispatch_id=identity.dispatch_id,
        session_id=identity.session_id,
        transport_request_id=identity.transport_request_id,
        waiting=waiting_state_from_lifecycle(
            progress.status,
            progress.status_reason,
            progress.waiting_since,
            progress.waiting_tickets,
        ),
        created_at=progress.created_at or now,
        started_at=progress.started_at or now,
        finished_at=now if done else None,
        updated_at=now,
        steps=progress.steps,
        input_tokens=progress.input_tokens,
        output_tokens=progress.output_tokens,
        state=progress.state,
    )


def activation_checkpoint(
    log: ActivationLog,
    progress: RunProgress,
    tool_calls: list[ToolCallState],
    events: list[Event],
) -> Checkpoint:
    """The checkpoint of `log`'s uncommitted messages with the run record `progress`
    describes, the changed `tool_calls` and the `events` (deltas coalesced). Stamps the
    run's new output messages in place."""
    identity = log.identity
    input_, output = materialize_message_log(
        log.messages,
        log.previous,
        identity.run_id,
        identity.thread_id,
        progress.steps,
        log.input_message_count,
        start_index=log.committed_count,
    )
    record = run_record_of(log, progress, input_, output)
    return Checkpoint(
        thread_id=identity.thread_id,
        record=record,
        new_messages=log.messages[log.committed_count :],
        expected_message_count=log.committed_count,
        tool_calls=tool_calls,
        events=ev.coalesce_deltas(events),
        step_index=progress.steps - 1 if progress.steps else None,
    )
