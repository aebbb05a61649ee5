"""Background work with real processes (PostgreSQL, Redis, `celery worker` and `celery
beat`, see conftest.py): a worker killed while it executes a run's background task. The
task's lease expires, the sweep runs it again on another worker, and the run, woken when
the task finishes, ends once with the report delivered once."""

from __future__ import annotations

import time

from runs.models import BackgroundTask, Message, Run, RunEvent
from runs.services.submission_flow import run_start
from tests.factories import scripted_agent
from tests.processes import wait_for
from tests.runs.helpers import assert_activations_closed, events


def test_a_worker_killed_in_a_background_task_is_replaced_and_the_run_ends_once(processes):
    doomed = processes("worker", "doomed")
    beat = processes("beat")  # the sweep
    agent = scripted_agent([], tools=["slow_report"])  # the demo model
    run = run_start(agent=agent, messages="Prepare a report on Q3 sales in 4 seconds")
    wait_for(
        lambda: (
            Run.objects.filter(pk=run.pk, status="waiting").exists()
            and BackgroundTask.objects.filter(run=run, status="running").exists()
        ),
        30,
        "the run to wait and its task to run",
    )
    time.sleep(1.0)  # inside the job
    doomed.kill()  # SIGKILL, the whole process group
    task = BackgroundTask.objects.get(run=run)
    assert (task.status, task.attempt) == ("running", 1)
    replacement = processes("worker", "replacement")
    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).status == "done", 60, "the run to finish")
    except AssertionError:
        rows = list(BackgroundTask.objects.filter(run=run).values())
        raise AssertionError((rows, replacement.log_tail(), beat.log_tail(1500))) from None

    run.refresh_from_db()
    task.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "natural"), run.error_payload
    assert (task.status, task.attempt) == ("completed", 2)
    assert task.delivered_at is not None and task.result.startswith("Report on Q3 sales:")
    assert run.final_output == f"The report on Q3 sales is ready: {task.result}"
    # one activation waited, the next one ended the run: one end, at the end of the log
    finishes = [e["result"]["status"] for e in events(run, "run_finish")]
    assert finishes == ["waiting", "done"]
    last = RunEvent.objects.filter(run=run).order_by("-seq").first()
    assert last is not None and last.event_type == "run_finish"
    assert last.payload["termination"] == {"type": "natural_end"}
    # the report reached the model once
    assert len(events(run, "background_task_delivered")) == 1
    users = [m.text for m in Message.objects.filter(thread=run.thread, role="user")]
    assert [t for t in users if t.startswith("[background task ")] == [
        f"[background task report on Q3 sales ({task.pk}) completed]\n{task.result}"
    ]
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert_activations_closed(run)
    assert run.recoveries == 0  # the run itself never lost a worker
