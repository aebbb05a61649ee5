"""Claims, leases, fencing, the sweep, delegation and the embedded worker."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from agents.models import Note
from common.audit import Actor
from common.errors import DecisionConflict, InvalidInput
from runs.models import Message, Run, RunEvent, Ticket
from runs.runtime.ports import LeaseLostError
from runs.runtime.testing import play_turn
from runs.services import dispatch
from runs.services.execution import run_advance, run_execute, runs_sweep
from runs.services.leases import run_claim
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from runs.store import OrmCheckpointStore
from tests.factories import call, publish, scripted_agent
from tests.processes import wait_for
from tests.runs.helpers import (
    activations,
    assert_activations_closed,
    assert_gap_free,
    drive,
    events,
    expire_lease,
)


@pytest.mark.django_db
def test_a_stale_worker_cannot_write_after_another_claimed_the_run():
    run = run_start(agent=scripted_agent([{"text": "hello"}]), messages="hi")
    first = run_claim(run_id=run.pk, worker="w1")
    expire_lease(run)
    assert runs_sweep()["recovered"] == 1
    second = run_claim(run_id=run.pk, worker="w2")
    assert second.attempt == first.attempt + 1
    with pytest.raises(LeaseLostError):
        run_execute(run=first, worker="w1")
    run_execute(run=second, worker="w2")
    run.refresh_from_db()
    assert run.status_reason == "natural"
    assert Message.objects.filter(thread=run.thread).count() == 2  # no duplicate reply
    assert_gap_free(run)


@pytest.mark.django_db
def test_a_live_segment_the_sweep_took_back_writes_nothing_more():
    """A segment whose renewal came late (a saturated worker): the sweep closed its
    activation and made the run due; before any claim, the segment's own checkpoint is
    refused, so the log never goes on after the interruption without a new run_start."""
    run = run_start(agent=scripted_agent([{"text": "late"}]), messages="hi")
    late = run_claim(run_id=run.pk, worker="w1")
    expire_lease(run)
    assert runs_sweep()["recovered"] == 1
    with pytest.raises(LeaseLostError):
        run_execute(run=late, worker="w1")
    assert Message.objects.filter(thread=run.thread).count() == 1  # the input only
    drive(run)
    run.refresh_from_db()
    assert run.status_reason == "natural"
    assert_gap_free(run)


@pytest.mark.django_db
def test_sweep_recovers_a_dead_workers_run_and_gives_up_on_a_poison_run(settings):
    settings.AWAKEN_MAX_ATTEMPTS = 2
    run = run_start(agent=scripted_agent([{"text": "hello"}]), messages="hi")
    for _ in range(2):
        assert run_claim(run_id=run.pk, worker="dies") is not None
        expire_lease(run)
        assert runs_sweep()["recovered"] == 1
    assert run_claim(run_id=run.pk, worker="dies") is not None
    expire_lease(run)
    assert runs_sweep()["given_up"] == 1
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "error")
    assert "gave up after 2 worker crashes" in run.error_payload["message"]
    assert_gap_free(run)


class WorkerKilled(BaseException):
    """What SIGKILL does to a segment: it stops there, and nothing after it runs."""


def kill_at_checkpoint(monkeypatch, number: int, kill: type[BaseException] = WorkerKilled) -> None:
    """The segment dies when it reaches its `number`th checkpoint (1: before any)."""
    real = OrmCheckpointStore.checkpoint
    reached = [0]

    def checkpoint(store, checkpoint):  # type: ignore[no-untyped-def]
        reached[0] += 1
        if reached[0] == number:
            raise kill
        real(store, checkpoint)

    monkeypatch.setattr(OrmCheckpointStore, "checkpoint", checkpoint)


TWO_STEPS = [
    {"text": "", "tool_calls": [call("calculator", {"expression": "6*7"})]},
    {"text": "42"},
]


@pytest.mark.django_db
@pytest.mark.parametrize("recovery", ["sweep", "redelivered-task"])
@pytest.mark.parametrize("killed_at", [1, 2], ids=["before-a-checkpoint", "after-a-step"])
def test_a_killed_activation_is_closed_before_the_next_one_starts(monkeypatch, recovery, killed_at):
    run = run_start(agent=scripted_agent(TWO_STEPS), messages="6*7?")
    claimed = run_claim(run_id=run.pk, worker="doomed")
    kill_at_checkpoint(monkeypatch, killed_at)
    with pytest.raises(WorkerKilled):
        run_execute(run=claimed, worker="doomed")
    monkeypatch.undo()
    expire_lease(run)
    if recovery == "sweep":
        assert runs_sweep()["recovered"] == 1
        # closed with the recovery, before any worker claims the run again
        assert activations(run)[-1][-1] == "error"
    else:  # the dead worker's task, delivered again, finds the run's lease expired
        assert run_advance(run_id=run.pk, worker="w2") == "completed"
    run = drive(run)
    assert (run.status_reason, run.final_output) == ("natural", "42")
    first, second = activations(run)
    assert first[-1] == "error"
    assert first[-2] == ("run_start" if killed_at == 1 else "step_end")
    assert events(run, "error") == [
        {
            "event_type": "error",
            "message": events(run, "error")[0]["message"],
            "code": "activation_interrupted",
        }
    ]
    assert second[0] == "run_start" and second[-2:] == ["state_snapshot", "run_finish"]
    assert len(events(run, "run_start")) == 2
    assert_activations_closed(run)
    assert_gap_free(run)


@pytest.mark.django_db
def test_a_segment_stopped_by_its_worker_shutting_down_closes_its_activation(monkeypatch):
    run = run_start(agent=scripted_agent(TWO_STEPS), messages="6*7?")
    kill_at_checkpoint(monkeypatch, 2, kill=SystemExit)  # warm shutdown of a pool child
    with pytest.raises(SystemExit):
        run_advance(run_id=run.pk, worker="stopping")
    monkeypatch.undo()
    run.refresh_from_db()
    assert (run.status, run.due, run.lease_owner) == ("running", True, "")
    assert activations(run)[0][-2:] == ["step_end", "error"]
    run = drive(run)
    assert run.status_reason == "natural"
    assert len(activations(run)) == 2
    assert_activations_closed(run)
    assert_gap_free(run)


@pytest.mark.django_db
def test_recovering_a_run_whose_activation_never_reached_the_log_adds_no_closing_event():
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]}],
        permission={
            "default_behavior": "allow",
            "rules": [{"tool": "write_note", "behavior": "ask"}],
        },
    )
    run = drive(run_start(agent=agent, messages="note"))
    decision_submit(ticket=Ticket.objects.get(run=run), action="reject")
    before = RunEvent.objects.filter(run=run).count()
    assert run_claim(run_id=run.pk, worker="doomed") is not None  # dies before a checkpoint
    expire_lease(run)
    assert runs_sweep()["recovered"] == 1
    assert RunEvent.objects.filter(run=run).count() == before  # nothing of it was logged
    run = drive(run)
    assert run.status == "done"
    assert not events(run, "error")
    assert_activations_closed(run)
    assert_gap_free(run)


@pytest.mark.django_db
@pytest.mark.parametrize("skew_minutes", [10, -10], ids=["ahead", "behind"])
def test_leases_go_by_the_database_clock_not_a_workers(monkeypatch, skew_minutes):
    run = run_start(agent=scripted_agent([{"text": "hello"}]), messages="hi")
    real_now = timezone.now
    skewed = lambda: real_now() + dt.timedelta(minutes=skew_minutes)  # noqa: E731

    monkeypatch.setattr(timezone, "now", skewed)  # this worker's clock is off
    first = run_claim(run_id=run.pk, worker="skewed")
    assert first is not None
    monkeypatch.setattr(timezone, "now", real_now)
    assert run_claim(run_id=run.pk, worker="punctual") is None  # the lease is live
    monkeypatch.setattr(timezone, "now", skewed)
    assert run_claim(run_id=run.pk, worker="other-skewed") is None
    assert runs_sweep()["recovered"] == 0
    run.refresh_from_db()
    assert (run.lease_owner, run.attempt) == ("skewed", first.attempt)
    assert dt.timedelta(0) < run.lease_expires_at - real_now() <= dt.timedelta(minutes=1)


def lose_the_database_at_checkpoints(monkeypatch, times: int) -> None:
    real = OrmCheckpointStore.checkpoint
    left = [times]

    def checkpoint(store, checkpoint):  # type: ignore[no-untyped-def]
        if left[0]:
            left[0] -= 1
            raise OperationalError("terminating connection due to administrator command")
        real(store, checkpoint)

    monkeypatch.setattr(OrmCheckpointStore, "checkpoint", checkpoint)


@pytest.mark.django_db(transaction=True)
def test_losing_the_database_mid_segment_loses_the_step_not_the_run(monkeypatch):
    run = run_start(agent=scripted_agent([{"text": "hello"}]), messages="hi")
    lose_the_database_at_checkpoints(monkeypatch, times=1)
    rung: list[str] = []
    monkeypatch.setattr(dispatch, "_enqueue", rung.append)

    assert run_advance(run_id=run.pk, worker="w1") == "interrupted"
    run.refresh_from_db()
    assert (run.status, run.due, run.lease_owner, run.recoveries) == ("running", True, "", 1)
    assert rung == [str(run.pk)]  # due again at once, not after the lease expires

    assert run_advance(run_id=run.pk, worker="w1") == "completed"
    run.refresh_from_db()
    assert (run.status_reason, run.final_output) == ("natural", "hello")
    assert Message.objects.filter(thread=run.thread).count() == 2
    # the interrupted activation is closed before the next one starts
    first, second = activations(run)
    assert first == ["run_start", "error"]
    assert events(run, "error")[0]["code"] == "activation_interrupted"
    assert second[0] == "run_start" and second[-1] == "run_finish"
    assert_gap_free(run)


@pytest.mark.django_db(transaction=True)
def test_a_run_that_keeps_losing_the_database_is_given_up_visibly(monkeypatch, settings):
    settings.AWAKEN_MAX_ATTEMPTS = 1
    run = run_start(agent=scripted_agent([{"text": "hello"}]), messages="hi")
    lose_the_database_at_checkpoints(monkeypatch, times=2)

    assert run_advance(run_id=run.pk, worker="w1") == "interrupted"
    assert run_advance(run_id=run.pk, worker="w1") == "failed"
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "error")
    assert "gave up after 1 interruptions" in run.error_payload["message"]
    assert "database error: terminating connection" in run.error_payload["message"]
    assert_gap_free(run)


@pytest.mark.django_db
def test_sweep_redispatches_due_runs_whose_doorbell_was_lost(django_capture_on_commit_callbacks):
    run = run_start(agent=scripted_agent([{"text": "hello"}]), messages="hi")
    Run.objects.filter(pk=run.pk).update(dispatched_at=timezone.now() - dt.timedelta(minutes=5))
    with django_capture_on_commit_callbacks() as callbacks:
        counts = runs_sweep()
    assert counts["redispatched"] == 1 and len(callbacks) == 1


@pytest.mark.django_db
def test_delegation_runs_a_persisted_child_and_returns_its_answer():
    child_agent = scripted_agent([{"text": "child answer"}], slug="helper")
    parent_agent = scripted_agent(
        [
            {"text": "", "tool_calls": [call("agent_run_helper", {"prompt": "do it"})]},
            {"text": "parent done"},
        ],
        tools=[],
    )
    parent_agent.delegates.add(child_agent)
    publish(parent_agent)
    parent = drive(run_start(agent=parent_agent, messages="delegate please"))
    assert parent.status_reason == "natural"
    child = Run.objects.get(parent_run=parent)
    assert (child.status_reason, child.final_output, child.origin) == (
        "natural",
        "child answer",
        "subagent",
    )
    assert child.parent_tool_call_id == events(parent, "tool_call_done")[0]["id"]
    result = events(parent, "tool_call_done")[0]["result"]
    assert result["data"]["response"] == "child answer"
    assert result["metadata"] == {"child_run_id": str(child.pk)}
    assert child.thread.parent_thread_id == parent.thread_id
    assert_gap_free(child)


@pytest.mark.django_db
def test_a_child_waiting_on_a_ticket_suspends_the_parent_until_it_finishes():
    child_agent = scripted_agent(
        [
            {"text": "", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]},
            {"text": "noted"},
        ],
        slug="scribe",
        permission={"default_behavior": "ask"},
    )
    parent_agent = scripted_agent(
        [
            {"text": "", "tool_calls": [call("agent_run_scribe", {"prompt": "note it"})]},
            {"text": "boss done"},
        ],
        tools=[],
    )
    parent_agent.delegates.add(child_agent)
    publish(parent_agent)
    parent = drive(run_start(agent=parent_agent, messages="go"))
    child = Run.objects.get(parent_run=parent)
    assert (parent.status, child.status) == ("waiting", "waiting")
    parent_ticket = Ticket.objects.get(run=parent)
    assert parent_ticket.ticket_id == f"delegate_run:{child.pk}"
    assert parent_ticket.reason == "agent_delegate:suspended"
    assert list(Ticket.objects.for_operators()) == [Ticket.objects.get(run=child)]
    with pytest.raises(InvalidInput, match="answered by child run"):
        decision_submit(ticket=parent_ticket, action="reject", actor=Actor(label="opa"))
    decision_submit(ticket=Ticket.objects.get(run=child), action="approve")
    child = drive(child)
    assert child.status_reason == "natural"
    parent_ticket.refresh_from_db()
    assert parent_ticket.status == "decided" and parent_ticket.decision.actor_label == "system"
    parent = drive(parent)
    assert (parent.status_reason, parent.final_output) == ("natural", "boss done")
    assert Note.objects.count() == 1


@pytest.mark.django_db
def test_cancelling_a_parent_cancels_its_children():
    child_agent = scripted_agent(
        [{"text": "", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]}],
        slug="slowpoke",
        permission={"default_behavior": "ask"},
    )
    parent_agent = scripted_agent(
        [{"text": "", "tool_calls": [call("agent_run_slowpoke", {"prompt": "x"})]}], tools=[]
    )
    parent_agent.delegates.add(child_agent)
    publish(parent_agent)
    parent = drive(run_start(agent=parent_agent, messages="go"))
    run_cancel(run=parent)
    child = Run.objects.get(parent_run=parent)
    assert child.status_reason == "cancelled"
    assert Ticket.objects.filter(status="pending").count() == 0


@pytest.mark.django_db(transaction=True)
def test_cancel_while_the_model_streams_ends_the_run_within_a_second(monkeypatch):
    from agents.providers import scripted

    streaming = threading.Event()

    def play_turn_telling_when_it_streams(turn, cancel):
        for chunk in play_turn(turn, cancel):
            streaming.set()
            yield chunk

    monkeypatch.setattr(scripted, "play_turn", play_turn_telling_when_it_streams)
    agent = scripted_agent([{"text": " ".join(["word"] * 40), "delay": 8}])
    run = run_start(agent=agent, messages="talk slowly")
    worker = threading.Thread(
        target=lambda: (run_advance(run_id=run.pk, worker="w1"), connection.close())
    )
    worker.start()
    streaming.wait(timeout=5)  # the model sent its first words
    asked = time.monotonic()
    run_cancel(run=run)
    worker.join(timeout=5)
    elapsed = time.monotonic() - asked
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "cancelled")
    assert elapsed < 1.0, elapsed
    types = list(
        RunEvent.objects.filter(run=run).order_by("seq").values_list("event_type", flat=True)
    )
    assert types[-4:] == ["state_snapshot", "step_end", "state_snapshot", "run_finish"]
    assert "inference_complete" in types
    assert_gap_free(run)


@pytest.mark.slow  # starts a Celery worker in this process
@pytest.mark.usefixtures("empty_broker")
@pytest.mark.django_db(transaction=True)
def test_the_embedded_worker_runs_a_run_to_the_end():
    from runs.embedded import start_embedded_worker, stop_embedded_worker

    start_embedded_worker()
    try:
        agent = scripted_agent(
            [
                {"text": "", "tool_calls": [call("calculator", {"expression": "2+3"})]},
                {"text": "five"},
            ]
        )
        run = run_start(agent=agent, messages="add")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            run.refresh_from_db()
            if run.status == "done":
                break
            time.sleep(0.05)
    finally:
        stop_embedded_worker()
    assert (run.status_reason, run.final_output) == ("natural", "five"), list(
        RunEvent.objects.filter(run=run).values_list("seq", "event_type")
    )
    assert_gap_free(run)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_decisions_apply_exactly_once():
    agent = scripted_agent(
        [
            {"text": "", "tool_calls": [call("write_note", {"title": "once", "body": "b"})]},
            {"text": "ok"},
        ],
        permission={"default_behavior": "ask"},
    )
    run = drive(run_start(agent=agent, messages="go"))
    ticket = Ticket.objects.get(run=run)
    barrier = threading.Barrier(20)
    outcomes: list[str] = []
    lock = threading.Lock()

    def decide(index: int) -> None:
        try:
            barrier.wait()
            decision_submit(
                ticket=Ticket.objects.get(pk=ticket.pk),
                action="approve",
                actor=Actor(label=f"op{index}"),
            )
            result = "applied"
        except DecisionConflict:
            result = "conflict"
        finally:
            connection.close()
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes).count("applied") == 1
    assert outcomes.count("conflict") == 19
    assert len(events(run, "ticket_decided")) == 1
    run = drive(run)
    assert run.status_reason == "natural"
    assert Note.objects.filter(title="once").count() == 1
    assert_gap_free(run)


@pytest.mark.django_db(transaction=True)
def test_the_process_lease_renewer_keeps_a_long_segment_and_stops_a_stolen_one(settings):
    from runs.runtime.ports import CancellationToken
    from runs.services.leases import LeaseRenewer

    settings.AWAKEN_LEASE_SECONDS = lease = 0.6
    renew_every = lease / 3  # the renewer's period
    kept = run_start(agent=scripted_agent([{"text": "a"}]), messages="long")
    stolen = run_start(agent=scripted_agent([{"text": "b"}]), messages="taken")
    claims = [run_claim(run_id=run.pk, worker="w1") for run in (kept, stolen)]
    first_expiry = Run.objects.get(pk=kept.pk).lease_expires_at

    def kept_lease_outlived_the_first() -> bool:
        expiry = Run.objects.get(pk=kept.pk).lease_expires_at
        return expiry > first_expiry + dt.timedelta(seconds=lease)

    renewer, tokens = LeaseRenewer(), [CancellationToken(), CancellationToken()]
    with renewer.hold(kept.pk, claims[0].attempt, tokens[0]):
        with renewer.hold(stolen.pk, claims[1].attempt, tokens[1]):
            Run.objects.filter(pk=stolen.pk).update(attempt=claims[1].attempt + 1)  # w2 took it
            wait_for(tokens[1].is_cancelled, timeout=2 * lease, what="the stolen run's stop")
            assert tokens[1].is_cancelled()  # the segment of the stolen run is told to stop
        wait_for(kept_lease_outlived_the_first, timeout=3 * lease, what="the kept run's renewal")
        assert not tokens[0].is_cancelled()
        assert Run.objects.get(pk=kept.pk).lease_expires_at > first_expiry + dt.timedelta(
            seconds=lease
        )
    Run.objects.filter(pk=kept.pk).update(lease_expires_at=None)  # as run_release does
    time.sleep(2 * renew_every)  # no renewal lands after the segment let go
    assert Run.objects.get(pk=kept.pk).lease_expires_at is None
