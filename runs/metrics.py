"""Prometheus metrics (docs/metrics.md): the series, the helpers that move them, and the
exposition that `/metrics` (runs.views.metrics) and the optional worker listener serve.

Counters and histograms are moved where things happen, in whichever process does them:
Celery prefork children (runs, steps, inference, tool calls, lease recoveries,
notification attempts), daphne processes (decisions, websocket clients). With
PROMETHEUS_MULTIPROC_DIR set (the settings set it, before this module is imported, in
the distributed mode) prometheus-client keeps every process's values in memory-mapped
files of that directory and the exposition sums them over all processes of the host.
Without it there is one process and its own registry.

Gauges read from the database (open tickets, due runs, failing notifications) are not
kept anywhere: they are computed when scraped, with a few cheap queries on partial
indexes, at most once per AWAKEN_METRICS_CACHE_SECONDS per process.

Nothing here queries the database on a run's hot path: labels come from what the caller
already holds (the agent's slug of a claimed run, the model and tool named in events).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import prometheus_client
from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.db.models import Count
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    multiprocess,
    values,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from agents.models import Agent
from runs.models import Run, Ticket
from runs.services.declared import declared
from runs.services.stats import outcome as run_outcome

logger = logging.getLogger(__name__)

MULTIPROCESS_DIR: str = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
if MULTIPROCESS_DIR and values.ValueClass is values.MutexValue:
    raise ImproperlyConfigured(
        "prometheus_client was imported before PROMETHEUS_MULTIPROC_DIR was set: its "
        "values would stay in this process; set the variable before Django starts"
    )

# Durations: runs include the time they wait for people, steps and calls do not.
RUN_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400, 7 * 86400)
STEP_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300)
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
WAIT_BUCKETS = (10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400)

RUNS_STARTED = Counter(
    "awaken_runs_started", "Runs whose first activation began on a worker.", ["agent"]
)
RUNS_FINISHED = Counter(
    "awaken_runs_finished",
    "Runs that ended, by outcome (completed, failed, cancelled, blocked).",
    ["agent", "outcome"],
)
RUN_DURATION = Histogram(
    "awaken_run_duration_seconds",
    "From a run's start to its end, waits for decisions included.",
    ["agent", "outcome"],
    buckets=RUN_BUCKETS,
)
STEP_DURATION = Histogram(
    "awaken_step_duration_seconds",
    "One step of a run: its inference and the tool calls it asked for.",
    ["agent"],
    buckets=STEP_BUCKETS,
)
INFERENCE_DURATION = Histogram(
    "awaken_inference_duration_seconds",
    "One model call, from the request to the last chunk.",
    ["model"],
    buckets=STEP_BUCKETS,
)
INFERENCE_TOKENS = Counter(
    "awaken_inference_tokens",
    "Tokens the models reported, by kind (input, output).",
    ["model", "kind"],
)
TOOL_CALL_DURATION = Histogram(
    "awaken_tool_call_duration_seconds",
    "One tool call on a worker: permission check, validation and execution.",
    ["tool"],
    buckets=CALL_BUCKETS,
)
TOOL_CALLS = Counter(
    "awaken_tool_calls",
    "Tool calls by outcome (succeeded, failed, suspended: waits for a decision).",
    ["tool", "outcome"],
)
TOOL_CALL_FAILURES = Counter(
    "awaken_tool_call_failures", "Tool calls that failed (their outcome is failed).", ["tool"]
)
TICKET_WAIT = Histogram(
    "awaken_ticket_wait_seconds",
    "From a ticket's opening to its decision, by the decision's action.",
    ["agent", "tool", "action"],
    buckets=WAIT_BUCKETS,
)
LEASE_RECOVERIES = Counter(
    "awaken_lease_recoveries",
    "Runs taken back from a worker that stopped (lease_expired) or lost the database "
    "mid-segment (database_lost); each resumes from its last checkpoint.",
    ["reason"],
)
NOTIFICATION_ATTEMPTS = Counter(
    "awaken_notification_attempts",
    "Notification delivery attempts by channel kind and result "
    "(delivered, failed: retried, failed_permanently).",
    ["kind", "result"],
)
NOTIFICATION_FAILURES = Counter(
    "awaken_notification_failures",
    "Notification delivery attempts that failed (retried or not).",
    ["kind"],
)
WEBSOCKET_CLIENTS = Gauge(
    "awaken_websocket_clients",
    "Websocket clients connected now (run pages, dashboards and lists).",
    ["kind"],
    multiprocess_mode="livesum",
)

_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def _tool_label(name: Any) -> str:
    """A tool's name as a label; a name no tool could have (the model invents those) is
    `other`, so that a model's fancy cannot grow the series without bound."""
    text = str(name or "")
    return text if _TOOL_NAME.fullmatch(text) else "other"


@functools.lru_cache(maxsize=1024)
def agent_slug(agent_id: int | None) -> str:
    """An agent's slug by id, one query per agent per process (agents are few). Used off
    the hot path only: decisions and failed runs."""
    if agent_id is None:
        return ""
    return Agent.objects.filter(pk=agent_id).values_list("slug", flat=True).first() or ""


def _after_commit(record: Callable[[], None]) -> None:
    """Move a series once the transaction that did the work commits (at once outside one),
    so work that rolls back is not counted, and a transaction run again after a lock
    conflict (runs.services.locks) counts once. Outside a transaction it asks nothing of
    the connection: a worker that just lost the database counts that too."""
    if transaction.get_connection().in_atomic_block:
        transaction.on_commit(record)
    else:
        record()


# --- runs -----------------------------------------------------------------------------------


def run_started(agent: str) -> None:
    RUNS_STARTED.labels(agent).inc()


def run_finished(
    agent: str,
    status: str,
    reason: str,
    started: dt.datetime | None,
    finished: dt.datetime | None,
) -> None:
    """A run ended (after its transaction commits): counted under its outcome, the same
    grouping as the dashboard's (runs.services.stats.outcome)."""
    outcome = run_outcome(status, reason or "")
    seconds = (finished - started).total_seconds() if started and finished else None

    def record() -> None:
        RUNS_FINISHED.labels(agent, outcome).inc()
        if seconds is not None:
            RUN_DURATION.labels(agent, outcome).observe(max(seconds, 0.0))

    _after_commit(record)


def run_ended(run: Run) -> None:
    """A service ended a run outside a worker's checkpoint (`run_fail`, or cancelling a run
    nobody executes): the agent's slug from the process's cache; a run that never started
    lasted from its creation, as a checkpoint counts it."""
    run_finished(
        agent_slug(run.agent_id),
        run.status,
        run.status_reason,
        run.started_at or run.created_at,
        run.finished_at,
    )


def lease_recovered(reason: str) -> None:
    """A run taken back from a worker (after the transaction that took it commits: a
    claim run again for a lock conflict counts once)."""
    _after_commit(lambda: LEASE_RECOVERIES.labels(reason).inc())


class ActivationTimer:
    """Times one activation's steps, inference and tool calls from the events it emits,
    as they are emitted (the live sink sees each one at once). A step's tool calls run
    one after the other right after its inference, so a call's duration is the time
    from the previous call's end (or the inference's) to its own end."""

    WATCHED = frozenset({"step_start", "step_end", "inference_complete", "tool_call_done"})

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.step_started: float | None = None
        self.mark: float | None = None
        # each timed call's duration (ms) by call id, until its checkpoint takes it
        self.tool_ms: dict[str, int] = {}

    def observe(self, event: dict[str, Any]) -> None:
        kind = event["event_type"]
        if kind not in self.WATCHED:
            return
        now = time.monotonic()
        if kind == "step_start":
            self.step_started, self.mark = now, None
        elif kind == "step_end":
            if self.step_started is not None:
                STEP_DURATION.labels(self.agent).observe(now - self.step_started)
            self.step_started = self.mark = None
        elif kind == "inference_complete":
            inference_done(event)
            self.mark = now
        else:
            tool = _tool_label((event.get("result") or {}).get("tool_name"))
            outcome = str(event.get("outcome") or "")
            TOOL_CALLS.labels(tool, outcome).inc()
            if outcome == "failed":
                TOOL_CALL_FAILURES.labels(tool).inc()
            if self.mark is not None:
                TOOL_CALL_DURATION.labels(tool).observe(now - self.mark)
                self.tool_ms[str(event.get("id") or "")] = int((now - self.mark) * 1000)
            self.mark = now


def inference_done(event: dict[str, Any]) -> None:
    """An `inference_complete` event: its duration and the tokens it reports."""
    model = str(event.get("model") or "unknown")
    INFERENCE_DURATION.labels(model).observe(float(event.get("duration_ms") or 0) / 1000)
    usage = event.get("usage") or {}
    for kind, field in (("input", "prompt_tokens"), ("output", "completion_tokens")):
        if usage.get(field):
            INFERENCE_TOKENS.labels(model, kind).inc(int(usage[field]))


# --- tickets, notifications, websockets ------------------------------------------------------


def ticket_decided(ticket: Ticket, action: str, decided_at: dt.datetime) -> None:
    """A decision closed `ticket` (after its transaction commits). A replay's tickets,
    decided by its set's policy, are nobody's wait: not counted."""
    if Ticket.run.is_cached(ticket) and ticket.run.run_mode == "replay":
        return
    waited = max((decided_at - ticket.created_at).total_seconds(), 0.0)
    tool, agent_id = _tool_label(ticket.tool_name), ticket.agent_id

    def record() -> None:
        TICKET_WAIT.labels(agent_slug(agent_id), tool, action).observe(waited)

    _after_commit(record)


def counts_attempts(send: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Wraps the function that makes one notification delivery attempt (it returns an
    outcome with `ok` and `permanent`): every attempt counted by channel kind and result,
    an attempt that raised as a failure."""

    @functools.wraps(send)
    def counted(row: Any) -> Any:
        # a subscription mails; a channel deleted meanwhile counts as "deleted"
        kind = (row.channel.kind if row.channel else "deleted") if row.channel_id else "email"
        try:
            result = send(row)
        except Exception:
            _attempt(kind, ok=False, permanent=False)
            raise
        _attempt(kind, ok=bool(result.ok), permanent=bool(result.permanent))
        return result

    return counted


def _attempt(kind: str, *, ok: bool, permanent: bool) -> None:
    result = "delivered" if ok else ("failed_permanently" if permanent else "failed")
    NOTIFICATION_ATTEMPTS.labels(kind, result).inc()
    if not ok:
        NOTIFICATION_FAILURES.labels(kind).inc()


def websocket_opened(kind: str) -> bool:
    """A websocket client of `kind` (run, dashboard) is connected; True, for the
    consumer to remember that it must call `websocket_closed` once."""
    WEBSOCKET_CLIENTS.labels(kind).inc()
    return True


def websocket_closed(kind: str) -> None:
    WEBSOCKET_CLIENTS.labels(kind).dec()


# --- gauges read from the database ------------------------------------------------------------


class DatabaseCollector(Collector):
    """The gauges the setting `AWAKEN_METRICS_DATABASE_GAUGES` declares (each a function
    returning its metric families; operations' are in runs.operations.metrics): open
    tickets by agent and tool, due runs no worker has claimed, notifications being
    retried, notification destinations paused by their circuit breaker: four queries,
    each reading a partial index whose size is the number of open things (pending
    tickets, due runs, pending deliveries) or a table of one row per destination, not of
    all rows, and at most once per `ttl` seconds per process however many scrapers
    ask."""

    KEY = "metrics:database-gauges"

    def __init__(self, ttl: Callable[[], float]) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()  # one scrape reads, the others wait for its answer

    def collect(self) -> Iterable[Metric]:
        ttl = self.ttl()
        if ttl <= 0:
            return self._read()
        with self._lock:  # in the local-memory `default` cache: per process
            metrics: list[Metric] = cache.get_or_set(self.KEY, self._read, ttl) or []
            return list(metrics)

    def forget(self) -> None:
        cache.delete(self.KEY)

    def _read(self) -> list[Metric]:
        declared_gauges = declared("AWAKEN_METRICS_DATABASE_GAUGES")
        return [metric for gauges in declared_gauges for metric in gauges()]


def run_gauges() -> list[Metric]:
    """The core's database gauges: open tickets by agent and tool, due runs unclaimed."""
    tickets = GaugeMetricFamily(
        "awaken_tickets_open",
        "Tickets waiting for a decision, by agent and tool.",
        labels=["agent", "tool"],
    )
    pending = (
        Ticket.objects.filter(status=Ticket.Status.PENDING)
        .order_by()
        .values_list("agent__slug", "tool_name")
        .annotate(open=Count("pk"))
    )
    merged: dict[tuple[str, str], int] = {}
    for slug, tool, count in pending:
        key = (slug or "", _tool_label(tool))
        merged[key] = merged.get(key, 0) + count
    for (slug, tool), count in sorted(merged.items()):
        tickets.add_metric([slug, tool], count)
    due = Run.objects.filter(due=True, lease_expires_at__isnull=True).exclude(
        status=Run.Status.DONE
    )
    return [
        tickets,
        GaugeMetricFamily(
            "awaken_runs_due_unclaimed",
            "Runs due to be executed that no worker has claimed yet.",
            value=due.count(),
        ),
    ]


database_gauges = DatabaseCollector(lambda: float(settings.AWAKEN_METRICS_CACHE_SECONDS))


# --- exposition ---------------------------------------------------------------------------------


def forget_dead_processes(directory: str = MULTIPROCESS_DIR) -> int:
    """Drop the live gauges (websocket clients) of processes that are gone (killed
    without a clean exit): their files would otherwise be summed in for good. Counters
    and histograms of dead processes stay: their totals must not go down."""
    if not directory:
        return 0
    dead = set()
    for path in Path(directory).glob("gauge_live*_*.db"):
        suffix = path.stem.rsplit("_", 1)[-1]
        if suffix.isdigit() and not _alive(int(suffix)):
            dead.add(int(suffix))
    for pid in dead:
        multiprocess.mark_process_dead(pid, directory)
    return len(dead)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_registry() -> CollectorRegistry:
    """The series moved by processes: summed over the host's processes in multiprocess
    mode, else this process's own."""
    if not MULTIPROCESS_DIR:
        return prometheus_client.REGISTRY
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, MULTIPROCESS_DIR)
    return registry


def exposition(accept: str | None, *, database: bool = True) -> tuple[bytes, str]:
    """The text a scrape gets (Prometheus or OpenMetrics format, as `accept` asks) and
    its content type; with the database gauges unless `database` is False."""
    forget_dead_processes()
    registry = process_registry()
    encoder, content_type = choose_encoder(accept or "")
    if database:
        combined = CollectorRegistry(auto_describe=False)
        combined.register(_Everything(registry))
        combined.register(database_gauges)
        registry = combined
    return encoder(registry), content_type


class _Everything(Collector):
    """Another registry's metrics, to serve them next to the database gauges."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterable[Metric]:
        return self.registry.collect()


def process_exited(pid: int | None = None) -> None:
    """A process that moved series is exiting: its live gauges stop counting."""
    if MULTIPROCESS_DIR:
        multiprocess.mark_process_dead(pid or os.getpid(), MULTIPROCESS_DIR)


def serve_worker_metrics(address: str) -> Any:
    """Serve this host's process series (no database gauges) over plain HTTP on
    `address` (host:port), from a thread of the calling process: the Celery worker's
    main process, for hosts that run workers and no web process. Returns the server."""
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        raise ImproperlyConfigured(f"AWAKEN_METRICS_ADDR must be host:port, got {address!r}")
    server, _thread = prometheus_client.start_http_server(
        int(port), addr=host.strip("[]") or "127.0.0.1", registry=_WorkerRegistry()
    )
    logger.info("metrics: serving this host's worker series on %s", address)
    return server


class _WorkerRegistry(CollectorRegistry):
    """Re-read the multiprocess files at every scrape (and drop dead processes' gauges)."""

    def __init__(self) -> None:
        super().__init__(auto_describe=False)

    def collect(self) -> Iterable[Metric]:
        forget_dead_processes()
        return process_registry().collect()
