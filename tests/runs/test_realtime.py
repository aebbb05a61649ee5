"""The one send path of runs/realtime.py: `Broadcaster.send` picks the loop that sends
(the serving loop, the caller's loop, or a loop of its own for Redis), keeps the order,
and never raises into the caller. Real channel layers throughout: the in-memory one, the
Redis one at REDIS_URL when set, and a Redis one at a port where nothing listens."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings as django_settings

from runs import realtime
from tests.processes import free_port

IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
GROUP = "run.realtime-test"


def _redis(url: str) -> dict[str, Any]:
    config = {"hosts": [{"address": url, "socket_connect_timeout": 1}]}
    return {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": config}}


def _messages(count: int) -> list[realtime.Message]:
    return [(GROUP, {"type": "run.live", "event": {"n": n}}) for n in range(count)]


async def _member() -> tuple[Any, str]:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(GROUP, channel)
    return layer, channel


async def _received(layer: Any, channel: str, count: int, timeout: float) -> list[int]:
    """The numbers of the first `count` messages received, bundles unpacked in order."""
    got: list[int] = []
    while len(got) < count:
        message = await asyncio.wait_for(layer.receive(channel), timeout)
        for each in message["messages"] if message["type"] == realtime.BUNDLE else [message]:
            got.append(each["event"]["n"])
    return got


def test_what_was_queued_together_goes_as_one_message_per_group_in_order():
    other = "run.other"
    queued = [*_messages(3), (other, {"type": "run.changed", "run": {"id": "x"}})]
    queued.append((GROUP, {"type": "run.events", "events": [{"seq": 1}]}))
    out = realtime.bundled(queued)
    assert [group for group, _ in out] == [GROUP, other]
    bundle = out[0][1]
    assert bundle["type"] == realtime.BUNDLE
    assert [m["type"] for m in bundle["messages"]] == ["run.live"] * 3 + ["run.events"]
    assert out[1][1] == {"type": "run.changed", "run": {"id": "x"}}  # alone: as it is


def test_a_worker_thread_hands_its_broadcasts_to_the_serving_loop_in_order(settings):
    """The in-memory layer's queues belong to the serving loop: a send from another thread
    must wake it at once (not when something else does)."""
    settings.CHANNEL_LAYERS = IN_MEMORY
    broadcaster = realtime.Broadcaster()

    async def scenario() -> list[int]:
        layer, channel = await _member()
        loop = asyncio.get_running_loop()
        broadcaster.serve_from(loop)
        assert broadcaster.serving_loop is loop
        try:
            worker = threading.Thread(target=broadcaster.send, args=(_messages(20),))
            started = loop.time()
            worker.start()
            got = await _received(layer, channel, 20, timeout=2)
            assert loop.time() - started < 0.3  # a loop left asleep wakes much later
            worker.join()
            return got
        finally:
            broadcaster.stop_serving(loop)

    assert async_to_sync(scenario)() == list(range(20))
    assert broadcaster.serving_loop is None


def test_only_the_serving_process_remembers_what_it_sent(settings):
    settings.CHANNEL_LAYERS = IN_MEMORY
    broadcaster = realtime.Broadcaster()
    broadcaster.note("r1", [{"seq": 1}])
    assert not broadcaster.sent_here("r1", 1)  # no watcher here: nothing noted
    loop = asyncio.new_event_loop()
    try:
        broadcaster.serve_from(loop)
        broadcaster.note("r1", [{"seq": 1}, {"seq": 2}])
        assert broadcaster.sent_here("r1", 2)
        assert not broadcaster.sent_here("r1", 2)  # forgotten once asked
        broadcaster.stop_serving(asyncio.new_event_loop())  # another loop: still serving
        assert broadcaster.serving_loop is loop
    finally:
        broadcaster.stop_serving(loop)
        loop.close()


def test_without_a_serving_loop_the_callers_loop_sends_from_sync_and_async_code(settings):
    settings.CHANNEL_LAYERS = IN_MEMORY
    broadcaster = realtime.Broadcaster()
    layer, channel = async_to_sync(_member)()
    broadcaster.send(_messages(3))  # sync code (a commit hook, a terminal command)
    assert async_to_sync(_received)(layer, channel, 3, 0.5) == [0, 1, 2]

    async def from_a_running_loop() -> list[int]:
        broadcaster.send(_messages(3))  # must not block or raise on this loop
        return await _received(layer, channel, 3, 0.5)

    assert async_to_sync(from_a_running_loop)() == [0, 1, 2]


@pytest.mark.skipif(not django_settings.REDIS_URL, reason="needs REDIS_URL")
def test_on_redis_one_loop_of_its_own_sends_in_order_and_flush_waits_for_it(settings):
    settings.CHANNEL_LAYERS = _redis(django_settings.REDIS_URL)
    broadcaster = realtime.Broadcaster()
    layer, channel = async_to_sync(_member)()
    try:
        broadcaster.send(_messages(50))
        broadcaster.flush()
        assert async_to_sync(_received)(layer, channel, 50, 5) == list(range(50))
    finally:
        async_to_sync(layer.group_discard)(GROUP, channel)


def test_a_layer_that_cannot_be_reached_is_logged_never_raised(settings, caplog):
    settings.CHANNEL_LAYERS = _redis(f"redis://127.0.0.1:{free_port()}/0")
    broadcaster = realtime.Broadcaster()
    with caplog.at_level(logging.WARNING, logger="runs.realtime"):
        broadcaster.send(_messages(2))  # returns at once: the commit is not held up
        broadcaster.flush(timeout=10)
    failed = [r for r in caplog.records if r.getMessage() == f"broadcast to {GROUP} failed"]
    assert len(failed) == 1  # the two messages went as one bundle
