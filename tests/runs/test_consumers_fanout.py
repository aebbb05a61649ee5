"""The per-process hub behind the websocket streams (runs/fanout.py): one group member
and one render per broadcast for all the sockets of a run, batched frames when a run is
busy, and channel-layer failures that are retried, logged and recovered from instead of
reaching the sockets."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import math
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import InMemoryChannelLayer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from runs import consumers, fanout
from runs.models import Run
from runs.realtime import DASHBOARD_GROUP, bundled, run_group
from runs.routing import websocket_urlpatterns
from tests.factories import done_run, step_end_event, view_only_user
from tests.processes import wait_for_async

pytestmark = pytest.mark.django_db(transaction=True)


class Layer(InMemoryChannelLayer):
    """The in-memory layer, counting group calls (and how many run at once), failing the
    first `fail_adds` group_adds and every group_discard when told, and failing a
    receive that gets a `test.break` message (as a lost Redis connection does)."""

    def __init__(self, fail_adds: int = 0, fail_discards: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fail_adds = fail_adds
        self.fail_discards = fail_discards
        self.adds = self.discards = self.running = self.most_running = 0
        self.add_delay = 0.0

    async def group_add(self, group: str, channel: str) -> None:
        self.adds += 1
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            await asyncio.sleep(self.add_delay)
            if self.fail_adds:
                self.fail_adds -= 1
                raise ConnectionError("Too many connections")
            await super().group_add(group, channel)
        finally:
            self.running -= 1

    async def group_discard(self, group: str, channel: str) -> None:
        self.discards += 1
        if self.fail_discards:
            raise ConnectionError("Too many connections")
        await super().group_discard(group, channel)

    async def receive(self, channel: str) -> dict[str, Any]:
        message = await super().receive(channel)
        if message.get("type") == "test.break":
            raise ConnectionError("Connection closed by server.")
        return message


@pytest.fixture
def layer(monkeypatch: pytest.MonkeyPatch) -> Layer:
    layer = Layer()
    monkeypatch.setattr(consumers, "get_channel_layer", lambda: layer)
    return layer


async def connect(path: str, user: User) -> WebsocketCommunicator:
    """Connected and past the replay (the path asks for none)."""
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    assert (await communicator.receive_json_from(timeout=2))["type"] == "ready"
    return communicator


def frame(run: Run, seq: int) -> dict[str, Any]:
    return {"event_type": "step_end", "run_id": str(run.pk), "seq": seq, "created_at": "t"}


def seqs_of(message: dict[str, Any]) -> list[int]:
    if message["type"] == "event":
        return [message["event"]["seq"]]
    assert message["type"] == "events"
    return [item["event"]["seq"] for item in message["events"]]


async def until_left(layer: Layer, group: str) -> None:
    for _ in range(100):
        if not layer.groups.get(group):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"still members of {group}: {layer.groups.get(group)}")


def test_sockets_on_one_run_share_one_member_and_one_render_per_event(layer, monkeypatch):
    run = done_run("hello there")
    user = view_only_user()
    last = run.last_event_seq
    renders: list[int] = []
    real_render = fanout.render_event_row

    def render(event: dict[str, Any]) -> str:
        renders.append(event["seq"])
        return real_render(event)

    monkeypatch.setattr(fanout, "render_event_row", render)
    group = run_group(run.pk)

    async def scenario() -> None:
        path = f"/ws/runs/{run.pk}/?after_seq={last}"
        sockets = [await connect(path, user) for _ in range(3)]
        assert len(layer.groups[group]) == 1 and layer.adds == 1
        await layer.group_send(group, {"type": "run.events", "events": [frame(run, last + 1)]})
        texts = [await socket.receive_from(timeout=2) for socket in sockets]
        assert len(set(texts)) == 1  # the same frame, encoded once
        message = json.loads(texts[0])
        assert message["type"] == "event" and message["event"]["seq"] == last + 1
        assert f'data-seq="{last + 1}"' in message["html"]
        assert renders == [last + 1]  # rendered once for the three sockets
        for socket in sockets[:2]:
            await socket.disconnect()
        assert len(layer.groups[group]) == 1  # the last socket still follows
        await sockets[2].disconnect()
        await until_left(layer, group)
        assert layer.discards == 1

    async_to_sync(scenario)()


def test_a_bundle_reaches_the_sockets_as_its_messages_in_order(layer):
    """What a worker queued for a run while its last send went out arrives as one bundle
    (runs.realtime.bundled): the sockets get each message, in the bundle's order."""
    run = done_run("hello there")
    last = run.last_event_seq
    group = run_group(run.pk)
    live = {"event_type": "text_delta", "run_id": str(run.pk), "delta": "4"}
    user = view_only_user()

    async def scenario() -> None:
        socket = await connect(f"/ws/runs/{run.pk}/?after_seq={last}", user)
        messages = bundled(
            [
                (group, {"type": "run.live", "event": live}),
                (group, {"type": "run.events", "events": [frame(run, last + 1)]}),
            ]
        )
        assert len(messages) == 1
        await layer.group_send(*messages[0])
        first = await socket.receive_json_from(timeout=2)
        second = await socket.receive_json_from(timeout=2)
        assert first == {"type": "live", "event": live}
        assert seqs_of(second) == [last + 1]
        await socket.disconnect()

    async_to_sync(scenario)()


def test_a_busy_run_gets_batched_frames_and_a_quiet_one_single_frames_at_once(layer):
    run = done_run("hello there")
    user = view_only_user()
    last = run.last_event_seq
    group = run_group(run.pk)

    async def scenario() -> None:
        socket = await connect(f"/ws/runs/{run.pk}/?after_seq={last}", user)
        for seq in range(last + 1, last + 6):  # five commits a few ms apart
            await layer.group_send(group, {"type": "run.events", "events": [frame(run, seq)]})
            await asyncio.sleep(fanout.BATCH_SECONDS / 8)
        messages, seqs = [], []
        while len(seqs) < 5:
            messages.append(await socket.receive_json_from(timeout=2))
            seqs += seqs_of(messages[-1])
        assert seqs == list(range(last + 1, last + 6))
        assert len(messages) < 5 and messages[-1]["type"] == "events"
        assert all(item["html"].startswith('<div class="ev"') for item in messages[-1]["events"])
        await asyncio.sleep(fanout.BATCH_SECONDS * 3)  # quiet: the next one is not held
        await layer.group_send(group, {"type": "run.events", "events": [frame(run, last + 6)]})
        message = await socket.receive_json_from(timeout=2)
        assert message["type"] == "event" and message["event"]["seq"] == last + 6
        await socket.disconnect()

    async_to_sync(scenario)()


def test_a_failing_group_add_is_retried_and_a_failing_discard_only_logged(layer, caplog):
    run = done_run("hello there")
    user = view_only_user()
    last = run.last_event_seq
    group = run_group(run.pk)
    layer.fail_adds = 2
    layer.fail_discards = True

    async def scenario() -> None:
        socket = await connect(f"/ws/runs/{run.pk}/?after_seq={last}", user)
        assert layer.adds == 3 and len(layer.groups[group]) == 1
        await layer.group_send(group, {"type": "run.events", "events": [frame(run, last + 1)]})
        assert seqs_of(await socket.receive_json_from(timeout=2)) == [last + 1]
        await socket.disconnect()
        for _ in range(100):  # the discard's retries
            if layer.discards == 1 + len(fanout.RETRY_DELAYS):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.05)

    with caplog.at_level(logging.WARNING, logger="runs.fanout"):
        async_to_sync(scenario)()
    assert layer.discards == 1 + len(fanout.RETRY_DELAYS)
    assert [r.getMessage() for r in caplog.records if "group_discard" in r.getMessage()]


def test_after_the_layer_fails_the_hub_joins_again_and_sockets_read_the_log(layer):
    """A Redis restart: the connection drops, groups and queued messages are gone."""
    run = done_run("hello there")
    user = view_only_user()
    last = run.last_event_seq
    group = run_group(run.pk)

    def commit_unannounced(seq: int) -> None:
        step_end_event(run, seq).save()

    async def scenario() -> None:
        socket = await connect(f"/ws/runs/{run.pk}/?after_seq={last}", user)
        (member,) = layer.groups[group]
        layer.groups.clear()
        await layer.send(member, {"type": "test.break"})
        await database_sync_to_async(commit_unannounced)(last + 1)  # its broadcast was lost
        message = await socket.receive_json_from(timeout=5)
        assert seqs_of(message) == [last + 1]  # read from the log once the hub joined again
        assert len(layer.groups[group]) == 1
        await layer.group_send(group, {"type": "run.events", "events": [frame(run, last + 2)]})
        assert seqs_of(await socket.receive_json_from(timeout=2)) == [last + 2]
        await socket.disconnect()

    async_to_sync(scenario)()


def test_live_memberships_are_renewed_before_the_layer_expires_them(monkeypatch):
    layer = Layer(group_expiry=2)  # renewed every second
    monkeypatch.setattr(consumers, "get_channel_layer", lambda: layer)
    run = done_run("hello there")
    user = view_only_user()
    last = run.last_event_seq

    async def scenario() -> None:
        socket = await connect(f"/ws/runs/{run.pk}/?after_seq={last}", user)
        loop = asyncio.get_running_loop()
        expired_at = loop.time() + layer.group_expiry  # of the first group_add, done by now
        await wait_for_async(
            lambda: loop.time() > expired_at and layer.adds >= 3,
            timeout=layer.group_expiry * 3,
            what="group_expiry to pass since the first group_add, with renewals",
        )
        await layer.group_send(
            run_group(run.pk), {"type": "run.events", "events": [frame(run, last + 1)]}
        )
        assert seqs_of(await socket.receive_json_from(timeout=2)) == [last + 1]
        await socket.disconnect()

    async_to_sync(scenario)()
    assert layer.adds >= 3


def test_concurrent_group_calls_are_bounded_per_process():
    layer = Layer()
    layer.add_delay = 0.02

    async def scenario() -> None:
        hub = fanout.hub_for(layer)
        followers = [fanout.Follower() for _ in range(40)]
        joined = await asyncio.gather(
            *(hub.subscribe(f"run.{index}", f) for index, f in enumerate(followers))
        )
        assert all(joined)
        for index, follower in enumerate(followers):
            hub.unsubscribe(f"run.{index}", follower)

    async_to_sync(scenario)()
    assert layer.adds == 40
    assert layer.most_running == fanout.MAX_LAYER_CALLS


def test_dashboard_sockets_share_one_member(layer):
    user = view_only_user()

    async def scenario() -> None:
        sockets = [await connect("/ws/dashboard/", user) for _ in range(3)]
        assert len(layer.groups[DASHBOARD_GROUP]) == 1
        summary = {"id": "r1", "status": "done"}
        await layer.group_send(DASHBOARD_GROUP, {"type": "run.changed", "run": summary})
        for socket in sockets:
            assert await socket.receive_json_from(timeout=2) == {"type": "run", "run": summary}
        for socket in sockets:
            await socket.disconnect()
        await until_left(layer, DASHBOARD_GROUP)

    async_to_sync(scenario)()


def test_dashboards_get_the_figures_rendered_once_per_process_while_runs_change(layer, monkeypatch):
    """However many dashboards are open and however many runs change, the figures are
    rendered at most once per FIGURES_EVERY_SECONDS (and once after the last change) and
    the same text is pushed to every dashboard; list pages without ?figures=1 get none."""
    user = view_only_user()
    renders: list[float] = []

    async def render() -> str:
        renders.append(asyncio.get_running_loop().time())
        return f"<b>figures {len(renders)}</b>"

    monkeypatch.setattr(consumers, "_render_figures", render)
    monkeypatch.setattr(consumers, "FIGURES_EVERY_SECONDS", 0.3)
    every = consumers.FIGURES_EVERY_SECONDS

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        dashboards = [await connect("/ws/dashboard/?figures=1", user) for _ in range(3)]
        runs_list = await connect("/ws/dashboard/", user)
        changed: list[float] = []
        for index in range(10):  # a change every 50 ms for half a second
            summary = {"id": f"r{index}", "status": "done"}
            await layer.group_send(DASHBOARD_GROUP, {"type": "run.changed", "run": summary})
            changed.append(loop.time())
            await asyncio.sleep(0.05)
        # the render after the last change, then a quiet period: no render is due anymore
        await wait_for_async(
            lambda: renders and renders[-1] > changed[-1] and loop.time() > renders[-1] + every,
            timeout=every * 4,
            what="the figures rendered once after the last change",
        )
        for socket in [*dashboards, runs_list]:
            messages = []
            while not await socket.receive_nothing(timeout=0.05):
                messages.append(await socket.receive_json_from())
            pushed = [m["html"] for m in messages if m["type"] == "figures"]
            assert len([m for m in messages if m["type"] == "run"]) == 10
            if socket is runs_list:
                assert pushed == []
            else:
                assert pushed == [f"<b>figures {n}</b>" for n in range(1, len(renders) + 1)]
        # the first change at once, then every `every` seconds while changes come, and one
        # after: at most one render per period the changes spanned, plus those two
        assert 2 <= len(renders) <= 2 + math.ceil((changed[-1] - changed[0]) / every)
        assert all(b - a >= every - 0.01 for a, b in itertools.pairwise(renders))
        for socket in [*dashboards, runs_list]:
            await socket.disconnect()
        await until_left(layer, DASHBOARD_GROUP)

    async_to_sync(scenario)()


def test_frames_held_during_the_replay_are_sent_after_it_once(layer, monkeypatch):
    """A commit broadcast while a socket reads the log: it is in the replay or held, and
    sent once, after `ready`."""
    run = done_run("hello there")
    user = view_only_user()
    last = run.last_event_seq
    group = run_group(run.pk)
    real_events_after = consumers._events_after

    async def events_after(run_id: str, after: int) -> list[dict[str, Any]]:
        frames = await real_events_after(run_id, after)
        # broadcast while the replay is being read: the last replayed seq and the next
        batch = [frame(run, last), frame(run, last + 1)]
        await layer.group_send(group, {"type": "run.events", "events": batch})
        await asyncio.sleep(fanout.BATCH_SECONDS * 2)
        return frames

    monkeypatch.setattr(consumers, "_events_after", events_after)

    async def scenario() -> None:
        communicator = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/runs/{run.pk}/?after_seq={last - 1}"
        )
        communicator.scope["user"] = user
        assert (await communicator.connect())[0]
        assert seqs_of(await communicator.receive_json_from(timeout=2)) == [last]
        assert await communicator.receive_json_from(timeout=2) == {
            "type": "ready",
            "last_seq": last,
        }
        assert seqs_of(await communicator.receive_json_from(timeout=2)) == [last + 1]
        assert await communicator.receive_nothing(timeout=0.2)
        await communicator.disconnect()

    async_to_sync(scenario)()
