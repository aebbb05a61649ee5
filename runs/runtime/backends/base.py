"""Execution backends: the capability matrix, request validation and result types
(docs/run-model.md, "Execution backends")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from ..agent import ResolvedAgent
from ..identity import RunIdentity
from ..ports import BackgroundResult, CancellationToken, CheckpointStore, EventSink
from ..types import (
    BackendRunStatus,
    Message,
    PersistedState,
    RunRecord,
    TerminationReason,
    ToolCallResume,
    ToolCallState,
    ToolDescriptor,
)


class Cancellation(StrEnum):
    NONE = "none"
    COOPERATIVE_TOKEN = "cooperative_token"
    REMOTE_ABORT = "remote_abort"
    COOPERATIVE_TOKEN_AND_REMOTE_ABORT = "cooperative_token_and_remote_abort"

    @property
    def supports_cooperative_token(self) -> bool:
        return self in (
            Cancellation.COOPERATIVE_TOKEN,
            Cancellation.COOPERATIVE_TOKEN_AND_REMOTE_ABORT,
        )

    @property
    def supports_remote_abort(self) -> bool:
        return self in (Cancellation.REMOTE_ABORT, Cancellation.COOPERATIVE_TOKEN_AND_REMOTE_ABORT)


class Continuation(StrEnum):
    NONE = "none"
    IN_PROCESS_STATE = "in_process_state"
    REMOTE_STATE = "remote_state"


class Waits(StrEnum):
    NONE = "none"
    INPUT = "input"
    AUTH = "auth"
    INPUT_AND_AUTH = "input_and_auth"


class Transcript(StrEnum):
    FULL_TRANSCRIPT = "full_transcript"
    INCREMENTAL_USER_MESSAGES_WITH_REMOTE_STATE = "incremental_user_messages_with_remote_state"
    SINGLE_PROMPT = "single_prompt"


class Output(StrEnum):
    TEXT = "text"
    TEXT_AND_ARTIFACTS = "text_and_artifacts"


@dataclass(frozen=True)
class BackendCapabilities:
    cancellation: Cancellation
    decisions: bool
    overrides: bool
    frontend_tools: bool
    continuation: Continuation
    waits: Waits
    transcript: Transcript
    output: Output

    @classmethod
    def full(cls) -> BackendCapabilities:
        return cls(
            Cancellation.COOPERATIVE_TOKEN,
            True,
            True,
            True,
            Continuation.IN_PROCESS_STATE,
            Waits.INPUT_AND_AUTH,
            Transcript.FULL_TRANSCRIPT,
            Output.TEXT_AND_ARTIFACTS,
        )

    @classmethod
    def remote_stateless_text(cls) -> BackendCapabilities:
        return cls(
            Cancellation.NONE,
            False,
            False,
            False,
            Continuation.NONE,
            Waits.NONE,
            Transcript.SINGLE_PROMPT,
            Output.TEXT,
        )

    @classmethod
    def a2a(cls) -> BackendCapabilities:
        return cls(
            Cancellation.REMOTE_ABORT,
            False,
            False,
            False,
            Continuation.REMOTE_STATE,
            Waits.INPUT_AND_AUTH,
            Transcript.INCREMENTAL_USER_MESSAGES_WITH_REMOTE_STATE,
            Output.TEXT_AND_ARTIFACTS,
        )

    def unsupported_root_features(self, request: BackendRootRunRequest) -> list[str]:
        unsupported = []
        if (request.decisions or request.control.decisions_attached) and not self.decisions:
            unsupported.append("decisions")
        if request.overrides is not None and not self.overrides:
            unsupported.append("overrides")
        if request.frontend_tools and not self.frontend_tools:
            unsupported.append("frontend_tools")
        if request.is_continuation and self.continuation is Continuation.NONE:
            unsupported.append("continuation")
        return unsupported

    def unsupported_delegate_features(self, request: BackendDelegateRunRequest) -> list[str]:
        unsupported = []
        if request.policy.persistence != "ephemeral":
            unsupported.append("delegate_persistence")
        if request.policy.continuation != "disabled" and self.continuation is Continuation.NONE:
            unsupported.append("continuation")
        return unsupported


class ExecutionBackendError(Exception):
    """kind: agent_not_found, execution_failed or remote_error."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def _raise_unsupported(agent_id: str, unsupported: list[str]) -> None:
    if unsupported:
        raise ExecutionBackendError(
            "execution_failed",
            f"agent '{agent_id}' backend does not support: {', '.join(unsupported)}",
        )


def validate_root_request(
    capabilities: BackendCapabilities, request: BackendRootRunRequest
) -> None:
    _raise_unsupported(request.agent_id, capabilities.unsupported_root_features(request))


def validate_delegate_request(
    capabilities: BackendCapabilities, request: BackendDelegateRunRequest
) -> None:
    _raise_unsupported(request.agent_id, capabilities.unsupported_delegate_features(request))


class AgentResolver(Protocol):
    def resolve(self, agent_id: str) -> ResolvedAgent: ...


@dataclass
class BackendParentContext:
    parent_run_id: str | None = None
    parent_thread_id: str | None = None
    parent_tool_call_id: str | None = None


@dataclass
class BackendControl:
    cancellation_token: CancellationToken | None = None
    decisions_attached: bool = False
    # asked before each step's inference: None, or the status reason the run waits with
    # instead (e.g. "budget"); our addition (docs/budgets.md)
    step_gate: Callable[[], str | None] | None = None


@dataclass
class BackendRootRunRequest:
    agent_id: str
    messages: list[Message]
    sink: EventSink
    resolver: AgentResolver
    identity: RunIdentity
    store: CheckpointStore | None = None
    control: BackendControl = field(default_factory=BackendControl)
    decisions: list[tuple[str, ToolCallResume]] = field(default_factory=list)
    overrides: dict[str, Any] | None = None
    frontend_tools: list[ToolDescriptor] = field(default_factory=list)
    previous: RunRecord | None = None
    tool_calls: dict[str, ToolCallState] | None = None
    is_continuation: bool = False
    background_results: list[BackgroundResult] = field(default_factory=list)


@dataclass
class BackendDelegatePolicy:
    persistence: str = "ephemeral"
    continuation: str = "disabled"


@dataclass
class BackendDelegateRunRequest:
    agent_id: str
    messages: list[Message]
    sink: EventSink
    resolver: AgentResolver
    parent: BackendParentContext = field(default_factory=BackendParentContext)
    control: BackendControl = field(default_factory=BackendControl)
    policy: BackendDelegatePolicy = field(default_factory=BackendDelegatePolicy)
    # Our difference: a store makes the child run durable; None = upstream's ephemeral.
    store: CheckpointStore | None = None
    identity: RunIdentity | None = None


@dataclass
class BackendRunOutput:
    text: str | None = None
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    raw: Any = None

    def is_empty(self) -> bool:
        return self.text is None and not self.artifacts and self.raw is None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.text is not None:
            data["text"] = self.text
        if self.artifacts:
            data["artifacts"] = self.artifacts
        if self.raw is not None:
            data["raw"] = self.raw
        return data


@dataclass
class BackendRunResult:
    agent_id: str
    status: BackendRunStatus
    termination: TerminationReason
    status_reason: str | None = None
    response: str | None = None
    output: BackendRunOutput = field(default_factory=BackendRunOutput)
    steps: int = 0
    run_id: str | None = None
    state: PersistedState | None = None
