"""What follows a run's end (runs.services.run_end): the declared order is the one run,
every way a run ends runs the pipeline exactly once, an effect that fails takes the end
back with it, and each effect does its one thing given a built context."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from typing import Any

import pytest
from django.utils import timezone

from common.audit import Actor
from common.errors import IllegalTransition
from runs import metrics
from runs.models import BackgroundTask, HourlyStat, PendingInput, Run, Ticket
from runs.operations import effects as operations_fx
from runs.operations.models.failures import FailureGroup
from runs.operations.models.notifications import NotificationDelivery
from runs.replays import effects as replays_fx
from runs.replays.models.replays import ReplayItem
from runs.replays.services.replays import replay_create, replay_request
from runs.runtime.backends.a2a.config import REMOTE_STATE_KEY
from runs.services import end_effects as fx
from runs.services.creation import normalize_input_messages
from runs.services.delivery import messages_json
from runs.services.execution import run_advance, run_fail, runs_sweep
from runs.services.run_end import (
    CANCELLED,
    FAILED,
    FINISHED,
    RunEnded,
    TicketsOpened,
    run_end_effects,
    run_end_effects_declared,
    tickets_opened_effects_declared,
)
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from tests.factories import AgentFactory, ModelFactory, done_run, scripted_agent, waiting_run
from tests.runs.helpers import drive, event_types, expire_lease
from tests.runs.notify_helpers import channel, notify_configured_fixture, rule  # noqa: F401

pytestmark = pytest.mark.django_db

CALLS: list[Any] = []
HERE = "tests.runs.test_run_end"


def record_end(ctx: RunEnded) -> None:
    CALLS.append((ctx.how, ctx.run.pk))


def first(ctx: RunEnded) -> None:
    CALLS.append("first")


def second(ctx: RunEnded) -> None:
    CALLS.append("second")


def explode_on_finish(ctx: RunEnded) -> None:
    if ctx.how == FINISHED:
        raise RuntimeError("effect failed")


def explode(ctx: RunEnded) -> None:
    raise RuntimeError("effect failed")


@pytest.fixture
def recorded(settings: Any) -> Any:
    """The declared effects, then one that records each end."""
    CALLS.clear()
    settings.AWAKEN_RUN_END_EFFECTS = [*settings.AWAKEN_RUN_END_EFFECTS, f"{HERE}.record_end"]
    yield CALLS
    CALLS.clear()


def ended(run: Run, how: str = FINISHED, **fields: Any) -> RunEnded:
    return RunEnded(run=run, how=how, now=timezone.now(), **fields)


def failed(run: Run) -> Run:
    """`run` as the row of a run that just ended with an error (not saved)."""
    run.status, run.status_reason = Run.Status.DONE, "error"
    run.error_payload = {"message": "boom"}
    run.finished_at = timezone.now()
    return run


def counters() -> Counter[str]:
    """The dashboard's run counters, its hours and all time together."""
    found: Counter[str] = Counter()
    for row in HourlyStat.objects.exclude(count=0).filter(metric__startswith="run:"):
        found[row.metric] += row.count
    return found


def queued(event: str) -> int:
    return NotificationDelivery.objects.filter(event=event).count()


# --- the pipeline ------------------------------------------------------------------------------


def test_the_declared_order_is_the_one_run(settings):
    names = [f"{f.__module__}.{f.__name__}" for f in run_end_effects_declared()]
    assert names == settings.AWAKEN_RUN_END_EFFECTS
    opened = [f"{f.__module__}.{f.__name__}" for f in tickets_opened_effects_declared()]
    assert opened == settings.AWAKEN_TICKET_OPENED_EFFECTS
    run = done_run()
    CALLS.clear()
    settings.AWAKEN_RUN_END_EFFECTS = [f"{HERE}.first", f"{HERE}.second"]
    run_end_effects(ended(run))
    settings.AWAKEN_RUN_END_EFFECTS = [f"{HERE}.second", f"{HERE}.first"]
    run_end_effects(ended(run))
    assert CALLS == ["first", "second", "second", "first"]


def test_a_checkpoint_ends_a_run_once_and_later_ends_find_nothing(recorded):
    run = done_run()
    assert recorded == [(FINISHED, run.pk)]
    assert run_fail(run_id=run.pk, attempt=None, message="late") is False
    with pytest.raises(IllegalTransition):
        run_cancel(run=run)
    assert recorded == [(FINISHED, run.pk)]


def test_a_failure_ends_a_run_once(recorded):
    run = waiting_run()
    assert run_fail(run_id=run.pk, attempt=None, message="boom") is True
    assert run_fail(run_id=run.pk, attempt=None, message="again") is False
    assert recorded == [(FAILED, run.pk)]


def test_a_cancel_ends_a_run_once(recorded):
    run = waiting_run()
    run_cancel(run=run)
    with pytest.raises(IllegalTransition):
        run_cancel(run=run)
    assert recorded == [(CANCELLED, run.pk)]


def test_a_run_the_sweep_gives_up_ends_once(recorded, settings):
    run = run_start(agent=scripted_agent([{"text": "hi"}]), messages="hello")
    Run.objects.filter(pk=run.pk).update(
        lease_owner="dead", recoveries=settings.AWAKEN_MAX_ATTEMPTS, due=False
    )
    expire_lease(run)
    assert runs_sweep()["given_up"] == 1
    assert runs_sweep()["given_up"] == 0
    assert recorded == [(FAILED, run.pk)]


def test_a_failing_effect_takes_the_checkpoint_back(settings):
    """The finishing checkpoint rolls back whole; the worker then fails the run, whose
    own end runs the same effects."""
    settings.AWAKEN_RUN_END_EFFECTS = [
        *settings.AWAKEN_RUN_END_EFFECTS,
        f"{HERE}.explode_on_finish",
    ]
    run = run_start(agent=scripted_agent([{"text": "all done"}]), messages="hello")
    assert run_advance(run_id=run.pk, worker="w") == "failed"
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "error")
    assert "RuntimeError: effect failed" in run.error_payload["message"]
    assert "run_finish" not in event_types(run)  # the checkpoint's events never committed
    assert event_types(run)[-1] == "error"
    assert counters() == {"run:failed": 2}  # its hour and all time, never completed


def test_a_failing_effect_takes_the_cancel_back(settings):
    run = waiting_run()
    settings.AWAKEN_RUN_END_EFFECTS = [*settings.AWAKEN_RUN_END_EFFECTS, f"{HERE}.explode"]
    before = event_types(run)
    with pytest.raises(RuntimeError):
        run_cancel(run=run)
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING
    assert event_types(run) == before
    assert Ticket.objects.get(run=run).status == Ticket.Status.PENDING


# --- each effect alone ---------------------------------------------------------------------------


def test_count_finished_moves_the_run_out_of_open_once():
    run = waiting_run()
    assert counters() == {"run:open": 2}  # its hour and all time
    fx.effect_count_finished(ended(failed(run), first=False))
    assert counters() == {"run:open": 2}
    fx.effect_count_finished(ended(run))
    assert counters() == {"run:failed": 2}


def test_notify_ended_queues_run_failed_or_given_up_and_nothing_for_a_cancel_or_replay():
    run = failed(waiting_run())
    rule(channel("https://h.example.com/"))
    operations_fx.effect_notify_ended(ended(run, CANCELLED))
    operations_fx.effect_notify_ended(ended(run, replay=True))
    operations_fx.effect_notify_ended(ended(run, first=False))
    assert queued("run.failed") == 0
    operations_fx.effect_notify_ended(ended(run, error_payload=run.error_payload))
    assert queued("run.failed") == 1
    operations_fx.effect_notify_ended(ended(run, FAILED, given_up=True))
    assert queued("run.given_up") == 1


def test_failure_record_groups_a_failed_run_but_not_a_replay():
    run = failed(waiting_run())
    operations_fx.effect_failure_record(ended(run, replay=True, error_payload=run.error_payload))
    assert not FailureGroup.objects.exists()
    operations_fx.effect_failure_record(ended(run, error_payload=run.error_payload))
    assert FailureGroup.objects.get().last_run_id == run.pk


def test_metrics_count_the_end_on_commit(django_capture_on_commit_callbacks):
    tag = uuid.uuid4().hex[:10]  # series of its own (the multiprocess files outlive runs)
    agent = AgentFactory(model=ModelFactory(slug=f"end-model-{tag}"), slug=f"end-{tag}")
    run = failed(run_start(agent=agent, messages="hi"))
    metrics.agent_slug.cache_clear()

    def finished() -> float:
        labels = {"agent": agent.slug, "outcome": "failed"}
        sample = metrics.process_registry().get_sample_value("awaken_runs_finished_total", labels)
        return sample or 0.0

    with django_capture_on_commit_callbacks(execute=True):
        fx.effect_metrics(ended(run, first=False))
    assert finished() == 0
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        fx.effect_metrics(ended(run, FAILED))  # from the row
        assert finished() == 0  # not before the commit
    for callback in callbacks:
        callback()
    with django_capture_on_commit_callbacks(execute=True):
        fx.effect_metrics(ended(run, agent=agent.slug, started_at=run.created_at))
    assert finished() == 2


def test_background_cancel_ends_unfinished_work_when_the_run_may_have_some():
    run = waiting_run()
    task = BackgroundTask.objects.create(run=run, tool_call_id="c1", kind="report")
    assert fx.effect_background_cancel(ended(run, background_work=False)) == 0
    assert fx.effect_background_cancel(ended(run)) == 1
    task.refresh_from_db()
    assert task.status == BackgroundTask.Status.CANCELLED


def test_deliver_next_starts_the_threads_queued_input():
    run = done_run()
    PendingInput.objects.create(
        thread=run.thread,
        seq=1,
        mode=PendingInput.Mode.QUEUE,
        messages=messages_json(normalize_input_messages("and then?")),
        agent=run.agent,
        actor_label="t",
    )
    assert fx.effect_deliver_next(ended(run, inputs_accepted=0)) is None  # none accepted
    started = fx.effect_deliver_next(ended(run))
    assert started is not None and started.thread_id == run.thread_id
    assert PendingInput.objects.get().status == PendingInput.Status.DELIVERED


def test_replay_ended_finishes_the_item_and_starts_the_next():
    agent = scripted_agent([{"text": "ok"}])
    for index in range(2):
        drive(run_start(agent=agent, messages=f"m{index}"))
    request = replay_request({"agent_id": agent.slug, "concurrency": 1})
    replay_set = replay_create(request=request, actor=Actor(label="ada", source="ui"))
    item = ReplayItem.objects.get(replay_set=replay_set, status=ReplayItem.Status.RUNNING)
    replays_fx.effect_replay_ended(ended(item.replay_run))  # not a replay: nothing
    item.refresh_from_db()
    assert item.status == ReplayItem.Status.RUNNING
    replays_fx.effect_replay_ended(ended(item.replay_run, replay=True))
    item.refresh_from_db()
    assert item.status == ReplayItem.Status.DONE
    assert ReplayItem.objects.filter(status=ReplayItem.Status.RUNNING).count() == 1


def test_abort_remote_after_an_end_outside_its_worker(django_capture_on_commit_callbacks):
    run = waiting_run()
    run.state = {"extensions": {REMOTE_STATE_KEY: {"task_id": "t1"}}}
    with django_capture_on_commit_callbacks() as callbacks:
        fx.effect_abort_remote(ended(run, FINISHED))
    assert callbacks == []
    with django_capture_on_commit_callbacks() as callbacks:
        fx.effect_abort_remote(ended(run, CANCELLED))
    assert len(callbacks) == 1


def test_notify_tickets_queues_ticket_opened_but_not_for_a_replay():
    run = waiting_run()
    rule(channel("https://h.example.com/"))
    tickets = list(Ticket.objects.filter(run=run))
    now = timezone.now()
    assert operations_fx.effect_notify_tickets(TicketsOpened(run, tickets, now, replay=True)) == 0
    assert operations_fx.effect_notify_tickets(TicketsOpened(run, [], now)) == 0
    assert queued("ticket.opened") == 0
    operations_fx.effect_notify_tickets(TicketsOpened(run, tickets, now))
    assert queued("ticket.opened") == 1


def test_replay_decide_decides_a_replays_tickets_by_policy():
    run = waiting_run()
    ticket = Ticket.objects.get(run=run)
    now = timezone.now() + dt.timedelta(seconds=1)
    assert replays_fx.effect_replay_decide(TicketsOpened(run, [ticket], now)) == 0
    assert Ticket.objects.get(pk=ticket.pk).status == Ticket.Status.PENDING
    assert replays_fx.effect_replay_decide(TicketsOpened(run, [ticket], now, replay=True)) == 1
    assert Ticket.objects.get(pk=ticket.pk).status == Ticket.Status.DECIDED
