"""A thread's pending input reaches its open pages live: queueing, editing, retracting
and interrupting append no run event, so they are announced as a change of the thread
(runs/realtime.py), on the dashboard socket to the thread's team; another process's
change is read from its audit entry by the serving process's watcher (runs/watcher.py)."""

from __future__ import annotations

import asyncio
from unittest import mock

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer

from common.audit import Actor
from runs.models import PendingInput
from runs.services.inputs import input_edit, input_retract, thread_interrupt
from runs.services.submission_flow import input_submit
from runs.watcher import CommitWatcher
from tests.factories import team_member, user_with_role, waiting_run
from tests.runs.test_consumers import _connect

pytestmark = pytest.mark.django_db(transaction=True)

ACTOR = Actor(label="cli", source="cli")


def queue(run, text: str) -> PendingInput:
    outcome = input_submit(agent=None, messages=text, thread=run.thread, mode="queue", actor=ACTOR)
    assert outcome.input.status == PendingInput.Status.PENDING
    return outcome.input


async def next_thread_frame(communicator) -> dict:
    while True:  # run changes may come too; the thread frame is what this waits for
        message = await communicator.receive_json_from(timeout=10)
        if message["type"] == "thread":
            return message["thread"]


def test_queue_edit_retract_and_interrupt_reach_the_dashboard_socket_of_the_thread():
    run = waiting_run()
    thread_id = str(run.thread_id)
    operator = user_with_role("operator", "opa")

    async def scenario():
        communicator = await _connect("/ws/dashboard/", operator)
        assert (await communicator.receive_json_from(timeout=2))["type"] == "ready"
        first = await sync_to_async(queue)(run, "and then the soup")
        assert (await next_thread_frame(communicator))["id"] == thread_id
        await sync_to_async(input_edit)(input_id=first.pk, messages="the salad", actor=ACTOR)
        assert (await next_thread_frame(communicator))["id"] == thread_id
        await sync_to_async(input_retract)(input_id=first.pk, actor=ACTOR)
        frame = await next_thread_frame(communicator)
        assert frame == {"id": thread_id, "team_id": run.thread.team_id}
        await sync_to_async(queue)(run, "dessert")
        await next_thread_frame(communicator)
        await sync_to_async(thread_interrupt)(thread=run.thread, actor=ACTOR, reason="stop")
        assert (await next_thread_frame(communicator))["id"] == thread_id
        await communicator.disconnect()

    async_to_sync(scenario)()


def test_another_teams_socket_is_not_told_about_the_thread():
    run = waiting_run()  # the default team's
    outsider = team_member("operator", "beta")

    async def scenario():
        communicator = await _connect("/ws/dashboard/", outsider)
        assert (await communicator.receive_json_from(timeout=2))["type"] == "ready"
        await sync_to_async(queue)(run, "secret")
        await asyncio.sleep(0.3)
        while not await communicator.receive_nothing(timeout=0.5):
            assert (await communicator.receive_json_from())["type"] != "thread"
        await communicator.disconnect()

    async_to_sync(scenario)()


@pytest.mark.skipif(
    not isinstance(get_channel_layer(), InMemoryChannelLayer),
    reason="the distributed mode broadcasts through Redis",
)
def test_the_watcher_reads_another_processes_input_changes_from_the_audit_log():
    run = waiting_run()
    watcher = CommitWatcher()
    try:
        assert watcher.read_threads() == []
        expected = [(str(run.thread_id), run.thread.team_id)]
        # another process's changes: broadcast there, not here
        with mock.patch("runs.services.inputs.broadcast_thread_changed") as elsewhere:
            first = queue(run, "one")
            second = queue(run, "two")
            assert watcher.read_threads() == expected  # one announcement for both
            input_retract(input_id=first.pk, actor=ACTOR)
            assert watcher.read_threads() == expected
            input_edit(input_id=second.pk, messages="three", actor=ACTOR)
            thread_interrupt(thread=run.thread, actor=ACTOR, reason="stop")
            assert watcher.read_threads() == expected
            assert elsewhere.call_count == 5
        assert watcher.read_threads() == []
    finally:
        watcher.stop()
