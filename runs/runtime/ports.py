"""The ports the loop talks to the world through. Adapters live outside the runtime:
the ORM store in `runs.store`, model clients in `agents.providers`, tools in `agents.tools`,
in-memory fakes in `runs.runtime.testing`."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from .events import Event
from .types import (
    Message,
    PersistedState,
    RunRecord,
    TokenUsage,
    ToolCallResume,
    ToolCallState,
    ToolDescriptor,
    ToolResult,
)

logger = logging.getLogger(__name__)

# --- Events ------------------------------------------------------------------------------------


class EventSink(Protocol):
    """Receives every event as the loop emits it (live, before it is durable)."""

    def emit(self, event: Event) -> None: ...


class NullEventSink:
    def emit(self, event: Event) -> None:
        return None


# --- Checkpoints -------------------------------------------------------------------------------


class VersionConflictError(Exception):
    """The thread's committed message count is not what the checkpoint expected."""

    def __init__(self, expected: int, actual: int | None = None) -> None:
        super().__init__(f"message log version conflict: expected {expected}, found {actual}")
        self.expected = expected
        self.actual = actual


class LeaseLostError(Exception):
    """Another worker owns the run now; this one must stop without writing."""


@dataclass
class Checkpoint:
    """One atomic write: the messages new since the last checkpoint, the run record,
    the tool-call states that changed and the events emitted since the last checkpoint."""

    thread_id: str
    record: RunRecord
    new_messages: list[Message]
    expected_message_count: int
    tool_calls: list[ToolCallState]
    events: list[Event]
    step_index: int | None = None
    # a step boundary where the run takes input sent while it ran (steer)
    accepts_input: bool = False
    # background work the step's tools started, and finished work this activation took in
    background_starts: list[BackgroundStart] = field(default_factory=list)
    background_delivered: list[str] = field(default_factory=list)


class CheckpointStore(Protocol):
    def load_run(self, run_id: str) -> RunRecord | None: ...

    def checkpoint(self, checkpoint: Checkpoint) -> list[Message] | None:
        """Commit `checkpoint`. At a boundary that `accepts_input`, the store may deliver
        input sent to the run meanwhile in the same commit, appended to the log after the
        checkpoint's messages: those messages are returned (committed already)."""
        ...


# --- Background work -------------------------------------------------------------------------


@dataclass
class BackgroundStart:
    """Work a tool started that outlives its step (a worker executes it later)."""

    task_id: str
    call_id: str
    kind: str
    label: str
    arguments: dict[str, Any]


@dataclass
class BackgroundResult:
    """Finished background work, handed to the run's next activation."""

    task_id: str
    kind: str
    label: str
    status: str  # completed, failed or cancelled
    result: Any = None
    error: str = ""

    def as_message_text(self) -> str:
        head = f"[background task {self.label or self.kind} ({self.task_id}) {self.status}]"
        if self.status == "completed":
            body = self.result if isinstance(self.result, str) else json.dumps(self.result)
            return f"{head}\n{body}"
        return f"{head}\n{self.error or 'no result'}"


# --- Cancellation ------------------------------------------------------------------------------


class CancellationToken:
    """Cooperative cancellation: a flag, optionally fed by a poll of an outside source
    (the run row, a pub/sub message) at most every `poll_interval` seconds."""

    def __init__(self, poll: Callable[[], bool] | None = None, poll_interval: float = 0.25) -> None:
        self._event = threading.Event()
        self._poll = poll
        self._poll_interval = poll_interval
        self._last_poll = 0.0
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], object]] = []

    def cancel(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # one listener must not keep the others from hearing
                logger.warning("a cancellation callback failed", exc_info=True)

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call `callback` when the token is cancelled (now, if it is already): how an
        awaited call is told at once instead of noticing at its next poll. Returns a
        function that takes the callback back."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def _forget(self, callback: Callable[[], object]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    def polled(self, fired: bool) -> None:
        """The caller just read the outside source itself: take its answer, and poll again
        only after `poll_interval`."""
        with self._lock:
            self._last_poll = time.monotonic()
        if fired:
            self.cancel()

    def is_cancelled(self) -> bool:
        if self._event.is_set():
            return True
        if self._poll is None:
            return False
        now = time.monotonic()
        with self._lock:
            if now - self._last_poll < self._poll_interval:
                return False
            self._last_poll = now
        try:
            fired = self._poll()
        except Exception:  # a failing poll must not crash the loop; try again later
            return False
        if fired:
            self.cancel()
        return fired

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, waking early (and returning True) on cancellation."""
        deadline = time.monotonic() + seconds
        while True:
            if self.is_cancelled():
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._event.wait(min(remaining, self._poll_interval if self._poll else remaining))


# --- Model clients -----------------------------------------------------------------------------


@dataclass
class InferenceRequest:
    model: str
    system_prompt: str
    messages: list[Message]
    tools: list[ToolDescriptor]
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class TextChunk:
    text: str


@dataclass
class ReasoningChunk:
    text: str


@dataclass
class ToolCallStartChunk:
    id: str
    name: str


@dataclass
class ToolCallArgsChunk:
    id: str
    delta: str


@dataclass
class UsageChunk:
    usage: TokenUsage


StreamChunk = TextChunk | ReasoningChunk | ToolCallStartChunk | ToolCallArgsChunk | UsageChunk


class ModelError(Exception):
    """The model provider failed; the message is shown to operators as the run's error."""


class ModelClient(Protocol):
    name: str

    def stream(
        self, request: InferenceRequest, cancel: CancellationToken
    ) -> Iterator[StreamChunk]: ...


# --- Tools ---------------------------------------------------------------------------------------


@dataclass
class ToolCallContext:
    call_id: str
    tool_name: str
    run_id: str
    thread_id: str
    agent_id: str
    cancel: CancellationToken
    emit: Callable[[Event], None]
    resume_input: ToolCallResume | None = None
    suspension_id: str | None = None
    suspension_reason: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    # start background work: (kind, arguments, label) -> task id; None where the run
    # cannot wait for it (sub-agent runs, tests without a store)
    start_background: Callable[[str, dict[str, Any], str], str] | None = None


class Tool(Protocol):
    @property
    def descriptor(self) -> ToolDescriptor: ...

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult: ...


# --- Plugins -------------------------------------------------------------------------------------


class Plugin(Protocol):
    """Hooks into the loop. Every hook is optional; see `loop.AgentLoop` for where each runs."""

    name: str


@dataclass
class StateHolder:
    """What `bind_runtime_context` hands a plugin: the run's persisted state extensions."""

    state: PersistedState
