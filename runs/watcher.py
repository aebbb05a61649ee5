"""Commits of other processes, for the pages of this one (the embedded default).

The in-memory channel layer reaches the sockets of its own process only. A run started or
a ticket decided from a terminal (`manage.py run_agent`, `manage.py decide`) commits in
another process, so its broadcast reached no page: open pages kept showing the old state
while saying "live", and offered to approve a ticket that was already decided.
`manage.py serve` on that layer therefore runs a `CommitWatcher` on its event loop: every
POLL_SECONDS it reads the event rows committed since it last looked and broadcasts those
this process did not broadcast itself, with their runs' list summaries, as the process
that committed them would have, through the one send path (runs/realtime.py). Followers
drop the seqs they already have, so an event sent twice (read here just before its own
broadcast was noted) costs one more list-row refresh at most.

A change of a thread's pending input (queued, edited, retracted, cancelled by an
interrupt) appends no run event; its audit entry, written in the same transaction, is
what the watcher reads for it (`INPUT_ACTIONS`), broadcasting that the thread changed.

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

from django.db import connection
from django.db.models import Q

from common.models import AuditEntry
from runs.models import PendingInput, Run, RunEvent, Thread
from runs.realtime import broadcaster, event_messages, thread_changed_message
from runs.services.events import run_summary

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.3  # how late a page may see another process's commit, at most
BATCH = 500  # event rows read at most per query; more are read at once after
GAP_SECONDS = 30.0  # how long an id skipped over is asked for again
MAX_GAP_IDS = 1000  # ids skipped over asked for at most (a larger jump: ids were deleted)
# what `run_summary` reads of a run
SUMMARY_FIELDS = ("thread", "status", "status_reason", "steps", "last_event_seq", "updated_at")

# the audit entries of pending-input changes, and what their target is
INPUT_ACTIONS = {
    "input.queue": "thread",
    "input.edit": "input",
    "input.retract": "input",
    "thread.interrupt": "thread",
}

Change = tuple[Any, list[dict[str, Any]], dict[str, Any]]  # run id, its new frames, summary


def _last_id() -> int:
    return RunEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def _last_audit_id() -> int:
    return AuditEntry.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


class IdCursor:
    """Where a read by id got to: the last id read, and the ids skipped over, asked for
    again during GAP_SECONDS (they may commit after a higher id did)."""

    def __init__(self) -> None:
        self.after = 0
        self.gaps: dict[int, float] = {}  # id skipped over -> until when to ask for it

    def where(self) -> Q:
        """The ids to read: those after the last one, and the gaps still open."""
        now = time.monotonic()
        self.gaps = {pk: until for pk, until in self.gaps.items() if until > now}
        where = Q(pk__gt=self.after)
        if self.gaps:
            where |= Q(pk__in=list(self.gaps))
        return where

    def read(self, pk: int) -> None:
        """Row `pk` was read (in id order)."""
        if pk > self.after:
            if pk - self.after <= MAX_GAP_IDS and len(self.gaps) < MAX_GAP_IDS:
                until = time.monotonic() + GAP_SECONDS
                for skipped in range(self.after + 1, pk):
                    self.gaps[skipped] = until
            self.after = pk
        else:
            self.gaps.pop(pk, None)


class CommitWatcher:
    """Reads the event log from where it ends when created; `start` makes it broadcast."""

    def __init__(self) -> None:
        # one thread of its own: a slow request never holds up the pages' updates
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="commit-watcher")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        self.events = IdCursor()
        self.audit = IdCursor()
        # read now, before any page connects: a page reads the log after it subscribes,
        # so whatever commits from here on reaches it one way or the other
        self.started = self._executor.submit(self._end_of_log).result()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Broadcast from `loop`, the loop serving this process's sockets (callable from
        any thread, before the loop runs too). Every broadcast of this process goes
        through that loop from now on (`broadcaster.serve_from`)."""
        self._loop = loop
        broadcaster.serve_from(loop)
        loop.call_soon_threadsafe(self._begin)

    def _begin(self) -> None:
        self._task = asyncio.ensure_future(self._watch())

    def stop(self) -> None:
        """Stop watching (callable from any thread)."""
        loop, self._loop = self._loop, None
        if loop is not None:
            broadcaster.stop_serving(loop)
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._cancel)
        self._executor.shutdown(wait=False)

    def _cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                changes, more, threads = await loop.run_in_executor(self._executor, self._poll)
            except Exception:
                if not self._failing:
                    logger.warning(
                        "reading the event log for other processes' commits failed", exc_info=True
                    )
                self._failing = True
                changes, more, threads = [], False, []
            else:
                if self._failing:
                    logger.info("reading the event log for other processes' commits again")
                self._failing = False
            messages = [m for change in changes for m in event_messages(*change)]
            broadcaster.send(messages + [thread_changed_message(*t) for t in threads])
            if not more:
                await asyncio.sleep(POLL_SECONDS)

    # in the watcher's thread -------------------------------------------------------------

    def _end_of_log(self) -> bool:
        """Start from the last event and audit entry; False when the database cannot be
        read yet (the first read that succeeds starts from there)."""
        try:
            self._start_at_the_end()
            return True
        except Exception:
            logger.warning("cannot read the event log yet", exc_info=True)
            return False
        finally:
            self._release()

    def _start_at_the_end(self) -> None:
        self.events.after = _last_id()
        self.audit.after = _last_audit_id()

    def _poll(self) -> tuple[list[Change], bool, list[tuple[str, int | None]]]:
        try:
            changes, more = self._read()
            return changes, more, self._read_threads()
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
        if not self.started:
            self._start_at_the_end()
            self.started = True
            return [], False
        rows = list(
            RunEvent.objects.filter(self.events.where())
            .order_by("pk")
            .values_list("pk", "run_id", "seq")[:BATCH]
        )
        wanted: list[int] = []
        for pk, run_id, seq in rows:
            self.events.read(pk)
            if not broadcaster.sent_here(run_id, seq):
                wanted.append(pk)
        return self._changes(wanted), len(rows) == BATCH

    def read_threads(self) -> list[tuple[str, int | None]]:
        """The threads whose pending input changed since the last call (id, team id), as
        their audit entries say; this process's own changes too (one more refresh of a
        panel at most)."""
        try:
            return self._read_threads()
        finally:
            self._release()

    def _read_threads(self) -> list[tuple[str, int | None]]:
        if not self.started:
            return []
        # every entry, not only INPUT_ACTIONS: an id left out would look like a gap
        rows = list(
            AuditEntry.objects.filter(self.audit.where())
            .order_by("pk")
            .values_list("pk", "action", "target_id")[:BATCH]
        )
        threads: dict[str, None] = {}
        inputs: list[str] = []
        for pk, action, target in rows:
            self.audit.read(pk)
            kind = INPUT_ACTIONS.get(action)
            if kind == "thread":
                threads[target] = None
            elif kind == "input":
                inputs.append(target)
        if inputs:
            found = PendingInput.objects.filter(pk__in=inputs).values_list("thread_id", flat=True)
            threads.update((str(thread_id), None) for thread_id in found)
        if not threads:
            return []
        teams = dict(Thread.objects.filter(pk__in=list(threads)).values_list("pk", "team_id"))
        return [(str(pk), team) for pk, team in teams.items()]

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
