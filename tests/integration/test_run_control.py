"""Run control in the distributed mode, through the HTTP API of a real daphne process and
real Celery workers on PostgreSQL: input modes, twenty clients queueing at once, and
priorities (docs/run-control.md)."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import httpx
from django.contrib.auth.models import User

from runs.models import Message, PendingInput, Run
from runs.services.submission_flow import run_start
from tests.factories import APPROVAL, call, note_call, scripted_agent, token_for
from tests.processes import free_port, wait_for
from tests.runs.helpers import assert_activations_closed, assert_gap_free, event_types, events


def daphne(processes: Any, service_env: dict[str, str]) -> str:
    port = free_port()
    service_env["API_THROTTLE_RATE"] = "1000000/min"
    processes("daphne", port=port)
    return f"http://127.0.0.1:{port}"


def api(base: str) -> httpx.Client:
    raw = token_for(User.objects.create_superuser(f"ops{time.monotonic_ns()}"))
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {raw}"}, timeout=30)


def send(client: httpx.Client, thread_id: Any, text: str, mode: str) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": text}], "mode": mode}
    return client.post(f"/api/v1/threads/{thread_id}/messages", json=body)


def busy_run(seconds: float, after: list[dict[str, Any]] | None = None) -> Run:
    """A run whose worker sits in a `seconds`-long sleep tool, then answers."""
    agent = scripted_agent(
        [
            {"text": "", "tool_calls": [call("sleep", {"seconds": seconds})]},
            *(after or [{"text": "slept"}]),
        ],
        tools=["sleep"],
    )
    run = run_start(agent=agent, messages="take your time")
    wait_for(
        lambda: Run.objects.filter(pk=run.pk, status="running").exclude(lease_owner="").exists(),
        30,
        "the worker to take the run",
    )
    return run


def thread_runs(run: Run) -> list[Run]:
    return list(Run.objects.filter(thread_id=run.thread_id).order_by("created_at", "id"))


def settled(run: Run, count: int) -> bool:
    runs = thread_runs(run)
    return len(runs) == count and all(r.status == "done" for r in runs)


def test_each_input_mode_through_the_api(processes, service_env):
    base = daphne(processes, service_env)
    processes("worker")
    client = api(base)

    # queue: waits for the busy run, then starts exactly one next run
    run = busy_run(2.0)
    response = send(client, run.thread_id, "after that", "queue")
    assert response.status_code == 202, response.text
    wait_for(lambda: settled(run, 2), 60, "the queued input's run")
    nxt = thread_runs(run)[1]
    assert event_types(nxt)[:2] == ["run_start", "input_delivered"]
    assert event_types(nxt).count("run_start") == 1
    assert_gap_free(nxt)

    # steer: in the running run's log after the step it arrived in, before the next step
    run = busy_run(2.0)
    response = send(client, run.thread_id, "mind the budget", "steer")
    assert response.status_code == 202, response.text
    wait_for(lambda: settled(run, 1), 60, "the steered run")
    roles = list(
        Message.objects.filter(thread_id=run.thread_id)
        .order_by("seq")
        .values_list("role", "content")
    )
    assert roles[3] == ("user", [{"type": "text", "text": "mind the budget"}])
    assert roles[2][0] == "tool"
    kinds = event_types(run)
    at = kinds.index("input_delivered")
    assert kinds[at - 1 : at + 2] == ["step_end", "input_delivered", "step_start"]
    assert_gap_free(run)

    # interrupt_then_queue: the busy run ends done/cancelled, its log closed; the message
    # starts the next run
    run = busy_run(30.0)
    response = send(client, run.thread_id, "forget it", "interrupt_then_queue")
    assert response.status_code in (201, 202), response.text
    wait_for(lambda: settled(run, 2), 60, "the interrupted thread's next run")
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "cancelled")
    assert events(run, "run_finish")[-1]["termination"] == {"type": "cancelled"}
    assert_activations_closed(run)
    assert_gap_free(run)

    # resume_open_run: continues the waiting run, reporting the tickets it superseded
    agent = scripted_agent(
        [{"text": "", "tool_calls": [note_call("x")]}, {"text": "done"}], permission=APPROVAL
    )
    waiting = run_start(agent=agent, messages="note it")
    wait_for(lambda: Run.objects.filter(pk=waiting.pk, status="waiting").exists(), 30, "wait")
    response = send(client, waiting.thread_id, "no, skip it", "resume_open_run")
    assert response.status_code == 200, response.text
    assert len(response.json()["superseded_tickets"]) == 1


def test_twenty_clients_queueing_on_one_busy_thread(processes, service_env):
    base = daphne(processes, service_env)
    processes("worker")
    first = busy_run(3.0)
    barrier = threading.Barrier(20)
    statuses: list[int] = []
    lock = threading.Lock()

    def client_sends(i: int) -> None:
        with api(base) as client:
            barrier.wait()
            status = send(client, first.thread_id, f"message {i}", "queue").status_code
        with lock:
            statuses.append(status)

    clients = [threading.Thread(target=client_sends, args=(i,)) for i in range(20)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(60)
    assert statuses == [202] * 20
    wait_for(lambda: settled(first, 21), 180, "twenty-one runs")
    inputs = list(PendingInput.objects.filter(thread_id=first.thread_id).order_by("seq"))
    assert [i.seq for i in inputs] == list(range(1, 21))
    assert all(i.status == "delivered" and i.boundary == "new_run" for i in inputs)
    # each delivered exactly once, in order of acceptance, one run each
    runs = thread_runs(first)[1:]
    assert [i.delivered_run_id for i in inputs] == [r.pk for r in runs]
    users = [
        m.text
        for m in Message.objects.filter(thread_id=first.thread_id, role="user").order_by("seq")
    ]
    assert users == ["take your time"] + [i.text for i in inputs]
    assert len(set(users)) == 21
    # runs never overlapped on the thread
    all_runs = thread_runs(first)
    for earlier, later in itertools.pairwise(all_runs):
        assert earlier.finished_at <= later.started_at
    for run in all_runs:
        assert_gap_free(run)


def test_a_high_priority_run_starts_before_fifty_older_low_priority_ones(processes):
    processes("worker", concurrency=1)
    blocker = busy_run(3.0)
    agent = scripted_agent([{"text": "ok"}])
    low = [run_start(agent=agent, messages=f"low {i}", priority=200) for i in range(50)]
    high = run_start(agent=agent, messages="urgent", priority=0)
    wait_for(lambda: Run.objects.filter(pk=high.pk, status="done").exists(), 60, "the urgent run")
    blocker.refresh_from_db()
    high.refresh_from_db()
    started = Run.objects.filter(pk__in=[r.pk for r in low], started_at__isnull=False)
    # the worker's next run after the blocker was the urgent one
    assert high.started_at >= blocker.finished_at
    assert not started.filter(started_at__lt=high.started_at).exists()
    wait_for(
        lambda: not Run.objects.filter(pk__in=[r.pk for r in low]).exclude(status="done").exists(),
        120,
        "the low runs",
    )
