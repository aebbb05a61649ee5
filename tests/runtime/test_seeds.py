"""The upstream runtime's own test cases, ported to this Python runtime as acceptance
cases: those of its checkpoint, its execution backends and its local backend."""

from __future__ import annotations

from typing import Any

from runs.runtime.backends import (
    BackendDelegateRunRequest,
    BackendParentContext,
    LocalBackend,
)
from runs.runtime.materialize import materialize_message_log
from runs.runtime.ports import NullEventSink, ToolCallContext
from runs.runtime.testing import FixedResolver, ScriptedLlm, agent, text_turn, tool_turn
from runs.runtime.types import (
    BackendRunStatus,
    BackendRunStatusKind,
    Message,
    MessageSeqRange,
    RunMessageInput,
    RunMessageOutput,
    RunRecord,
    RunStatus,
    TerminationReason,
    ToolCallResumeMode,
    ToolCallState,
    ToolCallStatus,
    ToolDescriptor,
    ToolResult,
    WaitingReason,
    waiting_state_from_lifecycle,
    waiting_tickets_from_states,
)

# --- upstream's checkpoint cases -----------------------------------------------------------------


def test_waiting_state_persists_suspended_tool_tickets() -> None:
    state = (
        ToolCallState("call-1", "dangerous", {"path": "/tmp/x"}, ToolCallStatus.SUSPENDED, 123)
        .with_resume_mode(ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT)
        .with_suspension("ticket-1", "approval")
    )

    waiting = waiting_state_from_lifecycle(
        RunStatus.WAITING,
        "suspended",
        "dispatch-1",
        waiting_tickets_from_states({"call-1": state}),
    )

    assert waiting is not None
    assert waiting.reason is WaitingReason.TOOL_PERMISSION
    assert waiting.ticket_ids == ["ticket-1"]
    assert len(waiting.tickets) == 1
    ticket = waiting.tickets[0]
    assert ticket.tool_call_id == "call-1"
    assert ticket.tool_name == "dangerous"
    assert ticket.arguments == {"path": "/tmp/x"}
    assert ticket.resume_mode is ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT
    assert ticket.reason == "approval"
    assert ticket.updated_at == 123
    assert waiting.since_dispatch_id == "dispatch-1"


def test_waiting_ticket_falls_back_to_tool_call_id_without_suspension_id() -> None:
    state = ToolCallState(
        "call-without-ticket", "plain_suspend", {"x": 1}, ToolCallStatus.SUSPENDED, 456
    )

    waiting = waiting_state_from_lifecycle(
        RunStatus.WAITING,
        "suspended",
        None,
        waiting_tickets_from_states({"call-without-ticket": state}),
    )

    assert waiting is not None
    assert waiting.ticket_ids == ["call-without-ticket"]
    assert waiting.tickets[0].ticket_id == "call-without-ticket"
    assert waiting.tickets[0].tool_call_id == "call-without-ticket"


def test_materialize_message_log_preserves_output_across_same_run_resume() -> None:
    old_output = Message.assistant("before wait")
    old_output.id = "m-old-output"
    old_output.run_id = "run-1"
    old_output.step_index = 0
    new_output = Message.assistant("after resume")
    new_output.id = "m-new-output"
    messages = [
        Message.user("first input"),
        old_output,
        Message.user("resume input"),
        new_output,
    ]
    previous = RunRecord(
        run_id="run-1",
        thread_id="thread-1",
        agent_id="agent",
        input=RunMessageInput(
            thread_id="thread-1",
            range=MessageSeqRange.new(1, 3),
            trigger_message_ids=["resume input"],
        ),
        output=RunMessageOutput(
            thread_id="thread-1",
            range=MessageSeqRange.new(2, 2),
            message_ids=["m-old-output"],
        ),
        status=RunStatus.WAITING,
        created_at=1,
        updated_at=1,
        steps=1,
    )

    _, output = materialize_message_log(messages, previous, "run-1", "thread-1", 2, 0)

    assert output is not None, "output should be preserved and extended"
    assert output.message_ids == ["m-old-output", "m-new-output"]
    assert output.range == MessageSeqRange.new(2, 4)
    assert messages[3].produced_by_run_id() == "run-1"
    # docs/run-model.md's example: the new message is stamped step 1, the old keeps step 0.
    assert messages[3].step_index == 1
    assert messages[1].step_index == 0


# --- upstream's execution backend cases ----------------------------------------------------------


def test_backend_status_timeout_is_first_class_at_runtime_boundary() -> None:
    status = BackendRunStatus.timeout()
    termination = TerminationReason.error("polling timeout exceeded")

    assert status.durable_run_status(termination) is RunStatus.DONE
    assert status.durable_status_reason(termination) == "timeout"
    assert status.result_status_label(termination) == "timeout"


def test_backend_status_waiting_is_first_class_at_runtime_boundary() -> None:
    status = BackendRunStatus.waiting_input("need details")
    termination = TerminationReason.error("should not win")

    assert status.durable_run_status(termination) is RunStatus.WAITING
    assert status.durable_status_reason(termination) == "input_required"
    assert status.result_status_label(termination) == "waiting_input"


# --- upstream's local backend cases --------------------------------------------------------------


class BindingPlugin:
    name = "binding-plugin"

    def __init__(self) -> None:
        self.bind_count = 0

    def bind_runtime_context(self, state: Any) -> None:
        self.bind_count += 1


class MessageEchoTool:
    """The seed's EchoTool: succeeds with its arguments and a message that must not win."""

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor("echo", "Echoes input back")

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        return ToolResult.success("echo", arguments, "tool result should not win")


def _delegate_request(resolver: FixedResolver, prompt: str) -> BackendDelegateRunRequest:
    return BackendDelegateRunRequest(
        agent_id="delegate",
        messages=[Message.user(prompt)],
        sink=NullEventSink(),
        resolver=resolver,
        parent=BackendParentContext(
            parent_run_id="parent-run",
            parent_thread_id="parent-thread",
            parent_tool_call_id="tool-1",
        ),
    )


def test_execute_delegate_binds_plugin_runtime_context() -> None:
    plugin = BindingPlugin()
    delegate = agent("delegate", ScriptedLlm([text_turn("delegated response")]), plugins=[plugin])
    resolver = FixedResolver({"delegate": delegate})

    result = LocalBackend().execute_delegate(_delegate_request(resolver, "hello"))

    assert result.status.kind is BackendRunStatusKind.COMPLETED
    assert plugin.bind_count == 1


def test_execute_delegate_returns_final_non_tool_message_after_tool_output() -> None:
    llm = ScriptedLlm(
        [
            tool_turn("echo", {"message": "tool result should not win"}, "call-1", text="checking"),
            text_turn("final child answer"),
        ]
    )
    delegate = agent("delegate", llm).with_tool(MessageEchoTool())
    resolver = FixedResolver({"delegate": delegate})

    result = LocalBackend().execute_delegate(_delegate_request(resolver, "delegate with a tool"))

    assert result.status.kind is BackendRunStatusKind.COMPLETED
    assert result.response == "final child answer"
    assert result.output.text == "final child answer"
    assert result.steps == 2
