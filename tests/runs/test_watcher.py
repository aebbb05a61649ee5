"""On the embedded default (in-memory channel layer) the serving process broadcasts what
other processes commit: `manage.py decide` in a terminal reaches an open run socket
within a second (runs/watcher.py)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys
from unittest import mock

import pytest
from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import connection
from django.utils import timezone

from runs import realtime
from runs.models import RunEvent, Ticket
from runs.services.submission_flow import run_start
from runs.watcher import CommitWatcher
from tests.factories import scripted_agent, view_only_user, waiting_run
from tests.processes import ROOT, database_url
from tests.runs.helpers import drive
from tests.runs.test_consumers import _subscribed

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not isinstance(get_channel_layer(), InMemoryChannelLayer),
        reason="the distributed mode broadcasts through Redis",
    ),
]

# A commit of another process must reach the page within a second; measured from the
# event's timestamp, taken before its transaction commits.
WITHIN_SECONDS = 1.0


def terminal_env(tmp_path) -> dict[str, str]:
    """A terminal's `manage.py` on this test database, on the embedded default."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    for name in ("REDIS_URL", "CELERY_BROKER_URL"):
        env.pop(name, None)
    env.update(
        {
            "DATABASE_URL": database_url(connection.settings_dict),
            "AWAKEN_VAR_DIR": str(tmp_path),
            "AWAKEN_EMBEDDED_WORKER": "true",
        }
    )
    return env


@pytest.fixture
def watcher():
    """What `manage.py serve` runs on its loop; the test starts it on its own."""
    watcher = CommitWatcher()
    yield watcher
    watcher.stop()
    assert realtime.broadcaster.serving_loop is None


@pytest.mark.slow  # `manage.py decide` in a child process
def test_a_ticket_decided_in_another_process_reaches_an_open_run_socket(watcher, tmp_path):
    run = waiting_run()
    ticket = Ticket.objects.get(run=run, status=Ticket.Status.PENDING)
    user = view_only_user()
    env = terminal_env(tmp_path)

    async def scenario():
        watcher.start(asyncio.get_running_loop())
        try:
            return await follow_the_decision()
        finally:
            watcher.stop()
            await asyncio.sleep(0)  # the watch ends before this loop does

    async def follow_the_decision():
        communicator, replayed = await _subscribed(
            f"/ws/runs/{run.pk}/?after_seq={run.last_event_seq}", user
        )
        assert replayed == []
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "manage.py",
            "decide",
            str(ticket.pk),
            "approve",
            "--timeout",
            "60",
            cwd=ROOT,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        frames, delays = [], []
        try:
            while not frames or frames[-1]["event_type"] != "run_finish":
                message = await communicator.receive_json_from(timeout=60)
                received = timezone.now()
                batch = [message["event"]] if message["type"] == "event" else []
                if message["type"] == "events":
                    batch = [item["event"] for item in message["events"]]
                for frame in batch:
                    frames.append(frame)
                    committed = dt.datetime.fromisoformat(frame["created_at"])
                    delays.append((received - committed).total_seconds())
        finally:
            output, _ = await process.communicate()
        assert process.returncode == 0, output.decode()
        assert "done (natural)" in output.decode()
        assert await communicator.receive_nothing(timeout=0.5)  # nothing twice
        await communicator.disconnect()
        return frames, delays

    frames, delays = async_to_sync(scenario)()
    waited_at = run.last_event_seq
    run.refresh_from_db()
    assert [f["seq"] for f in frames] == list(range(waited_at + 1, run.last_event_seq + 1))
    kinds = [f["event_type"] for f in frames]
    assert kinds[0] == "ticket_decided" and kinds[-1] == "run_finish", kinds
    assert (run.status, run.status_reason) == ("done", "natural")
    assert max(delays) < WITHIN_SECONDS, delays


def test_what_this_process_broadcast_is_left_out_and_the_rest_is_read_once(watcher):
    loop = asyncio.new_event_loop()
    try:
        realtime.broadcaster.serve_from(loop)  # as `start` does: this process notes its own
        with mock.patch.object(realtime.broadcaster, "send"):
            here = drive(run_start(agent=scripted_agent([{"text": "hi"}]), messages="a"))
        assert here.last_event_seq > 0
        assert watcher.read() == ([], False)

        # another process's commits: broadcast there, not here
        with mock.patch("runs.services.events.broadcast_events"):
            there = drive(run_start(agent=scripted_agent([{"text": "hi"}]), messages="b"))
        changes, more = watcher.read()
        assert not more
        assert [(run_id, [f["seq"] for f in frames]) for run_id, frames, _ in changes] == [
            (there.pk, list(range(1, there.last_event_seq + 1)))
        ]
        summary = changes[0][2]
        assert (summary["id"], summary["status"], summary["last_event_seq"]) == (
            str(there.pk),
            "done",
            there.last_event_seq,
        )
        assert watcher.read() == ([], False)
    finally:
        realtime.broadcaster.stop_serving(loop)
        loop.close()


def test_an_event_committed_behind_one_read_already_is_read_later(watcher):
    """Ids are not always committed in order (PostgreSQL): an id skipped over is asked
    for again."""
    run = drive(run_start(agent=scripted_agent([{"text": "hi"}]), messages="a"))
    watcher.read()
    rows = RunEvent.objects.filter(run=run).order_by("seq")
    last = rows.last()
    assert last is not None
    late = {"run": run, "event_type": "step_end", "payload": {"event_type": "step_end"}}
    RunEvent.objects.create(pk=last.pk + 2, seq=last.seq + 2, **late)
    changes, _ = watcher.read()
    assert [[f["seq"] for f in frames] for _, frames, _ in changes] == [[last.seq + 2]]
    RunEvent.objects.create(pk=last.pk + 1, seq=last.seq + 1, **late)  # commits late
    changes, _ = watcher.read()
    assert [[f["seq"] for f in frames] for _, frames, _ in changes] == [[last.seq + 1]]
    assert watcher.read() == ([], False)
