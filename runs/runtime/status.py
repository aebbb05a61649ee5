"""Run statuses and their lifecycle: where a run stands, why it ended or waits, and how a
backend's outcome maps onto the durable status (docs/run-model.md)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .stamps import drop_none, now_ms

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
    BUDGET = "budget"  # our addition: a team's or agent's budget is spent (docs/budgets.md)


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
        case "budget":
            return WaitingReason.BUDGET
        case _:
            return WaitingReason.EXTERNAL_EVENT


@dataclass(frozen=True)
class StoppedReason:
    code: str
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return drop_none({"code": self.code, "detail": self.detail})


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


@dataclass
class RunLifecycleState:
    run_id: str
    status: RunStatus = RunStatus.RUNNING
    status_reason: str | None = None
    updated_at: int = 0
    step_count: int = 0

    def to_json(self) -> dict[str, Any]:
        return drop_none(
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
