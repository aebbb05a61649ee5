"""Tool calls: their states, suspension tickets and resume decisions, and what a tool is
and returns."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .stamps import drop_none, now_ms

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
        return drop_none(
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
        return drop_none(
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
