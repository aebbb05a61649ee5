"""Retention: remove (and optionally archive) runs that finished long ago, in small
batches, so the run tables do not grow without bound.

What goes, and what stays:

- Only a whole run tree goes: a root run (no parent) together with its child runs, and
  only when every run of that tree, and every retry of any of them (and their trees), is
  `done` and finished before the cutoff. A root with one run still created, running or
  waiting, or finished recently, is skipped with its whole tree.
- A run's events, tool calls, tickets and decisions go with it.
- Messages belong to the thread: a thread (and its messages) goes only once none of its
  runs remain; otherwise it stays whole.
- Audit entries stay (they are the record); their link to the run is cleared, as are the
  other nullable links to removed runs and threads (notes, thread pointers, retries).

Each batch is one short transaction: take up to `batch_size` candidate roots after the
previous batch's last one (keyset on `(created_at, id)`, which the runs-by-status index
serves; `created_at` is before `finished_at`, so the cutoff bounds both), lock the rows it
will delete, then delete child-to-parent with one `DELETE … WHERE … IN (…)` per table.
Django's collector (`QuerySet.delete()`) would load every dependent row into memory, send
signals for each and clear links by long lists of primary keys; these statements are
compiled by the ORM (so they work on SQLite and PostgreSQL alike) and touch only the rows
of the batch. On PostgreSQL `lock_timeout` bounds every wait: a batch that meets a busy row gives
up, is tried again after a pause and, if it keeps meeting one, is left for the next
invocation, rather than queueing behind (and in front of) the workers.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from django.db import DatabaseError, OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from common.audit import SYSTEM, Actor, audit_record
from runs.models import (
    BackgroundTask,
    Decision,
    Message,
    PendingInput,
    Run,
    RunEvent,
    Thread,
    Ticket,
    ToolCall,
)
from runs.operations.models.failures import FailureGroupRun
from runs.operations.services.retention_archive import Archive, archive_lines, check_archive_dir
from runs.operations.services.retention_links import check_relations, clear_links, raw_delete
from runs.operations.services.retention_results import (
    BatchResult,
    PruneResult,
    RetentionError,
)
from runs.services import stats

logger = logging.getLogger(__name__)

# A batch's commit writes its whole deletion to the write-ahead log, and every other
# commit waits behind that flush: 500 runs (about 0.2 s of work) keep the others'
# waits well under 200 ms on a small machine, and the pause lets them through.
DEFAULT_BATCH_SIZE = 500
MAX_BATCH_SIZE = 10_000
DEFAULT_PAUSE = 0.1
# Longest any statement of a batch waits for a row lock (PostgreSQL only).
DEFAULT_LOCK_TIMEOUT_MS = 200
# Tries of one batch that keeps meeting busy rows before it is left for the next run.
LOCK_RETRIES = 3


class _Node(NamedTuple):
    id: uuid.UUID
    thread_id: uuid.UUID
    parent_run_id: uuid.UUID | None
    retry_of_id: uuid.UUID | None
    status: str
    finished_at: dt.datetime | None
    created_at: dt.datetime


_NODE_FIELDS = (
    "id",
    "thread_id",
    "parent_run_id",
    "retry_of_id",
    "status",
    "finished_at",
    "created_at",
)


class _Busy(Exception):
    """The batch met rows that changed under it (a new child or retry, a run another
    prune removed): roll back and try again."""


def prune_runs(
    *,
    older_than: dt.timedelta,
    batch_size: int = DEFAULT_BATCH_SIZE,
    archive_dir: Path | None = None,
    dry_run: bool = False,
    actor: Actor = SYSTEM,
    pause: float = DEFAULT_PAUSE,
    max_batches: int | None = None,
    max_seconds: float | None = None,
    lock_timeout_ms: int = DEFAULT_LOCK_TIMEOUT_MS,
    progress: Callable[[BatchResult], None] | None = None,
) -> PruneResult:
    """Delete the run trees that finished more than `older_than` ago, oldest first, in
    batches of up to `batch_size` root runs (with their child runs); with `archive_dir`,
    write each batch as JSON lines to one gzip file first. `dry_run` counts what would go
    and changes nothing (no archive, no audit entry). Stops starting batches after
    `max_batches` batches or `max_seconds`; the next invocation continues. Every other
    invocation writes one `runs.prune` audit entry, also when nothing was old enough and
    when it fails half way (the batches committed before the failure are gone).

    Call it outside any transaction: each batch must commit on its own (inside an outer
    one the batches' locks, and `lock_timeout`, would last until the outer commit)."""
    _check_arguments(older_than, batch_size, pause)
    check_relations()
    started = time.monotonic()
    result = PruneResult(cutoff=timezone.now() - older_than, dry_run=dry_run)
    archive = None
    if archive_dir is not None:
        check_archive_dir(Path(archive_dir))
        if not dry_run:
            archive = Archive.open(Path(archive_dir))
            result.archive_path = archive.path
    error: BaseException | None = None
    try:
        _run_batches(
            result,
            batch_size=batch_size,
            archive=archive,
            pause=pause,
            max_batches=max_batches,
            max_seconds=max_seconds,
            lock_timeout_ms=lock_timeout_ms,
            progress=progress,
            started=started,
        )
    except BaseException as exc:
        error = exc
        raise
    finally:
        if archive is not None:
            archive.close(keep=result.runs > 0)
            if result.runs == 0:
                result.archive_path = None
        result.seconds = time.monotonic() - started
        if not dry_run:
            _audit(result, actor, error)
    return result


def _check_arguments(older_than: dt.timedelta, batch_size: int, pause: float) -> None:
    if older_than <= dt.timedelta(0):
        raise RetentionError("the age must be positive")
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise RetentionError(f"the batch size must be between 1 and {MAX_BATCH_SIZE}")
    if pause < 0:
        raise RetentionError("the pause must not be negative")


def _run_batches(
    result: PruneResult,
    *,
    batch_size: int,
    archive: Archive | None,
    pause: float,
    max_batches: int | None,
    max_seconds: float | None,
    lock_timeout_ms: int,
    progress: Callable[[BatchResult], None] | None,
    started: float,
) -> None:
    after: tuple[dt.datetime, uuid.UUID] | None = None
    gone: set[uuid.UUID] = set()  # dry run: the runs earlier batches would have removed
    while True:
        if max_batches is not None and result.batches + result.contended >= max_batches:
            return
        if max_seconds is not None and time.monotonic() - started >= max_seconds:
            return
        roots = _page(result.cutoff, after, batch_size)
        if not roots:
            result.complete = True
            return
        number = result.batches + result.contended + 1
        batch = None
        for attempt in range(LOCK_RETRIES):
            if attempt:
                time.sleep(max(pause, 0.05) * 4**attempt)
            try:
                if result.dry_run:
                    batch = _count_batch(number, roots, result.cutoff, gone)
                else:
                    batch = _delete_batch(number, roots, result.cutoff, archive, lock_timeout_ms)
                break
            except (_Busy, OperationalError) as exc:
                if not _is_contention(exc):
                    raise
                logger.info("retention batch %s met busy rows (%s); trying again", number, exc)
        after = (roots[-1].created_at, roots[-1].id)
        if batch is None:
            # Left for the next invocation; later roots are independent of these.
            result.contended += 1
            logger.warning("retention batch %s left for later: its rows stayed busy", number)
        else:
            result.add(batch)
            if progress is not None:
                progress(batch)
        if len(roots) < batch_size:
            result.complete = result.contended == 0
            return
        if pause:
            time.sleep(pause)


def _page(
    cutoff: dt.datetime, after: tuple[dt.datetime, uuid.UUID] | None, size: int
) -> list[_Node]:
    """The next candidate roots, oldest first."""
    query = Run.objects.filter(
        status=Run.Status.DONE,
        parent_run__isnull=True,
        created_at__lt=cutoff,
        finished_at__lt=cutoff,
    )
    if after is not None:
        created, pk = after
        query = query.filter(created_at__gte=created).filter(
            Q(created_at__gt=created) | Q(created_at=created, pk__gt=pk)
        )
    rows = query.order_by("created_at", "pk").values_list(*_NODE_FIELDS)[:size]
    return [_Node(*row) for row in rows]


def _eligible(node: _Node, cutoff: dt.datetime) -> bool:
    return (
        node.status == Run.Status.DONE
        and node.finished_at is not None
        and node.finished_at < cutoff
    )


def _plan(roots: list[_Node], cutoff: dt.datetime) -> tuple[dict[uuid.UUID, _Node], int]:
    """The runs to delete for these candidate roots (roots whose trees, retries included,
    are all old and done, with their child runs) and how many roots were skipped."""
    nodes = {root.id: root for root in roots}
    frontier = set(nodes)
    while frontier:
        rows = (
            Run.objects.filter(Q(parent_run_id__in=frontier) | Q(retry_of_id__in=frontier))
            .order_by()
            .values_list(*_NODE_FIELDS)
        )
        frontier = set()
        for row in rows:
            node = _Node(*row)
            if node.id not in nodes:
                nodes[node.id] = node
                frontier.add(node.id)
    # A run that may not go yet keeps everything it descends from (parent or retried run).
    kept: set[uuid.UUID] = set()
    stack = [node.id for node in nodes.values() if not _eligible(node, cutoff)]
    while stack:
        run_id = stack.pop()
        if run_id in kept:
            continue
        kept.add(run_id)
        node = nodes[run_id]
        stack.extend(p for p in (node.parent_run_id, node.retry_of_id) if p in nodes)
    children: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
    for node in nodes.values():
        if node.parent_run_id in nodes:
            children[node.parent_run_id].append(node.id)
    doomed: dict[uuid.UUID, _Node] = {}
    stack = [root.id for root in roots if root.id not in kept]
    while stack:
        run_id = stack.pop()
        if run_id not in doomed:
            doomed[run_id] = nodes[run_id]
            stack.extend(children[run_id])
    skipped = sum(1 for root in roots if root.id in kept)
    return doomed, skipped


def _delete_batch(
    number: int,
    roots: list[_Node],
    cutoff: dt.datetime,
    archive: Archive | None,
    lock_timeout_ms: int,
) -> BatchResult:
    started = time.monotonic()
    batch = BatchResult(number=number)
    mark = archive.mark() if archive is not None else None
    try:
        with transaction.atomic():
            _set_lock_timeout(lock_timeout_ms)
            doomed, batch.skipped = _plan(roots, cutoff)
            if not doomed:
                batch.seconds = time.monotonic() - started
                return batch
            ids = list(doomed)
            locked = set(
                Run.objects.select_for_update().filter(pk__in=ids).values_list("pk", flat=True)
            )
            if len(locked) != len(ids):
                raise _Busy("runs of the batch were removed meanwhile")
            _recheck(ids, cutoff)
            orphans = _orphan_threads({node.thread_id for node in doomed.values()}, ids)
            if archive is not None:
                archive.write(archive_lines(ids, orphans))
            batch.decisions = raw_delete(Decision.objects.filter(ticket__run_id__in=ids))
            batch.tickets = raw_delete(Ticket.objects.filter(run_id__in=ids))
            batch.events = raw_delete(RunEvent.objects.filter(run_id__in=ids))
            batch.tool_calls = raw_delete(ToolCall.objects.filter(run_id__in=ids))
            batch.messages = raw_delete(Message.objects.filter(thread_id__in=orphans))
            raw_delete(BackgroundTask.objects.filter(run_id__in=ids))
            raw_delete(PendingInput.objects.filter(thread_id__in=orphans))
            raw_delete(FailureGroupRun.objects.filter(run_id__in=ids))  # groups keep counts
            clear_links(Run, ids, deleting={Run: ids, Thread: orphans})
            counted = stats.removal(ids)  # while the runs can still be read
            batch.runs = raw_delete(Run.objects.filter(pk__in=ids))
            if orphans:
                clear_links(Thread, orphans, deleting={Thread: orphans})
                batch.threads = raw_delete(Thread.objects.filter(pk__in=orphans))
            stats.apply(counted)  # last: it locks counter rows workers update too
    except BaseException:
        if archive is not None and mark is not None:
            archive.rewind(mark)
        raise
    batch.seconds = time.monotonic() - started
    logger.info(
        "retention batch %s: %s runs, %s events, %s threads, %s messages in %.3f s",
        number,
        batch.runs,
        batch.events,
        batch.threads,
        batch.messages,
        batch.seconds,
    )
    return batch


def _count_batch(
    number: int, roots: list[_Node], cutoff: dt.datetime, gone: set[uuid.UUID]
) -> BatchResult:
    """The dry run of `_delete_batch`: the same plan, counted instead of deleted. Runs
    earlier batches would have removed count as gone when deciding whether a thread has
    runs left (so the dry run keeps their ids in memory)."""
    started = time.monotonic()
    batch = BatchResult(number=number)
    doomed, batch.skipped = _plan(roots, cutoff)
    ids = list(doomed)
    if ids:
        threads = {node.thread_id for node in doomed.values()}
        left = (
            Run.objects.filter(thread_id__in=threads)
            .exclude(pk__in=ids)
            .order_by()
            .values_list("thread_id", "pk")
        )
        kept = {thread_id for thread_id, run_id in left if run_id not in gone}
        orphans = list(threads - kept)
        gone.update(ids)
        batch.runs = len(ids)
        batch.threads = len(orphans)
        batch.messages = Message.objects.filter(thread_id__in=orphans).count()
        batch.events = RunEvent.objects.filter(run_id__in=ids).count()
        batch.tool_calls = ToolCall.objects.filter(run_id__in=ids).count()
        batch.tickets = Ticket.objects.filter(run_id__in=ids).count()
        batch.decisions = Decision.objects.filter(ticket__run_id__in=ids).count()
    batch.seconds = time.monotonic() - started
    return batch


def _set_lock_timeout(milliseconds: int) -> None:
    """For this transaction only (`SET LOCAL`): a lock wait longer than this fails the
    statement, so the batch rolls back instead of holding its own locks while it waits."""
    if connection.vendor != "postgresql":
        return  # SQLite has one writer at a time and no row locks
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{int(milliseconds)}ms"])


def _is_contention(exc: BaseException) -> bool:
    if isinstance(exc, _Busy):
        return True
    # lock_not_available (lock_timeout), deadlock_detected, serialization_failure
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    if sqlstate in {"55P03", "40P01", "40001"}:
        return True
    return "database is locked" in str(exc)  # SQLite's busy timeout


def _recheck(ids: list[uuid.UUID], cutoff: dt.datetime) -> None:
    """With the batch's runs locked: nothing new may hang off them. A child or retry
    created since the plan was read (it cannot be old and done) sends the batch back."""
    doomed = set(ids)
    newer = (
        Run.objects.filter(Q(parent_run_id__in=ids) | Q(retry_of_id__in=ids))
        .exclude(pk__in=ids)
        .order_by()
        .values_list(*_NODE_FIELDS)
    )
    for row in newer:
        node = _Node(*row)
        if node.parent_run_id in doomed or not _eligible(node, cutoff):
            raise _Busy(f"run {node.id} now depends on a run of the batch")


def _orphan_threads(threads: set[uuid.UUID], ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """The threads of the batch that will have no run left. They are locked first (only
    they: a thread with a live run is busy with its worker), then checked again, so a run
    started on one meanwhile keeps it."""

    def with_other_runs(candidates: Iterable[uuid.UUID]) -> set[uuid.UUID]:
        return set(
            Run.objects.filter(thread_id__in=candidates)
            .exclude(pk__in=ids)
            .order_by()
            .values_list("thread_id", flat=True)
            .distinct()
        )

    candidates = threads - with_other_runs(threads)
    if not candidates:
        return []
    locked = set(
        Thread.objects.select_for_update()
        .filter(pk__in=candidates)
        .order_by()
        .values_list("pk", flat=True)
    )
    return sorted(locked - with_other_runs(locked))


def _audit(result: PruneResult, actor: Actor, error: BaseException | None) -> None:
    after = result.counts()
    after.pop("dry_run")
    if error is not None:
        after["error"] = f"{type(error).__name__}: {error}"[:500]
    try:
        with transaction.atomic():
            audit_record(
                actor=actor,
                action="runs.prune",
                target_type="retention",
                target_id=result.cutoff.isoformat(timespec="seconds"),
                after=after,
            )
    except DatabaseError:
        if error is None:
            raise
        logger.exception("could not record the failed prune in the audit trail")
