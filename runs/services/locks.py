"""Row locks on runs and threads, the one order every transaction takes them in, and
running a transaction again when PostgreSQL still reports a lock conflict.

Lock order (docs/run-model.md, "Lock order"):

1. the run the transaction acts on;
2. then its thread;
3. then the rows that belong to them: tickets, tool calls, pending input, background work
   (their writers hold the run or the thread first, so these never decide a wait);
4. the dashboard counters (runs.services.stats) are written in key order, one statement
   at a time, after the run and the thread.

A transaction that reaches further (a cancel cascades to the child runs of a delegate)
takes each further run, then its thread, after the run and thread it started with; a
parent's locks always come before its children's. Rows a transaction inserts are not
locks anyone waits on and may come anywhere.

The worker's claims and checkpoints, cancels and failures all start at the run row (their
first statement updates it). A sender knows the thread, not its open run: it reads the
thread's `open_run_id`, locks that run, then locks the thread only while it still points
at it (`lock_thread_with_open_run`); a thread that moved on is let go (its savepoint
rolled back) and read again, never held while the next run is locked. Every lock is `FOR NO KEY UPDATE`, what an UPDATE takes: it
excludes other writers but not the foreign key checks (`FOR KEY SHARE`, at commit) of
rows inserted elsewhere that point at the locked row, such as a message of the thread.

With one order no deadlock is expected. Should PostgreSQL still report one (or a
serialization failure), the service entries (submissions, decisions, interrupts,
cancels, retries) and the worker's claims, checkpoints and failures run their whole
transaction again (`retry_lock_conflicts`): the rolled-back attempt wrote nothing, so a
retry is safe. What the database does not roll back (the Prometheus series of
runs.metrics, broadcasts, task sends, remote aborts) is done by `transaction.on_commit`
callbacks, which a rolled-back attempt drops: it happens once, for the attempt that
committed.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from django.db import OperationalError, connection, transaction

from common.errors import IllegalTransition
from runs.models import Run, Thread

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

# SQLSTATEs worth running a whole transaction again for
LOCK_CONFLICTS = {"40P01": "deadlock", "40001": "serialization failure"}
ATTEMPTS = 4
PASSES = 5  # a sender's reads of a thread whose open run keeps changing


def lock_conflict(exc: BaseException) -> str | None:
    """The kind of lock conflict `exc` (a database error) reports, or None."""
    cause = exc.__cause__ if isinstance(exc, OperationalError) else None
    state = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    return LOCK_CONFLICTS.get(str(state)) if state else None


def retry_lock_conflicts(func: Callable[P, T]) -> Callable[P, T]:
    """Run `func`, one whole transaction, again when the database ends it for a deadlock
    or a serialization failure, up to ATTEMPTS times, after a short random pause.
    Inside a caller's transaction it runs once: only the outermost one can be retried."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        if connection.in_atomic_block:
            return func(*args, **kwargs)
        for attempt in range(1, ATTEMPTS):
            try:
                return func(*args, **kwargs)
            except OperationalError as exc:
                kind = lock_conflict(exc)
                if kind is None:
                    raise
                logger.warning(
                    "%s ended by a %s (%s); running it again (attempt %d of %d)",
                    func.__qualname__,
                    kind,
                    str(exc).splitlines()[0],
                    attempt + 1,
                    ATTEMPTS,
                )
                time.sleep(random.uniform(0.005, 0.05) * attempt)
        return func(*args, **kwargs)  # the last attempt: its error is the caller's

    return wrapper


def lock_run(run_id: Any, *, open_only: bool = False) -> Run | None:
    """Lock the run row (step 1 of the order); None when it is gone, or done when
    `open_only` (a run that ended while we waited for it is not locked)."""
    runs = Run.objects.select_for_update(no_key=True).filter(pk=run_id)
    if open_only:
        runs = runs.exclude(status=Run.Status.DONE)
    return runs.first()


def lock_thread_of(run: Run) -> None:
    """Lock the run's thread (step 2), the run being locked already."""
    list(
        Thread.objects.select_for_update(no_key=True)
        .filter(pk=run.thread_id)
        .values_list("pk", flat=True)
    )


class _Moved(Exception):
    """The thread's open run changed while a pass of `lock_thread_with_open_run` waited."""


def lock_thread_with_open_run(thread_id: Any) -> tuple[Thread, Run | None]:
    """Lock the thread's open run, then the thread, and return both (None: no open run).

    The thread is locked only while it still points at the run read before, a condition
    PostgreSQL checks again on the row version it waited for. A pass that finds the
    thread moved on (or its run ended) lets go of what it locked, rolling back to its
    savepoint (a row locked while waiting stays locked even when the condition then
    fails), and reads the thread again: no sender holds a thread while it waits for a
    run, whose claim or checkpoint holds the run and then wants the thread. Raises
    Thread.DoesNotExist for an unknown thread."""
    for _ in range(PASSES):
        try:
            with transaction.atomic():  # a savepoint, in the caller's transaction
                open_id = Thread.objects.values_list("open_run_id", flat=True).get(pk=thread_id)
                open_run = lock_run(open_id, open_only=True) if open_id is not None else None
                if open_id is not None and open_run is None:
                    raise _Moved  # it ended while we waited: the thread may have a new one
                thread = (
                    Thread.objects.select_for_update(no_key=True)
                    .filter(pk=thread_id, open_run_id=open_id)
                    .first()
                )
                if thread is None:
                    raise _Moved
                return thread, open_run
        except _Moved:
            continue
    raise IllegalTransition(f"thread {thread_id} is changing runs; send the message again")
