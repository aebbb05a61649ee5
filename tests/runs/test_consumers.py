"""The run stream websocket: replay, dedupe at the replay/live boundary, gap backfill and
close codes, with Channels' WebsocketCommunicator."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser, User

from runs.models import RunEvent
from runs.realtime import run_group
from runs.routing import websocket_urlpatterns
from tests.factories import done_run, step_end_event, user_with_role, view_only_user

pytestmark = pytest.mark.django_db(transaction=True)


async def _connect(path: str, user) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def _subscribed(path: str, user) -> tuple[WebsocketCommunicator, list[int]]:
    """Connect and collect the replay until the consumer says it is live."""
    communicator = await _connect(path, user)
    seqs = []
    while True:
        message = await communicator.receive_json_from(timeout=2)
        if message["type"] == "ready":
            assert message["last_seq"] == (seqs[-1] if seqs else message["last_seq"])
            return communicator, seqs
        seqs.append(message["event"]["seq"])


async def _receive_seqs(communicator: WebsocketCommunicator, count: int) -> list[int]:
    seqs = []
    for _ in range(count):
        message = await communicator.receive_json_from(timeout=2)
        assert message["type"] == "event"
        seqs.append(message["event"]["seq"])
    return seqs


def test_replays_persisted_events_after_the_given_seq_in_order():
    run = done_run("hello there")
    user = view_only_user()

    async def scenario():
        communicator, seqs = await _subscribed(f"/ws/runs/{run.pk}/?after_seq=3", user)
        assert seqs == list(range(4, run.last_event_seq + 1))
        assert await communicator.receive_nothing(timeout=0.2)
        await communicator.disconnect()

    async_to_sync(scenario)()


def test_live_frames_already_replayed_are_dropped_and_gaps_are_backfilled():
    run = done_run("hello there")
    user = view_only_user()
    last = run.last_event_seq
    layer = get_channel_layer()

    async def scenario():
        communicator, seqs = await _subscribed(f"/ws/runs/{run.pk}/", user)
        assert seqs == list(range(1, last + 1))
        old = await _frame(run, last)
        await layer.group_send(run_group(run.pk), {"type": "run.events", "events": [old]})
        assert await communicator.receive_nothing(timeout=0.2)
        # two more events are committed, but the layer delivers only the second one
        await _add_events(run, last)
        newest = await _frame(run, last + 2)
        await layer.group_send(run_group(run.pk), {"type": "run.events", "events": [newest]})
        assert await _receive_seqs(communicator, 2) == [last + 1, last + 2]
        assert await communicator.receive_nothing(timeout=0.2)
        await communicator.disconnect()

    async_to_sync(scenario)()


async def _add_events(run, last):
    from channels.db import database_sync_to_async

    def add():
        for seq in (last + 1, last + 2):
            step_end_event(run, seq).save()

    await database_sync_to_async(add)()


async def _frame(run, seq):
    from channels.db import database_sync_to_async

    return await database_sync_to_async(lambda: RunEvent.objects.get(run=run, seq=seq).as_frame())()


def test_live_token_deltas_are_forwarded_without_seq():
    run = done_run("hello there")
    user = view_only_user()

    async def scenario():
        communicator, seqs = await _subscribed(
            f"/ws/runs/{run.pk}/?after_seq={run.last_event_seq}", user
        )
        assert seqs == []
        await get_channel_layer().group_send(
            run_group(run.pk),
            {"type": "run.live", "event": {"event_type": "text_delta", "delta": "hi"}},
        )
        message = await communicator.receive_json_from(timeout=2)
        assert message == {"type": "live", "event": {"event_type": "text_delta", "delta": "hi"}}
        await communicator.disconnect()

    async_to_sync(scenario)()


@pytest.mark.parametrize(
    ("who", "code"), [("anonymous", 4401), ("nobody", 4403), ("viewer-unknown-run", 4404)]
)
def test_close_codes(who, code):
    run = done_run("hello there")
    user = {
        "anonymous": lambda: AnonymousUser(),
        "nobody": lambda: User.objects.create_user("nobody", password="x"),
        "viewer-unknown-run": view_only_user,
    }[who]()
    target = "00000000-0000-0000-0000-000000000000" if who == "viewer-unknown-run" else run.pk

    async def scenario():
        communicator = await _connect(f"/ws/runs/{target}/", user)
        message = await communicator.receive_output(timeout=2)
        assert message == {"type": "websocket.close", "code": code}

    async_to_sync(scenario)()


def test_an_action_sent_over_the_socket_by_a_viewer_closes_it_with_4403():
    run = done_run("hello there")
    user = view_only_user()

    async def scenario():
        communicator, _ = await _subscribed(
            f"/ws/runs/{run.pk}/?after_seq={run.last_event_seq}", user
        )
        await communicator.send_json_to({"action": "approve", "ticket": "x"})
        message = await communicator.receive_output(timeout=2)
        assert message == {"type": "websocket.close", "code": 4403}

    async_to_sync(scenario)()


def test_an_operator_is_told_the_socket_is_read_only():
    run = done_run("hello there")
    user = user_with_role("operator", "op")

    async def scenario():
        communicator, _ = await _subscribed(
            f"/ws/runs/{run.pk}/?after_seq={run.last_event_seq}", user
        )
        await communicator.send_json_to({"action": "approve"})
        message = await communicator.receive_json_from(timeout=2)
        assert message["type"] == "error" and "read-only" in message["message"]
        await communicator.disconnect()

    async_to_sync(scenario)()
