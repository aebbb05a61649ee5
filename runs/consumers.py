"""Websocket stream of one run's events: `ws/runs/<id>/?after_seq=N`.

Subscribe first, then replay what the database has after N, say `ready`, then forward
live frames,
dropping any seq already sent. The channel layer drops messages for slow consumers, so a
frame that skips ahead triggers a backfill from the database before it is forwarded.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from runs.models import Run, RunEvent
from runs.realtime import DASHBOARD_GROUP, render_event_row, run_group

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
BACKFILL_BATCH = 500


@database_sync_to_async
def _run_exists(run_id: str) -> bool:
    try:
        return Run.objects.filter(pk=run_id).exists()
    except Exception:  # not a UUID
        return False


@database_sync_to_async
def _events_after(run_id: str, after: int) -> list[dict[str, Any]]:
    rows = RunEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")[:BACKFILL_BATCH]
    return [row.as_frame() for row in rows]


async def refuse_actions(consumer: AsyncJsonWebsocketConsumer) -> None:
    """Sockets are read-only: actions are HTTP POSTs (CSRF, permissions, idempotency).
    Someone who may not act at all is disconnected; an operator is told where to go."""
    user = consumer.scope["user"]
    if not await database_sync_to_async(user.has_perm)("runs.decide_ticket"):
        await consumer.close(code=CLOSE_FORBIDDEN)
        return
    await consumer.send_json(
        {"type": "error", "message": "this socket is read-only; POST actions over HTTP"}
    )


class RunStreamConsumer(AsyncJsonWebsocketConsumer):
    run_id: str
    last_sent: int
    group: str | None = None

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.run_id = self.scope["url_route"]["kwargs"]["run_id"]
        if not await _run_exists(self.run_id):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        if not await database_sync_to_async(user.has_perm)("runs.view_run"):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last_sent = max(int(query.get("after_seq", ["0"])[0]), 0)
        except ValueError:
            self.last_sent = 0
        self.group = run_group(self.run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self._backfill()
        await self.send_json({"type": "ready", "last_seq": self.last_sent})

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        await refuse_actions(self)

    async def _backfill(self) -> None:
        while True:
            frames = await _events_after(self.run_id, self.last_sent)
            for frame in frames:
                await self._send_frame(frame)
            if len(frames) < BACKFILL_BATCH:
                return

    async def _send_frame(self, frame: dict[str, Any]) -> None:
        await self.send_json({"type": "event", "event": frame, "html": render_event_row(frame)})
        self.last_sent = frame["seq"]

    async def run_events(self, message: dict[str, Any]) -> None:
        for frame in message["events"]:
            seq = frame["seq"]
            if seq <= self.last_sent:
                continue
            if seq > self.last_sent + 1:
                await self._backfill()  # the layer dropped something: the log fills the gap
                continue
            await self._send_frame(frame)

    async def run_live(self, message: dict[str, Any]) -> None:
        await self.send_json({"type": "live", "event": message["event"]})


class DashboardConsumer(AsyncJsonWebsocketConsumer):
    """List-level changes: which run changed, for dashboards, lists and the inbox."""

    joined = False

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(user.has_perm)("runs.view_run"):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        await self.channel_layer.group_add(DASHBOARD_GROUP, self.channel_name)
        self.joined = True
        await self.send_json({"type": "ready"})

    async def disconnect(self, code: int) -> None:
        if self.joined:
            await self.channel_layer.group_discard(DASHBOARD_GROUP, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        await refuse_actions(self)

    async def run_changed(self, message: dict[str, Any]) -> None:
        await self.send_json({"type": "run", "run": message["run"]})
