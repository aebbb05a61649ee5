"""An idle websocket on daphne in the distributed mode stays open: the channel layer's
blocking read on Redis must not time out under it (redis-py 8's 5 s default socket
timeout raced channels-redis's 5 s BZPOPMIN and closed idle sockets with 1011)."""

from __future__ import annotations

import asyncio
import json

import websockets
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.test import Client

from runs.realtime import DASHBOARD_GROUP
from tests.processes import free_port

IDLE_SECONDS = 60


def test_an_idle_dashboard_websocket_stays_open_and_still_receives(processes):
    port = free_port()
    daphne = processes("daphne", port=port)
    user = User.objects.create_superuser("idler", password="pw")
    client = Client()
    client.force_login(user)
    headers = {
        "Cookie": f"sessionid={client.cookies['sessionid'].value}",
        "Origin": f"http://127.0.0.1:{port}",
    }

    async def idle_then_receive() -> dict:
        url = f"ws://127.0.0.1:{port}/ws/dashboard/"
        async with websockets.connect(url, additional_headers=headers) as socket:
            ready = json.loads(await asyncio.wait_for(socket.recv(), timeout=10))
            assert ready["type"] == "ready"
            try:  # nothing is sent while idle; the socket must not be closed meanwhile
                message = await asyncio.wait_for(socket.recv(), timeout=IDLE_SECONDS)
            except TimeoutError:
                pass
            else:
                raise AssertionError(f"unexpected message while idle: {message!r}")
            layer = get_channel_layer()
            assert layer is not None
            await layer.group_send(
                DASHBOARD_GROUP, {"type": "run.changed", "run": {"id": "after-idle"}}
            )
            return json.loads(await asyncio.wait_for(socket.recv(), timeout=10))

    try:
        frame = asyncio.run(idle_then_receive())
    except websockets.exceptions.ConnectionClosed as exc:
        raise AssertionError(
            f"the idle websocket was closed: {exc}\n{daphne.log_tail(2000)}"
        ) from None
    assert frame == {"type": "run", "run": {"id": "after-idle"}}
    assert "TimeoutError" not in daphne.log()
