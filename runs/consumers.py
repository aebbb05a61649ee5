"""Websocket streams: one run's events at `ws/runs/<id>/?after_seq=N`, and list-level
changes at `ws/dashboard/` (which run changed; which thread's pending input changed).

Broadcasts reach a socket through its process's hub (runs/fanout.py), which is the
group's one member for all the sockets of that process and renders each event row once;
a socket needs no channel of its own. A run stream subscribes first, then replays what
the database has after N, says `ready`, then forwards what the hub hands it, in seq
order, each seq once. What arrives while it reads the log is held and sent after it
(minus what the log already gave). The layer drops messages (slow consumers, a Redis
restart), so a frame that skips ahead makes the socket read the log again before it
goes on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils.module_loading import import_string

from common.access import visible_teams
from runs import fanout, metrics
from runs import permissions as perms
from runs.models import Run, RunEvent
from runs.realtime import DASHBOARD_GROUP, render_event_row, run_group

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_INTERNAL_ERROR = 1011
BACKFILL_BATCH = 500


@database_sync_to_async
def _run_visible(user: Any, run_id: str) -> bool:
    """The run exists and `user` may see it (its team's role): otherwise the socket closes
    as for an unknown run, not confirming another team's run exists."""
    try:
        team = Run.objects.filter(pk=run_id).values_list("agent__team_id", flat=True).first()
    except Exception:  # not a UUID
        return False
    return team is not None and bool(user.has_perm(perms.VIEW, team))


@database_sync_to_async
def _teams_seen(user: Any) -> frozenset[int] | None:
    return visible_teams(user, perms.VIEW)


@database_sync_to_async
def _events_after(run_id: str, after: int) -> list[dict[str, Any]]:
    rows = RunEvent.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")[:BACKFILL_BATCH]
    return [row.as_frame() for row in rows]


async def refuse_actions(consumer: AsyncJsonWebsocketConsumer) -> None:
    """Sockets are read-only: actions are HTTP POSTs (CSRF, permissions, idempotency).
    Someone who may not act at all is disconnected; an operator is told where to go."""
    user = consumer.scope["user"]
    if not await database_sync_to_async(user.has_perm)(perms.DECIDE):
        await consumer.close(code=CLOSE_FORBIDDEN)
        return
    await consumer.send_json(
        {"type": "error", "message": "this socket is read-only; POST actions over HTTP"}
    )


def _hub() -> fanout.Hub | None:
    layer = get_channel_layer()
    return None if layer is None else fanout.hub_for(layer)


class RunStreamConsumer(fanout.Follower, AsyncJsonWebsocketConsumer):
    # No channel of its own (an unknown alias gives no layer): the hub delivers.
    channel_layer_alias = None

    run_id: str
    last_sent = 0
    group: str | None = None
    counted = False  # in the websocket clients gauge (runs.metrics)
    hub: fanout.Hub | None = None
    # True while the socket reads the log (replay, a gap, a resync): the hub's frames
    # wait in `held` meanwhile, so that only one task sends to the socket at a time.
    syncing = True
    needs_log = False
    catching_up: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self.held: list[dict[str, Any]] = []
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.run_id = self.scope["url_route"]["kwargs"]["run_id"]
        if not await database_sync_to_async(user.has_perm)(perms.VIEW):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        if not await _run_visible(user, self.run_id):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last_sent = max(int(query.get("after_seq", ["0"])[0]), 0)
        except ValueError:
            self.last_sent = 0
        self.group = run_group(self.run_id)
        self.counted = metrics.websocket_opened("run")
        self.hub = _hub()
        if self.hub is not None:
            await self.hub.subscribe(self.group, self)  # before reading the log
        try:
            await self._backfill()
            await self.send_json({"type": "ready", "last_seq": self.last_sent})
            await self._catch_up()  # what the hub held while the log was read
        except BaseException:  # the socket dies with 1011 and gets no disconnect call
            await self.disconnect(CLOSE_INTERNAL_ERROR)
            raise

    async def disconnect(self, code: int) -> None:
        if self.counted:
            self.counted = False
            metrics.websocket_closed("run")
        if self.hub is not None and self.group is not None:
            self.hub.unsubscribe(self.group, self)
        if self.catching_up is not None:
            self.catching_up.cancel()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        await refuse_actions(self)

    # from the hub --------------------------------------------------------------------------

    async def on_events(self, batch: fanout.EventBatch) -> None:
        if self.syncing:
            self.held.extend(batch.frames)
            return
        if batch.continues(self.last_sent):  # the usual case: the text shared by all
            await self.send(text_data=batch.text())
            self.last_sent = batch.last_seq
            return
        frames, hole = fanout.following(batch.frames, self.last_sent)
        if frames:
            await self.send(text_data=batch.text(frames))
            self.last_sent = int(frames[-1]["seq"])
        if hole:  # the layer dropped something: the log fills the gap
            self._start_catch_up()

    async def on_text(self, text: str) -> None:
        await self.send(text_data=text)  # a live token delta

    def on_resync(self) -> None:
        if self.syncing:
            self.needs_log = True  # the running catch-up reads the log once more
        else:
            self._start_catch_up()

    # reading the log ----------------------------------------------------------------------

    def _start_catch_up(self) -> None:
        self.syncing = True
        self.needs_log = True
        self.catching_up = asyncio.create_task(self._catch_up_or_close())

    async def _catch_up_or_close(self) -> None:
        try:
            await self._catch_up()
        except Exception:
            logger.warning("run %s: reading the log failed; closing", self.run_id, exc_info=True)
            await self.close(code=CLOSE_INTERNAL_ERROR)  # the page reconnects from its seq

    async def _catch_up(self) -> None:
        """Send what the log (when `needs_log`) and the held frames have after
        `last_sent`, in order; then hand the socket back to the hub."""
        while True:
            if self.needs_log:
                self.needs_log = False
                await self._backfill()
            held, self.held = fanout.in_order(self.held), []
            if not held and not self.needs_log:
                break  # nothing awaited since the check: no frame can slip in unsent
            frames, hole = fanout.following(held, self.last_sent)
            for frame in frames:
                await self._send_frame(frame)
            if hole:
                self.needs_log = True
        self.syncing = False

    async def _backfill(self) -> None:
        while True:
            frames = await _events_after(self.run_id, self.last_sent)
            for frame in frames:
                await self._send_frame(frame)
            if len(frames) < BACKFILL_BATCH:
                return

    async def _send_frame(self, frame: dict[str, Any]) -> None:
        await self.send(text_data=fanout.frame_text([frame], render_event_row))
        self.last_sent = int(frame["seq"])


# How often a process pushes the dashboard's figures while runs change.
FIGURES_EVERY_SECONDS = 2.5


@database_sync_to_async
def _render_figures() -> str:
    """The dashboard's figures panel, rendered by the app that owns the dashboard (setting
    AWAKEN_DASHBOARD_FIGURES: runs.operations), so the core does not import it."""
    return str(import_string(settings.AWAKEN_DASHBOARD_FIGURES)())


class DashboardFigures(fanout.Follower):
    """The dashboard's figures, pushed to the dashboard pages of this process: rendered
    once per process at most every FIGURES_EVERY_SECONDS while runs change (and once after
    the last change), so neither the database nor daphne does more work for a hundred
    open dashboards than for one, and no tab fetches anything."""

    def __init__(self, hub: fanout.Hub) -> None:
        self.hub = hub
        self.pages: set[DashboardConsumer] = set()
        self.due = False
        self.last = 0.0
        self.task: asyncio.Task[None] | None = None

    async def join(self, page: DashboardConsumer) -> None:
        self.pages.add(page)
        if len(self.pages) == 1:
            await self.hub.subscribe(DASHBOARD_GROUP, self)

    def leave(self, page: DashboardConsumer) -> None:
        self.pages.discard(page)
        if not self.pages:
            self.hub.unsubscribe(DASHBOARD_GROUP, self)

    async def on_text(self, text: str) -> None:
        self.due = True
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._push())

    async def _push(self) -> None:
        loop = asyncio.get_running_loop()
        while self.due and self.pages:
            wait = self.last + FIGURES_EVERY_SECONDS - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            self.due = False
            self.last = loop.time()
            try:
                text = json.dumps({"type": "figures", "html": await _render_figures()})
            except Exception:  # the next change tries again
                logger.warning("rendering the dashboard's figures failed", exc_info=True)
                continue
            for page in list(self.pages):
                await page.send(text_data=text)


_figures: weakref.WeakKeyDictionary[fanout.Hub, DashboardFigures] = weakref.WeakKeyDictionary()


def _figures_for(hub: fanout.Hub) -> DashboardFigures:
    if hub not in _figures:
        _figures[hub] = DashboardFigures(hub)
    return _figures[hub]


class DashboardConsumer(fanout.Follower, AsyncJsonWebsocketConsumer):
    """List-level changes: which run changed, for dashboards, lists and the inbox; with
    `?figures=1` (the dashboard page) also the dashboard's figures, pushed."""

    channel_layer_alias = None  # the hub delivers (see RunStreamConsumer)
    hub: fanout.Hub | None = None
    figures: DashboardFigures | None = None
    counted = False  # in the websocket clients gauge (runs.metrics)
    teams: frozenset[int] | None = None  # whose runs' changes it gets; None: every team

    async def connect(self) -> None:
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(user.has_perm)(perms.VIEW):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.teams = await _teams_seen(user)
        self.counted = metrics.websocket_opened("dashboard")
        self.hub = _hub()
        if self.hub is not None:
            await self.hub.subscribe(DASHBOARD_GROUP, self)
            query = parse_qs(self.scope.get("query_string", b"").decode())
            # the pushed figures count every team: only for those who see every team
            if query.get("figures") == ["1"] and self.teams is None:
                self.figures = _figures_for(self.hub)
                await self.figures.join(self)
        await self.send_json({"type": "ready"})

    async def disconnect(self, code: int) -> None:
        if self.counted:
            self.counted = False
            metrics.websocket_closed("dashboard")
        if self.hub is not None:
            self.hub.unsubscribe(DASHBOARD_GROUP, self)
        if self.figures is not None:
            self.figures.leave(self)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        await refuse_actions(self)

    async def on_text(self, text: str) -> None:
        await self.send(text_data=text)

    async def on_run_text(self, item: tuple[int | None, str]) -> None:
        team, text = item
        if self.teams is None or team in self.teams:  # another team's run: not delivered
            await self.send(text_data=text)

    async def on_thread_text(self, item: tuple[int | None, str]) -> None:
        await self.on_run_text(item)  # the same team filter: another team's thread is not sent
