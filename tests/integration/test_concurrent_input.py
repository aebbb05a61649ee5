"""Input under contention, with real processes on PostgreSQL: thirty clients send to one
thread at once, five rounds, in every input mode, through two daphne processes, while
a decider approves the thread's tickets as they open, the thread is interrupted and two
workers checkpoint its runs. No request may answer 5xx, PostgreSQL may detect no
deadlock (its own counter, and no process logs one), and no worker segment may be lost
(each run ends without waiting for an expired lease, its log gap-free and closed).

The lock order that makes this hold is in docs/run-model.md ("Lock order")."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx
from django.contrib.auth.models import User
from django.db import connection

from runs.models import PendingInput, Run, RunEvent, Ticket
from runs.services.submission_flow import run_start
from tests.factories import APPROVAL, call, note_call, scripted_agent, token_for
from tests.processes import Proc, free_port, wait_for
from tests.runs.helpers import assert_activations_closed, assert_gap_free

SENDERS = 30
ROUNDS = 5
MODES = ["queue", "steer", "interrupt_then_queue", "resume_open_run"]
# what a request may answer: a run started (201), continued (200), input waits (202), or
# the mode does not fit the run's state right now (409: resume of a running run,
# decision on a ticket a resume superseded)
EXPECTED = {200, 201, 202, 409}


def pg_deadlocks() -> int:
    """Deadlocks PostgreSQL detected in this database so far (its statistics, as the
    ending backends flushed them)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


class Traffic:
    """The answers of every request made, by kind."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.answers: list[tuple[str, int, str]] = []

    def record(self, kind: str, response: httpx.Response) -> None:
        with self.lock:
            self.answers.append((kind, response.status_code, response.text[:300]))

    def failed(self) -> list[tuple[str, int, str]]:
        return [a for a in self.answers if a[1] >= 500]

    def unexpected(self) -> list[tuple[str, int, str]]:
        return [a for a in self.answers if a[1] not in EXPECTED]

    def count(self, kind: str) -> int:
        return sum(1 for a in self.answers if a[0].startswith(kind))


def in_background(target: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        try:
            target()
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_thirty_senders_in_mixed_modes_with_decisions_and_interrupts(processes, service_env):
    service_env["API_THROTTLE_RATE"] = "1000000/min"
    ports = [free_port(), free_port()]
    servers = [processes("daphne", f"daphne{i}", port=port) for i, port in enumerate(ports)]
    workers = [processes("worker", f"worker{i}", concurrency=3) for i in range(2)]
    procs: list[Proc] = [*servers, *workers]
    raw = token_for(User.objects.create_superuser("ops"))
    clients = [
        httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {raw}"},
            timeout=30,
        )
        for port in ports
    ]
    # each run: a short tool step (checkpoints), then a write that asks for a decision
    agent = scripted_agent(
        [
            {"text": "", "tool_calls": [call("sleep", {"seconds": 0.05})]},
            {"text": "", "tool_calls": [note_call("n")]},
            {"text": "done"},
        ],
        tools=["sleep", "write_note"],
        permission=APPROVAL,
    )
    first = run_start(agent=agent, messages="start")
    thread_id = first.thread_id
    deadlocks_before = pg_deadlocks()
    traffic = Traffic()
    stop = threading.Event()

    def decide() -> None:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{ports[0]}",
            headers={"Authorization": f"Bearer {raw}"},
            timeout=30,
        ) as client:
            while not stop.is_set():
                pending = list(
                    Ticket.objects.filter(run__thread_id=thread_id, status="pending").values_list(
                        "pk", flat=True
                    )
                )
                for ticket_id in pending:
                    response = client.post(
                        f"/api/v1/tickets/{ticket_id}/decision", json={"action": "approve"}
                    )
                    traffic.record("decision", response)
                time.sleep(0.02)

    decider = in_background(decide)
    barrier = threading.Barrier(SENDERS)

    def sender(index: int) -> None:
        client = clients[index % 2]
        for round_ in range(ROUNDS):
            barrier.wait(timeout=60)
            if index == 0 and round_ in (1, 3):
                response = client.post(
                    f"/api/v1/threads/{thread_id}/interrupt", json={"reason": "enough"}
                )
                traffic.record("interrupt", response)
                continue
            mode = MODES[(index + round_) % len(MODES)]
            body = {"messages": [{"role": "user", "content": f"{index}/{round_}"}], "mode": mode}
            response = client.post(f"/api/v1/threads/{thread_id}/messages", json=body)
            traffic.record(f"send {mode}", response)
            time.sleep(0.3)  # the runs move on between rounds

    started = time.monotonic()
    senders = [in_background(lambda i=i: sender(i)) for i in range(SENDERS)]
    for thread in senders:
        thread.join(90)
    sending = time.monotonic() - started
    # the queue's tail: a last interrupt cancels what still waits, the decider lets the
    # open run finish
    traffic.record(
        "interrupt",
        clients[0].post(f"/api/v1/threads/{thread_id}/interrupt", json={"reason": "the end"}),
    )

    def quiet() -> bool:
        return (
            not Run.objects.filter(thread_id=thread_id).exclude(status="done").exists()
            and not PendingInput.objects.filter(thread_id=thread_id, status="pending").exists()
        )

    try:
        wait_for(quiet, 30, "every run of the thread to end")
    finally:
        stop.set()
        decider.join(30)
        for client in clients:
            client.close()
        for proc in procs:
            proc.stop()  # their connections end: PostgreSQL's statistics are flushed
    logs = {proc.name: proc.log() for proc in procs}

    assert traffic.count("send") == SENDERS * ROUNDS - 2, traffic.answers
    assert traffic.count("decision") > 0
    assert not traffic.failed(), traffic.failed()
    assert not traffic.unexpected(), traffic.unexpected()
    for name, log in logs.items():
        assert "deadlock detected" not in log, f"{name}:\n{log[-4000:]}"
        assert "Internal Server Error" not in log, f"{name}:\n{log[-4000:]}"
    time.sleep(0.5)  # the ended backends' statistics
    deadlocks = pg_deadlocks() - deadlocks_before
    assert deadlocks == 0, f"PostgreSQL detected {deadlocks} deadlocks"

    # no segment lost: no run waited for an expired lease or lost its worker mid-step
    runs = list(Run.objects.filter(thread_id=thread_id).order_by("created_at", "id"))
    assert len(runs) > ROUNDS
    for run in runs:
        assert run.status == "done", (run.pk, run.status, run.status_reason)
        assert run.recoveries == 0, (run.pk, run.recoveries)
        assert_gap_free(run)
        assert_activations_closed(run)
    interrupted = RunEvent.objects.filter(
        run__thread_id=thread_id, event_type="error", payload__code="activation_interrupted"
    )
    assert not interrupted.exists(), list(interrupted.values_list("payload", flat=True))
    assert sending < 45, f"sending took {sending:.1f}s"
