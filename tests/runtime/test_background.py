"""Background work on the pure runtime: a tool starts work that outlives its step; a run
whose steps end while it is unfinished waits (`awaiting_tasks`) instead of finishing, and
the next activation reads each result as a message before its first inference."""

from __future__ import annotations

from typing import Any

from runs.runtime.loop import AgentLoop, AgentRunResult, RunIdentity
from runs.runtime.ports import BackgroundResult, ToolCallContext
from runs.runtime.testing import (
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
    RunRecord,
    RunStatus,
    ToolDescriptor,
    ToolResult,
    WaitingReason,
)

REPORT = {"topic": "Q3 sales", "seconds": 5}


class SlowReportTool:
    """Starts a report in the background, as the built-in `slow_report` does (that one
    is tested through the ORM in tests/runs/test_background_work.py)."""

    descriptor = ToolDescriptor("slow_report", "Start a report", {"type": "object"})

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        if ctx.start_background is None:
            return ToolResult.error("slow_report", "Background work is not available here.")
        topic = arguments["topic"]
        task_id = ctx.start_background("report", dict(arguments), f"report on {topic}")
        return ToolResult.success(
            "slow_report", {"task_id": task_id}, f"Started the report on {topic} ({task_id})."
        )


def fresh_store() -> InMemoryStore:
    store = InMemoryStore()
    store.append_messages("t1", [Message.user("Prepare a report on Q3 sales")])
    store.runs["r1"] = RunRecord(run_id="r1", thread_id="t1", agent_id="a")
    return store


def activate(
    store: InMemoryStore | None,
    turns: list[Turn],
    results: list[BackgroundResult] | None = None,
    *,
    background: bool = True,
) -> tuple[ScriptedLlm, RecordingSink, AgentRunResult]:
    llm = ScriptedLlm(turns)
    sink = RecordingSink()
    messages = store.load_messages("t1") if store else [Message.user("Prepare a report")]
    result = AgentLoop(
        agent=agent("a", llm).with_tool(SlowReportTool()),
        identity=RunIdentity("t1", "r1", "a"),
        messages=messages,
        sink=sink,
        store=store,
        previous=store.load_run("r1") if store else None,
        background_results=results,
        background=background,
    ).run()
    return llm, sink, result


def texts(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role.value, m.text()) for m in messages]


def started(store: InMemoryStore) -> tuple[AgentRunResult, Any]:
    """Run the first activation: the tool starts the report, the model answers."""
    _, sink, result = activate(
        store, [tool_turn("slow_report", REPORT, "c1"), text_turn("I've started it.")]
    )
    return result, sink


def test_work_started_by_a_tool_makes_the_run_wait_instead_of_finishing():
    store = fresh_store()
    result, sink = started(store)
    assert (result.status, result.status_reason) == (RunStatus.WAITING, "awaiting_tasks")
    record = store.runs["r1"]
    assert record.status is RunStatus.WAITING and record.status_reason == "awaiting_tasks"
    assert record.waiting_reason() is WaitingReason.BACKGROUND_TASKS
    # the start is committed with the step's checkpoint
    (start,) = store.background
    assert (start.kind, start.call_id, start.label) == ("report", "c1", "report on Q3 sales")
    assert start.arguments == REPORT
    events = store.events["r1"]
    types = [e["event_type"] for e in events]
    assert types[-1] == "run_finish" and types.count("run_finish") == 1
    assert events[-1]["result"]["status"] == "waiting"
    assert events[-1]["result"]["status_reason"] == "awaiting_tasks"
    (announced,) = [e for e in events if e["event_type"] == "background_task_started"]
    assert announced["task_id"] == start.task_id and announced["kind"] == "report"
    # the tool answered at once, with the task id
    tool_message = store.messages["t1"][2]
    assert tool_message.text().startswith("Started the report on Q3 sales")
    assert start.task_id in tool_message.text()
    assert sink.types()[-1] == "run_finish"


def test_the_next_activation_reads_the_result_before_its_first_inference_and_finishes():
    store = fresh_store()
    started(store)
    (start,) = store.background
    result = BackgroundResult(
        task_id=start.task_id,
        kind="report",
        label=start.label,
        status="completed",
        result="Report on Q3 sales: up 12%.",
    )
    llm, sink, outcome = activate(store, [text_turn("The report is ready: up 12%.")], [result])
    assert (outcome.status, outcome.status_reason) == (RunStatus.DONE, "natural")
    expected = f"[background task report on Q3 sales ({start.task_id}) completed]\n"
    expected += "Report on Q3 sales: up 12%."
    (request,) = llm.requests
    assert texts(request.messages)[-1] == ("user", expected)
    log = texts(store.messages["t1"])
    assert log.count(("user", expected)) == 1
    assert log[-1] == ("assistant", "The report is ready: up 12%.")
    (delivered,) = [e for e in sink.events if e["event_type"] == "background_task_delivered"]
    assert delivered["task_id"] == start.task_id and delivered["status"] == "completed"
    assert delivered["message_id"] == store.messages["t1"][-2].id
    assert sink.types().index("background_task_delivered") < sink.types().index("step_start")
    assert store.runs["r1"].status is RunStatus.DONE
    state = store.runs["r1"].state
    assert state is not None
    assert state.extensions["background_tasks"][start.task_id]["status"] == "completed"


def test_a_failed_task_reaches_the_model_as_its_error():
    store = fresh_store()
    started(store)
    (start,) = store.background
    failure = BackgroundResult(start.task_id, "report", start.label, "failed", error="boom")
    llm, _, outcome = activate(store, [text_turn("It failed.")], [failure])
    assert outcome.status is RunStatus.DONE
    assert llm.requests[0].messages[-1].text().endswith("failed]\nboom")


def test_a_run_that_cannot_wait_gets_an_error_result_from_the_tool():
    # no store (an ephemeral run), and a run not allowed to wait: no start_background
    for store, background in ((None, True), (fresh_store(), False)):
        llm, _, result = activate(
            store,
            [tool_turn("slow_report", REPORT, "c1"), text_turn("no report then")],
            background=background,
        )
        assert (result.status, result.status_reason) == (RunStatus.DONE, "natural")
        tool_message = llm.requests[1].messages[-1]
        assert "Background work is not available here" in tool_message.text()
        if store is not None:
            assert store.background == []
