"""The embedded default fires schedules: the in-process worker's one-second tick starts a
schedule's runs and the in-process Celery worker runs them to the end."""

from __future__ import annotations

import time

import pytest

from runs.models import Run, Schedule
from runs.operations.services.schedules import schedule_plan
from tests.factories import scripted_agent


@pytest.mark.slow  # starts a Celery worker and the tick in this process
@pytest.mark.usefixtures("empty_broker")
@pytest.mark.django_db(transaction=True)
def test_the_embedded_tick_fires_a_one_second_interval_schedule():
    from runs.embedded import start_embedded_worker, stop_embedded_worker

    schedule = Schedule(
        name="every second",
        agent=scripted_agent([{"text": "tick"}]),
        message="tick",
        kind="interval",
        interval_seconds=1,
    )
    schedule_plan(schedule)
    schedule.save()
    first_slot = schedule.next_run_at
    start_embedded_worker()
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if Run.objects.filter(schedule=schedule, status="done").count() >= 2:
                break
            time.sleep(0.1)
    finally:
        stop_embedded_worker()
    runs = list(Run.objects.filter(schedule=schedule).order_by("created_at"))
    done = [run for run in runs if run.status == "done"]
    assert len(done) >= 2, [(r.status, r.status_reason) for r in runs]
    assert {run.run_mode for run in runs} == {"scheduled"}
    assert {run.final_output for run in done} == {"tick"}
    assert len({run.thread_id for run in runs}) == len(runs)  # thread policy "new"
    schedule.refresh_from_db()
    assert schedule.last_run_at is not None and schedule.last_run_at > first_slot
    # fired on the one-second tick: each run started within two seconds of its slot
    assert (runs[0].created_at - first_slot).total_seconds() < 2.0
