"""The trace builder (runs/selectors/trace.py) on hand-built event logs: times, nesting,
tokens and cost, tickets, delegation, failures, interrupted activations, runs still
going; and its layout (runs/selectors/trace_layout.py)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from agents.pricing import cost_usd
from runs.selectors.trace import attach_child, build_trace
from runs.selectors.trace_layout import layout
from runs.selectors.trace_spans import RunFacts, Span, TraceEvent

T0 = dt.datetime(2026, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
IN_PRICE, OUT_PRICE = Decimal("3"), Decimal("15")


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


class Log:
    """Events in seq order, each at a commit time (seconds after T0)."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def add(self, when: float, kind: str, **data: Any) -> Log:
        self.events.append(TraceEvent(len(self.events) + 1, kind, at(when), data))
        return self

    def step(
        self,
        when: float,
        *,
        prompt: int,
        completion: int,
        ms: int,
        calls: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
    ) -> Log:
        """A step committed at `when`: an inference, then (call id, name, outcome) calls."""
        self.add(when, "step_start", message_id="m")
        for call_id, name, _ in calls:
            self.add(when, "tool_call_ready", id=call_id, name=name, arguments={})
        usage = {"prompt_tokens": prompt, "completion_tokens": completion}
        self.add(when, "inference_complete", model="m1", usage=usage, duration_ms=ms)
        for call_id, name, outcome in calls:
            result: dict[str, Any] = {"tool_name": name, "status": "success", "data": "ok"}
            if outcome == "suspended":
                ticket = f"perm_{call_id}" if name != "agent_run_scribe" else "delegate_run:x"
                result = {
                    "tool_name": name,
                    "status": "pending",
                    "suspension": {"suspension": {"id": ticket, "action": "tool:Permission"}},
                }
            elif outcome == "failed":
                result = {"tool_name": name, "status": "error", "message": "disk full"}
            self.add(when, "tool_call_done", id=call_id, outcome=outcome, result=result)
        self.add(when, "state_snapshot")
        return self.add(when, "step_end")

    def finish(
        self, when: float, status: str = "done", reason: str = "natural", **term: Any
    ) -> Log:
        termination = term or {"type": "natural_end"}
        result = {"status": status, "status_reason": reason}
        return self.add(when, "run_finish", result=result, termination=termination)


def facts(status: str = "done", reason: str = "natural", **kwargs: Any) -> RunFacts:
    values: dict[str, Any] = {
        "run_id": "01a2-0000-0000-0000-0000000000aa",
        "agent": "helper",
        "status": status,
        "status_reason": reason,
        "created_at": T0,
        "started_at": at(1),
        "input_price": IN_PRICE,
        "output_price": OUT_PRICE,
    }
    values.update(kwargs)
    return RunFacts(**values)


def kinds(span: Span) -> list[str]:
    return [child.kind for child in span.children]


def test_a_run_of_two_steps_places_its_spans_and_sums_its_tokens_and_cost():
    log = Log().add(0, "run_start", identity={})
    log.step(2, prompt=100, completion=10, ms=500, calls=[("c1", "write_note", "succeeded")])
    log.step(3, prompt=200, completion=20, ms=800).finish(3)
    trace = build_trace(
        facts(input_tokens=300, output_tokens=30), log.events, tool_ms={"c1": 400}, now=at(99)
    )
    root = trace.root
    assert (trace.steps, trace.activations) == (2, 1)
    assert (trace.input_tokens, trace.output_tokens) == (300, 30)
    assert trace.cost == cost_usd(
        input_tokens=300, output_tokens=30, input_price=IN_PRICE, output_price=OUT_PRICE
    )
    assert trace.recorded is None  # the log accounts for the run's usage
    (activation,) = root.children
    assert (activation.start, activation.end, activation.status) == (at(0), at(3), "ok")
    first, second = activation.children
    # the first step starts when a worker took the run (started_at), not at the submission
    assert (first.start, first.end) == (at(1), at(2))
    inference, tool = first.children
    assert (inference.kind, inference.start, inference.seconds) == ("inference", at(1), 0.5)
    assert (inference.input_tokens, inference.output_tokens) == (100, 10)
    assert inference.cost == Decimal("0.00045")
    assert (tool.kind, tool.name, tool.status) == ("tool", "write_note", "ok")
    assert (tool.start, tool.seconds, tool.estimated) == (at(1.5), 0.4, False)
    assert (second.start, second.end) == (at(2), at(3))  # from the previous commit
    assert (second.input_tokens, first.cost) == (200, Decimal("0.00045"))
    assert (activation.input_tokens, activation.output_tokens) == (300, 30)
    assert (root.start, root.end, root.status) == (at(0), at(3), "ok")
    assert root.cost == trace.cost


def test_calls_without_a_measured_duration_share_the_rest_of_their_step():
    log = Log().add(0, "run_start", identity={})
    calls = [("a", "search", "succeeded"), ("b", "fetch", "succeeded"), ("c", "save", "succeeded")]
    log.step(4, prompt=1, completion=1, ms=1000, calls=calls).finish(4)
    trace = build_trace(facts(started_at=None), log.events, tool_ms={"b": 1000}, now=at(9))
    step = trace.root.children[0].children[0]
    inference, a, b, c = step.children
    assert (step.start, step.end) == (at(0), at(4))
    assert (inference.start, inference.end) == (at(0), at(1))
    assert (a.start, a.seconds, a.estimated) == (at(1), 1.0, True)
    assert (b.start, b.seconds, b.estimated) == (at(2), 1.0, False)
    assert (c.start, c.end, c.estimated) == (at(3), at(4), True)


def test_a_ticket_waits_from_the_suspension_to_the_decision_and_the_run_resumes():
    log = Log().add(0, "run_start", identity={})
    log.step(2, prompt=10, completion=1, ms=300, calls=[("c1", "write_note", "suspended")])
    log.finish(2, "waiting", "suspended", type="suspended")
    decision = {"action": "approve", "actor": "ada"}
    log.add(10, "ticket_decided", tool_call_id="c1", ticket_id="perm_c1", decision=decision)
    # the resumed activation's run_start is committed with its first step
    log.add(12, "run_start", identity={"run_mode": "resume"})
    log.add(12, "tool_call_resumed", target_id="c1", result={"note_id": 1})
    log.step(12, prompt=20, completion=2, ms=1000).finish(12)
    trace = build_trace(facts(), log.events, now=at(99))
    first, resumed = trace.root.children
    assert (first.status, first.end) == ("paused", at(2))
    tool = first.children[0].children[1]
    assert tool.status == "ok"  # approved
    (ticket,) = tool.children
    assert (ticket.kind, ticket.name) == ("ticket", "Waiting for a decision")
    assert (ticket.start, ticket.end, ticket.seconds) == (at(2), at(10), 8.0)
    assert (ticket.note, ticket.status) == ("Approved by ada", "ok")
    # its work (one second of inference) ends at the commit: it began a second before
    assert resumed.name == "Resumed"
    assert kinds(resumed) == ["tool", "step"]
    assert resumed.children[0].name == "write_note (after the decision)"
    assert (resumed.start, resumed.children[1].start, resumed.end) == (at(11), at(11), at(12))
    assert (trace.steps, trace.activations, trace.input_tokens) == (2, 2, 30)


def test_an_open_ticket_keeps_the_run_waiting_to_now():
    log = Log().add(0, "run_start", identity={})
    log.step(2, prompt=10, completion=1, ms=300, calls=[("c1", "send_email", "suspended")])
    log.finish(2, "waiting", "suspended", type="suspended")
    trace = build_trace(facts("waiting", "suspended"), log.events, now=at(60))
    ticket = trace.root.children[0].children[0].children[1].children[0]
    assert (ticket.end, ticket.status, ticket.note) == (None, "waiting", "Not decided yet")
    assert (trace.root.status, trace.root.end) == ("waiting", None)
    rows = layout(trace, steps=50, now=at(60)).rows
    bar = next(row for row in rows if row.span is ticket)
    assert bar.running and bar.seconds is None
    assert (bar.left, bar.width) == (round(100 * 2 / 60, 3), round(100 * 58 / 60, 3))


def test_a_rejected_ticket_and_a_failed_call_say_so():
    log = Log().add(0, "run_start", identity={})
    log.step(1, prompt=1, completion=1, ms=10, calls=[("c1", "send_email", "suspended")])
    log.finish(1, "waiting", "suspended", type="suspended")
    log.add(5, "ticket_decided", tool_call_id="c1", decision={"action": "reject", "actor": "bo"})
    log.add(6, "run_start", identity={"run_mode": "resume"})
    log.step(6, prompt=1, completion=1, ms=10, calls=[("c2", "write_note", "failed")]).finish(6)
    trace = build_trace(facts(), log.events, now=at(9))
    first, second = trace.root.children
    call = first.children[0].children[1]
    assert (call.status, call.children[0].status) == ("rejected", "rejected")
    assert call.children[0].note == "Rejected by bo"
    failed = second.children[0].children[1]
    assert (failed.status, failed.note) == ("failed", "disk full")


def test_a_failed_inference_fails_its_step_and_activation():
    log = Log().add(0, "run_start", identity={})
    log.step(2, prompt=5, completion=5, ms=100)
    log.add(4, "step_start", message_id="m")
    log.add(4, "state_snapshot").add(4, "step_end")
    log.finish(4, "done", "error", type="error", value="cannot reach provider")
    trace = build_trace(facts("done", "error"), log.events, now=at(9))
    (activation,) = trace.root.children
    assert activation.status == "failed"
    assert "cannot reach provider" in activation.note
    assert trace.root.status == "failed"
    assert [step.children for step in activation.children][1] == []


def test_an_interrupted_activation_is_closed_and_the_next_one_goes_on():
    log = Log().add(0, "run_start", identity={})
    log.step(2, prompt=5, completion=5, ms=100)
    log.add(30, "error", code="activation_interrupted", message="worker lost")
    log.add(40, "run_start", identity={"run_mode": "resume"})
    log.step(40, prompt=7, completion=7, ms=2000).finish(40)
    trace = build_trace(facts(input_tokens=12, output_tokens=12), log.events, now=at(99))
    first, second = trace.root.children
    assert (first.status, first.end) == ("interrupted", at(30))
    assert first.note.startswith("Interrupted")
    assert (second.status, second.start) == ("ok", at(38))
    assert (trace.input_tokens, trace.recorded) == (12, None)


def test_a_run_in_progress_has_open_spans_ending_now():
    log = Log().add(0, "run_start", identity={})
    log.step(2, prompt=5, completion=5, ms=100)
    trace = build_trace(facts("running", ""), log.events, now=at(7))
    (activation,) = trace.root.children
    assert (activation.status, activation.end) == ("running", None)
    assert (trace.root.status, trace.root.end) == ("running", None)
    shown = layout(trace, steps=50, now=at(7))
    assert shown.seconds == 7.0
    assert shown.rows[0].width == 100.0


def test_a_child_run_nests_under_the_call_that_started_it():
    parent_log = Log().add(0, "run_start", identity={})
    calls = [("d1", "agent_run_scribe", "succeeded")]
    parent_log.step(5, prompt=10, completion=2, ms=500, calls=calls)
    parent_log.step(6, prompt=20, completion=3, ms=500).finish(6)
    child_log = Log().add(1, "run_start", identity={})
    child_log.step(3, prompt=7, completion=1, ms=200).finish(3)
    parent = build_trace(facts(input_tokens=30, output_tokens=5), parent_log.events, now=at(9))
    child = build_trace(
        facts(
            run_id="01a2-0000-0000-0000-0000000000bb",
            agent="scribe",
            created_at=at(1),
            started_at=at(1),
            input_tokens=7,
            output_tokens=1,
        ),
        child_log.events,
        now=at(9),
    )
    attach_child(parent, child, "d1")
    call = parent.calls["d1"]
    assert call.children == [child.root]
    assert child.root.name == "scribe"
    assert kinds(child.root) == ["activation"]
    assert kinds(child.root.children[0]) == ["step"]
    assert (child.root.input_tokens, child.root.output_tokens) == (7, 1)
    # the call covers the child run, which ran inside it
    assert call.start <= child.root.start and call.end >= child.root.children[0].end
    # the parent's totals are its own usage: the child's are its own
    assert (parent.input_tokens, parent.output_tokens, parent.recorded) == (30, 5, None)
    assert child.root.key != parent.root.key
    rows = layout(parent, steps=50, now=at(9)).rows
    depths = {row.span.key: row.depth for row in rows}
    assert depths[child.root.key] == depths[call.key] + 1


def test_a_run_whose_record_differs_from_its_log_says_so():
    log = Log().add(0, "run_start", identity={})
    log.step(2, prompt=5, completion=5, ms=100).finish(2)
    trace = build_trace(facts(input_tokens=50, output_tokens=9), log.events, now=at(9))
    assert trace.recorded == (50, 9)


def test_layout_shows_the_first_steps_and_counts_the_rest():
    log = Log().add(0, "run_start", identity={})
    for index in range(1, 8):
        log.step(index, prompt=1, completion=1, ms=10)
    log.finish(8)
    trace = build_trace(facts(started_at=None), log.events, now=at(9))
    shown = layout(trace, steps=3, now=at(9))
    assert (shown.steps_shown, shown.steps_total, shown.steps_hidden) == (3, 7, 4)
    assert [row.span.name for row in shown.rows if row.span.kind == "step"] == [
        "Step 1",
        "Step 2",
        "Step 3",
    ]
    assert all(0 <= row.left <= 100 and 0 < row.width <= 100 for row in shown.rows)
    assert shown.rows[0].left == 0 and shown.rows[0].width == 100.0
