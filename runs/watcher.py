"""Commits of other processes, for the pages of this one (the embedded default).

The in-memory channel layer reaches the sockets of its own process only. A run started or
a ticket decided from a terminal (`manage.py run_agent`, `manage.py decide`) commits in
another process, so its broadcast reached no page: open pages kept showing the old state
while saying "live", and offered to approve a ticket that was already decided.
`manage.py serve` on that layer therefore runs a `CommitWatcher` on its event loop: every
POLL_SECONDS it reads the event rows committed since it last looked and broadcasts those
this process did not broadcast itself, with their runs' list summaries, as the process
that committed them would have (runs/realtime.py). Followers drop the seqs they already
have, so an event sent twice (read here just before its own broadcast was noted) costs
one more list-row refresh at most.

Rows are read by id. On SQLite the rows that become visible always come after those read
already: one writer at a time, and ids never go back. Elsewhere (PostgreSQL without Redis)
a transaction can commit an id below one already read, so the ids skipped over are asked
for again during GAP_SECONDS.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from channels.layers import get_channel_layer
from django.db import connection
from django.db.models import Q

from runs.models import Run, RunEvent
from runs.realtime import event_messages, in_memory_home
from runs.services.events import run_summary

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.3  # how late a page may see another process's commit, at most
BATCH = 500  # event rows read at most per query; more are read at once after
GAP_SECONDS = 30.0  # how long an id skipped over is asked for again
MAX_GAP_IDS = 1000  # ids skipped over asked for at most (a larger jump: ids were deleted)
# what `run_summary` reads of a run
SUMMARY_FIELDS = ("thread", "status", "status_reason", "steps", "last_event_seq", "updated_at")

Change = tuple[Any, list[dict[str, Any]], dict[str, Any]]  # run id, its new frames, summary


def _last_id() -> int:
    return RunEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


class CommitWatcher:
    """Reads the event log from where it ends when created; `start` makes it broadcast."""

    def __init__(self) -> None:
        # one thread of its own: a slow request never holds up the pages' updates
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="commit-watcher")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self.gaps: dict[int, float] = {}  # id skipped over -> until when to ask for it
        # read now, before any page connects: a page reads the log after it subscribes,
        # so whatever commits from here on reaches it one way or the other
        self.after: int | None = self._executor.submit(self._end_of_log).result()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Broadcast from `loop`, the loop serving this process's sockets (callable from
        any thread, before the loop runs too). Every broadcast of this process goes
        through that loop from now on (see `in_memory_home`)."""
        self._loop = loop
        in_memory_home.loop = loop
        loop.call_soon_threadsafe(self._begin)

    def _begin(self) -> None:
        self._task = asyncio.ensure_future(self._watch())

    def stop(self) -> None:
        """Stop watching (callable from any thread)."""
        loop, self._loop = self._loop, None
        if loop is not None and in_memory_home.loop is loop:
            in_memory_home.loop = None
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._cancel)
        self._executor.shutdown(wait=False)

    def _cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        layer = get_channel_layer()
        while True:
            try:
                changes, more = await loop.run_in_executor(self._executor, self.read)
            except Exception:
                if not self._failing:
                    logger.warning(
                        "reading the event log for other processes' commits failed", exc_info=True
                    )
                self._failing = True
                changes, more = [], False
            else:
                if self._failing:
                    logger.info("reading the event log for other processes' commits again")
                self._failing = False
            for run_id, frames, summary in changes:
                for group, message in event_messages(run_id, frames, summary):
                    try:
                        await layer.group_send(group, message)
                    except Exception:
                        logger.warning("broadcast to %s failed", group, exc_info=True)
            if not more:
                await asyncio.sleep(POLL_SECONDS)

    # in the watcher's thread -------------------------------------------------------------

    def _end_of_log(self) -> int | None:
        """The last event's id; None when the database cannot be read yet (the first
        read that succeeds starts from there)."""
        try:
            return _last_id()
        except Exception:
            logger.warning("cannot read the event log yet", exc_info=True)
            return None
        finally:
            self._release()

    def read(self) -> tuple[list[Change], bool]:
        """The runs with events committed by other processes since the last call, oldest
        first, and whether more rows are waiting to be read."""
        try:
            return self._read()
        finally:
            self._release()

    def _read(self) -> tuple[list[Change], bool]:
        if self.after is None:
            self.after = _last_id()
            return [], False
        now = time.monotonic()
        self.gaps = {pk: until for pk, until in self.gaps.items() if until > now}
        where = Q(pk__gt=self.after)
        if self.gaps:
            where |= Q(pk__in=list(self.gaps))
        rows = list(
            RunEvent.objects.filter(where).order_by("pk").values_list("pk", "run_id", "seq")[:BATCH]
        )
        wanted: list[int] = []
        for pk, run_id, seq in rows:
            if pk > self.after:
                if pk - self.after <= MAX_GAP_IDS and len(self.gaps) < MAX_GAP_IDS:
                    for skipped in range(self.after + 1, pk):
                        self.gaps[skipped] = now + GAP_SECONDS
                self.after = pk
            else:
                self.gaps.pop(pk, None)
            if not in_memory_home.sent_here(run_id, seq):
                wanted.append(pk)
        return self._changes(wanted), len(rows) == BATCH

    def _changes(self, pks: list[int]) -> list[Change]:
        if not pks:
            return []
        frames: dict[Any, list[dict[str, Any]]] = {}
        first: dict[Any, int] = {}
        events = RunEvent.objects.filter(pk__in=pks).only("run_id", "seq", "payload", "created_at")
        for event in events.order_by("run_id", "seq"):
            frames.setdefault(event.run_id, []).append(event.as_frame())
            first[event.run_id] = min(first.get(event.run_id, event.pk), event.pk)
        runs = (
            Run.objects.filter(pk__in=list(frames))
            .select_related("agent")
            .only(*SUMMARY_FIELDS, "agent__team")
        )
        changes = [(run.pk, frames[run.pk], run_summary(run)) for run in runs]
        changes.sort(key=lambda change: first[change[0]])  # in the order they committed
        return changes

    @staticmethod
    def _release() -> None:
        # SQLite keeps its connection open between reads; a PostgreSQL connection goes
        # back to the pool, which requests need more
        if connection.vendor != "sqlite":
            connection.close()
