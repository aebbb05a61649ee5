"""The run model's data types: enums, records and their JSON shapes (docs/run-model.md).

Plain dataclasses, no Django. JSON produced here is what the API, the events and the
database store, so field names follow upstream exactly.

The types live in modules by concern and are all importable from here:
`status` (run statuses, termination reasons, backend outcomes, the lifecycle),
`messages` (messages and the tool calls they carry), `tool_calls` (tool call states,
suspension, resume, tool descriptors and results), `records` (the run record, its message
ranges, waiting state, token usage and persisted state) and `stamps` (ids and timestamps).
"""

from __future__ import annotations

from .messages import Message, Role, ToolCall
from .records import (
    MessageSeqRange,
    PersistedState,
    RunMessageInput,
    RunMessageOutput,
    RunRecord,
    RunRequestSnapshot,
    RunWaitingState,
    RunWaitingTicket,
    TokenUsage,
    waiting_state_from_lifecycle,
    waiting_tickets_from_states,
)
from .stamps import new_id, now_ms
from .status import (
    BackendRunStatus,
    BackendRunStatusKind,
    RunLifecycleState,
    RunStatus,
    StoppedReason,
    TerminationReason,
    WaitingReason,
    waiting_reason_from_status_reason,
)
from .tool_calls import (
    PendingToolCall,
    ResumeDecisionAction,
    SuspendTicket,
    Suspension,
    ToolCallResume,
    ToolCallResumeMode,
    ToolCallState,
    ToolCallStatus,
    ToolDescriptor,
    ToolResult,
    ToolStatus,
)

__all__ = [
    "BackendRunStatus",
    "BackendRunStatusKind",
    "Message",
    "MessageSeqRange",
    "PendingToolCall",
    "PersistedState",
    "ResumeDecisionAction",
    "Role",
    "RunLifecycleState",
    "RunMessageInput",
    "RunMessageOutput",
    "RunRecord",
    "RunRequestSnapshot",
    "RunStatus",
    "RunWaitingState",
    "RunWaitingTicket",
    "StoppedReason",
    "SuspendTicket",
    "Suspension",
    "TerminationReason",
    "TokenUsage",
    "ToolCall",
    "ToolCallResume",
    "ToolCallResumeMode",
    "ToolCallState",
    "ToolCallStatus",
    "ToolDescriptor",
    "ToolResult",
    "ToolStatus",
    "WaitingReason",
    "new_id",
    "now_ms",
    "waiting_reason_from_status_reason",
    "waiting_state_from_lifecycle",
    "waiting_tickets_from_states",
]
