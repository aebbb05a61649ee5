"""Channel-layer group names and broadcasts. The layer is at-most-once: it is a hint to
refresh, the database event log is the truth (SPEC §3)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

logger = logging.getLogger(__name__)

DASHBOARD_GROUP = "dashboard"


def run_group(run_id: Any) -> str:
    return f"run.{run_id}"


class _Broadcaster:
    """Sends from sync code through one long-lived event loop per process, in order.

    `async_to_sync(group_send)` per message starts a loop and, with channels-redis, a
    new Redis connection every time (about 5 ms each, measured by bench/). Here the
    messages go through a FIFO queue on a background loop that keeps its connections,
    and the caller does not wait: the layer is a hint, the database log is the truth.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[tuple[str, dict[str, Any]]] | None = None

    def send(self, group: str, message: dict[str, Any]) -> None:
        loop, queue = self._ensure()
        loop.call_soon_threadsafe(queue.put_nowait, (group, message))

    def _ensure(
        self,
    ) -> tuple[asyncio.AbstractEventLoop, asyncio.Queue[tuple[str, dict[str, Any]]]]:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # first use, or a forked worker
                ready = threading.Event()
                self._pid = os.getpid()
                threading.Thread(
                    target=self._run, args=(ready,), daemon=True, name="broadcast"
                ).start()
                ready.wait(5)
            assert self._loop is not None and self._queue is not None
            return self._loop, self._queue

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._queue = asyncio.Queue()
        ready.set()
        loop.run_until_complete(self._drain(self._queue))

    async def _drain(self, queue: asyncio.Queue[tuple[str, dict[str, Any]]]) -> None:
        while True:
            group, message = await queue.get()
            layer = get_channel_layer()
            try:
                if layer is not None:
                    await layer.group_send(group, message)
            except Exception:  # never let a broadcast failure touch the committed state
                logger.warning("broadcast to %s failed", group, exc_info=True)


_broadcaster = _Broadcaster()


def _send(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    if not isinstance(layer, InMemoryChannelLayer):
        _broadcaster.send(group, message)
        return
    # The in-memory layer (embedded default, tests) belongs to the serving process's loop.
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:
        logger.warning("broadcast to %s failed", group, exc_info=True)


def broadcast_events(run_id: Any, frames: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """Called on commit: the persisted events of a run, then a one-line summary for lists."""
    if frames:
        _send(run_group(run_id), {"type": "run.events", "events": frames})
    _send(DASHBOARD_GROUP, {"type": "run.changed", "run": summary})


def broadcast_live(run_id: Any, event: dict[str, Any]) -> None:
    """A token delta before it is persisted; carries no seq."""
    _send(run_group(run_id), {"type": "run.live", "event": event})


def render_event_row(frame: dict[str, Any]) -> str:
    """One timeline row, from the same partial the run page renders (escaped)."""
    from django.template.loader import render_to_string

    return render_to_string("runs/partials/event_row.html", {"event": frame})
