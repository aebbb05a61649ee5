"""Who holds a run: a worker claims it by compare-and-swap (an `attempt` that fences its
later writes), holds a lease the process renews while the segment works, and releases it.

Leases are set and judged by the database's clock only (`Now()`), never a worker's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import Case, DurationField, F, Q, Subquery, Value, When
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from agents.models import Agent
from runs import metrics
from runs.models import Run
from runs.runtime.ports import CancellationToken
from runs.services.dispatch import enqueue_on_commit, run_dispatch
from runs.services.events import (
    RUN_ROW_FIELDS,
    activation_close_interrupted,
    apply_thread_projection,
)
from runs.sql import Param, Params, prepared_update, update_returning

logger = logging.getLogger(__name__)


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def _lease() -> dt.timedelta:
    return dt.timedelta(seconds=settings.AWAKEN_LEASE_SECONDS)


def _lease_until() -> Any:
    """A new lease's end. Leases are set and judged by the database's clock only
    (`Now()`), never a worker's: workers' clocks may disagree."""
    return Now() + _lease()


AGENT_SLUG = {
    "agent_slug": "(SELECT slug FROM agents_agent WHERE agents_agent.id = runs_run.agent_id)",
    # its team: every broadcast of the run names it (runs.services.events.run_summary)
    "agent_team_id": "(SELECT team_id FROM agents_agent WHERE agents_agent.id = runs_run.agent_id)",
}


def _due_before(run_id: Any) -> Any:
    """Due runs nobody holds with a higher priority than `run_id` (itself due), first by
    priority (0 first), then age. Empty when `run_id` is not due. Runs of one priority
    keep the broker's order, which is the order they became due."""
    named = Run.objects.filter(pk=run_id, due=True)
    return (
        Run.objects.filter(due=True, lease_expires_at__isnull=True)
        .exclude(status=Run.Status.DONE)
        .filter(priority__lt=Subquery(named.values("priority")[:1]))
        .order_by("priority", "created_at", "id")
    )


def run_claim_next(*, run_id: Any, worker: str) -> Run | None:
    """What a worker answering `run_id`'s doorbell takes: the due run of the highest
    priority, the oldest of them (`run_id` unless a run of a higher priority is due), so a
    high-priority run starts before older low-priority ones whatever order their tasks
    sit in the broker. When it takes another run, `run_id`'s doorbell rings again. The
    choice and the claim are one statement: the run ahead (locked, skipping those another
    worker is taking) is the claim's target when there is one."""
    run = run_claim(run_id=run_id, worker=worker, ahead=True)
    if run is not None and run.pk != uuid.UUID(str(run_id)):
        enqueue_on_commit(run_id)
    return run


def _claim(how: str) -> tuple[Any, dict[str, Any]]:
    """The claim's update, with `Param`s (runs.sql.prepared_update). `how`: "due" takes the
    run when it is due and nobody holds it, "ahead" the same or the due run ahead of it
    (`run_claim_next`), "recovery" a running run whose worker's lease expired."""
    p = Params(Run)
    run_id = p("run_id", "id")
    take: dict[str, Any] = {
        "due": False,
        "lease_owner": p.lease_owner,
        "lease_expires_at": Now() + Param("lease", DurationField()),
        "attempt": F("attempt") + 1,
        "status": Run.Status.RUNNING,
        "status_reason": "",
        "waiting": None,
        "started_at": Coalesce("started_at", p("now", "started_at")),
        "updated_at": p("now", "updated_at"),
    }
    open_runs = Run.objects.exclude(status=Run.Status.DONE)
    if how == "recovery":
        take["recoveries"] = F("recoveries") + 1
        return open_runs.filter(
            pk=run_id, status=Run.Status.RUNNING, lease_expires_at__lt=Now()
        ), take
    target: Any = run_id
    if how == "ahead":
        ahead = _due_before(run_id).select_for_update(skip_locked=True, of=("self",))
        target = Coalesce(Subquery(ahead.values("pk")[:1]), run_id)
    return open_runs.filter(pk=target, due=True).filter(
        Q(lease_expires_at__isnull=True)
        # a running run whose lease expired is a recovery (below)
        | (Q(lease_expires_at__lt=Now()) & ~Q(status=Run.Status.RUNNING))
    ), take


def run_claim(*, run_id: Any, worker: str, ahead: bool = False) -> Run | None:
    """Take the run if it is due or its lease expired: one guarded update that answers the
    claimed row (its `attempt` fences every later write of this worker). `ahead`: take
    the due run ahead of it instead when there is one (`run_claim_next`); a recovery is
    of `run_id` only."""
    args = {"run_id": run_id, "lease_owner": worker, "lease": _lease(), "now": timezone.now()}

    def claim(how: str) -> Run | None:
        return prepared_update(("claim", how), lambda: _claim(how), args, extra=AGENT_SLUG)

    with transaction.atomic(savepoint=False):
        run = claim("ahead" if ahead else "due")
        if run is None:  # a redelivered task finds its dead worker's run: a recovery
            run = claim("recovery")
            if run is not None:
                activation_close_interrupted(run, LEASE_EXPIRED)
                metrics.lease_recovered("redelivered")
        if run is not None:
            # the agent as it is named now (only its slug and team are loaded)
            slug, team = run.agent_slug, run.agent_team_id  # type: ignore[attr-defined]
            run.agent = Agent.from_db(None, ["id", "slug", "team_id"], [run.agent_id, slug, team])
            apply_thread_projection(run)
        return run


# Why an activation ended without its `run_finish` (the `activation_interrupted` error).
LEASE_EXPIRED = (
    "activation interrupted: its worker stopped renewing the lease (killed, or cut off); "
    "the run resumes from its last checkpoint"
)
SEGMENT_STOPPED = (
    "activation interrupted: its worker stopped it before the end (shutting down); "
    "the run resumes from its last checkpoint"
)


def run_release(*, run_id: Any, attempt: int, interrupted: str | None = None) -> None:
    """Give up the lease; ring again if decisions arrived while we held it, or if the
    segment was interrupted (the worker is shutting down) before the run settled.

    `interrupted` (why) for a segment that ended without returning: the activation it
    left open in the log is closed with the release, in one transaction, so the next
    activation's `run_start` follows a closed one."""
    held = Run.objects.filter(pk=run_id, attempt=attempt).exclude(status=Run.Status.DONE)
    release = {
        "lease_owner": "",
        "lease_expires_at": None,
        "due": Case(When(status=Run.Status.RUNNING, then=Value(True)), default=F("due")),
    }
    if interrupted is not None:
        with transaction.atomic():
            run = update_returning(held, release, (*RUN_ROW_FIELDS, "due"))
            if run is not None:
                activation_close_interrupted(run, interrupted)
        if run is not None and run.due:
            run_dispatch(run_id)
        return
    released = held.update(**release)
    # a finished run's last checkpoint already gave the lease up: nothing can be due
    if released and Run.objects.filter(pk=run_id, due=True).exists():
        run_dispatch(run_id)


@dataclass
class _Lease:
    run_id: Any
    attempt: int
    token: CancellationToken
    renewed: float  # time.monotonic() of the claim or the last renewal
    released: bool = False  # set under the watch's round lock: no renewal lands after it


# How often the process's watch asks whether a run it holds was cancelled.
CANCEL_POLL_SECONDS = 0.25


class LeaseRenewer:
    """The process's one watch over every run segment it holds, however many: each
    round (every CANCEL_POLL_SECONDS) one query finds the held runs someone asked to
    cancel and cancels their tokens (which cancels what they await at once), and one
    UPDATE renews the leases due (a third of the lease after the claim or the last
    renewal); a segment whose run another worker took is cancelled. A segment shorter
    than a third of the lease costs no renewal."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the held map
        self._round = threading.Lock()  # a round's writes; releases wait for it
        self._held: dict[int, _Lease] = {}
        self._pid = 0
        self._wake = threading.Event()

    @contextlib.contextmanager
    def hold(self, run_id: Any, attempt: int, token: CancellationToken) -> Iterator[None]:
        lease = _Lease(run_id, attempt, token, time.monotonic())
        with self._lock:
            if self._pid != os.getpid():  # first use in this process (or a forked child)
                self._pid = os.getpid()
                threading.Thread(target=self._loop, daemon=True, name="lease-renewer").start()
            self._held[id(lease)] = lease
        self._wake.set()
        try:
            yield
        finally:
            with self._lock:
                self._held.pop(id(lease), None)
            with self._round:  # waits for a renewal in flight
                lease.released = True

    def _loop(self) -> None:
        while True:
            if not self._held:
                self._wake.wait(1.0)
                self._wake.clear()
            time.sleep(CANCEL_POLL_SECONDS)
            with self._lock:
                held = list(self._held.values())
            if not held:
                continue
            try:
                # the connection first: a round waiting on a busy pool must not hold up
                # the segments that end meanwhile (they take `_round` to let go)
                connection.ensure_connection()
                with self._round:
                    self._watch(held, time.monotonic())
            except (OperationalError, InterfaceError):
                # the database is away: try again next round; the lease (three renewals
                # long) outlives a short outage
                logger.warning("lease renewal failed", exc_info=True)
            except Exception:
                logger.exception("lease renewal failed")
            finally:
                connection.close()  # back to the pool between rounds

    def _watch(self, held: list[_Lease], now: float) -> None:
        live = [lease for lease in held if not lease.released]
        by_run = {str(lease.run_id): lease for lease in live}
        cancelled = Run.objects.filter(
            pk__in=[lease.run_id for lease in live], cancel_requested_at__isnull=False
        ).values_list("pk", flat=True)
        for run_id in cancelled:
            by_run[str(run_id)].token.cancel()
        interval = max(settings.AWAKEN_LEASE_SECONDS / 3, 0.2)
        due = [lease for lease in live if now - lease.renewed >= interval]
        if not due:
            return
        owned = Q()
        for lease in due:
            # the claim, unless the sweep took the run back (it clears the lease)
            owned |= Q(pk=lease.run_id, attempt=lease.attempt, lease_expires_at__isnull=False)
        renewed = Run.objects.filter(owned).update(lease_expires_at=_lease_until())
        for lease in due:
            lease.renewed = now
        if renewed == len(due):
            return
        rows = Run.objects.filter(
            pk__in=[lease.run_id for lease in due], lease_expires_at__isnull=False
        )
        current = {str(pk): attempt for pk, attempt in rows.values_list("pk", "attempt")}
        for lease in due:
            if current.get(str(lease.run_id)) != lease.attempt:
                # another worker holds the run now: stop this segment
                lease.token.cancel()
                with self._lock:
                    self._held.pop(id(lease), None)


renewer = LeaseRenewer()  # this process's
