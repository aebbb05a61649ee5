"""The agent loop: steps of inference and tool calls, suspension on tickets, durable resume.

Ported from upstream's loop_runner (docs/run-model.md) with this project's changes:
append-only checkpoints that carry the events they describe (gap-free log), steps that do
not reset on resume, and no in-process waiting: a run that suspends checkpoints as waiting
and ends its activation; a later activation replays the decided calls.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import events as ev
from .agent import AgentSpec, ResolvedAgent
from .background import AWAITING_TASKS, BackgroundWork
from .checkpoint import ActivationLog, RunProgress, activation_checkpoint, error_payload_of
from .events import Event
from .identity import RunIdentity
from .messages import model_visible_messages
from .ports import (
    BackgroundResult,
    CancellationToken,
    CheckpointStore,
    EventSink,
    InferenceRequest,
    ModelError,
    ReasoningChunk,
    TextChunk,
    ToolCallArgsChunk,
    ToolCallStartChunk,
    UsageChunk,
)
from .run_state import (
    LIFECYCLE_KEY,
    TOOL_CALLS_KEY,
    RuntimeState,
    end_without_activation,
    prepare_resume,
    run_end_events,
)
from .tool_batch import (
    INTERRUPTED_TEXT,
    PERMISSION_ACTION,
    MalformedArguments,
    ToolRunner,
    permission_ticket,
    shown_arguments,
    suspended_placeholder,
)
from .types import (
    Message,
    PersistedState,
    Role,
    RunRecord,
    RunStatus,
    TerminationReason,
    TokenUsage,
    ToolCall,
    ToolCallResume,
    ToolCallState,
    ToolCallStatus,
    ToolDescriptor,
    new_id,
    now_ms,
    waiting_tickets_from_states,
)

# Names that moved to their own modules, still importable from here.
__all__ = [
    "INTERRUPTED_TEXT",
    "LIFECYCLE_KEY",
    "PERMISSION_ACTION",
    "PERMISSION_KEY",
    "TOOL_CALLS_KEY",
    "AgentLoop",
    "AgentRunResult",
    "AgentSpec",
    "ResolvedAgent",
    "RunIdentity",
    "RuntimeState",
    "end_without_activation",
    "model_visible_messages",
    "permission_ticket",
    "prepare_resume",
    "run_end_events",
    "suspended_placeholder",
]

logger = logging.getLogger(__name__)

PERMISSION_KEY = "permission_policy"


@dataclass
class AgentRunResult:
    run_id: str
    response: str
    termination: TerminationReason
    steps: int
    status: RunStatus
    status_reason: str | None


class AgentLoop:
    """One activation of a run: from its last checkpoint until it ends or waits."""

    def __init__(
        self,
        *,
        agent: ResolvedAgent,
        identity: RunIdentity,
        messages: list[Message],
        sink: EventSink,
        store: CheckpointStore | None = None,
        cancel: CancellationToken | None = None,
        previous: RunRecord | None = None,
        tool_calls: dict[str, ToolCallState] | None = None,
        decisions: list[tuple[str, ToolCallResume]] | None = None,
        background_results: list[BackgroundResult] | None = None,
        background: bool = False,
        gate: Callable[[], str | None] | None = None,
    ) -> None:
        """`background`: tools may start background work the run waits for (a top-level
        run with a store); `background_results`: finished work this activation receives."""
        self.agent = agent
        self.identity = identity
        self.messages = list(messages)
        self.sink = sink
        self.store = store
        self.cancel = cancel or CancellationToken()
        self.previous = previous
        self.input_message_count = len(self.messages)
        self.committed_count = len(self.messages)
        self.state = RuntimeState(identity.run_id, previous.state if previous else None, tool_calls)
        if decisions:
            prepare_resume(self.state, decisions)
        self.input_tokens = previous.input_tokens if previous else 0
        self.output_tokens = previous.output_tokens if previous else 0
        self.created_at = (
            previous.created_at if previous and previous.created_at else int(time.time())
        )
        self.started_at = (previous.started_at if previous else None) or int(time.time())
        self.pending_events: list[Event] = []
        self.activation_start = len(self.messages)
        self.policies = agent.stop_policies
        self._written_calls: dict[str, dict[str, Any]] = {
            cid: call.to_json() for cid, call in self.state.tool_calls.items()
        }
        # Calls changed since the last checkpoint but dropped from the map by a StepStart
        # (e.g. replayed decisions): they must still reach the store, or a later activation
        # would find them suspended/resuming and replay them again.
        self._unwritten_calls: dict[str, ToolCallState] = {}
        self._step_message_id = ""
        self.background = BackgroundWork(self.state, self.emit)
        self.background_results = background_results or []
        self.gate = gate  # asked before each step: None, or the reason to wait with
        self.tools = ToolRunner(
            agent,
            identity,
            self.state,
            self.messages,
            self.emit,
            self.cancel,
            start_background=self.background.starter if background and store else None,
        )

    # --- events and state ------------------------------------------------------------------

    def emit(self, event: Event) -> None:
        self.pending_events.append(event)
        self.sink.emit(event)

    def _snapshot_event(self) -> Event:
        return ev.state_snapshot(self.state.export().to_json())

    def _checkpoint(
        self,
        termination: TerminationReason | None = None,
        final_output: str | None = None,
        error_payload: Any = None,
        *,
        boundary: bool = False,
    ) -> None:
        """Commit what the activation added since the last checkpoint. At a step
        `boundary` the store may deliver input sent to the run meanwhile (steer): it
        comes back committed and joins the log the next inference reads."""
        lifecycle = self.state.lifecycle
        persisted = PersistedState(self.state.revision, dict(self.state.extensions))
        if self.store is None:
            self.pending_events = []
            self.committed_count = len(self.messages)
            return
        log = ActivationLog(
            self.identity,
            self.messages,
            self.previous,
            self.input_message_count,
            self.committed_count,
        )
        progress = RunProgress(
            status=lifecycle.status,
            status_reason=lifecycle.status_reason,
            steps=lifecycle.step_count,
            state=persisted,
            created_at=self.created_at,
            started_at=self.started_at,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            waiting_tickets=waiting_tickets_from_states(self.state.tool_calls),
            waiting_since=self.identity.session_id,
            termination=termination,
            final_output=final_output,
            error_payload=error_payload,
        )
        pending = {**self._unwritten_calls, **self.state.tool_calls}
        changed = [
            call for cid, call in pending.items() if self._written_calls.get(cid) != call.to_json()
        ]
        checkpoint = activation_checkpoint(log, progress, changed, self.pending_events)
        checkpoint.accepts_input = boundary
        checkpoint.background_starts, checkpoint.background_delivered = self.background.take()
        delivered = self.store.checkpoint(checkpoint)
        for call in changed:
            self._written_calls[call.call_id] = call.to_json()
        self._unwritten_calls.clear()
        self.pending_events = []
        self.messages.extend(delivered or [])
        self.committed_count = len(self.messages)
        self.previous = checkpoint.record

    def _set_status(self, target: RunStatus, reason: str | None) -> None:
        self.state.set_status(target, reason)

    # --- the run -----------------------------------------------------------------------------

    def run(self) -> AgentRunResult:
        for plugin in self.agent.plugins:
            bind = getattr(plugin, "bind_runtime_context", None)
            if bind is not None:
                bind(self.state)
        self.emit(
            ev.run_start(
                self.identity.thread_id,
                self.identity.run_id,
                self.identity.parent_run_id,
                self.identity.to_json(),
            )
        )
        self._set_status(RunStatus.RUNNING, None)
        if self.agent.permission is not None:
            self.state.extensions[PERMISSION_KEY] = self.agent.permission.to_json()
        self.messages.extend(self.background.deliver(self.background_results))

        termination: TerminationReason | None = None
        if self.tools.replay_decided():
            self._set_status(RunStatus.DONE, "cancelled")
            termination = TerminationReason.cancelled()
        if termination is None and self._has_suspended_calls():
            termination = TerminationReason.suspended()
        while termination is None:
            if self.cancel.is_cancelled():
                self._set_status(RunStatus.DONE, "cancelled")
                termination = TerminationReason.cancelled()
                break
            if self.gate is not None and (reason := self.gate()):  # e.g. "budget"
                self._set_status(RunStatus.WAITING, reason)  # no model call: it waits
                termination = TerminationReason.suspended()
                break
            termination = self._step()
        return self._finish(termination)

    def _has_suspended_calls(self) -> bool:
        return any(c.status is ToolCallStatus.SUSPENDED for c in self.state.tool_calls.values())

    def _finish(self, termination: TerminationReason) -> AgentRunResult:
        response = self._last_assistant_text()
        error_payload = error_payload_of(termination)
        for event in run_end_events(self.identity, self.state, termination, response):
            self.emit(event)
        lifecycle = self.state.lifecycle
        self._checkpoint(termination, response or None, error_payload)
        return AgentRunResult(
            run_id=self.identity.run_id,
            response=response,
            termination=termination,
            steps=lifecycle.step_count,
            status=lifecycle.status,
            status_reason=lifecycle.status_reason,
        )

    def _last_assistant_text(self) -> str:
        for message in reversed(self.messages[self.activation_start :]):
            if message.role is Role.ASSISTANT and message.text():
                return message.text()
        return ""

    def _close_step(self, *, last: bool = False) -> None:
        """StepCompleted → checkpoint → state_snapshot → step_end, in one transaction.

        The last step of an activation is committed together with the run's end, so no
        reader ever sees a run that is done (or waiting) without its outcome."""
        self.state.lifecycle.step_count += 1
        self.state.lifecycle.updated_at = now_ms()
        self.emit(self._snapshot_event())
        self.emit(ev.step_end())
        if not last:
            self._checkpoint(boundary=True)

    # --- one step ------------------------------------------------------------------------------

    def _tool_descriptors(self) -> list[ToolDescriptor]:
        policy = self.agent.permission
        return [
            tool.descriptor
            for name, tool in sorted(self.agent.tools.items())
            if policy is None or not policy.unconditionally_denied(name)
        ]

    def _step(self) -> TerminationReason | None:
        """One step: inference, then the tool calls it asked for. Returns how the
        activation ends, or None when another step follows."""
        self._step_message_id = new_id()
        self.emit(ev.step_start(self._step_message_id))
        for cid, call in self.state.tool_calls.items():
            if self._written_calls.get(cid) != call.to_json():
                self._unwritten_calls[cid] = call
        self.state.tool_calls.clear()

        request = self._inference_request()
        started = time.monotonic()
        try:
            text, calls, usage, cancelled = self._infer(request)
        except ModelError as exc:
            return self._fail_step(str(exc) or exc.__class__.__name__)
        except Exception as exc:  # a broken client must fail the run, not the worker
            logger.exception("model client crashed in run %s", self.identity.run_id)
            return self._fail_step(f"model client error: {exc.__class__.__name__}: {exc}")
        self.emit(
            ev.inference_complete(
                self.agent.spec.model, usage, int((time.monotonic() - started) * 1000)
            )
        )
        if usage is not None:
            self.input_tokens += usage.prompt_tokens or 0
            self.output_tokens += usage.completion_tokens or 0
        self.state.stop_stats.inferences += 1

        if text or calls:
            shown = [ToolCall(c.id, c.name, shown_arguments(c.arguments)) for c in calls]
            self.messages.append(Message.assistant(text, shown))
        return self._end_step(calls, cancelled)

    def _inference_request(self) -> InferenceRequest:
        request = InferenceRequest(
            model=self.agent.spec.model,
            system_prompt=self.agent.spec.system_prompt,
            messages=model_visible_messages(self.messages),
            tools=self._tool_descriptors(),
        )
        for plugin in self.agent.plugins:
            hook = getattr(plugin, "before_inference", None)
            if hook is not None:
                hook(request)
        return request

    def _end_step(self, calls: list[ToolCall], cancelled: bool) -> TerminationReason | None:
        """After inference: stop (a stop policy, cancellation, no tool call) or run the
        step's tool calls, then close the step."""
        stop = self.policies.check(self.state.stop_stats, self.input_tokens, self.output_tokens)
        if stop is not None:
            code, detail = stop
            self._set_status(RunStatus.DONE, f"stopped:{code}")
            self._close_step(last=True)
            return TerminationReason.stopped(code, detail)
        if cancelled or self.cancel.is_cancelled():
            self._set_status(RunStatus.DONE, "cancelled")
            self._close_step(last=True)
            return TerminationReason.cancelled()
        if not calls:
            if self.background.pending():  # the run waits for its background work
                self._set_status(RunStatus.WAITING, AWAITING_TASKS)
            else:
                self._set_status(RunStatus.DONE, "natural")
            self._close_step(last=True)
            return TerminationReason.natural_end()

        blocked, suspended, any_error = self.tools.run_batch(calls)
        self.state.stop_stats.consecutive_errors = (
            self.state.stop_stats.consecutive_errors + 1 if any_error else 0
        )
        termination: TerminationReason | None = None
        if self.cancel.is_cancelled():
            self._set_status(RunStatus.DONE, "cancelled")
            termination = TerminationReason.cancelled()
        elif blocked is not None:
            self._set_status(RunStatus.DONE, f"blocked:{blocked}")
            termination = TerminationReason.blocked(blocked)
        elif suspended:
            self._set_status(RunStatus.WAITING, "suspended")
            termination = TerminationReason.suspended()
        self._close_step(last=termination is not None)
        return termination

    def _fail_step(self, message: str) -> TerminationReason:
        self._set_status(RunStatus.DONE, "error")
        self._close_step(last=True)
        return TerminationReason.error(message)

    def _infer(
        self, request: InferenceRequest
    ) -> tuple[str, list[ToolCall], TokenUsage | None, bool]:
        text_parts: list[str] = []
        order: list[str] = []
        names: dict[str, str] = {}
        raw_args: dict[str, list[str]] = {}
        usage: TokenUsage | None = None
        cancelled = False
        stream = self.agent.llm.stream(request, self.cancel)
        try:
            for chunk in stream:
                if isinstance(chunk, TextChunk):
                    if chunk.text:
                        text_parts.append(chunk.text)
                        self.emit(ev.text_delta(chunk.text))
                elif isinstance(chunk, ReasoningChunk):
                    self.emit(ev.reasoning_delta(chunk.text))
                elif isinstance(chunk, ToolCallStartChunk):
                    call_id = chunk.id or f"call_{new_id()}"
                    if call_id not in names:
                        order.append(call_id)
                        raw_args[call_id] = []
                    names[call_id] = chunk.name
                    self.emit(ev.tool_call_start(call_id, chunk.name))
                elif isinstance(chunk, ToolCallArgsChunk):
                    if chunk.id not in raw_args:
                        raise ModelError(f"model sent arguments for unknown tool call {chunk.id!r}")
                    raw_args[chunk.id].append(chunk.delta)
                    self.emit(ev.tool_call_delta(chunk.id, chunk.delta))
                elif isinstance(chunk, UsageChunk):
                    usage = chunk.usage
                if self.cancel.is_cancelled():
                    cancelled = True
                    break
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        calls: list[ToolCall] = []
        for call_id in order:
            raw = "".join(raw_args[call_id]).strip()
            arguments: Any
            try:
                arguments = json.loads(raw) if raw else {}
                if not isinstance(arguments, dict):
                    raise ValueError("arguments must be a JSON object")
            except ValueError as exc:
                arguments = MalformedArguments(raw, str(exc))
            call = ToolCall(call_id, names[call_id], arguments)
            calls.append(call)
            if not cancelled:
                shown = shown_arguments(arguments)
                self.emit(ev.tool_call_ready(call_id, call.name, shown))
        return "".join(text_parts), ([] if cancelled else calls), usage, cancelled
