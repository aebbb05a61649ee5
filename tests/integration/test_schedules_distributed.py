"""Schedules in the distributed mode: `celery beat` sends the one-second tick, a `celery
worker` fires the due slots and runs what they start (PostgreSQL, Redis; conftest.py)."""

from __future__ import annotations

import datetime as dt
import time

from django.utils import timezone

from common.audit import Actor
from runs.models import Run, Schedule
from runs.operations.services.schedules import schedule_pause, schedule_plan
from tests.factories import scripted_agent
from tests.processes import wait_for

INTERVAL = 10
ON_TIME = 2.0  # seconds: a slot's run starts within this of the slot


def every_ten_seconds(name: str, catch_up: str = "skip") -> tuple[Schedule, dt.datetime]:
    """A schedule every INTERVAL seconds whose first slot is two seconds from now."""
    schedule = Schedule(
        name=name,
        agent=scripted_agent([{"text": "ok"}]),
        message=f"{name}: report",
        kind="interval",
        interval_seconds=INTERVAL,
        catch_up=catch_up,
    )
    schedule_plan(schedule)
    schedule.next_run_at = slot = timezone.now() + dt.timedelta(seconds=2)
    schedule.save()
    return schedule, slot


def runs_of(schedule: Schedule) -> list[Run]:
    return list(Run.objects.filter(schedule=schedule).order_by("created_at"))


def wait_runs(schedule: Schedule, count: int, timeout: float) -> list[Run]:
    wait_for(lambda: len(runs_of(schedule)) >= count, timeout, f"{count} runs of {schedule}")
    return runs_of(schedule)


def sleep_until(moment: dt.datetime) -> None:
    time.sleep(max((moment - timezone.now()).total_seconds(), 0))


def late(run: Run, slot: dt.datetime) -> float:
    return (run.created_at - slot).total_seconds()


def test_an_interval_schedule_fires_on_time_and_stops_when_paused(processes):
    processes("worker")
    processes("beat")
    schedule, slot = every_ten_seconds("on time")
    first = wait_runs(schedule, 1, 10)[0]
    assert 0 <= late(first, slot) < ON_TIME
    second = wait_runs(schedule, 2, INTERVAL + 5)[1]
    assert 0 <= late(second, slot + dt.timedelta(seconds=INTERVAL)) < ON_TIME
    assert {run.run_mode for run in (first, second)} == {"scheduled"}
    schedule_pause(schedule, Actor(label="tester"))
    sleep_until(slot + dt.timedelta(seconds=2 * INTERVAL + 3))  # past the third slot
    assert len(runs_of(schedule)) == 2
    wait_for(
        lambda: not Run.objects.filter(schedule=schedule).exclude(status="done").exists(),
        20,
        "the runs to finish",
    )
    assert {run.final_output for run in runs_of(schedule)} == {"ok"}


def test_after_beat_was_down_catch_up_once_runs_once_and_skip_runs_nothing(processes):
    processes("worker")
    beat = processes("beat")
    once, slot = every_ten_seconds("catch up once", catch_up="once")
    skip, _ = every_ten_seconds("catch up skip", catch_up="skip")
    Schedule.objects.filter(pk=skip.pk).update(next_run_at=slot)
    wait_runs(once, 1, 10)
    wait_runs(skip, 1, 10)
    beat.stop()
    # down through the slots at +10 s and +20 s (more than an interval and its grace)
    sleep_until(slot + dt.timedelta(seconds=2 * INTERVAL + 2))
    assert (len(runs_of(once)), len(runs_of(skip))) == (1, 1)
    restarted = timezone.now()
    processes("beat", "beat-again")
    missed_up_to = slot + dt.timedelta(seconds=2 * INTERVAL)
    wait_for(
        lambda: (
            Schedule.objects.filter(
                pk__in=[once.pk, skip.pk], last_run_at__gte=missed_up_to
            ).count()
            == 2
        ),
        INTERVAL - 3,
        "both schedules to fire their missed slots",
    )
    once.refresh_from_db()
    skip.refresh_from_db()
    caught_up = runs_of(once)[1]
    assert once.last_outcome == f"caught up 2 missed: started run {caught_up.pk}"
    assert skip.last_outcome == "skipped 2 missed"
    assert caught_up.created_at >= restarted
    assert (len(runs_of(once)), len(runs_of(skip))) == (2, 1)
    # then the regular rhythm again: the +30 s slot fires once for each
    regular = slot + dt.timedelta(seconds=3 * INTERVAL)
    assert once.next_run_at == skip.next_run_at == regular
    assert 0 <= late(wait_runs(once, 3, 10)[2], regular) < ON_TIME
    assert 0 <= late(wait_runs(skip, 2, 10)[1], regular) < ON_TIME
    time.sleep(0.5)
    assert (len(runs_of(once)), len(runs_of(skip))) == (3, 2)
