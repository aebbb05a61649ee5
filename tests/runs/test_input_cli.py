"""The run-control commands in-process (call_command): send_input in each mode, inputs
(list, --all, --edit, --retract), thread_interrupt and set_priority, with their errors."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from common.models import AuditEntry
from runs.models import PendingInput, Run, Ticket
from runs.services.submission_flow import input_submit
from tests.factories import done_run, scripted_agent, waiting_run
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

MISSING = "0190e7a0-0000-7000-8000-000000000000"


def manage(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def busy_run() -> Run:
    run = input_submit(agent=scripted_agent([{"text": "ok"}], slug="greeter"), messages="go").run
    assert run is not None and run.status == "created"
    return run


def test_send_input_starts_a_run_on_an_idle_thread(settings):
    done = done_run()
    out = manage("send_input", str(done.thread_id), "more please", "--priority", "7")
    started = Run.objects.exclude(pk=done.pk).get(thread_id=done.thread_id)
    assert f"run {started.pk} started on thread {done.thread_id} with input #1" in out
    assert "(priority 7)" in out and started.priority == 7
    assert AuditEntry.objects.get(action="run.start", run=started).actor_label == "cli"


def test_send_input_queues_steers_and_interrupts():
    run = busy_run()
    thread = str(run.thread_id)
    out = manage("send_input", thread, "after that")
    assert "queued as input #2" in out and "starts the thread's next run" in out
    out = manage("send_input", thread, "mind this", "--mode", "steer", "--as", "ops-bot")
    assert "input #3" in out and f"waits for the next step of run {run.pk}" in out
    assert PendingInput.objects.get(thread=run.thread, seq=3).actor_label == "ops-bot"
    out = manage("send_input", thread, "instead", "--mode", "interrupt_then_queue")
    assert f"run {run.pk} cancelled" in out
    assert Run.objects.get(pk=run.pk).status_reason == "cancelled"


def test_send_input_resumes_a_waiting_run():
    run = waiting_run()
    ticket = Ticket.objects.get(run=run)
    out = manage("send_input", str(run.thread_id), "skip it", "--mode", "resume_open_run")
    assert f"run {run.pk} resumed with input #1" in out
    assert f"superseded tickets: {ticket.pk}" in out


def test_send_input_errors():
    run = busy_run()
    thread = str(run.thread_id)
    cases = [
        (("send_input", "nope", "x"), "unknown thread 'nope': not an id"),
        (("send_input", MISSING, "x"), f"unknown thread '{MISSING}'"),
        (("send_input", thread, "x", "--mode", "later"), "mode must be one of"),
        (("send_input", thread, "x", "--priority", "300"), "priority must be an integer from 0"),
        (("send_input", thread, "x", "--agent", "ghost"), "unknown agent 'ghost'"),
        (("send_input", thread, "   "), "messages[0].content is empty"),
        (("send_input", thread, "x", "--mode", "resume_open_run"), "not waiting"),
    ]
    for args, message in cases:
        with pytest.raises(CommandError, match=None) as raised:
            manage(*args)
        assert message in str(raised.value), (args, str(raised.value))
    assert PendingInput.objects.filter(thread=run.thread).count() == 1


def test_inputs_lists_edits_and_retracts():
    run = busy_run()
    thread = str(run.thread_id)
    manage("send_input", thread, "first draft")
    steer = manage("send_input", thread, "steer me", "--mode", "steer")
    assert "input #3" in steer
    listing = manage("inputs", thread)
    assert f"thread {thread}: 2 pending inputs; open run {run.pk} (created)" in listing
    assert "#2 pending · queue · priority 128 · by cli" in listing
    assert f"#3 pending into run {run.pk} · steer" in listing and "    steer me" in listing
    queued = PendingInput.objects.get(thread=run.thread, seq=2)

    out = manage("inputs", "--edit", str(queued.pk), "final text", "--priority", "5")
    assert "input #2 changed" in out and "    final text" in out
    queued.refresh_from_db()
    assert (queued.text, queued.priority) == ("final text", 5)
    out = manage("inputs", "--edit", str(queued.pk), "--priority", "6")
    assert "priority 6" in out

    out = manage("inputs", "--retract", str(queued.pk))
    assert "input #2 retracted" in out
    assert "#2" not in manage("inputs", thread).split("\n", 1)[1]
    everything = manage("inputs", thread, "--all")
    assert "3 inputs" in everything and "#2 retracted" in everything
    assert "#1 delivered to run" in everything and "at new_run" in everything


def test_inputs_errors_for_bad_ids_and_inputs_that_are_not_pending():
    run = busy_run()
    delivered = PendingInput.objects.get(thread=run.thread)  # it started the run
    cases = [
        (("inputs",), "give a thread id"),
        (("inputs", "nope"), "unknown thread 'nope'"),
        (("inputs", "--retract", MISSING), f"unknown input '{MISSING}'"),
        (("inputs", "--edit", "x1", "text"), "unknown input 'x1': not an id"),
        (("inputs", "--retract", str(delivered.pk)), "is delivered already"),
        (("inputs", "--edit", str(delivered.pk), "new"), "only pending input can change"),
        (("inputs", "--edit", str(delivered.pk)), "needs the new text, --priority N, or both"),
        (("inputs", "--edit", str(delivered.pk), "--priority", "-1"), "priority must be"),
        (("inputs", "--edit", MISSING, "--retract", MISSING), "separate actions"),
    ]
    for args, message in cases:
        with pytest.raises(CommandError) as raised:
            manage(*args)
        assert message in str(raised.value), (args, str(raised.value))


def test_thread_interrupt():
    run = busy_run()
    manage("send_input", str(run.thread_id), "one")
    manage("send_input", str(run.thread_id), "two")
    out = manage("thread_interrupt", str(run.thread_id))
    assert f"run {run.pk} cancelled" in out and "2 pending inputs cancelled" in out
    assert set(PendingInput.objects.filter(status="cancelled").values_list("seq", flat=True)) == {
        2,
        3,
    }
    again = manage("thread_interrupt", str(run.thread_id))
    assert "no open run" in again and "0 pending inputs cancelled" in again
    with pytest.raises(CommandError, match="unknown thread"):
        manage("thread_interrupt", MISSING)


def test_thread_interrupt_of_a_running_run_asks_it_to_stop():
    run = busy_run()
    Run.objects.filter(pk=run.pk).update(
        status="running",
        lease_owner="w1",
        lease_expires_at=timezone.now() + dt.timedelta(minutes=1),
    )
    out = manage("thread_interrupt", str(run.thread_id))
    assert f"run {run.pk} asked to stop" in out


def test_set_priority():
    run = busy_run()
    assert manage("set_priority", str(run.pk), "3") == f"run {run.pk}: priority 128 -> 3\n"
    assert Run.objects.get(pk=run.pk).priority == 3
    with pytest.raises(CommandError, match="priority must be an integer from 0"):
        manage("set_priority", str(run.pk), "256")
    with pytest.raises(CommandError, match="unknown run"):
        manage("set_priority", "nope", "3")
    drive(run)
    with pytest.raises(CommandError, match="only a queued run"):
        manage("set_priority", str(run.pk), "3")
