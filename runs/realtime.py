"""Channel-layer group names and broadcasts. The layer is at-most-once: it is a hint to
refresh, the database event log is the truth (runs/README.md).

Every broadcast of this process leaves through `broadcaster.send` (one path): run events
after their commit, live token deltas, run and thread changes for the lists, and what
`manage.py serve`'s watcher re-broadcasts for other processes (runs/watcher.py). It
decides how the messages reach the layer:

- a serving loop is known (`manage.py serve` on the in-memory layer names daphne's loop):
  they are handed to that loop, in order. The in-memory layer's queues belong to it; a
  message put there from another loop fills a queue without waking the loop, so sockets
  got it only when something else woke it, up to a second later;
- the in-memory layer without one (tests, terminal commands): the layer reaches this
  process only, so the caller's own loop sends (`async_to_sync` from sync code, which
  runs on the outer loop when there is one; a task when called on a running loop);
- any other layer (channels-redis): one long-lived loop per process, on a thread of its
  own, sends in order. `async_to_sync(group_send)` per message started a loop and a new
  Redis connection each time (about 5 ms each, measured by bench/); that loop keeps its
  connections and the caller does not wait. A process that exits right after its commit
  (a terminal command) sends what is queued first, waiting FLUSH_SECONDS at most.

A failed send is logged and never raised into the caller: the commit stands.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import threading
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.template.loader import render_to_string

logger = logging.getLogger(__name__)

DASHBOARD_GROUP = "dashboard"

Message = tuple[str, dict[str, Any]]  # a group and what is sent to it


def run_group(run_id: Any) -> str:
    return f"run.{run_id}"


async def _group_send(layer: Any, group: str, message: dict[str, Any]) -> None:
    try:
        await layer.group_send(group, message)
    except Exception:  # never let a broadcast failure touch the committed state
        logger.warning("broadcast to %s failed", group, exc_info=True)


# Groups a drain sends to at once (each send is a few Redis round trips)
SEND_CONCURRENCY = 16
BUNDLE = "bundle"  # the type of a message that carries a group's queued messages, in order


def bundled(messages: list[Message]) -> list[Message]:
    """One message per group: the group's messages in their order, as they are, when it
    has one; else a bundle of them (runs/fanout.py unpacks it)."""
    by_group: dict[str, list[dict[str, Any]]] = {}
    for group, message in messages:
        by_group.setdefault(group, []).append(message)
    return [
        (group, found[0] if len(found) == 1 else {"type": BUNDLE, "messages": found})
        for group, found in by_group.items()
    ]


async def _send_bundled(layer: Any, messages: list[Message]) -> None:
    gate = asyncio.Semaphore(SEND_CONCURRENCY)

    async def one(group: str, message: dict[str, Any]) -> None:
        async with gate:
            await _group_send(layer, group, message)

    await asyncio.gather(*(one(group, message) for group, message in bundled(messages)))


class _Outlet:
    """An event loop that sends queued messages to the layer. What was queued while the
    last send was going out is sent together: a bundle per group, which keeps the
    group's order, the groups sent at once. Sent one by one, a busy worker's broadcasts
    (a few Redis round trips each, each waiting for the interpreter lock among hundreds of
    run threads) fell seconds behind the runs they told of."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pid = os.getpid()
        self.queue: asyncio.Queue[Message] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start sending (on the outlet's loop)."""
        self.task = asyncio.ensure_future(self.drain())

    async def drain(self) -> None:
        while True:
            batch = [await self.queue.get()]
            while not self.queue.empty():
                batch.append(self.queue.get_nowait())
            try:
                layer = get_channel_layer()
                if layer is not None:
                    await _send_bundled(layer, batch)
            finally:
                for _ in batch:
                    self.queue.task_done()

    def put(self, messages: list[Message]) -> None:
        # RuntimeError: the loop closed, the server is stopping and nobody listens
        with contextlib.suppress(RuntimeError):
            for message in messages:
                self.loop.call_soon_threadsafe(self.queue.put_nowait, message)

    def stop(self) -> None:
        if self.task is not None and not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.task.cancel)

    def flush(self, timeout: float) -> None:
        """Wait until what was queued so far is sent (at most `timeout` seconds)."""
        if self.pid != os.getpid() or not self.loop.is_running():
            return
        done = asyncio.run_coroutine_threadsafe(self.queue.join(), self.loop)
        try:
            done.result(timeout)
        except Exception:  # not sent in time: the layer is a hint, the log the truth
            done.cancel()


class Broadcaster:
    """The one way out for this process's broadcasts (see the module docstring).

    With a serving loop it also remembers the events this process broadcast, so that the
    watcher, which broadcasts what other processes committed, can leave them out.
    """

    FLUSH_SECONDS = 2.0
    NOTED_LIMIT = 10_000  # events remembered at most; beyond, the oldest are forgotten

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._serving: _Outlet | None = None  # the loop serving this process's sockets
        self._own: _Outlet | None = None  # a loop of our own (layers other than in-memory)
        self._noted: dict[tuple[str, int], None] = {}  # insertion-ordered: oldest first
        self._tasks: set[asyncio.Task[None]] = set()  # sends started on a caller's loop

    # sending ------------------------------------------------------------------------------

    def send(self, messages: Iterable[Message]) -> None:
        """Send each (group, message), in order, from any thread or loop; never raises."""
        messages = list(messages)
        layer = get_channel_layer()
        if layer is None or not messages:
            return
        outlet = self._serving
        if outlet is None and not isinstance(layer, InMemoryChannelLayer):
            outlet = self._own_outlet()
        if outlet is not None:
            outlet.put(messages)
            return
        # the in-memory layer with no serving loop: the caller's loop is the layer's
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            try:
                async_to_sync(self._send_all)(layer, messages)
            except Exception:
                logger.warning("broadcast failed", exc_info=True)
            return
        for group, message in messages:  # in-memory group_send never waits: in order
            task = running.create_task(_group_send(layer, group, message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _send_all(layer: Any, messages: list[Message]) -> None:
        for group, message in messages:
            await _group_send(layer, group, message)

    def _own_outlet(self) -> _Outlet:
        with self._lock:
            own = self._own
            if own is None or own.pid != os.getpid():  # first use, or a forked worker
                ready = threading.Event()
                threading.Thread(
                    target=self._run_own, args=(ready,), daemon=True, name="broadcast"
                ).start()
                ready.wait(5)
                atexit.register(self.flush)
                own = self._own
            assert own is not None
            return own

    def _run_own(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._own = _Outlet(loop)
        self._own.start()
        ready.set()
        loop.run_forever()

    def flush(self, timeout: float | None = None) -> None:
        """Wait until what this process queued on its own loop is sent (at most
        `timeout` seconds, FLUSH_SECONDS by default)."""
        if self._own is not None:
            self._own.flush(self.FLUSH_SECONDS if timeout is None else timeout)

    # the serving loop ---------------------------------------------------------------------

    @property
    def serving_loop(self) -> asyncio.AbstractEventLoop | None:
        outlet = self._serving
        return None if outlet is None else outlet.loop

    def serve_from(self, loop: asyncio.AbstractEventLoop) -> None:
        """From now on every broadcast goes through `loop`, the one serving this
        process's sockets (callable from any thread, before the loop runs too)."""
        self.stop_serving()
        outlet = _Outlet(loop)
        loop.call_soon_threadsafe(outlet.start)
        self._serving = outlet

    def stop_serving(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Back to sending without a serving loop (only if it is still `loop`)."""
        outlet = self._serving
        if outlet is not None and (loop is None or outlet.loop is loop):
            self._serving = None
            outlet.stop()

    def note(self, run_id: Any, frames: list[dict[str, Any]]) -> None:
        if self._serving is None:
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


broadcaster = Broadcaster()


# what is broadcast -------------------------------------------------------------------------


def event_messages(
    run_id: Any, frames: list[dict[str, Any]], summary: dict[str, Any]
) -> list[Message]:
    """What a commit broadcasts: the persisted events of a run to its group, then a
    one-line summary (with the run's team) for lists."""
    messages: list[Message] = []
    if frames:
        messages.append((run_group(run_id), {"type": "run.events", "events": frames}))
    messages.append((DASHBOARD_GROUP, {"type": "run.changed", "run": summary}))
    return messages


def broadcast_events(run_id: Any, frames: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """Called on commit (see `event_messages`)."""
    broadcaster.note(run_id, frames)
    broadcaster.send(event_messages(run_id, frames, summary))


def broadcast_run_changed(run_id: Any, summary: dict[str, Any]) -> None:
    """Called on commit of a change that adds no event to the run's log (a ticket claimed,
    released or assigned): the run's summary to the lists and to the run's own page,
    which refetch what they show of it."""
    message = {"type": "run.changed", "run": summary}
    broadcaster.send([(DASHBOARD_GROUP, message), (run_group(run_id), message)])


def thread_changed_message(thread_id: Any, team_id: int | None) -> Message:
    """A change of a thread that is no run's event: its pending input (queued, edited,
    retracted or cancelled). Lists of runs ignore it; the thread's page refetches."""
    thread = {"id": str(thread_id), "team_id": team_id}
    return DASHBOARD_GROUP, {"type": "thread.changed", "thread": thread}


def broadcast_thread_changed(thread_id: Any, team_id: int | None) -> None:
    """Called on commit of a change of a thread's pending input."""
    broadcaster.send([thread_changed_message(thread_id, team_id)])


def broadcast_live(run_id: Any, event: dict[str, Any]) -> None:
    """A token delta before it is persisted; carries no seq."""
    broadcaster.send([(run_group(run_id), {"type": "run.live", "event": event})])


def render_event_row(frame: dict[str, Any]) -> str:
    """One timeline row, from the same partial the run page renders (escaped)."""
    return render_to_string("runs/partials/event_row.html", {"event": frame})
