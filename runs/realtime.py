"""Channel-layer group names and broadcasts. The layer is at-most-once: it is a hint to
refresh, the database event log is the truth (runs/README.md)."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import threading
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.template.loader import render_to_string

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
    A process that exits right after its commit (a terminal command) sends what is
    queued first, waiting FLUSH_SECONDS at most.
    """

    FLUSH_SECONDS = 2.0

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
                atexit.register(self.flush)
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
            finally:
                queue.task_done()

    def flush(self, timeout: float | None = None) -> None:
        """Wait until what was queued so far is sent (at most `timeout` seconds)."""
        loop, queue = self._loop, self._queue
        if loop is None or queue is None or self._pid != os.getpid() or loop.is_closed():
            return
        done = asyncio.run_coroutine_threadsafe(queue.join(), loop)
        try:
            done.result(self.FLUSH_SECONDS if timeout is None else timeout)
        except Exception:  # not sent in time: the layer is a hint, the log the truth
            done.cancel()


_broadcaster = _Broadcaster()


class _InMemoryHome:
    """The event loop that serves the sockets of this process, on the in-memory layer.

    The layer's queues belong to that loop. A broadcast sent from a worker thread through
    a loop of its own (`async_to_sync`) fills the queue but does not wake the loop, so
    the sockets got it only when something else woke it, up to a second later. Once the
    serving loop is known (`manage.py serve` names it, runs/watcher.py), every broadcast
    is handed to it instead, in order.

    It also remembers the events this process broadcast, so that the watcher, which
    broadcasts what other processes committed, can leave them out.
    """

    NOTED_LIMIT = 10_000  # events remembered at most; beyond, the oldest are forgotten

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._noted: dict[tuple[str, int], None] = {}  # insertion-ordered: oldest first
        self._tasks: set[asyncio.Future[Any]] = set()

    def send(self, layer: InMemoryChannelLayer, group: str, message: dict[str, Any]) -> bool:
        """Hand the broadcast to the serving loop; False if there is none."""
        loop = self.loop
        if loop is None:
            return False
        # RuntimeError: the loop closed, the server is stopping and nobody listens
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._start, layer, group, message)
        return True

    def _start(self, layer: InMemoryChannelLayer, group: str, message: dict[str, Any]) -> None:
        # group_send never waits on the in-memory layer: tasks started in this order
        # queue their messages in this order
        task = asyncio.ensure_future(layer.group_send(group, message))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("broadcast failed", exc_info=task.exception())

    def note(self, run_id: Any, frames: list[dict[str, Any]]) -> None:
        if self.loop is None:
            return  # no watcher here: nobody asks
        with self._lock:
            for frame in frames:
                self._noted[(str(run_id), int(frame["seq"]))] = None
            while len(self._noted) > self.NOTED_LIMIT:
                del self._noted[next(iter(self._noted))]

    def sent_here(self, run_id: Any, seq: int) -> bool:
        """Whether this process broadcast that event; forgotten once asked."""
        key = (str(run_id), seq)
        with self._lock:
            if key not in self._noted:
                return False
            del self._noted[key]
            return True


in_memory_home = _InMemoryHome()


def _send(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    if not isinstance(layer, InMemoryChannelLayer):
        _broadcaster.send(group, message)
        return
    if in_memory_home.send(layer, group, message):
        return
    # No serving loop known (tests, terminal commands): the layer's own process only.
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:
        logger.warning("broadcast to %s failed", group, exc_info=True)


def event_messages(
    run_id: Any, frames: list[dict[str, Any]], summary: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """What a commit broadcasts: the persisted events of a run to its group, then a
    one-line summary (with the run's team) for lists."""
    messages: list[tuple[str, dict[str, Any]]] = []
    if frames:
        messages.append((run_group(run_id), {"type": "run.events", "events": frames}))
    messages.append((DASHBOARD_GROUP, {"type": "run.changed", "run": summary}))
    return messages


def broadcast_events(run_id: Any, frames: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """Called on commit (see `event_messages`)."""
    in_memory_home.note(run_id, frames)
    for group, message in event_messages(run_id, frames, summary):
        _send(group, message)


def broadcast_run_changed(run_id: Any, summary: dict[str, Any]) -> None:
    """Called on commit of a change that adds no event to the run's log (a ticket claimed,
    released or assigned): the run's summary to the lists and to the run's own page,
    which refetch what they show of it."""
    message = {"type": "run.changed", "run": summary}
    _send(DASHBOARD_GROUP, message)
    _send(run_group(run_id), message)


def thread_changed_message(thread_id: Any, team_id: int | None) -> dict[str, Any]:
    """A change of a thread that is no run's event: its pending input (queued, edited,
    retracted or cancelled). Lists of runs ignore it; the thread's page refetches."""
    return {"type": "thread.changed", "thread": {"id": str(thread_id), "team_id": team_id}}


def broadcast_thread_changed(thread_id: Any, team_id: int | None) -> None:
    """Called on commit of a change of a thread's pending input."""
    _send(DASHBOARD_GROUP, thread_changed_message(thread_id, team_id))


def broadcast_live(run_id: Any, event: dict[str, Any]) -> None:
    """A token delta before it is persisted; carries no seq."""
    _send(run_group(run_id), {"type": "run.live", "event": event})


def render_event_row(frame: dict[str, Any]) -> str:
    """One timeline row, from the same partial the run page renders (escaped)."""
    return render_to_string("runs/partials/event_row.html", {"event": frame})
