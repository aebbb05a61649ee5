"""Our run events (docs/run-model.md, "Events") as AG-UI events (`ag-ui-protocol`'s
models), for `POST /api/v1/agents/{slug}/ag-ui` (docs/ag-ui.md).

`AguiTranslator` reads one AG-UI run's share of a run's event log, frame by frame, and
answers the AG-UI events each frame stands for: a text message per step, tool calls with
their arguments and results, state snapshots, steps, and the run's end. It touches no
database: an interrupt is built from the suspended tool call's own event. After the
AG-UI run's last event (RUN_FINISHED or RUN_ERROR) it answers nothing more.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.version import PROTOCOL_VERSION

from runs.runtime.events import ACTIVATION_INTERRUPTED

# The namespace of our CUSTOM events and of our keys in events' metadata.
NAMESPACE = "awaken"
TOOL_APPROVAL = "tool_approval"
INPUT_REQUIRED = "input_required"
# What a resume entry's payload may say (the tickets API's decision body): a form for it.
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"enum": ["approve", "edit", "reject"]},
        "arguments": {"type": "object", "description": "edit: the arguments the tool runs with"},
        "comment": {"type": "string"},
    },
    "required": ["action"],
}
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"enum": ["respond", "reject"]},
        "payload": {"description": "the answer: the tool's result"},
        "comment": {"type": "string"},
    },
    "required": ["action"],
}


def interrupt_reason(resume_mode: str) -> str:
    """A permission's ticket is an approval; a ticket whose answer is the tool's result
    (ask_human) wants input."""
    return INPUT_REQUIRED if resume_mode == "use_decision_as_tool_result" else TOOL_APPROVAL


def make_interrupt(
    *,
    ticket_id: str,
    tool_call_id: str,
    tool_name: str,
    arguments: Any,
    message: str,
    resume_mode: str,
    run_id: str,
) -> Interrupt:
    """One waiting ticket as an AG-UI interrupt; its id is the ticket id a resume entry
    (or the tickets API, `POST /api/v1/runs/{run}/decisions`) answers."""
    reason = interrupt_reason(resume_mode)
    return Interrupt(
        id=ticket_id,
        reason=reason,
        message=message or f"Tool '{tool_name}' suspended: awaiting approval",
        tool_call_id=tool_call_id or None,
        response_schema=APPROVAL_SCHEMA if reason == TOOL_APPROVAL else ANSWER_SCHEMA,
        metadata={
            NAMESPACE: {
                "runId": run_id,
                "toolName": tool_name,
                "arguments": arguments,
                "decisions": f"/api/v1/runs/{run_id}/decisions",
            }
        },
    )


def tool_result_text(result: Any) -> str:
    """A ToolResult (`{tool_name, status, data, message}`) or a resumed call's result as
    the text of a TOOL_CALL_RESULT: the data (JSON unless it is text), or the error."""
    if isinstance(result, dict) and "status" in result and "tool_name" in result:
        if result.get("status") == "error":
            return str(result.get("message") or "error")
        result = result.get("data")
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, default=str)


@dataclass
class AguiTranslator:
    """The AG-UI run `run_id` (the client's) of our thread `thread_id`; `our_run_id`
    is the run it follows."""

    thread_id: str
    run_id: str
    our_run_id: str
    finished: bool = False
    step: int = 0
    message_id: str = ""  # the current step's assistant message
    text_open: bool = False
    calls_started: set[str] = field(default_factory=set)
    calls_with_args: set[str] = field(default_factory=set)
    calls_ended: set[str] = field(default_factory=set)
    interrupts: dict[str, Interrupt] = field(default_factory=dict)
    usage: dict[str, TokenUsage] = field(default_factory=dict)

    # --- the run's edges ---------------------------------------------------------------

    def started(self) -> list[BaseEvent]:
        return [
            RunStartedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                protocol_version=PROTOCOL_VERSION,
                metadata={NAMESPACE: {"runId": self.our_run_id}},
            )
        ]

    def interrupted(self, interrupts: list[Interrupt]) -> list[BaseEvent]:
        """The run ends waiting for these tickets."""
        return self._end(
            RunFinishedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                outcome=RunFinishedInterruptOutcome(interrupts=interrupts),
            )
        )

    def failed(self, message: str, code: str) -> list[BaseEvent]:
        return self._end(RunErrorEvent(message=message or code, code=code))

    def finished_with(self, result: Any, *, cancelled: bool = False) -> list[BaseEvent]:
        outcome = RunFinishedCancelledOutcome() if cancelled else None
        return self._end(
            RunFinishedEvent(
                thread_id=self.thread_id,
                run_id=self.run_id,
                result=result,
                outcome=outcome,
                usage=list(self.usage.values()) or None,
            )
        )

    def _end(self, last: BaseEvent) -> list[BaseEvent]:
        if self.finished:
            return []
        events = self._close_text()
        if isinstance(last, RunErrorEvent) and self.usage:
            last.usage = list(self.usage.values())
        self.finished = True
        return [*events, last]

    # --- one frame ---------------------------------------------------------------------

    def translate(self, frame: dict[str, Any]) -> list[BaseEvent]:
        if self.finished:
            return []
        handler = getattr(self, "_on_" + str(frame.get("event_type")), None)
        return handler(frame) if handler is not None else []

    def _on_step_start(self, frame: dict[str, Any]) -> list[BaseEvent]:
        self.step += 1
        self.message_id = str(frame.get("message_id") or f"{self.our_run_id}-step-{self.step}")
        return [StepStartedEvent(step_name=f"step_{self.step}")]

    def _on_step_end(self, frame: dict[str, Any]) -> list[BaseEvent]:
        return [*self._close_text(), StepFinishedEvent(step_name=f"step_{self.step}")]

    def _on_text_delta(self, frame: dict[str, Any]) -> list[BaseEvent]:
        delta = str(frame.get("delta") or "")
        if not delta:
            return []
        events: list[BaseEvent] = []
        if not self.text_open:
            self.message_id = self.message_id or f"{self.our_run_id}-step-{self.step}"
            events.append(TextMessageStartEvent(message_id=self.message_id, role="assistant"))
            self.text_open = True
        events.append(TextMessageContentEvent(message_id=self.message_id, delta=delta))
        return events

    def _on_tool_call_start(self, frame: dict[str, Any]) -> list[BaseEvent]:
        return self._start_call(str(frame["id"]), str(frame.get("name") or ""))

    def _on_tool_call_delta(self, frame: dict[str, Any]) -> list[BaseEvent]:
        call_id, delta = str(frame["id"]), str(frame.get("args_delta") or "")
        if not delta or call_id in self.calls_ended:
            return []
        self.calls_with_args.add(call_id)
        return [ToolCallArgsEvent(tool_call_id=call_id, delta=delta)]

    def _on_tool_call_ready(self, frame: dict[str, Any]) -> list[BaseEvent]:
        call_id = str(frame["id"])
        events = self._start_call(call_id, str(frame.get("name") or ""))
        if call_id not in self.calls_with_args:
            arguments = json.dumps(frame.get("arguments") or {}, ensure_ascii=False)
            events.append(ToolCallArgsEvent(tool_call_id=call_id, delta=arguments))
            self.calls_with_args.add(call_id)
        if call_id not in self.calls_ended:
            events.append(ToolCallEndEvent(tool_call_id=call_id))
            self.calls_ended.add(call_id)
        return events

    def _on_tool_call_cancel(self, frame: dict[str, Any]) -> list[BaseEvent]:
        call_id = str(frame["id"])
        events: list[BaseEvent] = []
        if call_id in self.calls_started and call_id not in self.calls_ended:
            events.append(ToolCallEndEvent(tool_call_id=call_id))
            self.calls_ended.add(call_id)
        value = {"toolCallId": call_id, "reason": frame.get("reason")}
        return [*events, CustomEvent(name=f"{NAMESPACE}.tool_call_cancel", value=value)]

    def _start_call(self, call_id: str, name: str) -> list[BaseEvent]:
        if call_id in self.calls_started:
            return []
        self.calls_started.add(call_id)
        parent = self.message_id or None
        return [
            *self._close_text(),
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, parent_message_id=parent),
        ]

    def _on_tool_call_done(self, frame: dict[str, Any]) -> list[BaseEvent]:
        call_id, result = str(frame["id"]), frame.get("result") or {}
        if frame.get("outcome") == "suspended":
            suspension = result.get("suspension") or {}
            asked = suspension.get("suspension") or {}
            ticket = asked.get("id") or call_id
            self.interrupts[str(ticket)] = make_interrupt(
                ticket_id=str(ticket),
                tool_call_id=call_id,
                tool_name=str(result.get("tool_name") or ""),
                arguments=(suspension.get("pending") or {}).get("arguments"),
                message=str(asked.get("message") or result.get("message") or ""),
                resume_mode=str(suspension.get("resume_mode") or ""),
                run_id=self.our_run_id,
            )
            return []
        message_id = str(frame.get("message_id") or f"{call_id}-result")
        return [self._result(call_id, message_id, tool_result_text(result))]

    def _on_tool_call_resumed(self, frame: dict[str, Any]) -> list[BaseEvent]:
        call_id = str(frame["target_id"])
        text = tool_result_text(frame.get("result"))
        return [self._result(call_id, f"{call_id}-result", text)]

    def _result(self, call_id: str, message_id: str, text: str) -> ToolCallResultEvent:
        return ToolCallResultEvent(
            message_id=message_id, tool_call_id=call_id, content=text, role="tool"
        )

    def _on_state_snapshot(self, frame: dict[str, Any]) -> list[BaseEvent]:
        return [StateSnapshotEvent(snapshot=frame.get("snapshot") or {})]

    def _on_inference_complete(self, frame: dict[str, Any]) -> list[BaseEvent]:
        model, usage = str(frame.get("model") or ""), frame.get("usage") or {}
        entry = self.usage.setdefault(
            model, TokenUsage(model=model, input_tokens=0, output_tokens=0, total_tokens=0)
        )
        prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
        entry.input_tokens = (entry.input_tokens or 0) + prompt
        entry.output_tokens = (entry.output_tokens or 0) + completion
        entry.total_tokens = (entry.input_tokens or 0) + (entry.output_tokens or 0)
        return self._close_text()  # the step's text is complete

    def _on_ticket_decided(self, frame: dict[str, Any]) -> list[BaseEvent]:
        decision = frame.get("decision") or {}
        value = {
            "interruptId": frame.get("ticket_id"),
            "toolCallId": frame.get("tool_call_id"),
            "action": decision.get("action"),
            "actor": decision.get("actor"),
            "comment": decision.get("comment"),
        }
        self.interrupts.pop(str(frame.get("ticket_id")), None)
        return [CustomEvent(name=f"{NAMESPACE}.ticket_decided", value=value)]

    def _on_error(self, frame: dict[str, Any]) -> list[BaseEvent]:
        if frame.get("code") == ACTIVATION_INTERRUPTED:  # the run goes on from its checkpoint
            return self._close_text()
        return self.failed(str(frame.get("message") or ""), str(frame.get("code") or "error"))

    def _on_run_finish(self, frame: dict[str, Any]) -> list[BaseEvent]:
        termination = frame.get("termination") or {}
        kind, result = termination.get("type"), frame.get("result")
        if kind == "error":
            return self.failed(str(termination.get("value") or "the run failed"), "run_error")
        if kind == "cancelled":
            return self.finished_with(result, cancelled=True)
        status = (result or {}).get("status") if isinstance(result, dict) else None
        if kind == "suspended" or status == "waiting":
            if self.interrupts:
                return self.interrupted(list(self.interrupts.values()))
            return self._close_text()  # waiting on background work or a child run: go on
        return self.finished_with(result)

    def _close_text(self) -> list[BaseEvent]:
        if not self.text_open:
            return []
        self.text_open = False
        return [TextMessageEndEvent(message_id=self.message_id)]
