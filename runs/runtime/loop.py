"""The agent loop: steps of inference and tool calls, suspension on tickets, durable resume.

Ported from upstream's loop_runner (docs/run-model.md) with this project's changes:
append-only checkpoints that carry the events they describe (gap-free log), steps that do
not reset on resume, and no in-process waiting: a run that suspends checkpoints as waiting
and ends its activation; a later activation replays the decided calls.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

import jsonschema

from . import events as ev
from .events import Event
from .materialize import materialize_message_log
from .permissions import Behavior, PermissionPolicy, primary_argument
from .ports import (
    CancellationToken,
    Checkpoint,
    CheckpointStore,
    EventSink,
    InferenceRequest,
    ModelClient,
    ModelError,
    ReasoningChunk,
    TextChunk,
    Tool,
    ToolCallArgsChunk,
    ToolCallContext,
    ToolCallStartChunk,
    UsageChunk,
)
from .stop import STATS_KEY, StopPolicies, StopStats
from .types import (
    Message,
    PendingToolCall,
    PersistedState,
    ResumeDecisionAction,
    Role,
    RunLifecycleState,
    RunRecord,
    RunStatus,
    SuspendTicket,
    Suspension,
    TerminationReason,
    TokenUsage,
    ToolCall,
    ToolCallResume,
    ToolCallResumeMode,
    ToolCallState,
    ToolCallStatus,
    ToolDescriptor,
    ToolResult,
    ToolStatus,
    new_id,
    now_ms,
    waiting_state_from_lifecycle,
    waiting_tickets_from_states,
)

logger = logging.getLogger(__name__)


def _validator(schema: dict[str, Any]) -> Any:
    """A checked validator for a tool's parameter schema, built once per distinct schema
    (checking a schema costs more than validating the arguments against it)."""
    return _validator_for(json.dumps(schema, sort_keys=True))


@functools.lru_cache(maxsize=512)
def _validator_for(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)  # a SchemaError is raised (and not cached) on every call
    return cls(schema)


LIFECYCLE_KEY = "__runtime.run_lifecycle"
TOOL_CALLS_KEY = "__runtime.tool_call_states"
PERMISSION_KEY = "permission_policy"

INTERRUPTED_TEXT = "[Tool execution was interrupted]"
PERMISSION_ACTION = "tool:PermissionConfirm"


def suspended_placeholder(tool_name: str) -> str:
    return f"Tool '{tool_name}' suspended: awaiting decision"


def permission_ticket(call: ToolCall) -> SuspendTicket:
    ticket_id = f"perm_{call.id}"
    return SuspendTicket(
        suspension=Suspension(id=ticket_id, action=PERMISSION_ACTION, parameters=call.arguments),
        pending=PendingToolCall(id=ticket_id, name="permission_confirm", arguments=call.arguments),
        resume_mode=ToolCallResumeMode.REPLAY_TOOL_CALL,
    )


@dataclass
class RunIdentity:
    thread_id: str
    run_id: str
    agent_id: str
    parent_run_id: str | None = None
    parent_thread_id: str | None = None
    parent_tool_call_id: str | None = None
    dispatch_id: str | None = None
    session_id: str | None = None
    transport_request_id: str | None = None
    origin: str = "user"
    run_mode: str = "foreground"

    def to_json(self) -> dict[str, Any]:
        data = {key: value for key, value in self.__dict__.items() if value is not None}
        if self.run_mode == "foreground":
            data.pop("run_mode")
        return data


@dataclass
class AgentSpec:
    id: str
    model: str
    system_prompt: str = ""
    max_rounds: int = 16
    stop_conditions: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ResolvedAgent:
    """An agent ready to run: its spec, model client, tools and policies."""

    spec: AgentSpec
    llm: ModelClient
    tools: dict[str, Tool] = field(default_factory=dict)
    permission: PermissionPolicy | None = None  # None: every tool call is allowed
    plugins: list[Any] = field(default_factory=list)

    def with_tool(self, tool: Tool) -> ResolvedAgent:
        self.tools[tool.descriptor.name] = tool
        return self

    @property
    def stop_policies(self) -> StopPolicies:
        return StopPolicies.from_spec(self.spec.max_rounds, self.spec.stop_conditions)


@dataclass
class AgentRunResult:
    run_id: str
    response: str
    termination: TerminationReason
    steps: int
    status: RunStatus
    status_reason: str | None


class RuntimeState:
    """The run's in-process state and its persisted form."""

    def __init__(
        self,
        run_id: str,
        persisted: PersistedState | None = None,
        tool_calls: dict[str, ToolCallState] | None = None,
    ) -> None:
        persisted = persisted or PersistedState()
        self.revision = persisted.revision
        self.extensions = dict(persisted.extensions)
        lifecycle = self.extensions.get(LIFECYCLE_KEY) or {}
        self.lifecycle = RunLifecycleState(
            run_id=run_id,
            status=RunStatus(lifecycle.get("status", "running")),
            status_reason=lifecycle.get("status_reason"),
            updated_at=int(lifecycle.get("updated_at") or 0),
            step_count=int(lifecycle.get("step_count") or 0),
        )
        if tool_calls is None:
            raw = (self.extensions.get(TOOL_CALLS_KEY) or {}).get("calls") or {}
            tool_calls = {cid: ToolCallState.from_json(data) for cid, data in raw.items()}
        self.tool_calls: dict[str, ToolCallState] = dict(tool_calls)
        self.stop_stats = StopStats.from_json(self.extensions.get(STATS_KEY))

    def export(self) -> PersistedState:
        self.revision += 1
        self.extensions[LIFECYCLE_KEY] = self.lifecycle.to_json()
        self.extensions[TOOL_CALLS_KEY] = {
            "calls": {cid: call.to_json() for cid, call in sorted(self.tool_calls.items())}
        }
        self.extensions[STATS_KEY] = self.stop_stats.to_json()
        return PersistedState(self.revision, dict(self.extensions))

    def set_status(self, target: RunStatus, reason: str | None) -> None:
        if not self.lifecycle.apply(target, reason, clear_reason=reason is None):
            logger.error(
                "run %s: skipping illegal lifecycle transition %s -> %s",
                self.lifecycle.run_id,
                self.lifecycle.status,
                target,
            )

    def conclude(self, termination: TerminationReason) -> None:
        """The lifecycle a run has once an activation ends with `termination`."""
        if termination.type == TerminationReason.SUSPENDED:
            if self.lifecycle.status is not RunStatus.WAITING:
                self.set_status(RunStatus.WAITING, "suspended")
        elif self.lifecycle.status is not RunStatus.DONE:
            status, reason = termination.to_run_status()
            self.set_status(status, reason)

    def cancel_waiting_calls(self) -> None:
        """Calls still waiting for a decision (or for their replay) end with the run."""
        for call in list(self.tool_calls.values()):
            if call.status in (ToolCallStatus.SUSPENDED, ToolCallStatus.RESUMING):
                self.put_call(replace(call, status=ToolCallStatus.CANCELLED))

    def put_call(self, call: ToolCallState) -> None:
        current = self.tool_calls.get(call.call_id)
        if current is not None and not current.status.can_transition_to(call.status):
            logger.error(
                "skipping illegal tool call transition %s -> %s for %s",
                current.status,
                call.status,
                call.call_id,
            )
            return
        call.updated_at = now_ms()
        self.tool_calls[call.call_id] = call


def prepare_resume(
    state: RuntimeState,
    decisions: list[tuple[str, ToolCallResume]],
    mode_override: ToolCallResumeMode | None = None,
) -> None:
    """Apply decisions to suspended calls, found by call id or suspension id."""
    for target, decision in decisions:
        call = state.tool_calls.get(target) or next(
            (c for c in state.tool_calls.values() if c.suspension_id == target), None
        )
        if call is None:
            raise KeyError(f"tool call or suspension {target} not found")
        status = (
            ToolCallStatus.RESUMING
            if decision.action is ResumeDecisionAction.RESUME
            else ToolCallStatus.CANCELLED
        )
        state.put_call(
            ToolCallState(
                call_id=call.call_id,
                tool_name=call.tool_name,
                arguments=call.arguments,
                status=status,
                updated_at=now_ms(),
                resume_mode=mode_override or call.resume_mode,
                suspension_id=call.suspension_id,
                suspension_reason=call.suspension_reason,
                resume_input=decision,
            )
        )


class _MalformedArguments:
    def __init__(self, raw: str, error: str) -> None:
        self.raw = raw
        self.error = error


def model_visible_messages(messages: list[Message]) -> list[Message]:
    """What the model sees of the log: every answered call followed directly by its answer
    (the last one: a suspended placeholder gives way to the real result, even when the
    result was appended after later input); unanswered calls are left out."""
    answers: dict[str, Message] = {}
    for message in messages:
        if message.role is Role.TOOL and message.tool_call_id:
            answers[message.tool_call_id] = message
    visible: list[Message] = []
    for message in messages:
        if message.role is Role.TOOL:
            continue
        if message.role is Role.ASSISTANT and message.tool_calls:
            answered = [call for call in message.tool_calls if call.id in answers]
            if not answered and not message.text():
                continue
            if len(answered) != len(message.tool_calls):
                message = Message(
                    role=message.role,
                    content=message.content,
                    tool_calls=answered or None,
                    id=message.id,
                    run_id=message.run_id,
                    step_index=message.step_index,
                )
            visible.append(message)
            visible.extend(answers[call.id] for call in answered)
            continue
        visible.append(message)
    while (
        visible
        and visible[-1].role is Role.ASSISTANT
        and not visible[-1].text()
        and not visible[-1].tool_calls
    ):
        visible.pop()
    return visible


def run_end_events(
    identity: RunIdentity, state: RuntimeState, termination: TerminationReason, response: str
) -> list[Event]:
    """How a run's activation ends: the lifecycle `termination` leaves in `state`, its
    `state_snapshot` (a new revision), then `run_finish` with the result and identity."""
    state.conclude(termination)
    lifecycle = state.lifecycle
    result: dict[str, Any] = {"response": response, "status": lifecycle.status.value}
    if lifecycle.status_reason is not None:
        result["status_reason"] = lifecycle.status_reason
    return [
        ev.state_snapshot(state.export().to_json()),
        ev.run_finish(identity.thread_id, identity.run_id, termination, result, identity.to_json()),
    ]


def end_without_activation(
    identity: RunIdentity, persisted: PersistedState | None, termination: TerminationReason
) -> tuple[PersistedState, list[Event]]:
    """A run ended while no activation runs it (cancelled before it started or while it
    waits): the state to persist and the events that end its log, as the loop's own end
    would leave them. Its calls still waiting for a decision end with it."""
    state = RuntimeState(identity.run_id, persisted)
    state.cancel_waiting_calls()
    events = run_end_events(identity, state, termination, "")
    return PersistedState(state.revision, dict(state.extensions)), events


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
    ) -> None:
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
    ) -> None:
        lifecycle = self.state.lifecycle
        persisted = PersistedState(self.state.revision, dict(self.state.extensions))
        if self.store is None:
            self.pending_events = []
            self.committed_count = len(self.messages)
            return
        input_, output = materialize_message_log(
            self.messages,
            self.previous,
            self.identity.run_id,
            self.identity.thread_id,
            lifecycle.step_count,
            self.input_message_count,
            start_index=self.committed_count,
        )
        done = lifecycle.status is RunStatus.DONE
        now = int(time.time())
        record = RunRecord(
            run_id=self.identity.run_id,
            thread_id=self.identity.thread_id,
            agent_id=self.identity.agent_id,
            parent_run_id=self.identity.parent_run_id,
            request=self.previous.request if self.previous else None,
            input=input_,
            output=output,
            status=lifecycle.status,
            status_reason=lifecycle.status_reason,
            termination_reason=termination if done else None,
            final_output=final_output if done else None,
            error_payload=error_payload if done else None,
            dispatch_id=self.identity.dispatch_id,
            session_id=self.identity.session_id,
            transport_request_id=self.identity.transport_request_id,
            waiting=waiting_state_from_lifecycle(
                lifecycle.status,
                lifecycle.status_reason,
                self.identity.session_id,
                waiting_tickets_from_states(self.state.tool_calls),
            ),
            created_at=self.created_at,
            started_at=self.started_at,
            finished_at=now if done else None,
            updated_at=now,
            steps=lifecycle.step_count,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            state=persisted,
        )
        pending = {**self._unwritten_calls, **self.state.tool_calls}
        changed = [
            call for cid, call in pending.items() if self._written_calls.get(cid) != call.to_json()
        ]
        self.store.checkpoint(
            Checkpoint(
                thread_id=self.identity.thread_id,
                record=record,
                new_messages=self.messages[self.committed_count :],
                expected_message_count=self.committed_count,
                tool_calls=changed,
                events=ev.coalesce_deltas(self.pending_events),
                step_index=lifecycle.step_count - 1 if lifecycle.step_count else None,
            )
        )
        for call in changed:
            self._written_calls[call.call_id] = call.to_json()
        self._unwritten_calls.clear()
        self.pending_events = []
        self.committed_count = len(self.messages)
        self.previous = record

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

        termination = self._replay_resumed_calls()
        if termination is None and self._has_suspended_calls():
            termination = TerminationReason.suspended()
        while termination is None:
            if self.cancel.is_cancelled():
                self._set_status(RunStatus.DONE, "cancelled")
                termination = TerminationReason.cancelled()
                break
            termination = self._step()
        return self._finish(termination)

    def _has_suspended_calls(self) -> bool:
        return any(c.status is ToolCallStatus.SUSPENDED for c in self.state.tool_calls.values())

    def _finish(self, termination: TerminationReason) -> AgentRunResult:
        response = self._last_assistant_text()
        error_payload = (
            {"message": termination.value} if termination.type == TerminationReason.ERROR else None
        )
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
            self._checkpoint()

    # --- one step ------------------------------------------------------------------------------

    def _tool_descriptors(self) -> list[ToolDescriptor]:
        policy = self.agent.permission
        return [
            tool.descriptor
            for name, tool in sorted(self.agent.tools.items())
            if policy is None or not policy.unconditionally_denied(name)
        ]

    def _step(self) -> TerminationReason | None:
        self._step_message_id = new_id()
        self.emit(ev.step_start(self._step_message_id))
        for cid, call in self.state.tool_calls.items():
            if self._written_calls.get(cid) != call.to_json():
                self._unwritten_calls[cid] = call
        self.state.tool_calls.clear()

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
            self.messages.append(
                Message.assistant(
                    text,
                    [
                        ToolCall(
                            c.id,
                            c.name,
                            c.arguments.raw
                            if isinstance(c.arguments, _MalformedArguments)
                            else c.arguments,
                        )
                        for c in calls
                    ],
                )
            )

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
            self._set_status(RunStatus.DONE, "natural")
            self._close_step(last=True)
            return TerminationReason.natural_end()

        blocked, suspended, any_error = self._run_tool_batch(calls)
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
                arguments = _MalformedArguments(raw, str(exc))
            call = ToolCall(call_id, names[call_id], arguments)
            calls.append(call)
            if not cancelled:
                shown = arguments.raw if isinstance(arguments, _MalformedArguments) else arguments
                self.emit(ev.tool_call_ready(call_id, call.name, shown))
        return "".join(text_parts), ([] if cancelled else calls), usage, cancelled

    # --- tools ---------------------------------------------------------------------------------

    def _run_tool_batch(self, calls: list[ToolCall]) -> tuple[str | None, bool, bool]:
        """Run a step's calls in order. Returns (blocked reason, any suspended, any error)."""
        blocked: str | None = None
        suspended = False
        interrupted = False
        any_error = False
        for call in calls:
            if blocked is not None or interrupted:
                self._record_interrupted(call)
                any_error = True
                continue
            result, gate = self._execute_call(call, resume=None)
            if gate == "block":
                blocked = result.message or f"Tool '{call.name}' denied by permission rules"
            if result.status is ToolStatus.PENDING:
                suspended = True
                if gate != "suspend":
                    interrupted = True  # an executor suspension stops the batch
            elif result.status is ToolStatus.ERROR:
                any_error = True
            if self.cancel.is_cancelled():
                interrupted = True
        return blocked, suspended, any_error

    def _record_interrupted(self, call: ToolCall) -> None:
        arguments = (
            call.arguments.raw
            if isinstance(call.arguments, _MalformedArguments)
            else call.arguments
        )
        self.state.put_call(
            ToolCallState(call.id, call.name, arguments, ToolCallStatus.FAILED, now_ms())
        )
        message = Message.tool(call.id, INTERRUPTED_TEXT)
        self.messages.append(message)
        result = ToolResult.error(call.name, INTERRUPTED_TEXT)
        self.emit(ev.tool_call_done(call.id, message.id or "", result, "failed"))

    def _gate(self, call: ToolCall, tool: Tool | None) -> tuple[str, ToolResult | None]:
        policy = self.agent.permission
        if policy is None:
            return "allow", None
        params = tool.descriptor.parameters if tool is not None else None
        decision = policy.evaluate(call.name, call.arguments, primary_argument(params))
        if decision.behavior is Behavior.DENY:
            return "block", ToolResult.error(
                call.name, f"Tool '{call.name}' denied by permission rules"
            )
        if decision.behavior is Behavior.ASK:
            ticket = permission_ticket(call)
            return "suspend", ToolResult.pending(
                call.name, ticket, f"Tool '{call.name}' suspended: awaiting approval"
            )
        return "allow", None

    def _execute_call(
        self, call: ToolCall, resume: ToolCallState | None
    ) -> tuple[ToolResult, str | None]:
        """The tool pipeline: gate → validate → execute → record. Returns (result, gate)."""
        tool = self.agent.tools.get(call.name)
        gate: str | None = None
        base = resume or ToolCallState(
            call.id, call.name, call.arguments, ToolCallStatus.NEW, now_ms()
        )
        if isinstance(call.arguments, _MalformedArguments):
            result = ToolResult.error(
                call.name, f"Invalid JSON in tool call arguments: {call.arguments.error}"
            )
            base.arguments = call.arguments.raw
        elif tool is None:
            available = ", ".join(sorted(self.agent.tools)) or "none"
            result = ToolResult.error(
                call.name, f"Unknown tool '{call.name}'. Available tools: {available}"
            )
        else:
            gated: ToolResult | None = None
            if resume is None:
                gate, gated = self._gate(call, tool)
            result = gated if gated is not None else self._invoke(call, tool, resume)

        status = {
            ToolStatus.SUCCESS: ToolCallStatus.SUCCEEDED,
            ToolStatus.ERROR: ToolCallStatus.FAILED,
            ToolStatus.PENDING: ToolCallStatus.SUSPENDED,
        }[result.status]
        state = ToolCallState(
            call_id=call.id,
            tool_name=call.name,
            arguments=base.arguments,
            status=status,
            updated_at=now_ms(),
            resume_mode=base.resume_mode,
        )
        if result.suspension is not None:
            state.resume_mode = result.suspension.resume_mode
            state.with_suspension(
                result.suspension.suspension.id, result.suspension.suspension.action
            )
        if resume is not None and status is not ToolCallStatus.SUSPENDED:
            state.resume_input = None
            state.suspension_id = resume.suspension_id
            state.suspension_reason = resume.suspension_reason
        self.state.put_call(state)

        text = (
            suspended_placeholder(call.name)
            if status is ToolCallStatus.SUSPENDED
            else result.content_text()
        )
        message = Message.tool(call.id, text)
        self.messages.append(message)
        if resume is None:
            outcome = {"success": "succeeded", "error": "failed", "pending": "suspended"}[
                result.status.value
            ]
            self.emit(ev.tool_call_done(call.id, message.id or "", result, outcome))
        else:
            self.emit(ev.tool_call_resumed(call.id, result.resume_payload()))
        return result, gate

    def _invoke(self, call: ToolCall, tool: Tool, resume: ToolCallState | None) -> ToolResult:
        arguments = resume.arguments if resume is not None else call.arguments
        if (
            resume is not None
            and resume.resume_mode is ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT
        ):
            payload = resume.resume_input.result if resume.resume_input else None
            return ToolResult.success(call.name, payload)
        try:
            error = jsonschema.exceptions.best_match(
                _validator(tool.descriptor.parameters).iter_errors(arguments)
            )
            if error is not None:
                raise error
        except jsonschema.ValidationError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
            return ToolResult.error(
                call.name, f"Invalid arguments for tool '{call.name}' at {where}: {exc.message}"
            )
        except jsonschema.SchemaError as exc:
            return ToolResult.error(
                call.name, f"Tool '{call.name}' has a broken schema: {exc.message}"
            )
        ctx = ToolCallContext(
            call_id=call.id,
            tool_name=call.name,
            run_id=self.identity.run_id,
            thread_id=self.identity.thread_id,
            agent_id=self.identity.agent_id,
            cancel=self.cancel,
            emit=self.emit,
            resume_input=resume.resume_input if resume else None,
            suspension_id=resume.suspension_id if resume else None,
            suspension_reason=resume.suspension_reason if resume else None,
            state=self.state.extensions,
        )
        self.state.put_call(
            ToolCallState(call.id, call.name, arguments, ToolCallStatus.RUNNING, now_ms())
            if resume is None
            else ToolCallState(
                call.id,
                call.name,
                arguments,
                ToolCallStatus.RUNNING,
                now_ms(),
                resume.resume_mode,
                resume.suspension_id,
                resume.suspension_reason,
                resume.resume_input,
            )
        )
        try:
            result = tool.execute(dict(arguments), ctx)
        except Exception as exc:  # a failing tool is a failed call, not a failed run
            logger.exception("tool %s failed in run %s", call.name, self.identity.run_id)
            return ToolResult.error(call.name, f"Tool '{call.name}' failed: {exc}")
        if not isinstance(result, ToolResult):
            return ToolResult.error(call.name, f"Tool '{call.name}' returned no result")
        return result

    # --- resume: report rejected calls, then replay the decided ones ------------------------------

    def _replay_resumed_calls(self) -> TerminationReason | None:
        calls = self.state.tool_calls
        for call_id in sorted(calls):
            call = calls[call_id]
            if call.status is ToolCallStatus.CANCELLED and call.resume_input is not None:
                payload = call.resume_input.result
                self.emit(ev.tool_call_resumed(call_id, payload))
                self.messages.append(
                    Message.tool(call_id, json.dumps(payload, ensure_ascii=False, default=str))
                )
                self.state.tool_calls[call_id] = ToolCallState(
                    call_id,
                    call.tool_name,
                    call.arguments,
                    ToolCallStatus.CANCELLED,
                    now_ms(),
                    call.resume_mode,
                )
        for call_id in sorted(calls):
            call = calls[call_id]
            if call.status is not ToolCallStatus.RESUMING:
                continue
            self._execute_call(ToolCall(call_id, call.tool_name, call.arguments), resume=call)
            if self.cancel.is_cancelled():
                self._set_status(RunStatus.DONE, "cancelled")
                return TerminationReason.cancelled()
        return None
