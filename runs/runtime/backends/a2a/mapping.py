"""A2A tasks and messages <-> this runtime's types: task state labels, the message ids a
run sends under, and what a remote reply means for the run (status, termination,
response text, output and artifacts)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from a2a.types import Message as A2AMessage
from a2a.types import Role as A2ARole
from a2a.types import Task, TaskState
from google.protobuf.json_format import MessageToDict

from ...types import BackendRunStatus, TerminationReason
from ..base import BackendRunOutput
from .config import AUTH_TOOL, INPUT_TOOL

_MESSAGE_IDS = uuid.UUID("5b0f3c2e-8d0a-4f55-9a53-6a3f0d6c1e27")  # namespace of our messageIds

STATE_LABELS = {
    TaskState.TASK_STATE_SUBMITTED: "submitted",
    TaskState.TASK_STATE_WORKING: "working",
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
}
TERMINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
INTERRUPTED_STATES = frozenset(
    {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
)
SETTLED_STATES = TERMINAL_STATES | INTERRUPTED_STATES


def state_label(state: int) -> str:
    return STATE_LABELS.get(state, "unknown")  # type: ignore[call-overload]


def stream_state(item: Any) -> int | None:
    if item.HasField("task"):
        return int(item.task.status.state)
    if item.HasField("status_update"):
        return int(item.status_update.status.state)
    return None


def exchange_message_id(run_id: str, position: int, texts: list[str]) -> str:
    """The A2A messageId of what a run sends at a transcript position. A segment that
    died after sending but before recording the remote task sends the message again on
    recovery; under the same id, so a remote that deduplicates by messageId (the
    protocol's handle for that) sees one message."""
    return str(uuid.uuid5(_MESSAGE_IDS, json.dumps([run_id, position, texts])))


@dataclass
class Reply:
    """What the remote answered: a task (settled) or a direct message."""

    task: Task | None = None
    message: A2AMessage | None = None


@dataclass
class Outcome:
    """What an exchange means for the run: its status, termination, response and output,
    the steps it took and the synthetic tool a remote question waits on."""

    status: BackendRunStatus
    termination: TerminationReason
    response: str | None = None
    output: BackendRunOutput = field(default_factory=BackendRunOutput)
    steps: int = 0
    waiting_tool: str | None = None


def _text_of_parts(parts: Any) -> str:
    return "\n".join(part.text for part in parts if part.HasField("text"))


def _task_response(task: Task) -> str | None:
    """The text a completed task answers with: its artifacts, else its status message,
    else the last agent message of its history."""
    texts = [_text_of_parts(artifact.parts) for artifact in task.artifacts]
    text = "\n".join(t for t in texts if t)
    if text:
        return text
    return _status_text(task)


def _status_text(task: Task, *, from_history: bool = True) -> str | None:
    """The status message's text, else (if allowed) the last agent message of the history."""
    if task.status.HasField("message"):
        text = _text_of_parts(task.status.message.parts)
        if text:
            return text
    if not from_history:
        return None
    for message in reversed(task.history):
        if message.role == A2ARole.ROLE_AGENT:
            text = _text_of_parts(message.parts)
            if text:
                return text
    return None


def _artifacts(task: Task) -> list[dict[str, Any]]:
    found = []
    for artifact in task.artifacts:
        data = MessageToDict(artifact)
        item: dict[str, Any] = {"content": data.get("parts", [])}
        if artifact.artifact_id:
            item["id"] = artifact.artifact_id
        if artifact.name:
            item["name"] = artifact.name
        found.append(item)
    return found


def outcome_of(reply: Reply) -> Outcome:
    if reply.message is not None:
        text = _text_of_parts(reply.message.parts) or None
        return Outcome(
            BackendRunStatus.completed(),
            TerminationReason.natural_end(),
            text,
            BackendRunOutput(text=text),
            steps=1,
        )
    task = reply.task
    assert task is not None
    state = task.status.state
    if state == TaskState.TASK_STATE_COMPLETED:
        text = _task_response(task)
        return Outcome(
            BackendRunStatus.completed(),
            TerminationReason.natural_end(),
            text,
            BackendRunOutput(text=text, artifacts=_artifacts(task)),
            steps=1,
        )
    if state == TaskState.TASK_STATE_CANCELED:
        return Outcome(BackendRunStatus.cancelled(), TerminationReason.cancelled(), steps=1)
    if state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED):
        message = _status_text(task, from_history=False) or f"remote task {state_label(state)}"
        return Outcome(BackendRunStatus.failed(message), TerminationReason.error(message), steps=1)
    question = _status_text(task)
    if state == TaskState.TASK_STATE_INPUT_REQUIRED:
        return Outcome(
            BackendRunStatus.waiting_input(question),
            TerminationReason.suspended(),
            question,
            BackendRunOutput(text=question),
            steps=1,
            waiting_tool=INPUT_TOOL,
        )
    return Outcome(
        BackendRunStatus.waiting_auth(question),
        TerminationReason.suspended(),
        question,
        BackendRunOutput(text=question),
        steps=1,
        waiting_tool=AUTH_TOOL,
    )


def stopped_outcome(stop: str, timeout_ms: int) -> Outcome:
    """The outcome of an exchange stopped before the remote task settled: the run was
    cancelled ("cancelled") or the remote task outlived the timeout ("timeout")."""
    if stop == "cancelled":
        return Outcome(BackendRunStatus.cancelled(), TerminationReason.cancelled())
    return Outcome(
        BackendRunStatus.timeout(),
        TerminationReason.stopped("timeout", f"remote task did not settle within {timeout_ms} ms"),
    )


def payload_text(payload: Any) -> str:
    if isinstance(payload, str):
        return payload
    if isinstance(payload, dict) and isinstance(payload.get("text"), str):
        return str(payload["text"])
    return json.dumps(payload, ensure_ascii=False, default=str)
