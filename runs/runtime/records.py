"""The run record and its parts: message ranges, the request snapshot, the waiting state,
token usage and the persisted state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .stamps import drop_none
from .status import RunStatus, TerminationReason, WaitingReason, waiting_reason_from_status_reason
from .tool_calls import ToolCallResumeMode, ToolCallState, ToolCallStatus

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
        return drop_none(
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
        return drop_none(
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


# --- Waiting ---------------------------------------------------------------------------------


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
        return drop_none(
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
        return drop_none(
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
        return drop_none(dict(self.__dict__))


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
        return drop_none(
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
