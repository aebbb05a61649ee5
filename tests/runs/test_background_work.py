"""Background work through the services and the ORM store, the worker played in-process
(`drive` for runs, `background_execute` for tasks): a run waits for the report its tool
started, the finished work wakes it, the sweep recovers lost work and lost wakes, and the
run page and the API show the tasks (docs/background-work.md)."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from agents.tools import background_jobs
from agents.tools.background_jobs import UnknownJobError, background_job, report_job
from runs.models import BackgroundTask, Message, Run
from runs.runtime import types as rt
from runs.services.background import background_claim, background_execute, background_finish
from runs.services.execution import run_advance, runs_sweep
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from runs.store import OrmCheckpointStore
from tests.api.schema_check import conforms
from tests.factories import publish, scripted_agent
from tests.runs.helpers import assert_activations_closed, assert_gap_free, drive, events

pytestmark = pytest.mark.django_db

STARTED = "I've started the report on Q3 sales; I'll share it when it's ready."


def report_run(text: str = "Prepare a report on Q3 sales in 1 seconds") -> Run:
    """A run of the demo model with `slow_report`, driven until it waits for the report."""
    agent = scripted_agent([], tools=["slow_report"])
    return drive(run_start(agent=agent, messages=text))


def the_task(run: Run) -> BackgroundTask:
    return BackgroundTask.objects.get(run=run)


def quick(task: BackgroundTask) -> BackgroundTask:
    """The report takes no time (its arguments say how long it works)."""
    BackgroundTask.objects.filter(pk=task.pk).update(arguments={**task.arguments, "seconds": 0})
    return task


def texts(run: Run) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in Message.objects.filter(thread=run.thread).order_by("seq")]


def expire(task: BackgroundTask) -> None:
    """What time does to a dead worker's lease."""
    past = timezone.now() - dt.timedelta(seconds=1)
    BackgroundTask.objects.filter(pk=task.pk).update(lease_expires_at=past)


def test_a_run_waits_for_its_report_and_finishes_with_it():
    run = report_run()
    assert (run.status, run.status_reason, run.due) == ("waiting", "awaiting_tasks", False)
    assert run.waiting_reason == "background_tasks"
    assert texts(run)[-1] == ("assistant", STARTED)
    task = the_task(run)
    assert (task.status, task.kind, task.label) == ("pending", "report", "report on Q3 sales")
    assert task.arguments == {"topic": "Q3 sales", "seconds": 1}
    assert task.tool_call_id == events(run, "background_task_started")[0]["call_id"]

    started = time.monotonic()
    assert background_execute(task.pk, worker="bg-worker") == "completed"
    assert time.monotonic() - started >= 1.0  # the job's own pace
    task.refresh_from_db()
    assert (task.status, task.attempt, task.error, task.lease_expires_at) == (
        "completed",
        1,
        "",
        None,
    )
    assert task.result.startswith("Report on Q3 sales:")
    assert task.started_at and task.finished_at and task.delivered_at is None
    run.refresh_from_db()
    assert (run.status, run.due) == ("waiting", True)  # woken

    run = drive(run)
    assert (run.status, run.status_reason) == ("done", "natural")
    assert run.final_output == f"The report on Q3 sales is ready: {task.result}"
    task.refresh_from_db()
    assert task.delivered_at is not None
    delivered = f"[background task report on Q3 sales ({task.pk}) completed]\n{task.result}"
    assert texts(run)[3:] == [
        ("assistant", STARTED),
        ("user", delivered),
        ("assistant", run.final_output),
    ]
    assert len(events(run, "run_finish")) == 2  # one per activation: it waited, then ended
    (handed,) = events(run, "background_task_delivered")
    assert (handed["task_id"], handed["status"]) == (str(task.pk), "completed")
    assert_gap_free(run)
    assert_activations_closed(run)


def test_a_job_that_raises_fails_its_task_and_the_model_reads_the_error(monkeypatch):
    def broken(arguments: dict[str, Any], heartbeat: Any) -> Any:
        raise RuntimeError("no data for Q3")

    monkeypatch.setitem(background_jobs.JOBS, "report", broken)
    run = report_run()
    assert background_execute(the_task(run).pk) == "failed"
    task = the_task(run)
    assert (task.status, task.error, task.result) == (
        "failed",
        "RuntimeError: no data for Q3",
        None,
    )
    run = drive(run)
    assert (run.status, run.status_reason) == ("done", "natural")
    assert run.final_output == "The report on Q3 sales failed: RuntimeError: no data for Q3"


def test_the_result_is_stored_json_safe(monkeypatch):
    when = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    monkeypatch.setitem(
        background_jobs.JOBS, "report", lambda arguments, heartbeat: {"t": "a\x00b", "at": when}
    )
    run = report_run()
    assert background_execute(the_task(run).pk) == "completed"
    assert the_task(run).result == {"t": "a\ufffdb", "at": str(when)}


def test_work_finished_while_the_run_still_runs_is_woken_by_its_last_checkpoint(monkeypatch):
    """The race: the task completes after the run's last step started but before its
    final checkpoint commits; that checkpoint (which locks the run row, as the task's
    completion did) sees the work finished and makes the run due."""
    finish = OrmCheckpointStore.checkpoint
    outcomes = []

    def checkpoint(self: OrmCheckpointStore, checkpoint: Any) -> Any:
        if checkpoint.record.status is rt.RunStatus.WAITING:
            for task in BackgroundTask.objects.filter(run_id=self.run_id, status="pending"):
                outcomes.append(background_execute(quick(task).pk, worker="fast"))
                assert Run.objects.get(pk=self.run_id).status == "running"
        return finish(self, checkpoint)

    monkeypatch.setattr(OrmCheckpointStore, "checkpoint", checkpoint)
    agent = scripted_agent([], tools=["slow_report"])
    run = run_start(agent=agent, messages="Prepare a report on Q3 sales")
    run_advance(run_id=run.pk, worker="test-worker")
    assert outcomes == ["completed"]
    run.refresh_from_db()
    assert (run.status, run.status_reason, run.due) == ("waiting", "awaiting_tasks", True)
    run = drive(run)
    assert (run.status, run.status_reason) == ("done", "natural")
    assert run.final_output.startswith("The report on Q3 sales is ready: Report on Q3 sales:")


def test_a_duplicate_or_late_task_message_does_nothing():
    run = report_run()
    task = quick(the_task(run))
    assert background_execute(task.pk) == "completed"
    done = the_task(run)
    assert background_execute(task.pk) == "skipped"
    again = the_task(run)
    assert (again.status, again.attempt, again.result, again.finished_at) == (
        "completed",
        1,
        done.result,
        done.finished_at,
    )
    # a task a live worker holds is not taken either
    other = report_run("Prepare a report on Q4 in 1 seconds")
    assert background_claim(the_task(other).pk, "busy-worker") is not None
    assert background_execute(the_task(other).pk) == "skipped"
    assert the_task(other).attempt == 1


def test_the_sweep_runs_again_work_whose_worker_died(django_capture_on_commit_callbacks):
    run = report_run()
    task = quick(the_task(run))
    dead = background_claim(task.pk, "dead-worker")  # claimed, then the worker was killed
    assert dead is not None and dead.attempt == 1
    expire(task)
    with django_capture_on_commit_callbacks() as rung:
        counts = runs_sweep()
    assert counts["background_recovered"] == 1 and counts["background_given_up"] == 0
    assert len(rung) == 1  # its doorbell
    task = the_task(run)
    assert (task.status, task.lease_owner, task.lease_expires_at) == ("pending", "", None)
    assert background_execute(task.pk, worker="replacement") == "completed"
    # the dead worker's execution cannot write its outcome over the new one
    assert background_finish(dead, BackgroundTask.Status.COMPLETED, result="stale") is False
    task = the_task(run)
    assert (task.status, task.attempt) == ("completed", 2)
    assert task.result != "stale"
    run = drive(run)
    assert (run.status, run.status_reason) == ("done", "natural")
    assert runs_sweep()["background_recovered"] == 0


def test_work_that_used_up_its_attempts_fails_and_the_run_hears_of_it(settings):
    settings.AWAKEN_MAX_ATTEMPTS = 2
    run = report_run()
    task = the_task(run)
    for _ in range(2):
        assert background_claim(task.pk, "doomed") is not None
        expire(task)
        if the_task(run).attempt < 2:
            assert runs_sweep()["background_recovered"] == 1
    # a redelivered message finds an expired lease but no attempt left
    assert background_execute(task.pk) == "skipped"
    assert runs_sweep()["background_given_up"] == 1
    task = the_task(run)
    assert task.status == "failed" and task.error.startswith("gave up after 2 attempts")
    run.refresh_from_db()
    assert run.due
    run = drive(run)
    assert run.status == "done"
    assert run.final_output.startswith("The report on Q3 sales failed: gave up after 2 attempts")


def test_the_sweep_rings_again_for_work_whose_doorbell_was_lost(
    django_capture_on_commit_callbacks,
):
    run = report_run()
    task = the_task(run)
    long_ago = timezone.now() - dt.timedelta(minutes=5)
    BackgroundTask.objects.filter(pk=task.pk).update(dispatched_at=long_ago)
    with django_capture_on_commit_callbacks() as rung:
        assert runs_sweep()["background_redispatched"] == 1
    assert len(rung) == 1
    assert the_task(run).dispatched_at > long_ago
    assert runs_sweep()["background_redispatched"] == 0  # rung just now


def test_the_sweep_wakes_a_run_whose_wake_was_lost():
    run = report_run()
    # finished without the wake (as if that commit's wake never happened)
    BackgroundTask.objects.filter(run=run).update(status="completed", result="done early")
    assert runs_sweep()["background_woken"] == 1
    run.refresh_from_db()
    assert run.due
    assert runs_sweep()["background_woken"] == 0
    run = drive(run)
    assert run.final_output == "The report on Q3 sales is ready: done early"
    # a run that still waits for unfinished work is left alone
    other = report_run("Prepare a report on Q4")
    assert runs_sweep()["background_woken"] == 0
    other.refresh_from_db()
    assert not other.due


def test_cancelling_a_waiting_run_cancels_its_work_and_stops_the_job(monkeypatch, settings):
    run = report_run()  # with the usual lease: a loaded machine may take 0.3 s for a step
    settings.AWAKEN_LEASE_SECONDS = 0.3  # the job's heartbeat asks every 0.1 s
    beats = []

    def job(arguments: dict[str, Any], heartbeat: Any) -> Any:
        run_cancel(run=run)  # an operator, while the job works
        for _ in range(300):
            beats.append(heartbeat())
            if not beats[-1]:
                return "stopped"
            time.sleep(0.01)
        raise AssertionError("the heartbeat never said stop")

    monkeypatch.setitem(background_jobs.JOBS, "report", job)
    assert background_execute(the_task(run).pk) == "lost"
    assert beats[-1] is False and len(beats) < 300
    task = the_task(run)
    assert (task.status, task.result) == ("cancelled", None)
    run.refresh_from_db()
    assert (run.status, run.status_reason, run.due) == ("done", "cancelled", False)


def test_cancelling_a_waiting_run_before_its_work_started():
    run = report_run()
    run_cancel(run=run)
    assert the_task(run).status == "cancelled"
    assert background_execute(the_task(run).pk) == "skipped"
    assert runs_sweep()["background_woken"] == 0


def test_the_report_job_stops_when_told_and_unknown_kinds_are_refused():
    started = time.monotonic()
    assert report_job({"topic": "x", "seconds": 600}, lambda: False) is None
    assert time.monotonic() - started < 1
    assert report_job({"topic": "x", "seconds": 0}, lambda: True) == report_job(
        {"topic": "x", "seconds": 0}, lambda: True
    )
    with pytest.raises(UnknownJobError, match="Unknown background job kind 'nope'"):
        background_job("nope")


def test_a_delegated_run_cannot_start_background_work():
    assistant = scripted_agent([], tools=["slow_report"], slug="assistant-bg")
    manager = scripted_agent([], tools=[], slug="manager-bg")
    manager.delegates.set([assistant])
    publish(manager)
    run = drive(run_start(agent=manager, messages="Prepare a report on Q3 sales"))
    assert run.status == "done"
    child = Run.objects.get(parent_run=run)
    assert "Background work is not available here" in " ".join(t for _, t in texts(child))
    assert not BackgroundTask.objects.exists()


def test_the_run_page_and_the_api_show_the_tasks_escaped(viewer_client, operator_api):
    run = report_run("Prepare a report on <script>alert(1)</script>")
    task = the_task(run)
    assert task.label == "report on <script>alert(1)</script>"
    html = viewer_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert "Background tasks" in html and "Waiting for background tasks" in html
    assert "report on &lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html
    assert "pending" in html

    assert background_execute(quick(task).pk) == "completed"
    html = viewer_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert "completed" in html and "Report on &lt;script&gt;" in html
    assert "<script>alert(1)" not in html

    path = "/api/v1/runs/{run_id}"
    record = conforms(operator_api.get(f"/api/v1/runs/{run.pk}"), "GET", path).json()
    assert record["waiting_reason"] == "background_tasks"
    (shown,) = record["background_tasks"]
    assert shown["task_id"] == str(task.pk)
    assert (shown["label"], shown["kind"], shown["status"], shown["attempt"]) == (
        "report on <script>alert(1)</script>",
        "report",
        "completed",
        1,
    )
    assert shown["result"].startswith("Report on <script>") and shown["error"] is None
    # a run that never started work lists none, without asking
    other = drive(run_start(agent=scripted_agent([{"text": "hi"}]), messages="hi"))
    assert operator_api.get(f"/api/v1/runs/{other.pk}").json()["background_tasks"] == []
