"""Steer on the pure runtime: input sent to a running run is delivered at its next step
boundary (after a step's checkpoint, before the next inference), so the model reads it;
a run that ends first leaves it undelivered (the ORM store queues it for the next run)."""

from __future__ import annotations

from typing import Any

from runs.runtime.loop import AgentLoop, RunIdentity
from runs.runtime.ports import ToolCallContext
from runs.runtime.testing import (
    EchoTool,
    InMemoryStore,
    RecordingSink,
    ScriptedLlm,
    agent,
    text_turn,
    tool_turn,
)
from runs.runtime.types import Message, Role, RunRecord, RunStatus, ToolResult


class SteeringTool(EchoTool):
    """Sends steer input to the run while its step runs (as a client would)."""

    def __init__(self, store: InMemoryStore, text: str) -> None:
        super().__init__("work")
        self.store, self.text = store, text

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        self.store.send_input(ctx.run_id, [Message.user(self.text)])
        return super().execute(arguments, ctx)


def run_with(turns: list[Any], store: InMemoryStore, tool: Any) -> tuple[ScriptedLlm, Any, Any]:
    llm = ScriptedLlm(turns)
    resolved = agent("a", llm).with_tool(tool)
    sink = RecordingSink()
    result = AgentLoop(
        agent=resolved,
        identity=RunIdentity("t1", "r1", "a"),
        messages=store.load_messages("t1"),
        sink=sink,
        store=store,
        previous=store.load_run("r1"),
    ).run()
    return llm, sink, result


def fresh_store() -> InMemoryStore:
    store = InMemoryStore()
    store.append_messages("t1", [Message.user("start")])
    store.runs["r1"] = RunRecord(run_id="r1", thread_id="t1", agent_id="a")
    return store


def texts(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role.value, m.text()) for m in messages]


def test_a_steer_message_is_in_the_models_input_at_the_next_step():
    store = fresh_store()
    tool = SteeringTool(store, "also mention the weather")
    llm, _, result = run_with(
        [tool_turn("work", {"message": "x"}, "c1"), text_turn("done, and sunny")], store, tool
    )
    assert result.status is RunStatus.DONE
    first, second = llm.requests
    assert ("user", "also mention the weather") not in texts(first.messages)
    # the next inference reads it, after the tool result of the step it arrived in
    assert texts(second.messages)[-1] == ("user", "also mention the weather")
    assert second.messages[-2].role is Role.TOOL
    # the log holds it once, in that place, and the event log records the delivery
    log = texts(store.messages["t1"])
    assert log.count(("user", "also mention the weather")) == 1
    assert log.index(("user", "also mention the weather")) == 3
    events = [e["event_type"] for e in store.events["r1"]]
    delivered = events.index("input_delivered")
    assert events[delivered - 1] == "step_end"
    assert events[delivered + 1] == "step_start"
    event = store.events["r1"][delivered]
    assert event["boundary"] == "next_step" and event["mode"] == "steer"


def test_input_sent_during_the_last_step_is_not_delivered_to_the_ending_run():
    store = fresh_store()
    llm = ScriptedLlm([text_turn("finished")])
    resolved = agent("a", llm).with_tool(EchoTool())
    store.send_input("r1", [Message.user("too late")])  # no boundary follows: it ends first
    AgentLoop(
        agent=resolved,
        identity=RunIdentity("t1", "r1", "a"),
        messages=store.load_messages("t1"),
        sink=RecordingSink(),
        store=store,
        previous=store.load_run("r1"),
    ).run()
    assert ("user", "too late") not in texts(store.messages["t1"])
    assert store.inbox["r1"]  # still waiting: the store queues it for the next run
    assert "input_delivered" not in [e["event_type"] for e in store.events["r1"]]


def test_steer_input_sent_before_a_step_boundary_arrives_in_order():
    store = fresh_store()
    tool = SteeringTool(store, "second thought")
    store.send_input("r1", [Message.user("first thought")])
    llm, _, _ = run_with([tool_turn("work", {"message": "x"}, "c1"), text_turn("ok")], store, tool)
    assert texts(llm.requests[1].messages)[-2:] == [
        ("user", "first thought"),
        ("user", "second thought"),
    ]
    kinds = [e["event_type"] for e in store.events["r1"]]
    assert kinds.count("input_delivered") == 2
