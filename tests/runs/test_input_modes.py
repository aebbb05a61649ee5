"""Input modes through the services and the ORM store, with the worker played in-process
(`drive`): what each mode delivers, when, and what the event logs say (docs/run-control.md)."""

from __future__ import annotations

from itertools import pairwise

import pytest

from common.errors import IllegalTransition
from runs.models import Message, PendingInput, Run, Thread, Ticket
from runs.services.execution import run_advance, runs_sweep
from runs.services.inputs import input_edit, input_retract, thread_interrupt
from runs.services.leases import run_claim
from runs.services.runs import run_set_priority
from runs.services.submission_flow import input_submit, run_start
from tests.factories import call, scripted_agent, waiting_run
from tests.runs.helpers import (
    assert_activations_closed,
    assert_gap_free,
    drive,
    event_types,
    events,
)

pytestmark = pytest.mark.django_db

TWO_STEPS = [
    {"text": "", "tool_calls": [call("calculator", {"expression": "1+1"})]},
    {"text": "two"},
]


def texts(run: Run) -> list[tuple[str, str]]:
    rows = Message.objects.filter(thread=run.thread).order_by("seq")
    return [(m.role, m.text) for m in rows]


def thread_runs(run: Run) -> list[Run]:
    return list(Run.objects.filter(thread=run.thread).order_by("created_at", "id"))


def test_queue_waits_for_the_open_run_and_starts_exactly_one_next_run():
    first = run_start(agent=scripted_agent([{"text": "hi"}]), messages="first")
    outcome = input_submit(agent=None, messages="second", thread=first.thread)
    assert outcome.run is None and outcome.input.status == "pending"
    assert outcome.input.seq == 1
    assert len(thread_runs(first)) == 1
    drive(first)
    runs = thread_runs(first)
    assert len(runs) == 2
    nxt = runs[1]
    assert event_types(nxt)[:2] == ["run_start", "input_delivered"]
    delivered = events(nxt, "input_delivered")[0]
    assert delivered["boundary"] == "new_run" and delivered["mode"] == "queue"
    assert delivered["input_id"] == str(outcome.input.pk)
    drive(nxt)
    assert nxt.status == "done"
    # the worker did not repeat the run_start the submission wrote
    assert event_types(nxt).count("run_start") == 1
    assert_gap_free(nxt)
    assert_activations_closed(nxt)
    assert texts(nxt) == [
        ("user", "first"),
        ("assistant", "hi"),
        ("user", "second"),
        ("assistant", "hi"),
    ]
    outcome.input.refresh_from_db()
    assert (outcome.input.status, outcome.input.delivered_run_id) == ("delivered", nxt.pk)
    assert len(thread_runs(first)) == 2  # nothing more to start


def test_queued_inputs_start_one_run_each_in_order_of_acceptance():
    first = run_start(agent=scripted_agent([{"text": "ok"}]), messages="m0")
    for i in (1, 2, 3):
        input_submit(agent=None, messages=f"m{i}", thread=first.thread)
    run = first
    for _ in range(4):
        drive(run)
        run = thread_runs(first)[-1]
    runs = thread_runs(first)
    assert len(runs) == 4 and all(r.status == "done" for r in runs)
    users = [text for role, text in texts(first) if role == "user"]
    assert users == ["m0", "m1", "m2", "m3"]
    for earlier, later in pairwise(runs):
        assert earlier.finished_at <= later.created_at


def test_steer_is_delivered_at_the_next_step_boundary():
    run = run_start(agent=scripted_agent(TWO_STEPS), messages="add")
    outcome = input_submit(agent=None, messages="in words please", thread=run.thread, mode="steer")
    assert outcome.input.run_id == run.pk
    run.refresh_from_db()
    assert run.pending_inputs == 1
    drive(run)
    assert run.status == "done"
    log = texts(run)
    # after the first step's tool result, before the next inference
    assert log[:4] == [
        ("user", "add"),
        ("assistant", ""),
        ("tool", log[2][1]),
        ("user", "in words please"),
    ]
    kinds = event_types(run)
    at = kinds.index("input_delivered")
    assert kinds[at - 1] == "step_end" and kinds[at + 1] == "step_start"
    assert events(run, "input_delivered")[0]["boundary"] == "next_step"
    assert run.pending_inputs == 0
    assert len(thread_runs(run)) == 1
    assert_gap_free(run)


def test_steer_for_a_run_that_ends_first_is_queued_for_the_next_run():
    run = run_start(agent=scripted_agent([{"text": "quick"}]), messages="hi")
    steer = input_submit(agent=None, messages="and another thing", thread=run.thread, mode="steer")
    drive(run)
    assert run.status == "done"
    runs = thread_runs(run)
    assert len(runs) == 2
    steer.input.refresh_from_db()
    assert (steer.input.status, steer.input.boundary) == ("delivered", "new_run")
    assert steer.input.delivered_run_id == runs[1].pk


def test_interrupt_then_queue_cancels_the_open_run_and_starts_with_the_message():
    run = waiting_run()
    outcome = input_submit(
        agent=None, messages="never mind", thread=run.thread, mode="interrupt_then_queue"
    )
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "cancelled")
    assert event_types(run)[-1] == "run_finish"
    assert events(run, "run_finish")[-1]["termination"] == {"type": "cancelled"}
    assert_activations_closed(run)
    assert outcome.run is not None and outcome.created
    assert outcome.run.pk != run.pk
    assert events(outcome.run, "input_delivered")[0]["mode"] == "interrupt_then_queue"
    drive(outcome.run)  # its agent asks before writing the note again
    assert outcome.run.status == "waiting"
    assert [u for r, u in texts(run) if r == "user"] == ["write it down", "never mind"]


def test_interrupt_then_queue_of_a_running_run_waits_for_it_to_stop():
    run = run_start(agent=scripted_agent(TWO_STEPS), messages="add")
    assert run_claim(run_id=run.pk, worker="w") is not None  # a worker holds it
    outcome = input_submit(
        agent=None, messages="stop that", thread=run.thread, mode="interrupt_then_queue"
    )
    run.refresh_from_db()
    assert run.cancel_requested_at is not None and run.status == "running"
    assert outcome.run is None and outcome.input.status == "pending"


def test_resume_open_run_continues_the_waiting_run_and_reports_superseded_tickets():
    run = waiting_run()
    ticket = Ticket.objects.get(run=run, status="pending")
    outcome = input_submit(
        agent=None, messages="skip the note", thread=run.thread, mode="resume_open_run"
    )
    assert outcome.run.pk == run.pk and not outcome.created
    assert outcome.superseded == [str(ticket.pk)]
    kinds = event_types(run)
    assert kinds[-2:] == ["ticket_decided", "input_delivered"]
    assert events(run, "input_delivered")[0]["boundary"] == "resume_input"
    drive(run)  # the same run goes on: its agent asks again, on a new ticket
    assert run.status == "waiting" and run.steps == 2
    assert Ticket.objects.get(run=run, status="pending").pk != ticket.pk
    assert_activations_closed(run)
    assert_gap_free(run)


def test_resume_open_run_refuses_a_run_that_is_not_waiting():
    run = run_start(agent=scripted_agent([{"text": "hi"}]), messages="hi")
    with pytest.raises(IllegalTransition, match="not waiting"):
        input_submit(agent=None, messages="x", thread=run.thread, mode="resume_open_run")


def test_a_thread_without_an_open_run_starts_one_in_any_mode():
    done = drive(run_start(agent=scripted_agent([{"text": "hi"}]), messages="hi"))
    for mode in ("queue", "steer", "interrupt_then_queue", "resume_open_run"):
        outcome = input_submit(agent=None, messages=mode, thread=done.thread, mode=mode)
        assert outcome.created and outcome.run is not None
        drive(outcome.run)


def test_pending_input_can_be_edited_or_retracted_until_delivered():
    run = run_start(agent=scripted_agent([{"text": "ok"}]), messages="first")
    kept = input_submit(agent=None, messages="draft", thread=run.thread).input
    gone = input_submit(agent=None, messages="oops", thread=run.thread).input
    input_edit(input_id=kept.pk, messages="final text", priority=7)
    input_retract(input_id=gone.pk)
    drive(run)
    nxt = thread_runs(run)[1]
    assert nxt.priority == 7
    drive(nxt)
    users = [text for role, text in texts(run) if role == "user"]
    assert users == ["first", "final text"]
    assert len(thread_runs(run)) == 2  # the retracted one never ran
    with pytest.raises(IllegalTransition, match="delivered"):
        input_edit(input_id=kept.pk, messages="too late")
    with pytest.raises(IllegalTransition, match="retracted"):
        input_retract(input_id=gone.pk)


def test_thread_interrupt_cancels_the_open_run_and_every_pending_input():
    run = waiting_run()
    for i in range(3):
        input_submit(agent=None, messages=f"later {i}", thread=run.thread)
    result = thread_interrupt(thread=run.thread)
    run.refresh_from_db()
    assert run.status_reason == "cancelled"
    assert len(result["cancelled_inputs"]) == 3
    assert not PendingInput.objects.filter(thread=run.thread, status="pending").exists()
    assert len(thread_runs(run)) == 1


def test_a_worker_takes_a_higher_priority_run_first():
    low = run_start(agent=scripted_agent([{"text": "low"}]), messages="low", priority=200)
    high = run_start(agent=scripted_agent([{"text": "high"}]), messages="high", priority=0)
    run_advance(run_id=low.pk, worker="w")  # the doorbell of the older, low run
    low.refresh_from_db()
    high.refresh_from_db()
    assert high.status == "done" and low.status == "created" and low.due
    run_advance(run_id=low.pk, worker="w")
    low.refresh_from_db()
    assert low.status == "done"


def test_priority_changes_only_while_the_run_waits_for_a_worker():
    run = run_start(agent=scripted_agent([{"text": "hi"}]), messages="hi")
    assert run_set_priority(run=run, priority=3).priority == 3
    drive(run)
    with pytest.raises(IllegalTransition, match="queued"):
        run_set_priority(run=run, priority=5)


def test_the_sweep_starts_a_queued_input_whose_start_was_lost():
    run = run_start(agent=scripted_agent([{"text": "ok"}]), messages="first")
    queued = input_submit(agent=None, messages="next", thread=run.thread).input
    drive(run)
    # as if the transaction that ended the run had not started the next one
    Run.objects.filter(thread=run.thread).exclude(pk=run.pk).delete()
    PendingInput.objects.filter(pk=queued.pk).update(status="pending", delivered_run=None)
    Thread.objects.filter(pk=run.thread_id).update(open_run=None, active_run=None)
    assert runs_sweep()["inputs_started"] == 1
    queued.refresh_from_db()
    assert queued.status == "delivered"
    drive(queued.delivered_run)
    assert runs_sweep()["inputs_started"] == 0
