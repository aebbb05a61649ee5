"""Event order, durable records and messages of whole runs through AgentLoop, as
docs/run-model.md describes them, with this project's differences from upstream."""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from runs.runtime.events import coalesce_deltas
from runs.runtime.loop import AgentLoop, AgentRunResult, ResolvedAgent, RunIdentity
from runs.runtime.permissions import PermissionPolicy
from runs.runtime.ports import CancellationToken, ModelError, ToolCallContext
from runs.runtime.testing import (
    EchoTool,
    InMemoryStore,
    RecordingSink,
    ScriptedLlm,
    Turn,
    agent,
    text_turn,
    tool_turn,
)
from runs.runtime.types import (
    Message,
    MessageSeqRange,
    PendingToolCall,
    ResumeDecisionAction,
    Role,
    RunRecord,
    RunStatus,
    SuspendTicket,
    Suspension,
    TerminationReason,
    TokenUsage,
    ToolCallResume,
    ToolCallResumeMode,
    ToolCallStatus,
    ToolDescriptor,
    ToolResult,
    WaitingReason,
)

ASK_ALL = {"default_behavior": "ask", "rules": []}

TEXT_STEP_TAIL = ["inference_complete", "state_snapshot", "step_end"]
RUN_TAIL = ["state_snapshot", "run_finish"]
TOOL_STREAM = ["tool_call_start", "tool_call_delta", "tool_call_ready"]


# --- harness -------------------------------------------------------------------------------------


@dataclass
class Harness:
    store: InMemoryStore
    agent: ResolvedAgent
    sinks: list[RecordingSink] = field(default_factory=list)

    @property
    def llm(self) -> ScriptedLlm:
        return self.agent.llm  # type: ignore[return-value]

    @property
    def record(self) -> RunRecord:
        return self.store.runs["r1"]

    @property
    def messages(self) -> list[Message]:
        return self.store.messages["t1"]

    def tool(self, name: str = "echo") -> Any:
        return self.agent.tools[name]

    def run(
        self,
        *,
        cancel: CancellationToken | None = None,
        decisions: list[tuple[str, ToolCallResume]] | None = None,
    ) -> tuple[RecordingSink, AgentRunResult]:
        sink = RecordingSink()
        self.sinks.append(sink)
        resuming = bool(decisions) or "r1" in self.store.tool_calls
        result = AgentLoop(
            agent=self.agent,
            identity=RunIdentity("t1", "r1", "a"),
            messages=self.store.load_messages("t1"),
            sink=sink,
            store=self.store,
            cancel=cancel,
            previous=self.store.load_run("r1"),
            tool_calls=copy.deepcopy(self.store.tool_calls.get("r1")) if resuming else None,
            decisions=decisions,
        ).run()
        return sink, result

    def all_events(self) -> list[dict[str, Any]]:
        return [event for sink in self.sinks for event in sink.events]


def make(
    turns: list[Turn],
    *,
    permission: dict[str, Any] | None = None,
    tools: list[Any] | None = None,
    max_rounds: int | None = None,
    stop_conditions: list[dict[str, Any]] | None = None,
) -> Harness:
    store = InMemoryStore()
    store.append_messages("t1", [Message.user("hello")])
    store.runs["r1"] = RunRecord(run_id="r1", thread_id="t1", agent_id="a")
    resolved = agent("a", ScriptedLlm(turns))
    for tool in tools if tools is not None else [EchoTool()]:
        resolved.with_tool(tool)
    resolved.permission = PermissionPolicy.from_json(permission) if permission else None
    if max_rounds is not None:
        resolved.spec.max_rounds = max_rounds
    if stop_conditions is not None:
        resolved.spec.stop_conditions = stop_conditions
    return Harness(store, resolved)


def approve(target: str = "perm_call-1") -> list[tuple[str, ToolCallResume]]:
    return [(target, ToolCallResume("d1", ResumeDecisionAction.RESUME, {"approved": True}))]


def reject(payload: Any) -> list[tuple[str, ToolCallResume]]:
    return [("perm_call-1", ToolCallResume("d1", ResumeDecisionAction.CANCEL, payload))]


def collapse(types: list[str]) -> list[str]:
    """Consecutive text deltas as one, the way the persisted log stores them."""
    out: list[str] = []
    for kind in types:
        if kind == "text_delta" and out and out[-1] == "text_delta":
            continue
        out.append(kind)
    return out


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["event_type"] == kind]


def assert_persisted_log_matches_stream(h: Harness) -> None:
    """The persisted log is the live stream with consecutive text deltas coalesced."""
    persisted = h.store.events["r1"]
    streamed = h.all_events()
    assert [e["event_type"] for e in persisted] == collapse([e["event_type"] for e in streamed])
    assert persisted == coalesce_deltas(streamed)
    persisted_text = "".join(e["delta"] for e in of_type(persisted, "text_delta"))
    assert persisted_text == "".join(e["delta"] for e in of_type(streamed, "text_delta"))


def assert_messages_appended_once(h: Harness, expected_count: int) -> None:
    ids = [message.id for message in h.messages]
    assert len(ids) == expected_count
    assert len(set(ids)) == expected_count


def tool_messages(messages: list[Message]) -> list[Message]:
    return [message for message in messages if message.role is Role.TOOL]


class FailingTool:
    def __init__(self, name: str = "boom") -> None:
        self.calls = 0
        self._descriptor = ToolDescriptor(name, "Always raises")

    @property
    def descriptor(self) -> ToolDescriptor:
        return self._descriptor

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        self.calls += 1
        raise RuntimeError("kaput")


class ListTool:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            "sum",
            "Adds integers",
            {
                "type": "object",
                "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
                "required": ["items"],
            },
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        self.calls.append(arguments)
        return ToolResult.success("sum", sum(arguments["items"]))


# --- text only -----------------------------------------------------------------------------------


def test_text_only_run_emits_start_step_deltas_and_natural_finish() -> None:
    h = make([text_turn("all done now")])
    sink, result = h.run()

    assert sink.types() == [
        "run_start",
        "step_start",
        "text_delta",
        "text_delta",
        "text_delta",
        *TEXT_STEP_TAIL,
        *RUN_TAIL,
    ]
    finish = sink.events[-1]
    assert finish["termination"] == {"type": "natural_end"}
    assert finish["result"] == {
        "response": "all done now",
        "status": "done",
        "status_reason": "natural",
    }
    assert finish["run_id"] == "r1"
    assert finish["thread_id"] == "t1"
    assert sink.events[0]["run_id"] == "r1"
    assert result.termination == TerminationReason.natural_end()
    assert result.response == "all done now"

    record = h.record
    assert record.status is RunStatus.DONE
    assert record.status_reason == "natural"
    assert record.termination_reason == TerminationReason.natural_end()
    assert record.final_output == "all done now"
    assert record.error_payload is None
    assert record.waiting is None
    assert record.finished_at is not None
    assert record.steps == 1
    assert_persisted_log_matches_stream(h)
    assert [e["event_type"] for e in h.store.events["r1"]].count("text_delta") == 1


def test_inference_complete_reports_model_usage_and_duration() -> None:
    usage = TokenUsage(prompt_tokens=7, completion_tokens=3, total_tokens=10)
    h = make([text_turn("hi", usage=usage)])
    sink, _ = h.run()

    (complete,) = of_type(sink.events, "inference_complete")
    assert complete["model"] == "m"
    assert complete["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert isinstance(complete["duration_ms"], int)
    assert (h.record.input_tokens, h.record.output_tokens) == (7, 3)


def test_every_state_snapshot_carries_the_persisted_state() -> None:
    h = make([text_turn("hi")])
    sink, _ = h.run()

    snapshots = of_type(sink.events, "state_snapshot")
    assert len(snapshots) == 2
    revisions = [s["snapshot"]["revision"] for s in snapshots]
    assert revisions == sorted(revisions)
    lifecycle = snapshots[-1]["snapshot"]["extensions"]["__runtime.run_lifecycle"]
    assert lifecycle["status"] == "done"
    assert lifecycle["status_reason"] == "natural"
    assert lifecycle["step_count"] == 1


# --- one auto-allowed tool call, then text -------------------------------------------------------


def test_allowed_tool_call_then_text_follows_reference_order() -> None:
    h = make([tool_turn("echo", {"message": "hi"}, "call-1", text="let me"), text_turn("done")])
    sink, _ = h.run()

    assert sink.types() == [
        "run_start",
        "step_start",
        "text_delta",
        "text_delta",
        *TOOL_STREAM,
        "inference_complete",
        "tool_call_done",
        "state_snapshot",
        "step_end",
        "step_start",
        "text_delta",
        *TEXT_STEP_TAIL,
        *RUN_TAIL,
    ]
    ready = of_type(sink.events, "tool_call_ready")[0]
    assert ready == {
        "event_type": "tool_call_ready",
        "id": "call-1",
        "name": "echo",
        "arguments": {"message": "hi"},
    }
    done = of_type(sink.events, "tool_call_done")[0]
    assert done["id"] == "call-1"
    assert done["outcome"] == "succeeded"
    assert done["result"]["status"] == "success"
    assert done["result"]["tool_name"] == "echo"
    assert done["result"]["data"] == {"message": "hi"}
    tool_message = tool_messages(h.messages)[0]
    assert done["message_id"] == tool_message.id

    assert h.tool().calls == [{"message": "hi"}]
    assert h.record.status_reason == "natural"
    assert h.record.final_output == "done"
    assert h.record.steps == 2
    assert h.store.tool_calls["r1"]["call-1"].status is ToolCallStatus.SUCCEEDED
    assert_persisted_log_matches_stream(h)
    assert_messages_appended_once(h, 4)


def test_tool_result_is_sent_to_the_model_on_the_next_inference() -> None:
    h = make([tool_turn("echo", {"message": "hi"}, "call-1"), text_turn("done")])
    h.run()

    second = h.llm.requests[1].messages
    assert [m.role for m in second] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert second[1].tool_calls is not None
    assert second[1].tool_calls[0].id == "call-1"
    assert second[2].tool_call_id == "call-1"
    assert json.loads(second[2].text()) == {"message": "hi"}


# --- permission ask → suspend --------------------------------------------------------------------


def suspended_harness(turns: list[Turn] | None = None, **kwargs: Any) -> Harness:
    h = make(
        turns
        or [tool_turn("echo", {"message": "hi"}, "call-1", text="let me"), text_turn("all done")],
        permission=kwargs.pop("permission", ASK_ALL),
        **kwargs,
    )
    h.run()
    return h


def test_permission_ask_suspends_the_run() -> None:
    h = make(
        [tool_turn("echo", {"message": "hi"}, "call-1", text="let me"), text_turn("all done")],
        permission=ASK_ALL,
    )
    sink, result = h.run()

    assert sink.types() == [
        "run_start",
        "step_start",
        "text_delta",
        "text_delta",
        *TOOL_STREAM,
        "inference_complete",
        "tool_call_done",
        "state_snapshot",
        "step_end",
        *RUN_TAIL,
    ]
    done = of_type(sink.events, "tool_call_done")[0]
    assert done["outcome"] == "suspended"
    assert done["result"]["status"] == "pending"
    assert done["result"]["message"] == "Tool 'echo' suspended: awaiting approval"
    ticket = done["result"]["suspension"]
    assert ticket["suspension"]["id"] == "perm_call-1"
    assert ticket["suspension"]["action"] == "tool:PermissionConfirm"
    assert ticket["pending"] == {
        "id": "perm_call-1",
        "name": "permission_confirm",
        "arguments": {"message": "hi"},
    }
    assert ticket["resume_mode"] == "replay_tool_call"

    finish = sink.events[-1]
    assert finish["termination"] == {"type": "suspended"}
    assert finish["result"]["status"] == "waiting"
    assert result.termination == TerminationReason.suspended()
    assert result.status is RunStatus.WAITING

    record = h.record
    assert record.status is RunStatus.WAITING
    assert record.status_reason == "suspended"
    assert record.finished_at is None
    assert record.waiting is not None
    assert record.waiting.reason is WaitingReason.TOOL_PERMISSION
    assert record.waiting.ticket_ids == ["perm_call-1"]
    assert record.waiting.message == "suspended"
    (waiting_ticket,) = record.waiting.tickets
    assert waiting_ticket.tool_call_id == "call-1"
    assert waiting_ticket.tool_name == "echo"
    assert waiting_ticket.arguments == {"message": "hi"}
    assert waiting_ticket.reason == "tool:PermissionConfirm"
    assert waiting_ticket.resume_mode is ToolCallResumeMode.REPLAY_TOOL_CALL

    call = h.store.tool_calls["r1"]["call-1"]
    assert call.status is ToolCallStatus.SUSPENDED
    assert call.suspension_id == "perm_call-1"
    assert call.suspension_reason == "tool:PermissionConfirm"
    assert h.tool().calls == []
    assert tool_messages(h.messages)[0].text() == "Tool 'echo' suspended: awaiting decision"
    assert_persisted_log_matches_stream(h)
    assert_messages_appended_once(h, 3)


@pytest.mark.parametrize("target", ["perm_call-1", "call-1"])
def test_approve_resumes_and_runs_the_tool_exactly_once(target: str) -> None:
    h = suspended_harness()
    sink, result = h.run(decisions=approve(target))

    assert sink.types() == [
        "run_start",
        "tool_call_resumed",
        "step_start",
        "text_delta",
        "text_delta",
        *TEXT_STEP_TAIL,
        *RUN_TAIL,
    ]
    assert sink.events[0]["run_id"] == "r1"
    resumed = sink.events[1]
    assert resumed == {
        "event_type": "tool_call_resumed",
        "target_id": "call-1",
        "result": {"message": "hi"},
    }
    assert sink.events[-1]["termination"] == {"type": "natural_end"}
    assert result.termination == TerminationReason.natural_end()
    assert h.tool().calls == [{"message": "hi"}]
    assert h.record.status is RunStatus.DONE
    assert h.record.status_reason == "natural"
    assert h.record.waiting is None
    assert h.record.final_output == "all done"
    assert h.store.tool_calls["r1"]["call-1"].status is ToolCallStatus.SUCCEEDED

    # the model sees the real result, not the placeholder
    second = h.llm.requests[1].messages
    answers = [m for m in second if m.role is Role.TOOL]
    assert len(answers) == 1
    assert json.loads(answers[0].text()) == {"message": "hi"}
    assert_persisted_log_matches_stream(h)
    assert_messages_appended_once(h, 5)


def test_decided_call_is_not_replayed_by_a_later_activation() -> None:
    """A second suspension in the same run must not re-run (or re-report) the first call."""
    h = suspended_harness(
        [
            tool_turn("echo", {"message": "1"}, "call-1"),
            tool_turn("echo", {"message": "2"}, "call-2"),
            text_turn("done"),
        ]
    )
    second, _ = h.run(decisions=approve())
    assert second.events[-1]["termination"] == {"type": "suspended"}
    assert h.record.waiting is not None
    assert h.record.waiting.ticket_ids == ["perm_call-2"]
    assert h.store.tool_calls["r1"]["call-1"].status is ToolCallStatus.SUCCEEDED

    third, _ = h.run(decisions=approve("perm_call-2"))

    assert [e["target_id"] for e in of_type(third.events, "tool_call_resumed")] == ["call-2"]
    assert h.tool().calls == [{"message": "1"}, {"message": "2"}]
    assert h.record.status_reason == "natural"
    assert_messages_appended_once(h, 8)


def test_rejection_reports_to_the_model_without_running_the_tool() -> None:
    payload = {"approved": False, "message": "Rejected by alice: too risky"}
    h = suspended_harness()
    sink, result = h.run(decisions=reject(payload))

    assert collapse(sink.types()) == [
        "run_start",
        "tool_call_resumed",
        "step_start",
        "text_delta",
        *TEXT_STEP_TAIL,
        *RUN_TAIL,
    ]
    assert sink.events[1] == {
        "event_type": "tool_call_resumed",
        "target_id": "call-1",
        "result": payload,
    }
    assert h.tool().calls == []
    assert result.termination == TerminationReason.natural_end()
    assert h.record.status_reason == "natural"

    second = h.llm.requests[1].messages
    answer = second[-1]
    assert answer.role is Role.TOOL
    assert answer.tool_call_id == "call-1"
    assert "Rejected by alice: too risky" in answer.text()
    assert json.loads(answer.text()) == payload

    call = h.store.tool_calls["r1"]["call-1"]
    assert call.status is ToolCallStatus.CANCELLED
    assert call.resume_input is None
    assert_persisted_log_matches_stream(h)
    assert_messages_appended_once(h, 5)


def test_rejection_without_payload_reports_null() -> None:
    h = suspended_harness()
    sink, _ = h.run(decisions=reject(None))

    assert sink.events[1]["result"] is None
    assert h.llm.requests[1].messages[-1].text() == "null"


def test_edited_arguments_are_what_the_tool_runs_with() -> None:
    h = suspended_harness()
    h.store.tool_calls["r1"]["call-1"].arguments = {"message": "edited"}
    sink, _ = h.run(decisions=approve())

    assert h.tool().calls == [{"message": "edited"}]
    assert sink.events[1]["result"] == {"message": "edited"}
    assert json.loads(h.llm.requests[1].messages[-1].text()) == {"message": "edited"}
    assert h.store.tool_calls["r1"]["call-1"].arguments == {"message": "edited"}


def test_edited_arguments_failing_the_schema_fail_the_call_and_the_run_continues() -> None:
    h = suspended_harness()
    h.store.tool_calls["r1"]["call-1"].arguments = {"message": 42}
    sink, _ = h.run(decisions=approve())

    assert h.tool().calls == []
    error = sink.events[1]["result"]["error"]
    assert "Invalid arguments for tool 'echo'" in error
    assert "message" in error
    assert h.store.tool_calls["r1"]["call-1"].status is ToolCallStatus.FAILED
    assert h.record.status_reason == "natural"


def test_respond_uses_the_payload_as_the_tool_result() -> None:
    h = suspended_harness()
    h.store.tool_calls["r1"]["call-1"].resume_mode = ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT
    answer = {"answer": 42}
    sink, _ = h.run(
        decisions=[("perm_call-1", ToolCallResume("d1", ResumeDecisionAction.RESUME, answer))]
    )

    assert h.tool().calls == []
    assert sink.events[1] == {
        "event_type": "tool_call_resumed",
        "target_id": "call-1",
        "result": answer,
    }
    last = h.llm.requests[1].messages[-1]
    assert last.tool_call_id == "call-1"
    assert json.loads(last.text()) == answer
    assert h.store.tool_calls["r1"]["call-1"].status is ToolCallStatus.SUCCEEDED
    assert h.record.status_reason == "natural"


def test_resume_without_a_decision_stays_suspended() -> None:
    h = suspended_harness()
    sink, result = h.run()

    assert sink.types() == ["run_start", *RUN_TAIL]
    assert result.termination == TerminationReason.suspended()
    assert h.record.status is RunStatus.WAITING
    assert h.record.waiting is not None
    assert h.record.waiting.ticket_ids == ["perm_call-1"]
    assert len(h.llm.requests) == 1


def test_unknown_decision_target_is_rejected() -> None:
    h = suspended_harness()
    with pytest.raises(KeyError, match="tool call or suspension perm_nope not found"):
        h.run(decisions=approve("perm_nope"))


def test_ask_suspends_each_call_of_a_step_with_its_own_ticket() -> None:
    turn = Turn(
        tool_calls=[
            {"id": "call-2", "name": "echo", "arguments": {"message": "b"}},
            {"id": "call-1", "name": "echo", "arguments": {"message": "a"}},
        ]
    )
    h = make([turn, text_turn("done")], permission=ASK_ALL)
    sink, _ = h.run()

    assert [e["outcome"] for e in of_type(sink.events, "tool_call_done")] == ["suspended"] * 2
    assert h.record.waiting is not None
    # tickets are sorted by tool call id
    assert h.record.waiting.ticket_ids == ["perm_call-1", "perm_call-2"]

    rejection = ToolCallResume("d2", ResumeDecisionAction.CANCEL, {"approved": False})
    decisions = [*approve("perm_call-1"), ("perm_call-2", rejection)]
    resumed, _ = h.run(decisions=decisions)
    assert [e["target_id"] for e in of_type(resumed.events, "tool_call_resumed")] == [
        "call-2",
        "call-1",
    ]  # rejections are reported first, then the approved calls run
    assert h.tool().calls == [{"message": "a"}]
    assert h.record.status_reason == "natural"


class AskHumanTool:
    """Suspends itself (executor suspension); the operator's answer becomes the result."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            "ask_human",
            "Asks a human",
            {"type": "object", "properties": {"question": {"type": "string"}}},
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        self.calls.append(arguments)
        ticket = SuspendTicket(
            Suspension(f"suspend_{ctx.call_id}", "tool:ask_human"),
            PendingToolCall(ctx.call_id, "ask_human", arguments),
            ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT,
        )
        return ToolResult.pending("ask_human", ticket, "waiting for a human")


def test_a_tool_suspending_itself_stops_the_batch_and_its_answer_is_the_result() -> None:
    turn = Turn(
        tool_calls=[
            {"id": "call-1", "name": "ask_human", "arguments": {"question": "colour?"}},
            {"id": "call-2", "name": "echo", "arguments": {"message": "x"}},
        ]
    )
    h = make([turn, text_turn("thanks")], tools=[AskHumanTool(), EchoTool()])
    sink, _ = h.run()

    outcomes = [(e["id"], e["outcome"]) for e in of_type(sink.events, "tool_call_done")]
    assert outcomes == [("call-1", "suspended"), ("call-2", "failed")]
    assert tool_messages(h.messages)[1].text() == "[Tool execution was interrupted]"
    assert h.tool("echo").calls == []
    assert h.record.waiting is not None
    (ticket,) = h.record.waiting.tickets
    assert ticket.ticket_id == "suspend_call-1"
    assert ticket.reason == "tool:ask_human"
    assert ticket.resume_mode is ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT

    answer = {"answer": "blue"}
    resumed, _ = h.run(
        decisions=[("suspend_call-1", ToolCallResume("d1", ResumeDecisionAction.RESUME, answer))]
    )

    assert resumed.events[1] == {
        "event_type": "tool_call_resumed",
        "target_id": "call-1",
        "result": answer,
    }
    assert h.tool("ask_human").calls == [{"question": "colour?"}]  # not re-run on resume
    answers = [m for m in h.llm.requests[1].messages if m.tool_call_id == "call-1"]
    assert [json.loads(m.text()) for m in answers] == [answer]
    assert h.record.status_reason == "natural"
    assert_persisted_log_matches_stream(h)


# --- cancellation --------------------------------------------------------------------------------


def test_cancel_while_streaming_closes_the_step_and_ends_cancelled() -> None:
    words = " ".join(f"w{i}" for i in range(10))
    h = make([text_turn(words, delay=3.0)])
    token = CancellationToken()
    timer = threading.Timer(0.5, token.cancel)
    timer.start()
    try:
        sink, result = h.run(cancel=token)
    finally:
        timer.cancel()

    deltas = sink.types().count("text_delta")
    assert deltas < 10, "the stream must stop early"
    assert [t for t in sink.types() if t != "text_delta"] == [
        "run_start",
        "step_start",
        *TEXT_STEP_TAIL,
        *RUN_TAIL,
    ]
    assert sink.types()[-5:] == [*TEXT_STEP_TAIL, *RUN_TAIL]
    finish = sink.events[-1]
    assert finish["termination"] == {"type": "cancelled"}
    assert finish["result"]["status"] == "done"
    assert finish["result"]["status_reason"] == "cancelled"
    assert result.termination == TerminationReason.cancelled()
    assert h.record.status is RunStatus.DONE
    assert h.record.status_reason == "cancelled"
    assert h.record.termination_reason == TerminationReason.cancelled()
    assert h.record.finished_at is not None
    assert_persisted_log_matches_stream(h)


def test_cancel_before_the_first_step_runs_no_inference() -> None:
    h = make([text_turn("never")])
    token = CancellationToken()
    token.cancel()
    sink, result = h.run(cancel=token)

    assert sink.types() == ["run_start", *RUN_TAIL]
    assert sink.events[-1]["termination"] == {"type": "cancelled"}
    assert result.termination == TerminationReason.cancelled()
    assert h.llm.requests == []
    assert h.record.status is RunStatus.DONE
    assert h.record.status_reason == "cancelled"
    assert h.record.steps == 0
    assert_persisted_log_matches_stream(h)


def test_cancel_during_a_tool_interrupts_the_rest_of_the_batch() -> None:
    token = CancellationToken()

    class CancellingTool(EchoTool):
        def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
            token.cancel()
            return super().execute(arguments, ctx)

    turn = Turn(
        tool_calls=[
            {"id": "call-1", "name": "echo", "arguments": {"message": "a"}},
            {"id": "call-2", "name": "echo", "arguments": {"message": "b"}},
        ]
    )
    h = make([turn, text_turn("never")], tools=[CancellingTool()])
    sink, result = h.run(cancel=token)

    assert result.termination == TerminationReason.cancelled()
    assert h.tool().calls == [{"message": "a"}]
    outcomes = [(e["id"], e["outcome"]) for e in of_type(sink.events, "tool_call_done")]
    assert outcomes == [("call-1", "succeeded"), ("call-2", "failed")]
    assert tool_messages(h.messages)[1].text() == "[Tool execution was interrupted]"
    assert sink.types()[-4:] == ["state_snapshot", "step_end", *RUN_TAIL]
    assert len(h.llm.requests) == 1
    assert h.record.status_reason == "cancelled"


# --- deny ----------------------------------------------------------------------------------------


def test_deny_rule_blocks_the_run_and_interrupts_remaining_calls() -> None:
    turn = Turn(
        tool_calls=[
            {"id": "call-1", "name": "echo", "arguments": {"message": "a"}},
            {"id": "call-2", "name": "echo", "arguments": {"message": "b"}},
        ]
    )
    h = make(
        [turn, text_turn("never")],
        permission={"default_behavior": "allow", "rules": [{"tool": "echo", "behavior": "deny"}]},
    )
    sink, result = h.run()

    assert sink.types() == [
        "run_start",
        "step_start",
        "tool_call_start",
        "tool_call_delta",
        "tool_call_start",
        "tool_call_delta",
        "tool_call_ready",
        "tool_call_ready",
        "inference_complete",
        "tool_call_done",
        "tool_call_done",
        "state_snapshot",
        "step_end",
        *RUN_TAIL,
    ]
    first, second = of_type(sink.events, "tool_call_done")
    assert (first["id"], first["outcome"]) == ("call-1", "failed")
    assert first["result"]["message"] == "Tool 'echo' denied by permission rules"
    assert (second["id"], second["outcome"]) == ("call-2", "failed")
    assert second["result"]["message"] == "[Tool execution was interrupted]"

    reason = "Tool 'echo' denied by permission rules"
    assert sink.events[-1]["termination"] == {"type": "blocked", "value": reason}
    assert result.termination == TerminationReason.blocked(reason)
    assert h.record.status is RunStatus.DONE
    assert h.record.status_reason == f"blocked:{reason}"
    assert h.tool().calls == []
    assert len(h.llm.requests) == 1
    assert [m.text() for m in tool_messages(h.messages)] == [
        reason,
        "[Tool execution was interrupted]",
    ]
    calls = h.store.tool_calls["r1"]
    assert calls["call-1"].status is ToolCallStatus.FAILED
    assert calls["call-2"].status is ToolCallStatus.FAILED
    assert_persisted_log_matches_stream(h)


def test_allowed_call_before_a_denied_one_still_runs() -> None:
    turn = Turn(
        tool_calls=[
            {"id": "call-1", "name": "echo", "arguments": {"message": "a"}},
            {"id": "call-2", "name": "rm", "arguments": {"message": "b"}},
            {"id": "call-3", "name": "echo", "arguments": {"message": "c"}},
        ]
    )
    h = make(
        [turn],
        tools=[EchoTool("echo"), EchoTool("rm")],
        permission={
            "default_behavior": "ask",
            "rules": [
                {"tool": "echo", "behavior": "allow"},
                {"tool": 'rm(message ~ "*")', "behavior": "deny"},
            ],
        },
    )
    sink, _ = h.run()

    assert h.tool("echo").calls == [{"message": "a"}]
    assert h.tool("rm").calls == []
    outcomes = [e["outcome"] for e in of_type(sink.events, "tool_call_done")]
    assert outcomes == ["succeeded", "failed", "failed"]
    assert h.record.status_reason == "blocked:Tool 'rm' denied by permission rules"


# --- stop policies -------------------------------------------------------------------------------


def test_max_rounds_stops_after_the_inference_that_exceeds_it() -> None:
    h = make([tool_turn("echo", {"message": "x"}, f"call-{i}") for i in range(5)], max_rounds=2)
    sink, result = h.run()

    assert len(h.llm.requests) == 3
    assert h.tool().calls == [{"message": "x"}] * 2
    step = ["step_start", *TOOL_STREAM, "inference_complete"]
    assert sink.types() == [
        "run_start",
        *step,
        "tool_call_done",
        "state_snapshot",
        "step_end",
        *step,
        "tool_call_done",
        "state_snapshot",
        "step_end",
        *step,
        "state_snapshot",
        "step_end",
        *RUN_TAIL,
    ]
    termination = sink.events[-1]["termination"]
    assert termination["type"] == "stopped"
    assert termination["value"]["code"] == "max_rounds"
    assert result.termination.type == "stopped"
    assert h.record.status is RunStatus.DONE
    assert h.record.status_reason == "stopped:max_rounds"
    assert h.record.steps == 3
    assert "call-2" not in h.store.tool_calls["r1"]
    assert_persisted_log_matches_stream(h)


def test_default_max_rounds_is_sixteen() -> None:
    h = make([tool_turn("echo", {"message": "x"}, f"call-{i}") for i in range(20)])
    h.run()

    assert len(h.llm.requests) == 17
    assert h.record.status_reason == "stopped:max_rounds"


def test_token_budget_stops_once_the_total_is_exceeded() -> None:
    usage = TokenUsage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
    turns = [tool_turn("echo", {"message": "x"}, f"call-{i}", usage=usage) for i in range(4)]
    h = make(turns, stop_conditions=[{"type": "token_budget", "max_total": 25}])
    sink, _ = h.run()

    assert len(h.llm.requests) == 2
    assert h.tool().calls == [{"message": "x"}]
    assert h.record.status_reason == "stopped:token_budget"
    assert sink.events[-1]["termination"]["value"]["code"] == "token_budget"
    assert (h.record.input_tokens, h.record.output_tokens) == (20, 10)


def test_token_budget_at_exactly_the_limit_does_not_stop() -> None:
    usage = TokenUsage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
    turns = [
        tool_turn("echo", {"message": "x"}, "call-1", usage=usage),
        text_turn("ok", usage=usage),
    ]
    h = make(turns, stop_conditions=[{"type": "token_budget", "max_total": 30}])
    h.run()

    assert h.record.status_reason == "natural"


def test_consecutive_errors_stop_the_run() -> None:
    turns = [tool_turn("boom", {}, f"call-{i}") for i in range(5)]
    h = make(
        turns, tools=[FailingTool()], stop_conditions=[{"type": "consecutive_errors", "max": 2}]
    )
    sink, _ = h.run()

    assert h.tool("boom").calls == 2
    assert len(h.llm.requests) == 3
    assert h.record.status_reason == "stopped:consecutive_errors"
    assert sink.events[-1]["termination"]["value"]["code"] == "consecutive_errors"


def test_a_successful_step_resets_the_consecutive_error_count() -> None:
    turns = [
        tool_turn("boom", {}, "call-1"),
        tool_turn("echo", {"message": "ok"}, "call-2"),
        tool_turn("boom", {}, "call-3"),
        text_turn("done"),
    ]
    h = make(
        turns,
        tools=[FailingTool(), EchoTool()],
        stop_conditions=[{"type": "consecutive_errors", "max": 2}],
    )
    h.run()

    assert h.record.status_reason == "natural"
    assert h.tool("boom").calls == 2


# --- steps do not reset on resume ----------------------------------------------------------------


def test_steps_count_every_step_across_activations() -> None:
    h = suspended_harness()
    assert h.record.steps == 1

    sink, result = h.run(decisions=approve())

    assert result.steps == 2
    assert h.record.steps == 2
    snapshot = of_type(sink.events, "state_snapshot")[-1]["snapshot"]
    assert snapshot["extensions"]["__runtime.run_lifecycle"]["step_count"] == 2
    produced = [(m.role, m.step_index) for m in h.messages if m.run_id == "r1"]
    assert produced == [
        (Role.ASSISTANT, 0),
        (Role.TOOL, 0),
        (Role.TOOL, 1),
        (Role.ASSISTANT, 1),
    ]


def test_max_rounds_counts_inferences_across_activations() -> None:
    h = suspended_harness(
        [tool_turn("echo", {"message": "x"}, "call-1"), text_turn("never")], max_rounds=1
    )
    h.run(decisions=approve())

    assert h.tool().calls == [{"message": "x"}]
    assert h.record.status_reason == "stopped:max_rounds"
    assert h.record.steps == 2


# --- bad model output and failing tools: a clear error, a defined state --------------------------


def test_malformed_tool_call_json_fails_the_call_and_the_run_continues() -> None:
    turn = Turn(
        tool_calls=[{"id": "call-1", "name": "echo", "arguments": {}}],
        raw_arguments={"call-1": '{"message": '},
    )
    h = make([turn, text_turn("recovered")])
    sink, result = h.run()

    ready = of_type(sink.events, "tool_call_ready")[0]
    assert ready["arguments"] == '{"message":'  # the raw text, as streamed (trimmed)
    done = of_type(sink.events, "tool_call_done")[0]
    assert done["outcome"] == "failed"
    assert done["result"]["status"] == "error"
    assert done["result"]["message"].startswith("Invalid JSON in tool call arguments")
    assert h.tool().calls == []
    assert result.termination == TerminationReason.natural_end()
    assert h.record.final_output == "recovered"
    assert h.store.tool_calls["r1"]["call-1"].status is ToolCallStatus.FAILED
    # the model is told what went wrong
    assert "Invalid JSON" in h.llm.requests[1].messages[-1].text()


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "42"])
def test_tool_call_arguments_must_be_a_json_object(raw: str) -> None:
    turn = Turn(tool_calls=[{"id": "call-1", "name": "echo"}], raw_arguments={"call-1": raw})
    h = make([turn, text_turn("ok")])
    sink, _ = h.run()

    done = of_type(sink.events, "tool_call_done")[0]
    assert done["outcome"] == "failed"
    assert "Invalid JSON" in done["result"]["message"]
    assert h.tool().calls == []


def test_empty_tool_call_arguments_mean_an_empty_object() -> None:
    turn = Turn(tool_calls=[{"id": "call-1", "name": "echo"}], raw_arguments={"call-1": ""})
    h = make([turn, text_turn("ok")])
    h.run()

    assert h.tool().calls == [{}]


def test_unknown_tool_fails_the_call_and_the_run_continues() -> None:
    h = make([tool_turn("nope", {}, "call-1"), text_turn("ok")])
    sink, result = h.run()

    done = of_type(sink.events, "tool_call_done")[0]
    assert done["outcome"] == "failed"
    assert "Unknown tool 'nope'" in done["result"]["message"]
    assert "echo" in done["result"]["message"]  # names what is available
    assert result.termination == TerminationReason.natural_end()


def test_arguments_failing_the_schema_fail_the_call_naming_the_path() -> None:
    tool = ListTool()
    h = make(
        [
            Turn(
                tool_calls=[
                    {"id": "call-1", "name": "sum", "arguments": {"items": [1, "two"]}},
                    {"id": "call-2", "name": "sum", "arguments": {}},
                    {"id": "call-3", "name": "sum", "arguments": {"items": [1, 2]}},
                ]
            ),
            text_turn("ok"),
        ],
        tools=[tool],
    )
    sink, result = h.run()

    first, second, third = of_type(sink.events, "tool_call_done")
    assert first["outcome"] == "failed"
    assert "Invalid arguments for tool 'sum' at items/1" in first["result"]["message"]
    assert second["outcome"] == "failed"
    assert "(root)" in second["result"]["message"]
    assert "items" in second["result"]["message"]
    assert third["outcome"] == "succeeded"
    assert tool.calls == [{"items": [1, 2]}]
    assert result.termination == TerminationReason.natural_end()


class BrokenSchemaTool(ListTool):
    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor("sum", "Adds integers", {"type": "not-a-type"})


def test_a_tool_with_a_broken_schema_fails_every_call_and_never_runs() -> None:
    tool = BrokenSchemaTool()
    calls = [{"id": f"call-{i}", "name": "sum", "arguments": {"items": [i]}} for i in (1, 2)]
    h = make([Turn(tool_calls=calls), text_turn("ok")], tools=[tool])
    sink, result = h.run()

    # the second call meets the same error: a broken schema is never cached as checked
    for done in of_type(sink.events, "tool_call_done"):
        assert done["outcome"] == "failed"
        assert "Tool 'sum' has a broken schema" in done["result"]["message"]
    assert tool.calls == []
    assert result.termination == TerminationReason.natural_end()


def test_model_error_ends_the_run_with_error_payload() -> None:
    h = make([Turn(error="provider exploded")])
    sink, result = h.run()

    assert sink.types() == ["run_start", "step_start", "state_snapshot", "step_end", *RUN_TAIL]
    finish = sink.events[-1]
    assert finish["termination"] == {"type": "error", "value": "provider exploded"}
    assert finish["result"]["status"] == "done"
    assert finish["result"]["status_reason"] == "error"
    assert result.termination == TerminationReason.error("provider exploded")
    record = h.record
    assert record.status is RunStatus.DONE
    assert record.status_reason == "error"
    assert record.termination_reason == TerminationReason.error("provider exploded")
    assert record.error_payload == {"message": "provider exploded"}
    assert record.final_output is None
    assert_persisted_log_matches_stream(h)


def test_a_crashing_model_client_is_an_error_not_a_crash() -> None:
    class BrokenLlm:
        name = "broken"

        def stream(self, request: Any, cancel: Any) -> Any:
            raise RuntimeError("socket closed")

    h = make([])
    h.agent.llm = BrokenLlm()
    _, result = h.run()

    assert result.termination.type == "error"
    assert "socket closed" in result.termination.value
    assert h.record.error_payload == {"message": result.termination.value}


def test_model_error_after_a_tool_step_keeps_the_earlier_output() -> None:
    h = make([tool_turn("echo", {"message": "x"}, "call-1"), Turn(error="rate limited")])
    h.run()

    assert h.record.status_reason == "error"
    assert h.record.error_payload == {"message": "rate limited"}
    assert h.record.steps == 2
    assert_messages_appended_once(h, 3)


def test_model_error_is_a_model_error_subclass_of_exception() -> None:
    assert issubclass(ModelError, Exception)


def test_a_raising_tool_fails_the_call_and_the_run_continues() -> None:
    h = make([tool_turn("boom", {}, "call-1"), text_turn("after")], tools=[FailingTool()])
    sink, result = h.run()

    done = of_type(sink.events, "tool_call_done")[0]
    assert done["outcome"] == "failed"
    assert done["result"]["message"] == "Tool 'boom' failed: kaput"
    assert result.termination == TerminationReason.natural_end()
    assert h.record.final_output == "after"
    assert h.store.tool_calls["r1"]["call-1"].status is ToolCallStatus.FAILED


# --- append-only checkpoints, ranges and produced-by stamps --------------------------------------


def test_suspend_and_resume_append_each_message_once() -> None:
    h = suspended_harness()
    after_suspend = [m.id for m in h.messages]
    assert len(after_suspend) == 3

    h.run(decisions=approve())

    ids = [m.id for m in h.messages]
    assert ids[:3] == after_suspend
    assert_messages_appended_once(h, 5)
    assert [m.role for m in h.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
        Role.ASSISTANT,
    ]


def test_input_and_output_ranges_after_suspend_and_resume() -> None:
    h = suspended_harness()
    record = h.record
    assert record.input is not None
    assert record.input.range == MessageSeqRange(1, 1)
    assert record.output is not None
    assert record.output.range == MessageSeqRange(2, 3)
    assert record.output.message_ids == [m.id for m in h.messages[1:3]]

    h.run(decisions=approve())

    record = h.record
    assert record.input is not None
    assert record.input.range == MessageSeqRange(1, 1)  # carried forward, not re-derived
    assert record.output is not None
    assert record.output.thread_id == "t1"
    assert record.output.range == MessageSeqRange(2, 5)
    assert record.output.message_ids == [m.id for m in h.messages[1:]]
    assert len(record.output.range) == len(record.output.message_ids)


def test_output_messages_are_stamped_with_run_and_step() -> None:
    h = make(
        [
            tool_turn("echo", {"message": "a"}, "call-1", text="first"),
            tool_turn("echo", {"message": "b"}, "call-2"),
            text_turn("done"),
        ]
    )
    h.run()

    stamps = [(m.role, m.run_id, m.step_index) for m in h.messages]
    assert stamps == [
        (Role.USER, None, None),
        (Role.ASSISTANT, "r1", 0),
        (Role.TOOL, "r1", 0),
        (Role.ASSISTANT, "r1", 1),
        (Role.TOOL, "r1", 1),
        (Role.ASSISTANT, "r1", 2),
    ]


def test_a_later_run_on_the_same_thread_keeps_earlier_stamps() -> None:
    h = make([text_turn("first answer"), text_turn("second answer")])
    h.run()
    h.store.append_messages("t1", [Message.user("again")])
    h.store.runs["r2"] = RunRecord(run_id="r2", thread_id="t1", agent_id="a")

    AgentLoop(
        agent=h.agent,
        identity=RunIdentity("t1", "r2", "a"),
        messages=h.store.load_messages("t1"),
        sink=RecordingSink(),
        store=h.store,
        previous=h.store.load_run("r2"),
    ).run()

    stamps = [(m.role, m.run_id, m.step_index) for m in h.messages]
    assert stamps == [
        (Role.USER, None, None),
        (Role.ASSISTANT, "r1", 0),
        (Role.USER, None, None),
        (Role.ASSISTANT, "r2", 0),
    ]
    second = h.store.runs["r2"]
    assert second.input is not None
    assert second.input.range == MessageSeqRange(1, 3)
    assert second.output is not None
    assert second.output.range == MessageSeqRange(4, 4)
    assert second.output.message_ids == [h.messages[3].id]
    assert h.store.runs["r1"].output is not None
    assert h.store.runs["r1"].output.range == MessageSeqRange(2, 2)


def test_a_stale_checkpoint_is_refused() -> None:
    from runs.runtime.ports import VersionConflictError

    h = make([text_turn("hi")])
    loop = AgentLoop(
        agent=h.agent,
        identity=RunIdentity("t1", "r1", "a"),
        messages=h.store.load_messages("t1"),
        sink=RecordingSink(),
        store=h.store,
        previous=h.store.load_run("r1"),
    )
    h.store.append_messages("t1", [Message.user("written meanwhile")])
    with pytest.raises(VersionConflictError):
        loop.run()
