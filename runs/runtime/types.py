"""The run model's data types: enums, records and their JSON shapes (docs/run-model.md).

Plain dataclasses, no Django. JSON produced here is what the API, the events and the
database store, so field names follow upstream exactly.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from uuid6 import uuid7


def now_ms() -> int:
    return int(time.time() * 1000)


def new_id() -> str:
    return str(uuid7())


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if value is not None}


# --- Run lifecycle -----------------------------------------------------------------------


class RunStatus(StrEnum):
    CREATED = "created"
    RUNNING = "running"
    WAITING = "waiting"
    DONE = "done"

    @property
    def is_terminal(self) -> bool:
        return self is RunStatus.DONE

    def can_transition_to(self, target: RunStatus) -> bool:
        if self is target:
            return True
        return target in _RUN_TRANSITIONS[self]


_RUN_TRANSITIONS: dict[RunStatus, set[RunStatus]] = {
    RunStatus.CREATED: {RunStatus.RUNNING, RunStatus.DONE},
    RunStatus.RUNNING: {RunStatus.WAITING, RunStatus.DONE},
    RunStatus.WAITING: {RunStatus.RUNNING, RunStatus.DONE},
    RunStatus.DONE: set(),
}


class WaitingReason(StrEnum):
    TOOL_PERMISSION = "tool_permission"
    USER_INPUT = "user_input"
    BACKGROUND_TASKS = "background_tasks"
    EXTERNAL_EVENT = "external_event"
    RATE_LIMIT = "rate_limit"
    MANUAL_PAUSE = "manual_pause"


def waiting_reason_from_status_reason(status_reason: str | None) -> WaitingReason:
    """The waiting reason a status_reason stands for, the same for local and remote runs."""
    match status_reason:
        case "awaiting_tasks":
            return WaitingReason.BACKGROUND_TASKS
        case "input_required" | "user_input_required":
            return WaitingReason.USER_INPUT
        case "auth_required" | "suspended":
            return WaitingReason.TOOL_PERMISSION
        case "rate_limit":
            return WaitingReason.RATE_LIMIT
        case "manual_pause":
            return WaitingReason.MANUAL_PAUSE
        case _:
            return WaitingReason.EXTERNAL_EVENT


@dataclass(frozen=True)
class StoppedReason:
    code: str
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none({"code": self.code, "detail": self.detail})


@dataclass(frozen=True)
class TerminationReason:
    """Adjacently tagged: {"type": "<snake>", "value": <payload>}; unit variants omit value."""

    type: str
    value: Any = None

    NATURAL_END = "natural_end"
    BEHAVIOR_REQUESTED = "behavior_requested"
    STOPPED = "stopped"
    CANCELLED = "cancelled"
    BLOCKED = "blocked"
    SUSPENDED = "suspended"
    ERROR = "error"

    @classmethod
    def natural_end(cls) -> TerminationReason:
        return cls(cls.NATURAL_END)

    @classmethod
    def behavior_requested(cls) -> TerminationReason:
        return cls(cls.BEHAVIOR_REQUESTED)

    @classmethod
    def stopped(cls, code: str, detail: str | None = None) -> TerminationReason:
        return cls(cls.STOPPED, StoppedReason(code, detail))

    @classmethod
    def cancelled(cls) -> TerminationReason:
        return cls(cls.CANCELLED)

    @classmethod
    def blocked(cls, reason: str) -> TerminationReason:
        return cls(cls.BLOCKED, reason)

    @classmethod
    def suspended(cls) -> TerminationReason:
        return cls(cls.SUSPENDED)

    @classmethod
    def error(cls, message: str) -> TerminationReason:
        return cls(cls.ERROR, message)

    def to_json(self) -> dict[str, Any]:
        if self.value is None:
            return {"type": self.type}
        value = self.value.to_json() if isinstance(self.value, StoppedReason) else self.value
        return {"type": self.type, "value": value}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TerminationReason:
        kind = data["type"]
        if kind == "plugin_requested":
            kind = cls.BEHAVIOR_REQUESTED
        value = data.get("value")
        if kind == cls.STOPPED and isinstance(value, dict):
            return cls(kind, StoppedReason(value["code"], value.get("detail")))
        return cls(kind, value)

    def to_run_status(self) -> tuple[RunStatus, str | None]:
        match self.type:
            case self.NATURAL_END:
                return RunStatus.DONE, "natural"
            case self.BEHAVIOR_REQUESTED:
                return RunStatus.DONE, "behavior_requested"
            case self.STOPPED:
                return RunStatus.DONE, f"stopped:{self.value.code}"
            case self.CANCELLED:
                return RunStatus.DONE, "cancelled"
            case self.BLOCKED:
                return RunStatus.DONE, f"blocked:{self.value}"
            case self.SUSPENDED:
                return RunStatus.WAITING, None
            case _:
                return RunStatus.DONE, "error"

    @classmethod
    def from_done_reason(cls, reason: str) -> TerminationReason:
        if reason == "natural":
            return cls.natural_end()
        if reason == "behavior_requested":
            return cls.behavior_requested()
        if reason == "cancelled":
            return cls.cancelled()
        if reason.startswith("blocked:"):
            return cls.blocked(reason.removeprefix("blocked:"))
        if reason.startswith("stopped:"):
            return cls.stopped(reason.removeprefix("stopped:"))
        if reason.startswith("error:"):
            return cls.error(reason.removeprefix("error:"))
        return cls.error(reason)


class BackendRunStatusKind(StrEnum):
    COMPLETED = "completed"
    WAITING_INPUT = "waiting_input"
    WAITING_AUTH = "waiting_auth"
    SUSPENDED = "suspended"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"


_STATUS_LABELS = {
    RunStatus.CREATED: "created",
    RunStatus.RUNNING: "running",
    RunStatus.WAITING: "waiting",
    RunStatus.DONE: "done",
}


@dataclass(frozen=True)
class BackendRunStatus:
    """A backend's outcome and its durable (status, reason, label) mapping."""

    kind: BackendRunStatusKind
    message: str | None = None

    @classmethod
    def completed(cls) -> BackendRunStatus:
        return cls(BackendRunStatusKind.COMPLETED)

    @classmethod
    def waiting_input(cls, message: str | None = None) -> BackendRunStatus:
        return cls(BackendRunStatusKind.WAITING_INPUT, message)

    @classmethod
    def waiting_auth(cls, message: str | None = None) -> BackendRunStatus:
        return cls(BackendRunStatusKind.WAITING_AUTH, message)

    @classmethod
    def suspended(cls, message: str | None = None) -> BackendRunStatus:
        return cls(BackendRunStatusKind.SUSPENDED, message)

    @classmethod
    def failed(cls, message: str) -> BackendRunStatus:
        return cls(BackendRunStatusKind.FAILED, message)

    @classmethod
    def cancelled(cls) -> BackendRunStatus:
        return cls(BackendRunStatusKind.CANCELLED)

    @classmethod
    def timeout(cls) -> BackendRunStatus:
        return cls(BackendRunStatusKind.TIMEOUT)

    @property
    def is_waiting(self) -> bool:
        return self.kind in _WAITING_KINDS

    def __str__(self) -> str:
        if self.message is not None:
            return f"{self.kind.value}: {self.message}"
        return self.kind.value

    def durable_run_status(self, termination: TerminationReason) -> RunStatus:
        if self.is_waiting:
            return RunStatus.WAITING
        if self.kind is BackendRunStatusKind.COMPLETED:
            return termination.to_run_status()[0]
        return RunStatus.DONE

    def durable_status_reason(self, termination: TerminationReason) -> str | None:
        match self.kind:
            case BackendRunStatusKind.WAITING_INPUT:
                return "input_required"
            case BackendRunStatusKind.WAITING_AUTH:
                return "auth_required"
            case BackendRunStatusKind.SUSPENDED:
                return "suspended"
            case BackendRunStatusKind.TIMEOUT:
                return "timeout"
            case BackendRunStatusKind.FAILED:
                return "error"
            case BackendRunStatusKind.CANCELLED:
                return "cancelled"
            case _:
                return termination.to_run_status()[1]

    def result_status_label(self, termination: TerminationReason) -> str:
        if self.kind is BackendRunStatusKind.COMPLETED:
            return _STATUS_LABELS[termination.to_run_status()[0]]
        return self.kind.value


_WAITING_KINDS = {
    BackendRunStatusKind.WAITING_INPUT,
    BackendRunStatusKind.WAITING_AUTH,
    BackendRunStatusKind.SUSPENDED,
}


# --- Messages ------------------------------------------------------------------------------


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: Any

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolCall:
        return cls(id=data["id"], name=data["name"], arguments=data.get("arguments"))


@dataclass
class Message:
    role: Role
    content: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    visibility: str = "all"
    run_id: str | None = None
    step_index: int | None = None
    id: str | None = field(default_factory=new_id)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(Role.USER, [{"type": "text", "text": text}])

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(Role.SYSTEM, [{"type": "text", "text": text}])

    @classmethod
    def assistant(cls, text: str, tool_calls: list[ToolCall] | None = None) -> Message:
        content = [{"type": "text", "text": text}] if text else []
        return cls(Role.ASSISTANT, content, tool_calls=tool_calls or None)

    @classmethod
    def tool(cls, tool_call_id: str, text: str) -> Message:
        return cls(Role.TOOL, [{"type": "text", "text": text}], tool_call_id=tool_call_id)

    def text(self) -> str:
        return "".join(
            block.get("text", "") for block in self.content if block.get("type") == "text"
        )

    def produced_by_run_id(self) -> str | None:
        return self.run_id

    def mark_produced_by(self, run_id: str, step_index: int | None) -> None:
        """Stamp the producer; never overwrites an existing stamp."""
        if self.run_id is None:
            self.run_id = run_id
        if self.step_index is None:
            self.step_index = step_index

    def to_json(self) -> dict[str, Any]:
        metadata = _drop_none({"run_id": self.run_id, "step_index": self.step_index})
        data: dict[str, Any] = {"id": self.id, "role": self.role.value, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_json() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.visibility != "all":
            data["visibility"] = self.visibility
        if metadata:
            data["metadata"] = metadata
        return _drop_none(data)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Message:
        metadata = data.get("metadata") or {}
        calls = data.get("tool_calls") or None
        return cls(
            role=Role(data["role"]),
            content=list(data.get("content") or []),
            tool_calls=[ToolCall.from_json(call) for call in calls] if calls else None,
            tool_call_id=data.get("tool_call_id"),
            visibility=data.get("visibility", "all"),
            run_id=metadata.get("run_id"),
            step_index=metadata.get("step_index"),
            id=data.get("id"),
        )


# --- Input / output ranges --------------------------------------------------------------------


@dataclass(frozen=True)
class MessageSeqRange:
    from_seq: int
    to_seq: int

    @classmethod
    def new(cls, from_seq: int, to_seq: int) -> MessageSeqRange | None:
        if 0 < from_seq <= to_seq:
            return cls(from_seq, to_seq)
        return None

    def __len__(self) -> int:
        return self.to_seq - self.from_seq + 1

    def to_json(self) -> dict[str, int]:
        return {"from_seq": self.from_seq, "to_seq": self.to_seq}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> MessageSeqRange | None:
        if not data:
            return None
        return cls.new(int(data["from_seq"]), int(data["to_seq"]))


@dataclass
class RunMessageInput:
    thread_id: str
    range: MessageSeqRange | None = None
    trigger_message_ids: list[str] = field(default_factory=list)
    selected_message_ids: list[str] = field(default_factory=list)
    context_policy: Any = None
    compacted_snapshot_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "thread_id": self.thread_id,
                "range": self.range.to_json() if self.range else None,
                "trigger_message_ids": list(self.trigger_message_ids),
                "selected_message_ids": list(self.selected_message_ids),
                "context_policy": self.context_policy,
                "compacted_snapshot_id": self.compacted_snapshot_id,
            }
        )

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> RunMessageInput | None:
        if not data:
            return None
        return cls(
            thread_id=data["thread_id"],
            range=MessageSeqRange.from_json(data.get("range")),
            trigger_message_ids=list(data.get("trigger_message_ids") or []),
            selected_message_ids=list(data.get("selected_message_ids") or []),
            context_policy=data.get("context_policy"),
            compacted_snapshot_id=data.get("compacted_snapshot_id"),
        )


@dataclass
class RunMessageOutput:
    thread_id: str
    range: MessageSeqRange | None = None
    message_ids: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "thread_id": self.thread_id,
                "range": self.range.to_json() if self.range else None,
                "message_ids": list(self.message_ids),
            }
        )

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> RunMessageOutput | None:
        if not data:
            return None
        return cls(
            thread_id=data["thread_id"],
            range=MessageSeqRange.from_json(data.get("range")),
            message_ids=list(data.get("message_ids") or []),
        )


@dataclass
class RunRequestSnapshot:
    origin: str = "User"
    sender_id: str | None = None
    input_message_ids: list[str] = field(default_factory=list)
    input_message_count: int = 0

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"origin": self.origin, "input_message_ids": self.input_message_ids}
        if self.sender_id is not None:
            data["sender_id"] = self.sender_id
        if self.input_message_count:
            data["input_message_count"] = self.input_message_count
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> RunRequestSnapshot | None:
        if not data:
            return None
        return cls(
            origin=data.get("origin", "User"),
            sender_id=data.get("sender_id"),
            input_message_ids=list(data.get("input_message_ids") or []),
            input_message_count=int(data.get("input_message_count") or 0),
        )


# --- Tool calls, suspension and resume ---------------------------------------------------------


class ToolCallStatus(StrEnum):
    NEW = "new"
    RUNNING = "running"
    SUSPENDED = "suspended"
    RESUMING = "resuming"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in {ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED, ToolCallStatus.CANCELLED}

    def can_transition_to(self, target: ToolCallStatus) -> bool:
        if self is target:
            return True
        if self is ToolCallStatus.NEW:
            return True
        if self.is_terminal:
            return False
        return target in _TOOL_TRANSITIONS[self]


_TOOL_TRANSITIONS = {
    ToolCallStatus.RUNNING: {
        ToolCallStatus.SUSPENDED,
        ToolCallStatus.SUCCEEDED,
        ToolCallStatus.FAILED,
        ToolCallStatus.CANCELLED,
    },
    ToolCallStatus.SUSPENDED: {ToolCallStatus.RESUMING, ToolCallStatus.CANCELLED},
    ToolCallStatus.RESUMING: {
        ToolCallStatus.RUNNING,
        ToolCallStatus.SUSPENDED,
        ToolCallStatus.SUCCEEDED,
        ToolCallStatus.FAILED,
        ToolCallStatus.CANCELLED,
    },
}


class ToolCallResumeMode(StrEnum):
    REPLAY_TOOL_CALL = "replay_tool_call"
    USE_DECISION_AS_TOOL_RESULT = "use_decision_as_tool_result"
    PASS_DECISION_TO_TOOL = "pass_decision_to_tool"


class ResumeDecisionAction(StrEnum):
    RESUME = "resume"
    CANCEL = "cancel"


@dataclass
class ToolCallResume:
    decision_id: str
    action: ResumeDecisionAction
    result: Any = None
    reason: str | None = None
    updated_at: int = field(default_factory=now_ms)

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "decision_id": self.decision_id,
                "action": self.action.value,
                "result": self.result,
                "reason": self.reason,
                "updated_at": self.updated_at,
            }
        )

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ToolCallResume | None:
        if not data:
            return None
        return cls(
            decision_id=data["decision_id"],
            action=ResumeDecisionAction(data["action"]),
            result=data.get("result"),
            reason=data.get("reason"),
            updated_at=int(data.get("updated_at") or 0),
        )


@dataclass
class Suspension:
    id: str
    action: str
    message: str = ""
    parameters: Any = None
    response_schema: Any = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "action": self.action}
        if self.message:
            data["message"] = self.message
        if self.parameters is not None:
            data["parameters"] = self.parameters
        if self.response_schema is not None:
            data["response_schema"] = self.response_schema
        return data


@dataclass
class PendingToolCall:
    id: str
    name: str
    arguments: Any

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass
class SuspendTicket:
    suspension: Suspension
    pending: PendingToolCall
    resume_mode: ToolCallResumeMode = ToolCallResumeMode.REPLAY_TOOL_CALL

    def to_json(self) -> dict[str, Any]:
        return {
            "suspension": self.suspension.to_json(),
            "pending": self.pending.to_json(),
            "resume_mode": self.resume_mode.value,
        }


@dataclass
class ToolCallState:
    call_id: str
    tool_name: str
    arguments: Any
    status: ToolCallStatus
    updated_at: int
    resume_mode: ToolCallResumeMode = ToolCallResumeMode.REPLAY_TOOL_CALL
    suspension_id: str | None = None
    suspension_reason: str | None = None
    resume_input: ToolCallResume | None = None

    def with_resume_mode(self, mode: ToolCallResumeMode) -> ToolCallState:
        self.resume_mode = mode
        return self

    def with_suspension(self, suspension_id: str | None, reason: str | None) -> ToolCallState:
        trimmed = suspension_id.strip() if suspension_id else None
        self.suspension_id = trimmed or None
        self.suspension_reason = reason
        return self

    @property
    def ticket_id(self) -> str:
        """The ticket id is the suspension id, falling back to the call id."""
        if self.suspension_id and self.suspension_id.strip():
            return self.suspension_id
        return self.call_id

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "call_id": self.call_id,
                "tool_name": self.tool_name,
                "arguments": self.arguments,
                "status": self.status.value,
                "updated_at": self.updated_at,
                "resume_mode": self.resume_mode.value,
                "suspension_id": self.suspension_id,
                "suspension_reason": self.suspension_reason,
                "resume_input": self.resume_input.to_json() if self.resume_input else None,
            }
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolCallState:
        return cls(
            call_id=data["call_id"],
            tool_name=data["tool_name"],
            arguments=data.get("arguments"),
            status=ToolCallStatus(data["status"]),
            updated_at=int(data.get("updated_at") or 0),
            resume_mode=ToolCallResumeMode(data.get("resume_mode") or "replay_tool_call"),
            suspension_id=data.get("suspension_id"),
            suspension_reason=data.get("suspension_reason"),
            resume_input=ToolCallResume.from_json(data.get("resume_input")),
        )


@dataclass
class RunWaitingTicket:
    ticket_id: str
    tool_call_id: str
    tool_name: str
    arguments: Any
    resume_mode: ToolCallResumeMode
    reason: str | None
    updated_at: int

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "ticket_id": self.ticket_id,
                "tool_call_id": self.tool_call_id,
                "tool_name": self.tool_name,
                "arguments": self.arguments,
                "resume_mode": self.resume_mode.value,
                "reason": self.reason,
                "updated_at": self.updated_at,
            }
        )


@dataclass
class RunWaitingState:
    reason: WaitingReason
    ticket_ids: list[str] = field(default_factory=list)
    tickets: list[RunWaitingTicket] = field(default_factory=list)
    since_dispatch_id: str | None = None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "reason": self.reason.value,
                "ticket_ids": list(self.ticket_ids),
                "tickets": [ticket.to_json() for ticket in self.tickets],
                "since_dispatch_id": self.since_dispatch_id,
                "message": self.message,
            }
        )


def waiting_tickets_from_states(states: dict[str, ToolCallState]) -> list[RunWaitingTicket]:
    """One ticket per suspended call, sorted by (tool_call_id, ticket_id)."""
    tickets = [
        RunWaitingTicket(
            ticket_id=call.ticket_id,
            tool_call_id=call_id,
            tool_name=call.tool_name,
            arguments=call.arguments,
            resume_mode=call.resume_mode,
            reason=call.suspension_reason,
            updated_at=call.updated_at,
        )
        for call_id, call in states.items()
        if call.status is ToolCallStatus.SUSPENDED
    ]
    tickets.sort(key=lambda ticket: (ticket.tool_call_id, ticket.ticket_id))
    return tickets


def waiting_state_from_lifecycle(
    status: RunStatus,
    status_reason: str | None,
    since_dispatch_id: str | None,
    tickets: list[RunWaitingTicket],
) -> RunWaitingState | None:
    if status is not RunStatus.WAITING:
        return None
    return RunWaitingState(
        reason=waiting_reason_from_status_reason(status_reason),
        ticket_ids=[ticket.ticket_id for ticket in tickets],
        tickets=tickets,
        since_dispatch_id=since_dispatch_id,
        message=status_reason,
    )


# --- Tools -------------------------------------------------------------------------------------


class ToolStatus(StrEnum):
    SUCCESS = "success"
    PENDING = "pending"
    ERROR = "error"


@dataclass
class ToolDescriptor:
    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass
class ToolResult:
    tool_name: str
    status: ToolStatus
    data: Any = None
    message: str | None = None
    suspension: SuspendTicket | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def success(cls, tool_name: str, data: Any, message: str | None = None) -> ToolResult:
        return cls(tool_name, ToolStatus.SUCCESS, data, message)

    @classmethod
    def error(cls, tool_name: str, message: str, data: Any = None) -> ToolResult:
        return cls(tool_name, ToolStatus.ERROR, data, message)

    @classmethod
    def pending(cls, tool_name: str, ticket: SuspendTicket, message: str) -> ToolResult:
        return cls(tool_name, ToolStatus.PENDING, None, message, suspension=ticket)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "tool_name": self.tool_name,
            "status": self.status.value,
            "data": self.data,
            "message": self.message,
        }
        if self.suspension is not None:
            data["suspension"] = self.suspension.to_json()
        if self.metadata:
            data["metadata"] = self.metadata
        return data

    def content_text(self) -> str:
        """The text of the tool message that reports this result to the model."""
        if self.message is not None:
            return self.message
        return json.dumps(self.data, ensure_ascii=False, default=str)

    def resume_payload(self) -> Any:
        """The payload of a tool_call_resumed event."""
        if self.status is ToolStatus.SUCCESS:
            if not self.metadata:
                return self.data
            return {"data": self.data, "metadata": self.metadata}
        if self.status is ToolStatus.ERROR:
            return {"error": self.message} if self.message is not None else self.data
        return None


# --- Tokens and state ------------------------------------------------------------------------


@dataclass
class TokenUsage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    thinking_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none(dict(self.__dict__))


@dataclass
class PersistedState:
    revision: int = 0
    extensions: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"revision": self.revision, "extensions": self.extensions}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> PersistedState | None:
        if not data:
            return None
        return cls(int(data.get("revision") or 0), dict(data.get("extensions") or {}))


@dataclass
class RunLifecycleState:
    run_id: str
    status: RunStatus = RunStatus.RUNNING
    status_reason: str | None = None
    updated_at: int = 0
    step_count: int = 0

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "run_id": self.run_id,
                "status": self.status.value,
                "status_reason": self.status_reason,
                "updated_at": self.updated_at,
                "step_count": self.step_count,
            }
        )

    def apply(self, target: RunStatus, reason: str | None, *, clear_reason: bool = False) -> bool:
        """Apply a lifecycle update; illegal transitions are skipped, not raised."""
        if not self.status.can_transition_to(target):
            return False
        self.status = target
        self.status_reason = None if clear_reason else reason
        self.updated_at = now_ms()
        return True


@dataclass
class RunRecord:
    """Every field of upstream's RunRecord (docs/run-model.md). Times are unix seconds."""

    run_id: str
    thread_id: str
    agent_id: str
    parent_run_id: str | None = None
    request: RunRequestSnapshot | None = None
    input: RunMessageInput | None = None
    output: RunMessageOutput | None = None
    status: RunStatus = RunStatus.CREATED
    status_reason: str | None = None
    termination_reason: TerminationReason | None = None
    final_output: str | None = None
    error_payload: Any = None
    dispatch_id: str | None = None
    session_id: str | None = None
    transport_request_id: str | None = None
    waiting: RunWaitingState | None = None
    created_at: int = 0
    started_at: int | None = None
    finished_at: int | None = None
    updated_at: int = 0
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    state: PersistedState | None = None

    @property
    def outcome(self) -> dict[str, Any] | None:
        if self.termination_reason is None:
            return None
        return _drop_none(
            {
                "termination_reason": self.termination_reason.to_json(),
                "final_output": self.final_output,
                "error_payload": self.error_payload,
            }
        )

    def waiting_reason(self) -> WaitingReason | None:
        if self.status is not RunStatus.WAITING:
            return None
        return waiting_reason_from_status_reason(self.status_reason)
