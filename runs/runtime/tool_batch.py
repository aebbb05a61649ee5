"""A step's tool calls: the pipeline each call goes through (permission gate, argument
validation, execution, then its recorded state, tool message and event), a step's batch
of calls run in order, and the replay of the calls decided while the run waited."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

import jsonschema

from . import events as ev
from .agent import ResolvedAgent
from .events import Event
from .identity import RunIdentity
from .permissions import Behavior, primary_argument
from .ports import CancellationToken, Tool, ToolCallContext
from .run_state import RuntimeState
from .types import (
    Message,
    PendingToolCall,
    SuspendTicket,
    Suspension,
    ToolCall,
    ToolCallResumeMode,
    ToolCallState,
    ToolCallStatus,
    ToolResult,
    ToolStatus,
    now_ms,
)

logger = logging.getLogger(__name__)

INTERRUPTED_TEXT = "[Tool execution was interrupted]"
PERMISSION_ACTION = "tool:PermissionConfirm"


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


def suspended_placeholder(tool_name: str) -> str:
    return f"Tool '{tool_name}' suspended: awaiting decision"


def permission_ticket(call: ToolCall) -> SuspendTicket:
    ticket_id = f"perm_{call.id}"
    return SuspendTicket(
        suspension=Suspension(id=ticket_id, action=PERMISSION_ACTION, parameters=call.arguments),
        pending=PendingToolCall(id=ticket_id, name="permission_confirm", arguments=call.arguments),
        resume_mode=ToolCallResumeMode.REPLAY_TOOL_CALL,
    )


class MalformedArguments:
    """Arguments the model sent that are not a JSON object (the call fails with `error`)."""

    def __init__(self, raw: str, error: str) -> None:
        self.raw = raw
        self.error = error


def shown_arguments(arguments: Any) -> Any:
    """The arguments as the model sent them (the raw text when they are malformed)."""
    return arguments.raw if isinstance(arguments, MalformedArguments) else arguments


def settled_call_state(
    call: ToolCall, base: ToolCallState, resume: ToolCallState | None, result: ToolResult
) -> ToolCallState:
    """The call's state once its result is known: succeeded, failed or suspended (with the
    new suspension); a resumed call that did not suspend again keeps the suspension it
    was resumed from and drops its resume input."""
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
        state.with_suspension(result.suspension.suspension.id, result.suspension.suspension.action)
    if resume is not None and status is not ToolCallStatus.SUSPENDED:
        state.resume_input = None
        state.suspension_id = resume.suspension_id
        state.suspension_reason = resume.suspension_reason
    return state


class ToolRunner:
    """Runs an activation's tool calls against its run state, messages and event stream."""

    def __init__(
        self,
        agent: ResolvedAgent,
        identity: RunIdentity,
        state: RuntimeState,
        messages: list[Message],
        emit: Callable[[Event], None],
        cancel: CancellationToken,
        start_background: Callable[[str], Callable[[str, dict[str, Any], str], str]] | None = None,
    ) -> None:
        self.start_background = start_background
        self.agent = agent
        self.identity = identity
        self.state = state
        self.messages = messages
        self.emit = emit
        self.cancel = cancel

    def run_batch(self, calls: list[ToolCall]) -> tuple[str | None, bool, bool]:
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
            result, gate = self.execute_call(call, resume=None)
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
        arguments = shown_arguments(call.arguments)
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

    def execute_call(
        self, call: ToolCall, resume: ToolCallState | None
    ) -> tuple[ToolResult, str | None]:
        """The tool pipeline: gate → validate → execute → record. Returns (result, gate)."""
        tool = self.agent.tools.get(call.name)
        gate: str | None = None
        base = resume or ToolCallState(
            call.id, call.name, call.arguments, ToolCallStatus.NEW, now_ms()
        )
        if isinstance(call.arguments, MalformedArguments):
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

        state = settled_call_state(call, base, resume, result)
        self.state.put_call(state)

        text = (
            suspended_placeholder(call.name)
            if state.status is ToolCallStatus.SUSPENDED
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
            start_background=self.start_background(call.id) if self.start_background else None,
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

    def replay_decided(self) -> bool:
        """Report the calls whose decision rejected them, then run the ones resumed (in call
        id order). Returns True when the run was cancelled during the replay (it stops)."""
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
            self.execute_call(ToolCall(call_id, call.tool_name, call.arguments), resume=call)
            if self.cancel.is_cancelled():
                return True
        return False
