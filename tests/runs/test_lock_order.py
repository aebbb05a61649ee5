"""Every transaction on runs and threads takes its row locks in the one order
(runs.services.locks): the run, then its thread, then the rows that belong to them; a
parent's before its children's. Recorded from the SQL each transaction sends while a
thread lives through every input mode, decisions, interrupts, a worker's claims and
checkpoints, a cancel that cascades to a delegate, a failure and a retry.

PostgreSQL only: the order matters where rows are locked (SQLite locks the database)."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

import pytest
from django.db import connection, transaction

from runs.models import PendingInput, Run, Thread, Ticket
from runs.services.execution import run_fail
from runs.services.inputs import input_edit, input_retract, thread_interrupt
from runs.services.locks import retry_lock_conflicts
from runs.services.runs import run_cancel, run_retry
from runs.services.submission_flow import input_submit, run_start
from runs.services.tickets import decision_submit
from tests.factories import APPROVAL, call, note_call, publish, scripted_agent
from tests.runs.helpers import drive
from tests.runs.lock_order import recording, tables_locked, violations

pytestmark = [
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="row locks and their order: PostgreSQL"
    ),
]


def send(thread: Thread, text: str, mode: str) -> object:
    return input_submit(agent=None, messages=text, thread=thread, mode=mode)


def pending_ticket(run: Run) -> Ticket:
    return Ticket.objects.get(run=run, status="pending")


@pytest.mark.django_db
def test_a_thread_s_whole_life_takes_its_locks_run_then_thread_then_its_rows():
    agent = scripted_agent(
        [{"text": "", "tool_calls": [note_call("n")]}, {"text": "done"}], permission=APPROVAL
    )
    with recording() as recorder:
        run = drive(run_start(agent=agent, messages="go"))  # waits for its ticket
        thread = Thread.objects.get(pk=run.thread_id)
        send(thread, "and mind this", "steer")
        queued = send(thread, "after that", "queue").input
        input_edit(input_id=queued.pk, messages="after that, please")
        send(thread, "no, do this instead", "resume_open_run")  # supersedes the ticket
        run = drive(run)  # the steer input at the step boundary; waits again
        decision_submit(ticket=pending_ticket(run), action="approve")
        run = drive(run)  # finishes: the queued input starts the next run
        nxt = Run.objects.filter(thread=thread).exclude(pk=run.pk).get()
        send(thread, "stop that", "interrupt_then_queue")  # cancels it: one more starts
        later = send(thread, "and later", "queue").input
        input_retract(input_id=later.pk)
        send(thread, "later still", "queue")
        thread_interrupt(thread=thread, reason="enough")
        again = drive(run_start(agent=agent, messages="again", thread=thread))
        run_start(agent=agent, messages="continue", thread=thread)  # continues it
        drive(again)
        run_fail(run_id=again.pk, attempt=None, message="gave up")
        drive(run_retry(run=again))
    nxt.refresh_from_db()
    assert nxt.status_reason == "cancelled"
    assert PendingInput.objects.filter(thread=thread, status="pending").count() == 0
    assert not violations(recorder), "\n".join(violations(recorder))
    assert {"runs_run", "runs_thread", "runs_ticket", "runs_pendinginput"} <= tables_locked(
        recorder
    )


@pytest.mark.django_db
def test_a_cancel_takes_the_parent_s_run_and_thread_before_its_child_s():
    child_agent = scripted_agent(
        [{"text": "", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]}],
        slug="helper",
        permission={"default_behavior": "ask"},
    )
    parent_agent = scripted_agent(
        [{"text": "", "tool_calls": [call("agent_run_helper", {"prompt": "x"})]}], tools=[]
    )
    parent_agent.delegates.add(child_agent)
    publish(parent_agent)
    parent = drive(run_start(agent=parent_agent, messages="go"))
    child = Run.objects.get(parent_run=parent)
    assert child.status == "waiting"
    with recording() as recorder:
        run_cancel(run=parent)
        thread_interrupt(thread=Thread.objects.get(pk=child.thread_id))
    child.refresh_from_db()
    assert child.status_reason == "cancelled"
    assert not violations(recorder), "\n".join(violations(recorder))


@pytest.mark.django_db
def test_the_check_finds_a_thread_locked_before_its_run():
    run = drive(run_start(agent=scripted_agent([{"text": "hi"}]), messages="go"))
    with recording() as recorder, transaction.atomic():
        Thread.objects.select_for_update().get(pk=run.thread_id)
        Run.objects.filter(pk=run.pk).update(priority=5)
    found = violations(recorder)
    assert len(found) == 1 and "run" in found[0] and "after thread" in found[0], found


@pytest.mark.django_db(transaction=True)
def test_a_transaction_ended_by_a_deadlock_runs_again_and_succeeds(caplog):
    run = drive(run_start(agent=scripted_agent([{"text": "hi"}]), messages="go"))
    other = drive(run_start(agent=scripted_agent([{"text": "hi"}]), messages="go"))
    barrier = threading.Barrier(2)
    attempts: Counter[str] = Counter()

    @retry_lock_conflicts
    @transaction.atomic
    def touch(first: Any, second: Any, name: str) -> None:
        attempts[name] += 1
        Thread.objects.filter(pk=first).update(title=name)
        if attempts[name] == 1:  # both hold their first row: each waits for the other's
            barrier.wait(timeout=10)
        Thread.objects.filter(pk=second).update(title=name)

    outcomes: list[object] = []

    def in_thread(first: Any, second: Any, name: str) -> None:
        try:
            touch(first, second, name)
            outcomes.append("ok")
        except Exception as exc:
            outcomes.append(exc)
        finally:
            connection.close()

    workers = [
        threading.Thread(target=in_thread, args=(run.thread_id, other.thread_id, "a")),
        threading.Thread(target=in_thread, args=(other.thread_id, run.thread_id, "b")),
    ]
    with caplog.at_level(logging.WARNING, logger="runs.services.locks"):
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(30)
    assert outcomes == ["ok", "ok"]
    assert sorted(attempts.values()) == [1, 2]  # PostgreSQL ended one; it ran again
    assert "touch ended by a deadlock (deadlock detected)" in caplog.text
