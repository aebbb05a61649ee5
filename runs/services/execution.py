"""Executing runs on workers: run one segment of a claimed run (claims and leases:
`runs.services.leases`) from its last checkpoint, child runs for delegates, and the sweep
that makes it durable.

A task delivered twice, late or after the run moved on finds nothing to claim and does
nothing. A worker killed mid-step loses that step only: its lease expires, the sweep makes
the run due again and the next claim resumes from the last checkpoint.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Now
from django.utils import timezone

from agents.resolver import ToolWrapper, VersionResolver
from agents.selectors import agent_version_by_id
from agents.services.endpoints import endpoint_backend_for_spec
from runs import metrics, tracing
from runs.models import (
    PendingInput,
    Run,
)
from runs.runtime import types as rt
from runs.runtime.backends import (
    BackendControl,
    BackendRootRunRequest,
    BackendRunResult,
    LocalBackend,
)
from runs.runtime.background import BACKGROUND_KEY
from runs.runtime.ports import (
    LeaseLostError,
    Tool,
    VersionConflictError,
)
from runs.services.checkpoint_input import background_results
from runs.services.declared import declared
from runs.services.delegation import cancel_token, delegate_runner, run_notify_parent
from runs.services.delivery import thread_start_next
from runs.services.dispatch import run_dispatch
from runs.services.events import (
    RUN_ROW_FIELDS,
    activation_close_interrupted,
    apply_thread_projection,
    events_append,
    run_identity,
)
from runs.services.leases import (
    LEASE_EXPIRED,
    SEGMENT_STOPPED,
    renewer,
    run_claim_next,
    run_release,
    worker_identity,
)
from runs.services.locks import lock_thread_of, retry_lock_conflicts
from runs.services.run_end import FAILED, RunEnded, run_end_effects, run_is_replay
from runs.services.runs import run_request_cancel_flag
from runs.services.step_gates import run_step_gate
from runs.services.tickets import tickets_close_open
from runs.sql import release_connection, update_returning
from runs.store import (
    OrmCheckpointStore,
    OrmLiveSink,
    load_messages,
    load_open_tool_calls,
    record_from_row,
)

logger = logging.getLogger(__name__)


def run_tool_wrapper(run: Run) -> ToolWrapper | None:
    """What wraps each tool of the run's agents: the wrappers the apps declare in the
    setting `AWAKEN_RUN_TOOL_WRAPPERS` (each given the run: None, or a wrapper; replays:
    dry and recorded tools), applied in their order; None when none applies."""
    found = [wrap for make in declared("AWAKEN_RUN_TOOL_WRAPPERS") if (wrap := make(run))]
    if len(found) < 2:
        return found[0] if found else None

    def wrap_all(tool: Tool) -> Tool:
        for wrap in found:
            tool = wrap(tool)
        return tool

    return wrap_all


class Segment:
    """What one activation of a claimed run needs, loaded in one go (the claim's
    transaction, in `run_advance`), then executed under the lease."""

    def __init__(self, run: Run, worker: str, *, just_claimed: bool = False) -> None:
        run.agent_version = agent_version_by_id(run.agent_version_id)
        self.run = run
        self.trace = tracing.activation_start(run)  # its spans (docs/tracing.md)
        self.token = cancel_token(run)
        # asked once here (the claim's transaction read the row already); later, the
        # process's watch tells
        cancel_requested = (
            run.cancel_requested_at is not None if just_claimed else run_request_cancel_flag(run.pk)
        )
        if cancel_requested:
            self.token.cancel()
        resolver = VersionResolver(
            {run.agent.slug: run.agent_version},
            delegate_runner=delegate_runner(run, run.attempt, worker),
            tool_wrapper=run_tool_wrapper(run),
        )
        sink = OrmLiveSink(run.pk, run.agent.slug, trace=self.trace)
        self.request = BackendRootRunRequest(
            agent_id=run.agent.slug,
            messages=load_messages(run.thread_id),
            sink=sink,
            resolver=resolver,
            identity=run_identity(run),
            store=OrmCheckpointStore(
                run.pk,
                run.attempt,
                settings.AWAKEN_LEASE_SECONDS,
                # the submission recorded this first activation's run_start already
                # (a later attempt's log has the interrupted one's end after it)
                announced=run.attempt == 1 and run.steps == 0 and run.last_event_seq >= 1,
                timer=sink.timer,  # the tool calls' durations, for the usage counters
                trace=self.trace,
                replay=run_is_replay(run),
            ),
            control=BackendControl(
                cancellation_token=self.token,
                decisions_attached=False,
                step_gate=run_step_gate(run),  # e.g. budgets (docs/budgets.md)
            ),
            previous=record_from_row(run),
            # a run that never checkpointed has no tool calls yet
            tool_calls=load_open_tool_calls(run.pk) if run.steps else {},
            background_results=background_results(run.pk) if _started_work(run) else [],
        )
        self.remote = endpoint_backend_for_spec(run.agent_version.spec or {})  # A2A agents
        if self.remote is None:
            resolver.preload(run.agent.slug)  # its model row, in the same round

    def execute(self) -> BackendRunResult:
        with renewer.hold(self.run.pk, self.run.attempt, self.token), self.trace.current():
            return (self.remote or LocalBackend()).execute_root(self.request)


def _started_work(run: Run) -> bool:
    """Whether the run ever started background work (its state lists it)."""
    return bool(((run.state or {}).get("extensions") or {}).get(BACKGROUND_KEY))


def run_execute(*, run: Run, worker: str) -> BackendRunResult:
    """Run one segment of a claimed run: from its last checkpoint until it ends or waits."""
    segment = Segment(run, worker)
    try:
        return segment.execute()
    finally:
        segment.trace.end("returned")


def run_advance(*, run_id: Any, worker: str | None = None) -> str:
    """The body of the `advance_run` task. Returns what happened, for logs and tests."""
    worker = worker or worker_identity()
    claimed = _claim(run_id, worker)
    release_connection()  # the segment takes one only for its checkpoints
    if claimed is None:
        return "skipped"
    run, segment, failure = claimed
    run_id = run.pk  # a run ahead of it by priority, maybe
    if run.attempt == 1:  # its first claim
        metrics.run_started(run.agent.slug)
    attempt = run.attempt
    outcome = "finished"
    settled = False  # the last checkpoint ended the run and gave its lease up
    # set while the segment has not returned: its activation has no end in the log yet
    interrupted: str | None = SEGMENT_STOPPED
    try:
        if failure is not None:
            raise failure
        assert segment is not None
        result = segment.execute()
        interrupted = None
        outcome = str(result.status)
        settled = result.status.durable_run_status(result.termination) is rt.RunStatus.DONE
    except LeaseLostError:
        logger.warning("run %s: lease lost to another worker; stopping", run_id)
        outcome = "lease_lost"
        return outcome
    except VersionConflictError as exc:
        logger.error("run %s: %s; it will be retried", run_id, exc)
        Run.objects.filter(pk=run_id, attempt=attempt).update(due=True)
        outcome = "conflict"
        interrupted = f"activation interrupted: {exc}; the run resumes from its last checkpoint"
    except (OperationalError, InterfaceError) as exc:
        outcome, interrupted = _database_lost(run_id, attempt, exc)
    except Exception as exc:
        logger.exception("run %s crashed the worker segment", run_id)
        run_fail(
            run_id=run_id,
            attempt=attempt,
            message=f"internal error: {exc.__class__.__name__}: {exc}",
        )
        outcome = "failed"
    finally:
        if not settled:
            run_release(run_id=run_id, attempt=attempt, interrupted=interrupted)
        if segment is not None:
            segment.trace.end(outcome)
    if run.parent_run_id:
        run_notify_parent(run_id=run_id)
    return outcome


@retry_lock_conflicts
@transaction.atomic  # the claim and everything the segment loads: one round
def _claim(run_id: Any, worker: str) -> tuple[Run, Segment | None, Exception | None] | None:
    """Claim the run (or one ahead of it) and load its segment; a segment that cannot be
    loaded from bad data is returned as the failure to fail the run with, once the claim
    committed. None: nothing to claim."""
    run = run_claim_next(run_id=run_id, worker=worker)
    if run is None:
        return None
    try:
        return run, Segment(run, worker, just_claimed=True), None
    except (OperationalError, InterfaceError):
        raise  # the claim rolls back with it: the run is still due
    except Exception as exc:
        return run, None, exc


def _database_lost(run_id: Any, attempt: int, exc: Exception) -> tuple[str, str]:
    """A restart, failover or killed connection mid-segment: the step in progress is lost,
    not the run; it is due again once released (or, if the database is still away, when
    its lease expires), and one that keeps losing it is given up like a poison run.
    Returns the outcome and the activation's interruption."""
    logger.warning("run %s: lost the database mid-segment: %s", run_id, exc)
    connection.close()  # the next query connects afresh
    metrics.lease_recovered("database_lost")
    interrupted = (
        "activation interrupted: its worker lost the database; "
        "the run resumes from its last checkpoint"
    )
    if _count_recovery(run_id, attempt) <= settings.AWAKEN_MAX_ATTEMPTS:
        return "interrupted", interrupted
    run_fail(
        run_id=run_id,
        attempt=attempt,
        given_up=True,
        message=f"gave up after {settings.AWAKEN_MAX_ATTEMPTS} interruptions; "
        f"the last: database error: {exc}",
    )
    return "failed", interrupted


def _count_recovery(run_id: Any, attempt: int) -> int:
    """One more recovery of the run (while this worker still holds it); the new count."""
    Run.objects.filter(pk=run_id, attempt=attempt).update(recoveries=F("recoveries") + 1)
    return int(Run.objects.values_list("recoveries", flat=True).get(pk=run_id))


@retry_lock_conflicts
@transaction.atomic
def run_fail(*, run_id: Any, attempt: int | None, message: str, given_up: bool = False) -> bool:
    """End a run `done`/`error` with a message, if this worker still holds it; notify
    run.given_up (`given_up`: it kept losing its workers) or run.failed."""
    query = (
        Run.objects.select_for_update(no_key=True).filter(pk=run_id).exclude(status=Run.Status.DONE)
    )
    if attempt is not None:  # the caller's claim, still holding the lease
        query = query.filter(attempt=attempt, lease_expires_at__isnull=False)
    run = query.first()
    if run is None:
        return False
    lock_thread_of(run)  # the run, then its thread (runs.services.locks)
    now = timezone.now()
    termination = rt.TerminationReason.error(message)
    run.status = Run.Status.DONE
    run.status_reason = "error"
    run.termination_reason = termination.to_json()
    run.error_payload = {"message": message}
    run.waiting = None
    run.due = False
    run.lease_owner, run.lease_expires_at = "", None
    run.finished_at = now
    run.updated_at = now
    tickets_close_open(run, now)
    run.save()
    events_append(
        run,
        [
            {"event_type": "error", "message": message, "code": "run_failed"},
        ],
        now=now,
    )
    apply_thread_projection(run)
    # what follows its end, as after any (runs.services.run_end): counters, run.failed or
    # run.given_up, its failure group, background work, the thread's next input, ...
    run_end_effects(
        RunEnded(
            run=run,
            how=FAILED,
            now=now,
            replay=run_is_replay(run),
            error_payload=run.error_payload,
            given_up=given_up,
        )
    )
    return True


# --- the sweep ------------------------------------------------------------------------------------


def runs_sweep(*, now: dt.datetime | None = None) -> dict[str, int]:
    """The sweep: the steps of the setting `AWAKEN_SWEEP_STEPS`, in order, each given the
    same `now` and adding its counts (the apps above the core declare theirs there:
    tickets past their deadline, replays to repair)."""
    now = now or timezone.now()
    counts: dict[str, int] = {}
    for step in declared("AWAKEN_SWEEP_STEPS"):
        counts.update(step(now))
    return counts


def leases_recover(now: dt.datetime) -> dict[str, int]:
    """A sweep step: runs whose worker died (lease expired) are due again, their dead
    worker's activation closed; runs that keep killing their workers fail."""
    counts = {"recovered": 0, "given_up": 0}
    expired = Run.objects.filter(lease_expires_at__lt=Now()).exclude(status=Run.Status.DONE)
    for run_id, recoveries in expired.values_list("pk", "recoveries")[:500]:
        if recoveries + 1 > settings.AWAKEN_MAX_ATTEMPTS:
            if run_fail(
                run_id=run_id,
                attempt=None,
                given_up=True,
                message=f"gave up after {recoveries} worker crashes while running this run",
            ):
                counts["given_up"] += 1
            continue
        with transaction.atomic():  # due again, its dead worker's activation closed
            taken = update_returning(
                Run.objects.filter(pk=run_id, lease_expires_at__lt=Now()),
                {
                    "due": True,
                    "lease_owner": "",
                    "lease_expires_at": None,
                    "recoveries": F("recoveries") + 1,
                },
                RUN_ROW_FIELDS,
            )
            if taken is not None:
                activation_close_interrupted(taken, LEASE_EXPIRED)
                counts["recovered"] += 1
                metrics.lease_recovered("lease_expired")
                run_dispatch(run_id)
    return counts


def runs_redispatch_lost(now: dt.datetime) -> dict[str, int]:
    """A sweep step: due runs with no recent dispatch (their doorbell was lost) are
    enqueued again."""
    stale = now - dt.timedelta(seconds=max(settings.AWAKEN_SWEEP_SECONDS * 2, 2))
    due = (
        Run.objects.filter(due=True, lease_expires_at__isnull=True)
        .exclude(status=Run.Status.DONE)
        .filter(Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=stale))
        .order_by("priority", "created_at")
        .values_list("pk", flat=True)[:500]
    )
    redispatched = 0
    for run_id in due:
        redispatched += 1
        run_dispatch(run_id)
    return {"redispatched": redispatched}


def inputs_sweep(now: dt.datetime) -> dict[str, int]:
    """A sweep step: queued input whose start was lost (inputs_start_lost)."""
    return {"inputs_started": inputs_start_lost()}


def inputs_start_lost() -> int:
    """Threads left with queued input and no open run (the start that should have followed
    their last run's end was lost): their next run starts."""
    threads = (
        PendingInput.objects.filter(
            status=PendingInput.Status.PENDING, run__isnull=True, thread__open_run__isnull=True
        )
        .values_list("thread_id", flat=True)
        .distinct()[:100]
    )
    started = 0
    for thread_id in list(threads):
        with transaction.atomic():
            started += thread_start_next(thread_id) is not None
    return started
