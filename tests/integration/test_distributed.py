"""The distributed mode with real processes: PostgreSQL, Redis, `celery worker`,
`celery beat` and `daphne` subprocesses (see conftest.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest
import websockets
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from agents.models import Note
from common.audit import Actor
from runs.models import Decision, Message, Run, RunEvent, Ticket, ToolCall
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import APPROVAL, call, scripted_agent
from tests.integration.conftest import redis_restart
from tests.processes import free_port, wait_for
from tests.runs.helpers import activations, assert_activations_closed, events


def gap_free(run: Run) -> bool:
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    return seqs == list(range(1, len(seqs) + 1)) and Run.objects.get(
        pk=run.pk
    ).last_event_seq == len(seqs)


def messages_contiguous(run: Run) -> list[str]:
    rows = list(
        Message.objects.filter(thread=run.thread).order_by("seq").values_list("seq", "role")
    )
    assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1))
    return [role for _, role in rows]


def all_done(runs: list[Run]) -> bool:
    return Run.objects.filter(pk__in=[r.pk for r in runs]).exclude(status="done").count() == 0


def test_fifty_runs_submitted_at_once_all_finish_with_gap_free_logs(processes):
    processes("worker")
    processes("beat")
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("calculator", {"expression": "6*7"})]}, {"text": "42"}]
    )
    runs = [run_start(agent=agent, messages=f"question {i}") for i in range(50)]
    wait_for(lambda: all_done(runs), 120, "50 runs to finish")
    for run in runs:
        run.refresh_from_db()
        assert (run.status_reason, run.final_output) == ("natural", "42")
        assert gap_free(run)
        assert messages_contiguous(run) == ["user", "assistant", "tool", "assistant"]


def run_in_slow_tool(seconds: float, inside: float) -> Run:
    """A run whose worker sits `inside` seconds into a `seconds`-long sleep tool (the
    model turn before it is instant)."""
    agent = scripted_agent(
        [
            {"text": "waiting", "tool_calls": [call("sleep", {"seconds": seconds})]},
            {"text": "woke up"},
        ],
        tools=["sleep"],
    )
    run = run_start(agent=agent, messages="take your time")
    wait_for(
        lambda: Run.objects.filter(pk=run.pk, status="running").exclude(lease_owner="").exists(),
        20,
        "claim",
    )
    time.sleep(inside)
    return run


def finished_once(run: Run, log: str) -> Run:
    """Wait for the run; it ended naturally with one tool call, one of each message, a
    gap-free log and every activation in it closed."""
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "done", 60, "the run to finish")
    run.refresh_from_db()
    assert (run.status_reason, run.final_output) == ("natural", "woke up"), log[-3000:]
    assert ToolCall.objects.get(run=run).status == "succeeded"
    assert messages_contiguous(run) == ["user", "assistant", "tool", "assistant"]
    assert gap_free(run)
    assert_activations_closed(run)
    return run


def test_a_worker_killed_in_a_slow_tool_is_replaced_without_duplicates(processes):
    first = processes("worker", "doomed")
    processes("beat")
    stepped = run_start(  # killed in its second step, after its first one's checkpoint
        agent=scripted_agent(
            [
                {"text": "", "tool_calls": [call("calculator", {"expression": "6*7"})]},
                {"text": "waiting", "tool_calls": [call("sleep", {"seconds": 3})]},
                {"text": "woke up"},
            ],
            tools=["calculator", "sleep"],
        ),
        messages="one step, then take your time",
    )
    run = run_in_slow_tool(3, inside=1.0)
    wait_for(lambda: Run.objects.filter(pk=stepped.pk, steps=1).exists(), 20, "a first step")
    first.kill()
    replacement = processes("worker", "replacement")
    run = finished_once(run, replacement.log())
    assert run.recoveries == 1
    # the killed activation is closed before the replacement's starts
    assert activations(run)[0] == ["run_start", "error"]
    assert [e["code"] for e in events(run, "error")] == ["activation_interrupted"]
    assert len(activations(run)) == 2

    wait_for(lambda: Run.objects.get(pk=stepped.pk).status == "done", 60, "the other run")
    stepped.refresh_from_db()
    assert (stepped.status_reason, stepped.final_output, stepped.recoveries) == (
        "natural",
        "woke up",
        1,
    )
    killed, resumed = activations(stepped)
    assert killed[0] == "run_start" and killed[-2:] == ["step_end", "error"]
    assert resumed[0] == "run_start" and resumed[-2:] == ["state_snapshot", "run_finish"]
    assert [e["code"] for e in events(stepped, "error")] == ["activation_interrupted"]
    assert len(events(stepped, "run_start")) == 2 and len(events(stepped, "run_finish")) == 1
    assert messages_contiguous(stepped) == ["user", *["assistant", "tool"] * 2, "assistant"]
    assert gap_free(stepped)


@pytest.mark.parametrize("group", [False, True], ids=["main-process", "process-group"])
def test_a_worker_stopped_with_sigterm_mid_run_leaves_it_finished_once(processes, group):
    """A deploy: SIGTERM to the worker (systemd's KillMode=mixed signals the main process,
    control-group every process) while a run sits in a slow tool; a new worker starts."""
    old = processes("worker", "old")
    processes("beat")
    run = run_in_slow_tool(2, inside=0.5)
    if group:
        os.killpg(old.popen.pid, signal.SIGTERM)
    else:
        old.popen.send_signal(signal.SIGTERM)
    processes("worker", "new")
    run = finished_once(run, old.log())
    wait_for(lambda: not old.alive(), 30, "the old worker to exit")
    # warm shutdown finishes the segment; a pool child killed by the signal releases the
    # run, which the new worker resumes: either way, no worker crash is counted
    assert run.recoveries == 0


def test_a_run_whose_worker_loses_its_database_connections_resumes_and_finishes(processes):
    worker = processes("worker")
    processes("beat")
    run = run_in_slow_tool(2, inside=1.0)
    with connection.cursor() as cursor:  # every other session dies, as in a PostgreSQL
        cursor.execute(  # restart or failover
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    # a segment holds a connection only while it claims or checkpoints, so it meets the
    # loss (if at all) at its next checkpoint, through a pooled connection that died
    finished_once(run, worker.log())


def test_runs_waiting_and_running_finish_after_redis_restarts(processes):
    worker = processes("worker", supervised=True)
    beat = processes("beat")
    approval = scripted_agent(
        [
            {"text": "", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]},
            {"text": "noted"},
        ],
        permission=APPROVAL,
    )
    slow = scripted_agent(
        [{"text": "", "tool_calls": [call("sleep", {"seconds": 2})]}, {"text": "slept"}],
        tools=["sleep"],
    )
    waiting = [run_start(agent=approval, messages=f"note {i}") for i in range(3)]
    running = [run_start(agent=slow, messages=f"sleep {i}") for i in range(3)]
    wait_for(
        lambda: Run.objects.filter(pk__in=[r.pk for r in waiting], status="waiting").count() == 3,
        30,
        "waits",
    )
    wait_for(
        lambda: Run.objects.filter(pk__in=[r.pk for r in running], status="running").count() == 3,
        30,
        "claims",
    )
    redis_restart()
    for ticket in Ticket.objects.filter(run__in=waiting, status="pending"):
        decision_submit(ticket=ticket, action="approve", actor=Actor(label="ops"))
    try:
        wait_for(lambda: all_done(waiting + running), 90, "every run to finish after the restart")
    except AssertionError:
        states = list(
            Run.objects.filter(pk__in=[r.pk for r in waiting + running]).values_list(
                "status", "due", "lease_owner", "recoveries"
            )
        )
        raise AssertionError((states, worker.log()[-4000:], beat.log()[-1500:])) from None
    for run in waiting + running:
        run.refresh_from_db()
        assert run.status_reason == "natural", (run.pk, run.status_reason, run.error_payload)
        assert gap_free(run)
        assert_activations_closed(run)
        assert not ToolCall.objects.filter(run=run).exclude(status="succeeded").exists()
    assert Note.objects.count() == 3


def test_cancel_while_the_model_streams_ends_the_run_within_a_second(processes):
    processes("worker")
    agent = scripted_agent([{"text": " ".join(["slow"] * 50), "delay": 20}])
    run = run_start(agent=agent, messages="talk")
    wait_for(
        lambda: Run.objects.filter(pk=run.pk, status="running").exclude(lease_owner="").exists(),
        20,
        "claim",
    )
    time.sleep(0.5)
    asked = time.monotonic()
    run_cancel(run=run)
    wait_for(
        lambda: Run.objects.get(pk=run.pk).status == "done", 5, "the cancel to land", interval=0.01
    )
    elapsed = time.monotonic() - asked
    run.refresh_from_db()
    assert run.status_reason == "cancelled"
    assert elapsed < 1.0, elapsed
    assert gap_free(run)


def test_a_ticket_past_its_deadline_is_rejected_by_the_system_and_the_run_continues(processes):
    processes("worker")
    processes("beat")
    agent = scripted_agent(
        [
            {"text": "", "tool_calls": [call("write_note", {"title": "late", "body": "b"})]},
            {"text": "understood"},
        ],
        permission=APPROVAL,
        ticket_deadline_seconds=1,
    )
    run = run_start(agent=agent, messages="note it")
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "waiting", 20, "the ticket")
    ticket = Ticket.objects.get(run=run)
    assert ticket.deadline_at is not None and ticket.default_action == "reject"
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "done", 20, "the deadline to pass")
    decision = Decision.objects.get(ticket=ticket)
    assert (decision.action, decision.actor_label) == ("reject", "system")
    assert "deadline" in decision.comment
    run.refresh_from_db()
    assert run.status_reason == "natural" and not Note.objects.exists()
    assert gap_free(run)


def test_a_browser_websocket_on_daphne_sees_every_event_of_a_worker_run_once(processes):
    port = free_port()
    processes("daphne", port=port)
    processes("worker")
    user = User.objects.create_superuser("watcher", password="pw")
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("calculator", {"expression": "1+1"})]}, {"text": "two"}]
    )
    run = run_start(agent=agent, messages="add")

    async def watch() -> list[dict]:
        url = f"ws://127.0.0.1:{port}/ws/runs/{run.pk}/?after_seq=0"
        headers = {"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"}
        frames: list[dict] = []
        async with websockets.connect(url, additional_headers=headers) as socket:
            while True:
                message = json.loads(await asyncio.wait_for(socket.recv(), timeout=30))
                if message["type"] == "event":
                    frames.append(message["event"])
                elif message["type"] == "events":  # a commit of several, or a busy run
                    frames += [item["event"] for item in message["events"]]
                if frames and frames[-1]["event_type"] == "run_finish":
                    return frames

    frames = asyncio.run(watch())
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    stored = list(
        RunEvent.objects.filter(run=run).order_by("seq").values_list("event_type", flat=True)
    )
    assert [f["event_type"] for f in frames] == stored


@pytest.mark.parametrize("origin", ["http://evil.example.com"])
def test_daphne_refuses_a_websocket_from_a_foreign_origin(processes, origin):
    port = free_port()
    processes("daphne", port=port)

    async def attempt() -> None:
        url = f"ws://127.0.0.1:{port}/ws/runs/00000000-0000-0000-0000-000000000000/"
        async with websockets.connect(url, additional_headers={"Origin": origin}):
            pass

    with pytest.raises(websockets.exceptions.InvalidStatus):
        asyncio.run(attempt())
