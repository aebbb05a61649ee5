"""Reads for the operator pages: each returns what one page or partial shows, with a
query count that does not grow with the number of rows."""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from django.db.models import CharField, Count, Q, QuerySet
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.utils import timezone
from django.utils.http import urlencode

from agents.models import Agent, Model, ModelProvider, RemoteEndpoint
from runs.models import AuditEntry, Message, Run, RunEvent, Thread, Ticket
from runs.runtime.types import WaitingReason, waiting_reason_from_status_reason

PAGE_SIZE = 50


# --- keyset pagination ------------------------------------------------------------------------------


def encode_cursor(created_at: dt.datetime, pk: Any) -> str:
    raw = json.dumps([created_at.isoformat(), str(pk)])
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_cursor(cursor: str) -> tuple[dt.datetime, str] | None:
    try:
        created, pk = json.loads(base64.urlsafe_b64decode(cursor.encode()).decode())
        return dt.datetime.fromisoformat(created), str(pk)
    except (ValueError, TypeError):
        return None


@dataclass
class Page:
    items: list[Any]
    next_cursor: str | None


def keyset_page(queryset: QuerySet, cursor: str | None, size: int = PAGE_SIZE) -> Page:
    """Newest first by (created_at, pk); the cursor is the last row shown."""
    if cursor:
        position = decode_cursor(cursor)
        if position is not None:
            created, pk = position
            queryset = queryset.filter(Q(created_at__lt=created) | Q(created_at=created, pk__lt=pk))
    rows = list(queryset.order_by("-created_at", "-pk")[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    return Page(rows, encode_cursor(rows[-1].created_at, rows[-1].pk) if more and rows else None)


# --- runs -----------------------------------------------------------------------------------------------


# The waiting reasons of REFERENCE §1.6, as offered in filters.
WAITING_REASONS = [reason.value for reason in WaitingReason]


@dataclass
class RunFilters:
    status: str = ""
    waiting_reason: str = ""
    agent: str = ""
    thread: str = ""
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    q: str = ""
    provider: str = ""
    endpoint: str = ""
    reason: str = ""

    @property
    def active(self) -> bool:
        return any(
            [
                self.status,
                self.waiting_reason,
                self.agent,
                self.thread,
                self.since,
                self.until,
                self.q,
                self.provider,
                self.endpoint,
                self.reason,
            ]
        )


WAITING_REASON_FILTERS = {
    "tool_permission": Q(status_reason__in=["suspended", "auth_required"]),
    "user_input": Q(status_reason__in=["input_required", "user_input_required"]),
    "background_tasks": Q(status_reason="awaiting_tasks"),
    "rate_limit": Q(status_reason="rate_limit"),
    "manual_pause": Q(status_reason="manual_pause"),
}


def runs_for_list() -> QuerySet[Run]:
    return Run.objects.select_related("agent", "agent_version", "thread").annotate(
        open_tickets=Count("tickets", filter=Q(tickets__status=Ticket.Status.PENDING))
    )


def run_list(*, filters: RunFilters, cursor: str | None = None, size: int = PAGE_SIZE) -> Page:
    runs = runs_for_list()
    if filters.status:
        runs = runs.filter(status=filters.status)
    if filters.waiting_reason:
        condition = WAITING_REASON_FILTERS.get(filters.waiting_reason)
        runs = runs.filter(status=Run.Status.WAITING)
        if condition is not None:
            runs = runs.filter(condition)
        else:  # external_event: any other waiting reason
            for other in WAITING_REASON_FILTERS.values():
                runs = runs.exclude(other)
    if filters.agent:
        runs = runs.filter(agent__slug=filters.agent)
    if filters.thread:
        runs = runs.filter(thread_id=_uuid_or_none(filters.thread))
    if filters.provider:  # through the pinned version's model
        models = Model.objects.filter(provider__slug=filters.provider).values("slug")
        model_id = Cast(KeyTextTransform("model_id", "agent_version__spec"), CharField())
        runs = runs.alias(spec_model_id=model_id).filter(spec_model_id__in=models)
    if filters.endpoint:
        endpoint_id = Cast(KeyTextTransform("endpoint_id", "agent_version__spec"), CharField())
        runs = runs.alias(spec_endpoint_id=endpoint_id).filter(spec_endpoint_id=filters.endpoint)
    if filters.reason:
        runs = runs.filter(status_reason=filters.reason)
    if filters.since:
        runs = runs.filter(created_at__gte=filters.since)
    if filters.until:
        runs = runs.filter(created_at__lt=filters.until)
    if filters.q:
        term = filters.q.strip()
        ident = _uuid_or_none(term)
        if ident is not None:
            runs = runs.filter(Q(pk=ident) | Q(thread_id=ident))
        else:
            threads = Message.objects.filter(content__icontains=term).values("thread_id")
            runs = runs.filter(thread_id__in=threads)
    return keyset_page(runs, cursor, size)


def _uuid_or_none(value: str) -> Any:
    import uuid

    try:
        return uuid.UUID(value.strip())
    except (ValueError, AttributeError):
        return None


def run_row(run_id: Any) -> Run | None:
    return runs_for_list().filter(pk=run_id).first()


@dataclass
class RunDetail:
    run: Run
    messages: list[Message]
    events: list[RunEvent]
    open_tickets: list[Ticket]
    decided_tickets: list[Ticket]
    children: list[Run]
    ancestors: list[Run]
    retries: list[Run]
    newer_version: bool
    duration: dt.timedelta | None
    extra: dict[str, Any] = field(default_factory=dict)


def run_detail(run_id: Any) -> RunDetail | None:
    run = (
        Run.objects.select_related(
            "agent", "agent_version", "thread", "parent_run__agent", "retry_of"
        )
        .filter(pk=run_id)
        .first()
    )
    if run is None:
        return None
    return RunDetail(
        run=run,
        messages=run_transcript(run),
        events=list(RunEvent.objects.filter(run=run).order_by("seq")),
        open_tickets=run_open_tickets(run),
        decided_tickets=list(
            Ticket.objects.filter(run=run)
            .exclude(status=Ticket.Status.PENDING)
            .select_related("decision", "tool_call")
            .order_by("created_at")
        ),
        children=list(
            Run.objects.filter(parent_run=run).select_related("agent").order_by("created_at")
        ),
        ancestors=_ancestors(run),
        retries=list(Run.objects.filter(retry_of=run).only("id", "status", "status_reason")),
        newer_version=run.agent_version.number
        < (run.agent.versions.order_by("-number").values_list("number", flat=True).first() or 0),
        duration=_duration(run),
    )


def _ancestors(run: Run) -> list[Run]:
    chain: list[Run] = []
    parent = run.parent_run
    while parent is not None and len(chain) < 20:
        chain.append(parent)
        if parent.parent_run_id is None:
            break
        parent = (
            Run.objects.select_related("agent", "parent_run")
            .filter(pk=parent.parent_run_id)
            .first()
        )
    return list(reversed(chain))


def _duration(run: Run) -> dt.timedelta | None:
    if run.started_at is None:
        return None
    return (run.finished_at or timezone.now()) - run.started_at


def run_transcript(run: Run) -> list[Message]:
    return list(Message.objects.filter(thread_id=run.thread_id).order_by("seq"))


def run_open_tickets(run: Run) -> list[Ticket]:
    return list(
        Ticket.objects.filter(run=run, status=Ticket.Status.PENDING)
        .select_related("tool_call")
        .order_by("created_at")
    )


# --- tickets ----------------------------------------------------------------------------------------------


def inbox_tickets(*, agent: str = "", tool: str = "") -> list[Ticket]:
    tickets = Ticket.objects.for_operators().select_related("run__agent", "tool_call")
    if agent:
        tickets = tickets.filter(run__agent__slug=agent)
    if tool:
        tickets = tickets.filter(tool_name=tool)
    return list(tickets.order_by("created_at", "pk")[:500])


# --- dashboard ------------------------------------------------------------------------------------------


@dataclass
class Dashboard:
    by_status: dict[str, int]
    by_waiting_reason: dict[str, int]
    pending_tickets: int
    oldest_ticket: Ticket | None
    recent_failures: list[Run]
    hourly: list[dict[str, Any]]
    wait_buckets: list[dict[str, Any]]
    health: list[HealthRow] = field(default_factory=list)


WAIT_BUCKETS = [
    ("< 1 min", 60),
    ("1–5 min", 300),
    ("5–30 min", 1800),
    ("30 min–2 h", 7200),
    ("> 2 h", None),
]


def dashboard(now: dt.datetime | None = None) -> Dashboard:
    now = now or timezone.now()
    by_status = {status: 0 for status in Run.Status.values}
    for status, count in Run.objects.values_list("status").annotate(n=Count("id")):
        by_status[status] = count
    by_reason: dict[str, int] = {}
    waiting = Run.objects.filter(status=Run.Status.WAITING).values_list("status_reason")
    for status_reason, count in waiting.annotate(n=Count("id")):
        reason = waiting_reason_from_status_reason(status_reason or None).value
        by_reason[reason] = by_reason.get(reason, 0) + count
    pending = Ticket.objects.for_operators()
    failures = list(
        Run.objects.filter(status=Run.Status.DONE)
        .filter(Q(status_reason__in=["error", "timeout"]) | Q(status_reason__startswith="stopped:"))
        .select_related("agent")
        .order_by("-finished_at")[:8]
    )
    return Dashboard(
        by_status=by_status,
        by_waiting_reason=by_reason,
        pending_tickets=pending.count(),
        oldest_ticket=pending.select_related("run__agent").order_by("created_at").first(),
        recent_failures=failures,
        hourly=_hourly(now),
        wait_buckets=_wait_buckets(now),
        health=dependency_health(now),
    )


# --- provider and endpoint health (dashboard panel) -------------------------------------------------

HEALTH_ROWS_MAX = 50
FAILED_WINDOW = dt.timedelta(hours=24)


@dataclass
class HealthRow:
    """A model provider or remote endpoint, its last check, and the runs that depend on it:
    running or waiting now, and failed (status_reason "error") in the last 24 hours."""

    kind: str  # "provider" | "endpoint"
    slug: str
    name: str
    health: str
    error: str
    checked_at: dt.datetime | None
    running: int = 0
    waiting: int = 0
    failed: int = 0
    failed_query: str = ""


def dependency_health(now: dt.datetime) -> list[HealthRow]:
    """Four queries whatever the number of runs: providers, endpoints, the model → provider
    map, and the runs grouped by their pinned spec's model_id / endpoint_id and status."""
    fields = ("pk", "slug", "name", "health", "health_error", "health_checked_at")
    providers = list(ModelProvider.objects.only(*fields).order_by("slug")[:HEALTH_ROWS_MAX])
    endpoints = list(RemoteEndpoint.objects.only(*fields).order_by("slug")[:HEALTH_ROWS_MAX])
    if not providers and not endpoints:
        return []
    since = now - FAILED_WINDOW
    since_text = timezone.localtime(since).strftime("%Y-%m-%dT%H:%M")
    rows: dict[tuple[str, str], HealthRow] = {}
    for kind, items in (("provider", providers), ("endpoint", endpoints)):
        for item in items:
            rows[(kind, item.slug)] = HealthRow(
                kind=kind,
                slug=item.slug,
                name=item.name,
                health=item.health,
                error=item.health_error,
                checked_at=item.health_checked_at,
                failed_query=urlencode({kind: item.slug, "reason": "error", "since": since_text}),
            )
    provider_of_model = dict(
        Model.objects.filter(provider__in=providers).values_list("slug", "provider__slug")
    )
    counts = (
        Run.objects.filter(
            Q(status__in=[Run.Status.RUNNING, Run.Status.WAITING])
            | Q(status=Run.Status.DONE, status_reason="error", created_at__gte=since)
        )
        .annotate(
            spec_model_id=KeyTextTransform("model_id", "agent_version__spec"),
            spec_endpoint_id=KeyTextTransform("endpoint_id", "agent_version__spec"),
        )
        .values_list("spec_model_id", "spec_endpoint_id", "status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    bucket = {
        Run.Status.RUNNING: "running",
        Run.Status.WAITING: "waiting",
        Run.Status.DONE: "failed",
    }
    for model_id, endpoint_id, status, n in counts:
        targets = [
            rows.get(("provider", provider_of_model.get(model_id) or "")),
            rows.get(("endpoint", endpoint_id or "")),
        ]
        for row in targets:
            if row is not None:
                setattr(row, bucket[status], getattr(row, bucket[status]) + n)
    return list(rows.values())


def _outcome(status: str, reason: str) -> str:
    if status != Run.Status.DONE:
        return "open"
    if reason == "natural" or reason == "behavior_requested":
        return "completed"
    if reason == "cancelled":
        return "cancelled"
    if reason.startswith("blocked:"):
        return "blocked"
    return "failed"


OUTCOMES = ["completed", "failed", "cancelled", "blocked", "open"]


def _hourly(now: dt.datetime) -> list[dict[str, Any]]:
    start = (now - dt.timedelta(hours=23)).replace(minute=0, second=0, microsecond=0)
    hours = [start + dt.timedelta(hours=i) for i in range(24)]
    counts = {hour: dict.fromkeys(OUTCOMES, 0) for hour in hours}
    rows = Run.objects.filter(created_at__gte=start).values_list(
        "created_at", "status", "status_reason"
    )
    for created, status, reason in rows.iterator():
        hour = created.replace(minute=0, second=0, microsecond=0)
        if hour in counts:
            counts[hour][_outcome(status, reason)] += 1
    peak = max((sum(c.values()) for c in counts.values()), default=0) or 1
    result = []
    for index, hour in enumerate(hours):
        bucket = counts[hour]
        total = sum(bucket.values())
        y = 100.0
        segments = []
        for outcome in OUTCOMES:
            height = 100.0 * bucket[outcome] / peak
            y -= height
            if bucket[outcome]:
                segments.append(
                    {
                        "outcome": outcome,
                        "count": bucket[outcome],
                        "y": round(y, 2),
                        "height": round(height, 2),
                    }
                )
        result.append({"hour": hour, "x": index * 10, "total": total, "segments": segments})
    return result


def _wait_buckets(now: dt.datetime) -> list[dict[str, Any]]:
    """How long decided tickets waited (last 7 days) plus how long open ones wait so far."""
    since = now - dt.timedelta(days=7)
    waits: list[float] = []
    for created, closed in (
        Ticket.objects.filter(created_at__gte=since)
        .values_list("created_at", "closed_at")
        .iterator()
    ):
        waits.append(((closed or now) - created).total_seconds())
    counts = [0] * len(WAIT_BUCKETS)
    for seconds in waits:
        for index, (_, limit) in enumerate(WAIT_BUCKETS):
            if limit is None or seconds < limit:
                counts[index] += 1
                break
    peak = max(counts) or 1
    return [
        {"label": label, "count": count, "width": round(100.0 * count / peak, 2)}
        for (label, _), count in zip(WAIT_BUCKETS, counts, strict=True)
    ]


# --- threads and audit ------------------------------------------------------------------------------


def thread_list(*, cursor: str | None = None, q: str = "") -> Page:
    threads = Thread.objects.select_related("open_run", "latest_run__agent")
    if q:
        ident = _uuid_or_none(q)
        threads = threads.filter(pk=ident) if ident else threads.filter(Q(title__icontains=q))
    return keyset_page(threads, cursor)


def thread_detail(thread_id: Any) -> tuple[Thread, list[Message], list[Run]] | None:
    thread = Thread.objects.select_related("open_run").filter(pk=thread_id).first()
    if thread is None:
        return None
    messages = list(Message.objects.filter(thread=thread).order_by("seq"))
    runs = list(Run.objects.filter(thread=thread).select_related("agent").order_by("created_at"))
    return thread, messages, runs


def agents_for_composer() -> list[Agent]:
    return list(Agent.objects.order_by("slug"))


def audit_list(
    *, action: str = "", actor: str = "", run: str = "", cursor: str | None = None
) -> Page:
    entries = AuditEntry.objects.select_related("actor")
    if action:
        entries = entries.filter(action__startswith=action)
    if actor:
        entries = entries.filter(actor_label=actor)
    if run:
        entries = entries.filter(run_id=_uuid_or_none(run))
    return keyset_page(entries, cursor)
