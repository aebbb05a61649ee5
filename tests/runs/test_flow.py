"""End-to-end behaviour of the run model through services, the ORM store and the worker
entrypoint (`run_advance`), on whatever database DATABASE_URL selects."""

from __future__ import annotations

import pytest

from agents.models import Note
from common.audit import Actor
from common.errors import DecisionConflict, IllegalTransition, InvalidInput
from runs.models import Decision, Message, Run, Thread, Ticket, ToolCall
from runs.services.runs import run_cancel, run_retry
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit, normalize_decision_body, ticket_for_target
from tests.factories import NOTE, call, scripted_agent, waiting_run
from tests.runs.helpers import assert_gap_free, drive, event_types, events

pytestmark = pytest.mark.django_db

STEP_TAIL = ["inference_complete", "state_snapshot", "step_end"]
FINISH = ["state_snapshot", "run_finish"]


def start(agent, text="hello", thread=None) -> Run:
    return run_start(agent=agent, messages=text, thread=thread)


def pending_ticket(run: Run) -> Ticket:
    return Ticket.objects.get(run=run, status=Ticket.Status.PENDING)


def test_text_only_run_finishes_natural_with_ranges_and_projection():
    agent = scripted_agent([{"text": "hi there"}])
    run = drive(start(agent))
    assert (run.status, run.status_reason) == ("done", "natural")
    assert run.termination_reason == {"type": "natural_end"}
    assert run.final_output == "hi there"
    assert run.steps == 1
    assert run.finished_at is not None and run.started_at is not None
    assert run.input["range"] == {"from_seq": 1, "to_seq": 1}
    assert run.output["range"] == {"from_seq": 2, "to_seq": 2}
    assert event_types(run) == ["run_start", "step_start", "text_delta", *STEP_TAIL, *FINISH]
    finish = events(run, "run_finish")[0]
    assert finish["result"] == {
        "response": "hi there",
        "status": "done",
        "status_reason": "natural",
    }
    reply = Message.objects.get(thread=run.thread, seq=2)
    assert (reply.role, reply.produced_by_run_id, reply.step_index) == ("assistant", run.pk, 0)
    thread = Thread.objects.get(pk=run.thread_id)
    assert thread.latest_run_id == run.pk and thread.open_run_id is None
    assert thread.message_count == Message.objects.filter(thread=thread).count() == 2
    assert_gap_free(run)


def test_auto_allowed_tool_call_runs_and_the_model_sees_its_result():
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("calculator", {"expression": "6*7"})]}, {"text": "42"}]
    )
    run = drive(start(agent))
    assert run.status_reason == "natural"
    assert event_types(run) == [
        "run_start",
        "step_start",
        "tool_call_start",
        "tool_call_delta",
        "tool_call_ready",
        "inference_complete",
        "tool_call_done",
        "state_snapshot",
        "step_end",
        "step_start",
        "text_delta",
        *STEP_TAIL,
        *FINISH,
    ]
    done = events(run, "tool_call_done")[0]
    assert done["outcome"] == "succeeded" and done["result"]["data"]["result"] == 42
    assert ToolCall.objects.get(run=run).status == "succeeded"
    assert run.steps == 2
    assert_gap_free(run)


def test_permission_ask_suspends_with_a_ticket_and_waiting_state():
    run = waiting_run()
    ticket = pending_ticket(run)
    assert ticket.ticket_id.startswith("perm_call_")
    assert ticket.reason == "tool:PermissionConfirm"
    assert ticket.resume_mode == "replay_tool_call"
    assert ticket.arguments == NOTE["arguments"]
    assert run.waiting["reason"] == "tool_permission"
    assert run.waiting["ticket_ids"] == [ticket.ticket_id]
    assert run.waiting_reason == "tool_permission"
    assert run.status_reason == "suspended"
    assert run.termination_reason is None
    assert event_types(run)[-5:] == ["tool_call_done", "state_snapshot", "step_end", *FINISH]
    assert events(run, "run_finish")[0]["termination"] == {"type": "suspended"}
    assert not Note.objects.exists()
    assert Thread.objects.get(pk=run.thread_id).open_run_id == run.pk


def test_approve_resumes_the_run_and_the_tool_runs_once():
    run = waiting_run()
    before = run.last_event_seq
    decision = decision_submit(
        ticket=pending_ticket(run), action="approve", actor=Actor(label="alice")
    )
    run.refresh_from_db()
    assert run.due
    run = drive(run)
    assert (run.status, run.status_reason) == ("done", "natural")
    assert event_types(run, after=before) == [
        "ticket_decided",
        "run_start",
        "tool_call_resumed",
        "step_start",
        "text_delta",
        *STEP_TAIL,
        *FINISH,
    ]
    assert Note.objects.filter(title="lunch").count() == 1
    assert decision.actor_label == "alice" and decision.action == "approve"
    assert run.steps == 2  # steps do not reset on resume
    assert run.output["range"]["from_seq"] == 2
    assert_gap_free(run)


def test_reject_tells_the_model_with_the_reason_and_the_run_continues():
    run = waiting_run()
    decision_submit(
        ticket=pending_ticket(run), action="reject", comment="not today", actor=Actor(label="bob")
    )
    run = drive(run)
    assert run.status_reason == "natural"
    assert not Note.objects.exists()
    tool_messages = [
        m.text for m in Message.objects.filter(thread=run.thread, role="tool").order_by("seq")
    ]
    assert any("Rejected by bob: not today" in text for text in tool_messages)
    assert events(run, "tool_call_resumed")[0]["result"]["approved"] is False
    assert ToolCall.objects.get(run=run).status == "cancelled"


def test_edit_runs_the_tool_with_edited_arguments_and_records_before_and_after():
    run = waiting_run()
    edited = {"title": "dinner", "body": "soup"}
    decision = decision_submit(
        ticket=pending_ticket(run), action="edit", arguments=edited, actor=Actor(label="carol")
    )
    run = drive(run)
    assert run.status_reason == "natural"
    assert list(Note.objects.values_list("title", "body")) == [("dinner", "soup")]
    assert decision.arguments_before == NOTE["arguments"]
    assert decision.arguments_after == edited


def test_edit_with_arguments_failing_the_schema_is_refused_and_loses_nothing():
    run = waiting_run()
    ticket = pending_ticket(run)
    with pytest.raises(InvalidInput, match="title"):
        decision_submit(ticket=ticket, action="edit", arguments={"body": "no title"})
    ticket.refresh_from_db()
    assert ticket.status == "pending" and not Decision.objects.exists()


def test_respond_answers_ask_human_without_running_a_tool():
    script = [
        {"text": "", "tool_calls": [call("ask_human", {"question": "Which color?"})]},
        {"text": "ok, blue"},
    ]
    run = waiting_run(script=script, permission={"default_behavior": "allow"}, tools=["ask_human"])
    ticket = pending_ticket(run)
    assert ticket.resume_mode == "use_decision_as_tool_result"
    assert ticket.message == "Which color?"
    with pytest.raises(InvalidInput, match="respond"):
        decision_submit(ticket=ticket, action="approve")
    decision_submit(ticket=ticket, action="respond", payload={"answer": "blue"})
    run = drive(run)
    assert run.status_reason == "natural"
    assert events(run, "tool_call_resumed")[0]["result"] == {"answer": "blue"}
    tool_texts = [m.text for m in Message.objects.filter(thread=run.thread, role="tool")]
    assert '{"answer": "blue"}' in tool_texts


def test_upstream_decision_body_is_accepted():
    run = waiting_run()
    body = normalize_decision_body(
        {"toolCallId": NOTE_ID(run), "action": "resume", "payload": {"approved": True}}
    )
    ticket = ticket_for_target(run=run, target=body["target"])
    decision = decision_submit(ticket=ticket, action=body["action"], payload=body["payload"])
    assert decision.action == "approve"
    assert drive(run).status_reason == "natural"
    assert Note.objects.count() == 1


def NOTE_ID(run: Run) -> str:
    return ToolCall.objects.get(run=run).call_id


@pytest.mark.parametrize(
    "body",
    [
        {"action": "cancel", "payload": None},
        {"action": "resume", "payload": {"approved": False}},
    ],
)
def test_upstream_cancel_or_not_approved_is_a_rejection(body):
    run = waiting_run()
    ticket = pending_ticket(run)
    normalized = normalize_decision_body({**body, "toolCallId": ticket.ticket_id})
    assert normalized["action"] == "reject"
    decision_submit(ticket=ticket_for_target(run=run, target=normalized["target"]), action="reject")
    assert drive(run).status_reason == "natural"
    assert not Note.objects.exists()


def test_second_decision_gets_a_conflict_naming_who_decided_first():
    run = waiting_run()
    ticket = pending_ticket(run)
    decision_submit(ticket=ticket, action="approve", actor=Actor(label="alice"))
    with pytest.raises(DecisionConflict, match="already decided by alice at") as info:
        decision_submit(ticket=ticket, action="reject", actor=Actor(label="bob"))
    assert info.value.details["decision"]["actor"] == "alice"
    assert info.value.status == 409


def test_repeating_a_decision_id_returns_the_first_result():
    run = waiting_run()
    ticket = pending_ticket(run)
    first = decision_submit(ticket=ticket, action="approve", decision_id="client-key-1")
    again = decision_submit(ticket=ticket, action="approve", decision_id="client-key-1")
    assert first.pk == again.pk
    assert Decision.objects.count() == 1
    assert events(run, "ticket_decided").__len__() == 1


def test_cancel_while_waiting_ends_done_cancelled_and_closes_tickets():
    run = waiting_run()
    ticket = pending_ticket(run)
    run_cancel(run=run)
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "cancelled")
    assert run.termination_reason == {"type": "cancelled"}
    assert run.waiting is None and run.finished_at is not None
    ticket.refresh_from_db()
    assert ticket.status == "cancelled"
    assert event_types(run)[-2:] == FINISH
    assert Thread.objects.get(pk=run.thread_id).open_run_id is None
    with pytest.raises(DecisionConflict, match="cancelled"):
        decision_submit(ticket=ticket, action="approve")
    with pytest.raises(IllegalTransition, match="already finished"):
        run_cancel(run=run)
    assert_gap_free(run)


def loop_cancelled_run() -> Run:
    """A run the loop itself cancels (its worker saw the request before its first step)."""
    from runs.services.execution import run_execute
    from runs.services.leases import run_claim

    run = start(scripted_agent([{"text": "never said"}]))
    claimed = run_claim(run_id=run.pk, worker="w1")
    run_cancel(run=run)
    run_execute(run=claimed, worker="w1")
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "cancelled")
    return run


LIFECYCLE = "__runtime.run_lifecycle"
TOOL_CALLS = "__runtime.tool_call_states"


def test_cancelling_a_waiting_run_ends_its_state_and_log_as_the_loop_would():
    from runs.services.events import run_identity

    reference = loop_cancelled_run()
    run = waiting_run()
    waiting_state = run.state
    assert waiting_state["extensions"][LIFECYCLE]["status"] == "waiting"
    run_cancel(run=run)
    run.refresh_from_db()

    # the persisted state and its snapshot say the run ended cancelled, as the loop's do
    snapshot = events(run, "state_snapshot")[-1]["snapshot"]
    assert snapshot == run.state
    assert events(reference, "state_snapshot")[-1]["snapshot"] == reference.state
    assert run.state["revision"] == waiting_state["revision"] + 1
    lifecycle = run.state["extensions"][LIFECYCLE]
    expected = reference.state["extensions"][LIFECYCLE]
    assert (lifecycle["status"], lifecycle["status_reason"]) == ("done", "cancelled")
    assert (lifecycle["status"], lifecycle["status_reason"]) == (
        expected["status"],
        expected["status_reason"],
    )
    assert lifecycle["step_count"] == run.steps
    assert set(reference.state["extensions"]) <= set(run.state["extensions"])
    calls = run.state["extensions"][TOOL_CALLS]["calls"]
    assert [call["status"] for call in calls.values()] == ["cancelled"]
    assert list(ToolCall.objects.filter(run=run).values_list("status", flat=True)) == ["cancelled"]

    # its run_finish has the fields of every other one, identity included
    finish = events(run, "run_finish")[-1]
    expected_finish = events(reference, "run_finish")[-1]
    assert finish.keys() == expected_finish.keys()
    assert finish["identity"] == run_identity(run).to_json()
    assert expected_finish["identity"] == run_identity(reference).to_json()
    first_start = events(run, "run_start")[0]["identity"]
    assert {**finish["identity"], "run_mode": "foreground"} == {
        **first_start,
        "run_mode": "foreground",
    }
    assert finish["termination"] == expected_finish["termination"] == {"type": "cancelled"}
    assert (
        finish["result"]
        == expected_finish["result"]
        == {
            "response": "",
            "status": "done",
            "status_reason": "cancelled",
        }
    )
    assert_gap_free(run)


def test_cancelling_a_created_run_persists_a_cancelled_state():
    run = start(scripted_agent([{"text": "never"}]))
    run_cancel(run=run)
    run.refresh_from_db()
    lifecycle = run.state["extensions"][LIFECYCLE]
    assert (lifecycle["status"], lifecycle["status_reason"]) == ("done", "cancelled")
    assert events(run, "state_snapshot")[-1]["snapshot"] == run.state
    assert "identity" in events(run, "run_finish")[-1]
    assert event_types(run) == ["run_start", *FINISH]


def test_cancel_of_a_created_run_finishes_it_without_a_worker():
    run = start(scripted_agent([{"text": "never"}]))
    run_cancel(run=run)
    run.refresh_from_db()
    assert (run.status, run.status_reason, run.due) == ("done", "cancelled", False)
    assert drive(run).steps == 0


def test_cancel_of_a_claimed_run_is_cooperative():
    from runs.services.execution import run_execute
    from runs.services.leases import run_claim

    run = start(scripted_agent([{"text": "never said"}]))
    claimed = run_claim(run_id=run.pk, worker="w1")
    run_cancel(run=run)
    run.refresh_from_db()
    assert run.status == "running" and run.cancel_requested_at is not None
    run_execute(run=claimed, worker="w1")
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "cancelled")
    assert event_types(run) == ["run_start", *FINISH]


def test_deny_rule_blocks_the_run():
    agent = scripted_agent(
        [{"text": "", "tool_calls": [NOTE, call("calculator", {"expression": "1+1"})]}],
        permission={
            "default_behavior": "allow",
            "rules": [{"tool": "write_note", "behavior": "deny"}],
        },
    )
    run = drive(start(agent))
    assert run.status == "done"
    assert run.status_reason == "blocked:Tool 'write_note' denied by permission rules"
    assert run.termination_reason == {
        "type": "blocked",
        "value": "Tool 'write_note' denied by permission rules",
    }
    texts = [m.text for m in Message.objects.filter(thread=run.thread, role="tool").order_by("seq")]
    assert texts == [
        "Tool 'write_note' denied by permission rules",
        "[Tool execution was interrupted]",
    ]


def test_max_rounds_stops_the_run_before_the_extra_rounds_tools():
    looping = [{"text": "again", "tool_calls": [call("calculator", {"expression": "1+1"})]}] * 5
    agent = scripted_agent(looping, max_rounds=2)
    run = drive(start(agent))
    assert run.status_reason == "stopped:max_rounds"
    assert run.termination_reason["value"]["code"] == "max_rounds"
    assert ToolCall.objects.filter(run=run).count() == 2  # the third round's call never ran


@pytest.mark.parametrize(
    ("turn", "message"),
    [
        (
            {
                "text": "",
                "tool_calls": [call("calculator", {})],
                "raw_arguments": {"0": "{not json"},
            },
            "Invalid JSON",
        ),
        ({"text": "", "tool_calls": [call("no_such_tool", {})]}, "Unknown tool 'no_such_tool'"),
        (
            {"text": "", "tool_calls": [call("calculator", {"expression": 5})]},
            "Invalid arguments for tool 'calculator' at expression",
        ),
    ],
)
def test_malformed_model_output_fails_the_call_clearly_and_the_run_continues(turn, message):
    agent = scripted_agent([turn, {"text": "sorry"}])
    run = drive(start(agent))
    assert run.status_reason == "natural"
    done = events(run, "tool_call_done")[0]
    assert done["outcome"] == "failed"
    assert message in done["result"]["message"]
    assert ToolCall.objects.get(run=run).status == "failed"


def test_model_error_fails_the_run_with_its_message():
    agent = scripted_agent([{"error": "provider says no"}])
    run = drive(start(agent))
    assert (run.status, run.status_reason) == ("done", "error")
    assert run.error_payload == {"message": "provider says no"}
    assert run.termination_reason == {"type": "error", "value": "provider says no"}
    assert run.is_failed


def test_retry_starts_a_new_run_from_the_last_checkpoint():
    agent = scripted_agent([{"error": "flaky"}])
    failed = drive(start(agent))
    agent.model.script = [{"text": "recovered"}]
    agent.model.save()
    retry = drive(run_retry(run=failed))
    assert retry.retry_of_id == failed.pk
    assert retry.agent_version_id == failed.agent_version_id
    assert retry.thread_id == failed.thread_id
    assert (retry.status_reason, retry.final_output) == ("natural", "recovered")
    with pytest.raises(IllegalTransition, match="only failed runs"):
        run_retry(run=retry)


def test_a_duplicate_task_is_a_no_op():
    from runs.services.execution import run_advance

    run = start(scripted_agent([{"text": "once"}]))
    assert run_advance(run_id=run.pk, worker="w1") == "completed"
    assert run_advance(run_id=run.pk, worker="w2") == "skipped"
    assert events(run, "run_start").__len__() == 1


def test_a_message_to_a_waiting_thread_continues_the_same_run_and_supersedes_its_ticket():
    run = waiting_run()
    run.agent.model.script = [{"text": "fine, skipping"}]
    run.agent.model.save()
    continued = run_start(agent=run.agent, messages="never mind", thread=run.thread)
    assert continued.pk == run.pk
    decision = Decision.objects.get()
    assert (decision.action, decision.actor_label) == ("reject", "system")
    run = drive(run)
    assert run.status_reason == "natural"
    assert Run.objects.count() == 1 and not Note.objects.exists()
    roles = list(
        Message.objects.filter(thread=run.thread).order_by("seq").values_list("role", flat=True)
    )
    assert roles.count("user") == 2


def test_a_message_to_a_thread_with_a_running_run_is_refused():
    from runs.services.leases import run_claim

    run = start(scripted_agent([{"text": "x"}]))
    run_claim(run_id=run.pk, worker="w1")
    with pytest.raises(IllegalTransition, match="already has a running run"):
        run_start(agent=run.agent, messages="again", thread=run.thread)


def test_idempotency_key_returns_the_same_run():
    agent = scripted_agent([{"text": "x"}])
    first = run_start(agent=agent, messages="hi", idempotency_key="k-1")
    again = run_start(agent=agent, messages="hi", idempotency_key="k-1")
    assert first.pk == again.pk and Run.objects.count() == 1


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([], "non-empty"),
        ([{"role": "robot", "content": "x"}], "role"),
        ([{"role": "user", "content": 3}], "content"),
        ([{"role": "user", "content": "   "}], "empty"),
        ("x" * 32_001, "at most 32,000 are allowed"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error_and_nothing_is_written(messages, error):
    agent = scripted_agent([{"text": "x"}])
    with pytest.raises(InvalidInput, match=error):
        run_start(agent=agent, messages=messages)
    assert not Run.objects.exists() and not Message.objects.exists()


def test_run_pins_its_agent_version_across_a_config_change():
    run = waiting_run()
    pinned = run.agent_version
    run.agent.tools = ["calculator"]
    run.agent.save()
    decision_submit(ticket=pending_ticket(run), action="approve")
    run = drive(run)
    assert run.agent_version_id == pinned.pk
    assert Note.objects.count() == 1  # write_note still available under the pinned version


def test_nul_characters_from_a_tool_are_stored_replaced_not_crashing_the_checkpoint(monkeypatch):
    from agents.tools.builtin import CurrentTimeTool
    from runs.runtime.types import ToolResult

    monkeypatch.setattr(
        CurrentTimeTool,
        "execute",
        lambda self, arguments, ctx: ToolResult.success("current_time", "bin\x00ary"),
    )
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("current_time", {})]}, {"text": "ok"}],
        tools=["current_time"],
    )
    run = drive(start(agent))
    assert run.status_reason == "natural"
    assert events(run, "tool_call_done")[0]["result"]["data"] == "bin\ufffdary"
    assert Message.objects.get(thread=run.thread, seq=3).text == '"bin\\u0000ary"'  # JSON-escaped
    assert_gap_free(run)


def test_nul_characters_in_operator_input_are_refused():
    with pytest.raises(InvalidInput, match="NUL"):
        start(scripted_agent([{"text": "x"}]), "hello\x00there")
    run = waiting_run()
    with pytest.raises(InvalidInput, match="NUL"):
        decision_submit(ticket=pending_ticket(run), action="reject", comment="no\x00")
    assert pending_ticket(run).status == "pending"


def test_lone_surrogates_from_a_tool_are_stored_replaced_like_nul(monkeypatch):
    # PostgreSQL cannot store a lone surrogate (not encodable as UTF-8) any more than NUL
    from agents.tools.builtin import CurrentTimeTool
    from runs.runtime.types import ToolResult

    monkeypatch.setattr(
        CurrentTimeTool,
        "execute",
        lambda self, arguments, ctx: ToolResult.success("current_time", "half\ud800pair"),
    )
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("current_time", {})]}, {"text": "ok"}],
        tools=["current_time"],
    )
    run = drive(start(agent))
    assert run.status_reason == "natural"
    assert events(run, "tool_call_done")[0]["result"]["data"] == "half\ufffdpair"
    assert_gap_free(run)


def test_lone_surrogates_in_operator_input_are_refused():
    with pytest.raises(InvalidInput, match="lone surrogates"):
        start(scripted_agent([{"text": "x"}]), "hello\udc00there")
    run = waiting_run()
    with pytest.raises(InvalidInput, match="lone surrogates"):
        decision_submit(ticket=pending_ticket(run), action="reject", comment="no\ud800")
    with pytest.raises(InvalidInput, match="lone surrogates"):
        decision_submit(ticket=pending_ticket(run), action="respond", payload={"\ud800": 1})
    assert pending_ticket(run).status == "pending"
