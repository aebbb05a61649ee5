"""One channel-layer member per group and process, fanned out to the local followers.

Hundreds of sockets can follow one run in one daphne process. When each socket was a
group member of its own, every event cost one Redis message, one template render and
one JSON encoding per socket, and a burst of connects or closes was a burst of
group_add/group_discard calls that ran the Redis connection pool dry (failed discards
left dead members that were still sent every broadcast). Here a process joins each
group once: a `Topic` per group that has local followers owns ONE layer channel, the
group's member; it receives each broadcast once, renders each event row once and hands
the same frame text to every follower (websocket consumers, SSE streams).

Membership. The group is joined when its first local follower arrives, and `subscribe`
returns only once that is done, so a follower that reads the event log afterwards
cannot miss a commit in between. It is left when the last follower goes. Layer calls
are retried briefly, logged when they keep failing, never raised into a follower, and
at most MAX_LAYER_CALLS run at once per process. Every member is added again each
quarter of the layer's `group_expiry`, so live members never expire while those of a
process that died stop being sent to. When receiving fails (Redis restarted: groups
and queued messages are gone), the hub joins every group again and asks every follower
to read the log, which is the truth (runs/README.md).

Busy runs. Event frames that arrive within BATCH_SECONDS of the previous event frame
are held until BATCH_SECONDS after it and sent as one `{"type": "events"}` frame; an
event after a quieter spell goes out at once. Live deltas and list changes are sent as
they come, after any events held before them, so the order is kept.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from runs.realtime import BUNDLE, render_event_row

logger = logging.getLogger(__name__)

BATCH_SECONDS = 0.04  # at most this much added to an event's latency, only when busy
MAX_LAYER_CALLS = 8  # group_add/group_discard in flight per process
RETRY_DELAYS = (0.1, 0.3, 1.0)  # after the first attempt of a layer call
REJOIN_SECONDS = 5.0  # between attempts to join a group that could not be joined
YIELD_EVERY = 50  # followers handed a frame before the loop gets a turn
INBOX_LIMIT = 2000  # frames an SSE stream may leave unread before it reads the log instead

Frame = dict[str, Any]


def frame_text(frames: list[Frame], html: Callable[[Frame], str]) -> str:
    """The websocket frame for committed events: `{"type": "event", "event", "html"}` for
    one, `{"type": "events", "events": [{"event", "html"}, ...]}` for several."""
    if len(frames) == 1:
        return json.dumps({"type": "event", "event": frames[0], "html": html(frames[0])})
    items = [{"event": frame, "html": html(frame)} for frame in frames]
    return json.dumps({"type": "events", "events": items})


def following(frames: Iterable[Frame], after: int) -> tuple[list[Frame], bool]:
    """The frames (in seq order) that continue seq `after` without a hole, and whether a
    hole comes after them (the layer lost a broadcast: the log has it)."""
    out: list[Frame] = []
    expected = after + 1
    for frame in frames:
        seq = int(frame["seq"])
        if seq < expected:
            continue  # sent already
        if seq > expected:
            return out, True
        out.append(frame)
        expected += 1
    return out, False


def in_order(frames: Iterable[Frame]) -> list[Frame]:
    """Frames sorted by seq, each seq once (a message can be delivered twice)."""
    return sorted({int(frame["seq"]): frame for frame in frames}.values(), key=lambda f: f["seq"])


class EventBatch:
    """Committed event frames in seq order, as one topic sends them to all its followers:
    each row's HTML is rendered at most once and the whole batch's text encoded once."""

    def __init__(self, frames: list[Frame]) -> None:
        self.frames = frames
        self._rows: dict[int, str] = {}
        self._text: str | None = None

    @property
    def first_seq(self) -> int:
        return int(self.frames[0]["seq"])

    @property
    def last_seq(self) -> int:
        return int(self.frames[-1]["seq"])

    def continues(self, after: int) -> bool:
        """The whole batch is exactly what comes after seq `after`."""
        return self.first_seq == after + 1 and self.last_seq == after + len(self.frames)

    def html(self, frame: Frame) -> str:
        seq = int(frame["seq"])
        if seq not in self._rows:
            self._rows[seq] = render_event_row(frame)
        return self._rows[seq]

    def text(self, frames: list[Frame] | None = None) -> str:
        """The websocket frame of the whole batch (encoded once), or of some of its frames
        (for a follower that had some of them already)."""
        if frames is not None:
            return frame_text(frames, self.html)
        if self._text is None:
            self._text = frame_text(self.frames, self.html)
        return self._text


class Follower:
    """Something local that follows a group. The topic calls these one at a time from
    its delivery task; they must not wait on anything slow (start a task instead)."""

    async def on_events(self, batch: EventBatch) -> None:
        """Committed events of the run, in seq order."""

    async def on_text(self, text: str) -> None:
        """A ready websocket frame: a live token delta or a list-level change."""

    async def on_run_text(self, item: tuple[int | None, str]) -> None:
        """A run's change (its team id, the ready frame): followers that serve users of
        some teams only (the dashboard socket) filter on the team; by default, as text."""
        await self.on_text(item[1])

    async def on_thread_text(self, item: tuple[int | None, str]) -> None:
        """A thread's change that is no run's (its pending input): its team id and the
        ready frame. Only the pages of one thread want it; by default, nothing."""

    def on_resync(self) -> None:
        """Broadcasts may have been lost (the layer failed, or the group was joined only
        after some retries): read the log again."""


class Topic:
    """One group as this process follows it: one layer channel, its receive loop, and
    the delivery loop that batches event frames and hands everything to the followers."""

    def __init__(self, hub: Hub, group: str) -> None:
        self.hub = hub
        self.group = group
        self.channel = ""
        self.member = False  # the last group_add succeeded
        self.followers: dict[Follower, None] = {}  # an ordered set
        loop = asyncio.get_running_loop()
        self.joined: asyncio.Future[bool] = loop.create_future()  # the first join's outcome
        self._outbox: collections.deque[tuple[str, Any]] = collections.deque()
        self._wake = asyncio.Event()
        self._last_events = float("-inf")  # loop time of the last event frame sent
        self._tasks = [
            asyncio.create_task(self._receive(), name=f"fanout receive {group}"),
            asyncio.create_task(self._deliver(), name=f"fanout deliver {group}"),
        ]

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._joined(False)

    def _joined(self, outcome: bool) -> None:
        if not self.joined.done():
            self.joined.set_result(outcome)

    def resync(self) -> None:
        """Delivered in order, from the delivery task, like everything followers get."""
        self._post(("resync", None))

    async def _receive(self) -> None:
        layer = self.hub.layer
        try:
            self.channel = str(await layer.new_channel())
        except Exception:
            logger.warning("%s: no channel from the channel layer", self.group, exc_info=True)
            self._joined(False)
            return
        joined = await self.hub.add(self)
        self._joined(joined)
        while not joined:
            await asyncio.sleep(REJOIN_SECONDS)
            joined = await self.hub.add(self)
            if joined:
                self.resync()
        failures = 0
        while True:
            try:
                message = await layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                failures += 1
                if failures == 1:
                    logger.warning("%s: channel layer receive failed", self.group, exc_info=True)
                self.hub.layer_failed()
                await asyncio.sleep(min(5.0, 0.1 * 2**failures))
                continue
            if failures:
                logger.info("%s: channel layer receiving again", self.group)
                failures = 0
            self._accept(message)

    def _accept(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == BUNDLE:  # several messages to the group, in order (runs.realtime.bundled)
            for each in message.get("messages") or ():
                self._accept(each)
        elif kind == "run.events":
            if message.get("events"):
                self._post(("events", list(message["events"])))
        elif kind == "run.live":
            self._post(("text", json.dumps({"type": "live", "event": message["event"]})))
        elif kind == "run.changed":
            run = message["run"]
            self._post(("run", (run.get("team_id"), json.dumps({"type": "run", "run": run}))))
        elif kind == "thread.changed":
            thread = message["thread"]
            text = json.dumps({"type": "thread", "thread": thread})
            self._post(("thread", (thread.get("team_id"), text)))
        else:
            logger.debug("%s: ignored a %r message", self.group, kind)

    def _post(self, item: tuple[str, Any]) -> None:
        self._outbox.append(item)
        self._wake.set()

    async def _deliver(self) -> None:
        loop = asyncio.get_running_loop()
        outbox = self._outbox
        while True:
            await self._wake.wait()
            self._wake.clear()
            while outbox:
                kind, item = outbox[0]
                if kind == "events":
                    wait = self._last_events + BATCH_SECONDS - loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)  # what arrives meanwhile joins this frame
                    frames: list[Frame] = []
                    while outbox and outbox[0][0] == "events":
                        frames.extend(outbox.popleft()[1])
                    batch = EventBatch(in_order(frames))
                    self._last_events = loop.time()
                    await self._each("on_events", batch)
                elif kind == "text":
                    outbox.popleft()
                    await self._each("on_text", item)
                elif kind == "run":  # rendered once; each follower filters by team
                    outbox.popleft()
                    await self._each("on_run_text", item)
                elif kind == "thread":
                    outbox.popleft()
                    await self._each("on_thread_text", item)
                else:
                    outbox.popleft()
                    for follower in list(self.followers):
                        follower.on_resync()

    async def _each(self, method: str, argument: Any) -> None:
        for index, follower in enumerate(list(self.followers), 1):
            try:
                await getattr(follower, method)(argument)
            except Exception:  # one broken socket must not starve the others
                logger.exception("%s: a follower failed", self.group)
            if index % YIELD_EVERY == 0:
                # a send only queues the frame: let the loop write the queued ones out
                # (and serve others) instead of holding it for the whole crowd
                await asyncio.sleep(0)


class Hub:
    """This event loop's topics on one channel layer (see the module docstring)."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.topics: dict[str, Topic] = {}
        self.refresh_seconds = max(1.0, float(getattr(layer, "group_expiry", 86400)) / 4)
        self._calls = asyncio.Semaphore(MAX_LAYER_CALLS)
        self._background: set[asyncio.Task[None]] = set()
        self._recovering = False
        self._spawn(self._refresh_forever())

    async def subscribe(self, group: str, follower: Follower) -> bool:
        """Follow `group`. Returns once this process is the group's member (True), or
        once joining failed (False: logged; the hub keeps trying and then calls the
        followers' `on_resync`). Either way the follower stays subscribed until
        `unsubscribe`."""
        topic = self.topics.get(group)
        if topic is None:
            topic = self.topics[group] = Topic(self, group)
        topic.followers[follower] = None
        # shielded: a follower cancelled while waiting must not cancel the others' wait
        return await asyncio.shield(topic.joined)

    def unsubscribe(self, group: str, follower: Follower) -> None:
        topic = self.topics.get(group)
        if topic is None or follower not in topic.followers:
            return
        del topic.followers[follower]
        if not topic.followers:  # the last one: leave the group
            del self.topics[group]
            topic.close()
            if topic.channel:
                self._spawn(self._call("group_discard", topic.group, topic.channel))

    async def add(self, topic: Topic) -> bool:
        topic.member = await self._call("group_add", topic.group, topic.channel)
        return topic.member

    async def _call(self, method: str, group: str, channel: str) -> bool:
        """One group_add/group_discard, retried; False (and a warning) if all attempts
        failed. Never raises: the layer is a hint, the log is the truth."""
        error: BaseException | None = None
        for delay in (0.0, *RETRY_DELAYS):
            if delay:
                await asyncio.sleep(delay)
            try:
                async with self._calls:
                    await getattr(self.layer, method)(group, channel)
                return True
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = exc
        logger.warning(
            "%s %s failed after %d attempts: %r", method, group, len(RETRY_DELAYS) + 1, error
        )
        return False

    def layer_failed(self) -> None:
        """A topic could not receive: once the layer answers again, every group is
        joined again (a restarted Redis kept none) and every follower reads the log."""
        if not self._recovering:
            self._recovering = True
            self._spawn(self._recover())

    async def _recover(self) -> None:
        delay = 0.5
        try:
            while True:
                await asyncio.sleep(delay)
                topics = [topic for topic in self.topics.values() if topic.channel]
                if await self._add_all(topics):
                    for topic in topics:
                        topic.resync()
                    return
                delay = min(delay * 2, 10.0)
        finally:
            self._recovering = False

    async def _refresh_forever(self) -> None:
        """Keep live memberships from expiring (group_add again renews the member)."""
        while True:
            await asyncio.sleep(self.refresh_seconds)
            await self._add_all([topic for topic in self.topics.values() if topic.member])

    async def _add_all(self, topics: list[Topic]) -> bool:
        """Add the topics still followed, one after the other; stop at the first failure
        (the layer is away: trying the others now would only wait on each)."""
        for topic in topics:
            if self._live(topic) and not await self.add(topic):
                return False
        return True

    def _live(self, topic: Topic) -> bool:
        """Still followed: a topic closed meanwhile must not be joined again."""
        return self.topics.get(topic.group) is topic

    def _spawn(self, coroutine: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, Hub]] = (
    weakref.WeakKeyDictionary()
)


def hub_for(layer: Any) -> Hub:
    """The running event loop's hub on `layer` (one per loop: daphne has one; tests
    start a loop per test)."""
    hubs = _hubs.setdefault(asyncio.get_running_loop(), {})
    hub = hubs.get(id(layer))
    if hub is None or hub.layer is not layer:
        hub = hubs[id(layer)] = Hub(layer)
    return hub


class Inbox(Follower):
    """A follower for code that pulls (the SSE stream): broadcast frames wait here."""

    def __init__(self, hub: Hub, group: str) -> None:
        self.hub = hub
        self.group = group
        self._frames: list[Frame] = []
        self._resync = False
        self._ready = asyncio.Event()

    async def open(self) -> bool:
        joined = await self.hub.subscribe(self.group, self)
        if not joined:
            self.close()
        return joined

    def close(self) -> None:
        self.hub.unsubscribe(self.group, self)

    async def on_events(self, batch: EventBatch) -> None:
        if len(self._frames) < INBOX_LIMIT:
            self._frames.extend(batch.frames)
        else:  # the reader is far behind: it reads the log instead
            self._resync = True
        self._ready.set()

    def on_resync(self) -> None:
        self._resync = True
        self._ready.set()

    async def get(self) -> list[Frame] | None:
        """The frames broadcast since the last call (waits for some), or None: some may
        have been lost, read the log."""
        await self._ready.wait()
        self._ready.clear()
        frames, self._frames = self._frames, []
        if self._resync:
            self._resync = False
            return None
        return frames
