"""Reads for the operator pages: each returns what one page or partial shows, with a
query count that does not grow with the number of rows."""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Sum
from django.utils import timezone
from django.utils.http import urlencode

from agents.models import Agent, AgentVersion, Model, ModelProvider, RemoteEndpoint
from runs.models import (
    DELEGATE_TICKET_PREFIX,
    AuditEntry,
    HourlyStat,
    Message,
    Run,
    RunEvent,
    Thread,
    Ticket,
)
from runs.runtime.types import WaitingReason, waiting_reason_from_status_reason
from runs.services import stats

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


def keyset_page(
    queryset: QuerySet, cursor: str | None, size: int = PAGE_SIZE, *, oldest_first: bool = False
) -> Page:
    """Newest first by (created_at, pk) (oldest first if asked); the cursor is the last
    row shown. The bound is written `created_at <= c AND (created_at < c OR pk < p)` so
    the index on (created_at, pk) is entered at the cursor, not scanned up to it."""
    if cursor:
        position = decode_cursor(cursor)
        if position is not None:
            created, pk = position
            if oldest_first:
                queryset = queryset.filter(created_at__gte=created).filter(
                    Q(created_at__gt=created) | Q(pk__gt=pk)
                )
            else:
                queryset = queryset.filter(created_at__lte=created).filter(
                    Q(created_at__lt=created) | Q(pk__lt=pk)
                )
    order = ("created_at", "pk") if oldest_first else ("-created_at", "-pk")
    rows = list(queryset.order_by(*order)[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    return Page(rows, encode_cursor(rows[-1].created_at, rows[-1].pk) if more and rows else None)


# --- runs -----------------------------------------------------------------------------------------------


# The waiting reasons (docs/run-model.md), as offered in filters.
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

# Columns a list row never shows; some are large (a run's state, its input snapshot).
LIST_DEFERRED = (
    "request",
    "input",
    "output",
    "state",
    "waiting",
    "error_payload",
    "final_output",
    "agent_version__spec",
    "thread__custom",
)


def runs_for_list() -> QuerySet[Run]:
    return Run.objects.select_related("agent", "agent_version", "thread").defer(*LIST_DEFERRED)


def run_list(*, filters: RunFilters, cursor: str | None = None, size: int = PAGE_SIZE) -> Page:
    """Each filter maps onto an index ending in (created_at, id) (runs.models.Run.Meta), so
    a page reads about `size` index entries whatever the table holds."""
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
    agent_id = _agent_id(filters.agent) if filters.agent else None
    if agent_id is not None:  # by id, so the planner sees one value of (agent, created_at, id)
        runs = runs.filter(agent_id=agent_id)
    if filters.thread:
        runs = runs.filter(thread_id=_uuid_or_none(filters.thread))
    if filters.provider or filters.endpoint:  # through the pinned versions' specs
        versions = _versions_using(filters.provider, filters.endpoint, agent_id)
        runs = runs.filter(agent_version_id__in=versions)  # none: no query at all
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
            runs = runs.filter(_threads_saying(term))
    return keyset_page(runs, cursor, size)


# A search matching at most this many messages lists the runs of their threads; beyond
# it the word is common, and the newest runs are checked one by one instead.
SEARCH_MESSAGES = 2000


def _threads_saying(term: str) -> Q:
    """Runs whose thread has a message containing `term` (any case). On PostgreSQL the
    trigram index (runs migration 0006) finds the messages of a rare word at once; those
    are few, so the runs of their threads are read by thread and sorted. A common word is
    found in the first threads checked, so the runs are read newest first, each checked
    for a matching message, until the page is full. Deciding here rather than leaving it
    to the planner keeps a rare word off the second plan: for a thread of thousands of
    messages it would read them all once per run of the thread."""
    found = list(
        Message.objects.filter(content__icontains=term)
        .order_by()
        .values_list("thread_id", flat=True)[: SEARCH_MESSAGES + 1]
    )
    if len(found) <= SEARCH_MESSAGES:
        return Q(thread_id__in=set(found))
    said = Message.objects.filter(thread_id=OuterRef("thread_id"), content__icontains=term)
    return Q(Exists(said))


def _agent_id(slug: str) -> int:
    return Agent.objects.filter(slug=slug).values_list("pk", flat=True).first() or 0


def _versions_using(provider: str, endpoint: str, agent_id: int | None) -> list[int]:
    """Ids of the agent versions (of `agent_id`, if given) whose spec uses a model of
    `provider` / the endpoint: versions are few, runs are many."""
    models = set(Model.objects.filter(provider__slug=provider).values_list("slug", flat=True))
    versions = AgentVersion.objects.all()
    if agent_id is not None:
        versions = versions.filter(agent_id=agent_id)
    found = []
    for pk, spec in versions.values_list("pk", "spec"):
        spec = spec or {}
        if provider and spec.get("model_id") not in models:
            continue
        if endpoint and spec.get("endpoint_id") != endpoint:
            continue
        found.append(pk)
    return found


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
    """What the run page shows. Every list is bounded: the logs (events, the thread's
    messages) are their newest page with a way to load earlier ones, the other lists their
    newest RELATED_PAGE rows with `more` set when some were left out."""

    run: Run
    messages: Rows
    events: Rows
    open_tickets: Rows
    decided_tickets: Rows
    children: Rows
    ancestors: list[Run]
    retries: Rows
    newer_version: bool
    duration: dt.timedelta | None
    extra: dict[str, Any] = field(default_factory=dict)


# The panels of the run page; a partial that refreshes one panel reads only what it shows.
RUN_SECTIONS = frozenset({"header", "tickets", "transcript", "timeline"})


def run_detail(
    run_id: Any,
    *,
    sections: frozenset[str] = RUN_SECTIONS,
    events_before: int | None = None,
    messages_before: int | None = None,
    messages_from: int | None = None,
) -> RunDetail | None:
    run = (
        Run.objects.select_related(
            "agent", "agent_version", "thread", "parent_run__agent", "retry_of"
        )
        .filter(pk=run_id)
        .first()
    )
    if run is None:
        return None
    header, tickets = "header" in sections, "tickets" in sections
    return RunDetail(
        run=run,
        messages=(
            run_transcript(run, before_seq=messages_before, from_seq=messages_from)
            if "transcript" in sections
            else Rows()
        ),
        events=(run_timeline(run, before_seq=events_before) if "timeline" in sections else Rows()),
        open_tickets=run_open_tickets(run) if tickets else Rows(),
        decided_tickets=(
            _newest(
                Ticket.objects.filter(run=run)
                .exclude(status=Ticket.Status.PENDING)
                .select_related("decision", "tool_call")
            )
            if tickets
            else Rows()
        ),
        children=_newest(Run.objects.filter(parent_run=run).select_related("agent"))
        if header
        else Rows(),
        ancestors=_ancestors(run) if header else [],
        retries=_newest(Run.objects.filter(retry_of=run).only("id", "status", "status_reason"))
        if header
        else Rows(),
        newer_version=(
            run.agent_version.number
            < (run.agent.versions.order_by("-number").values_list("number", flat=True).first() or 0)
        )
        if header
        else False,
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


def run_transcript(run: Run, *, before_seq: int | None = None, from_seq: int | None = None) -> Rows:
    """The run's thread's newest messages (the run page shows the whole conversation).
    A live refresh of the page's panel (from its first message on, no upper bound) may show
    up to TRANSCRIPT_LIVE, so what arrives while the page is open does not at once push
    messages it showed behind a "show earlier" control."""
    live_refresh = from_seq is not None and before_seq is None
    return seq_window(
        Message.objects.filter(thread_id=run.thread_id),
        before_seq=before_seq,
        from_seq=from_seq,
        size=TRANSCRIPT_LIVE if live_refresh else TRANSCRIPT_PAGE,
    )


def run_open_tickets(run: Run) -> Rows:
    """Oldest first, like the inbox; past RELATED_PAGE the others are decided there."""
    rows = list(
        Ticket.objects.filter(run=run, status=Ticket.Status.PENDING)
        .select_related("tool_call")
        .order_by("created_at", "pk")[: RELATED_PAGE + 1]
    )
    return Rows(rows[:RELATED_PAGE], more=len(rows) > RELATED_PAGE)


# --- tickets ----------------------------------------------------------------------------------------------


def _tickets_for(tickets: QuerySet[Ticket], agent: str, tool: str) -> QuerySet[Ticket]:
    """The agent and tool filters of the inbox and the tickets API."""
    if agent:
        tickets = tickets.filter(agent_id=_agent_id(agent))
    if tool:
        tickets = tickets.filter(tool_name=tool)
    return tickets


def inbox_tickets(
    *, agent: str = "", tool: str = "", cursor: str | None = None, size: int = PAGE_SIZE
) -> Page:
    """Pending tickets, oldest first, over the (partial) inbox indexes."""
    tickets = Ticket.objects.for_operators().select_related("run__agent", "tool_call")
    return keyset_page(_tickets_for(tickets, agent, tool), cursor, size, oldest_first=True)


def ticket_list(
    *, status: str, agent: str = "", tool: str = "", cursor: str | None = None, size: int
) -> Page:
    """The API's tickets: pending ones as the inbox lists them, closed ones newest first."""
    if status == Ticket.Status.PENDING:
        return inbox_tickets(agent=agent, tool=tool, cursor=cursor, size=size)
    tickets = Ticket.objects.filter(status=status).select_related(
        "run__agent", "tool_call", "decision"
    )
    return keyset_page(_tickets_for(tickets, agent, tool), cursor, size)


def inbox_count(*, agent: str = "", tool: str = "") -> int:
    return _tickets_for(Ticket.objects.for_operators(), agent, tool).count()


def inbox_filter_options() -> tuple[list[str], list[str]]:
    """The agents and the tools their configuration offers (not a scan of the tickets)."""
    agents: list[str] = []
    tools: set[str] = set()
    for slug, agent_tools in Agent.objects.order_by("slug").values_list("slug", "tools"):
        agents.append(slug)
        tools.update(str(name) for name in agent_tools or [])
    return agents, sorted(tools)


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


def dashboard(now: dt.datetime | None = None) -> Dashboard:
    """Counters (runs.services.stats) and small index scans: the runs not done (partial
    index `run_open_idx`), the pending tickets, the failures index."""
    now = now or timezone.now()
    by_status = {status: 0 for status in Run.Status.values}
    by_reason: dict[str, int] = {}
    open_runs = open_run_counts()
    for status, status_reason, _, count in open_runs:
        by_status[status] += count
        if status == Run.Status.WAITING:
            reason = waiting_reason_from_status_reason(status_reason or None).value
            by_reason[reason] = by_reason.get(reason, 0) + count
    finished = HourlyStat.objects.filter(hour=stats.ALL_TIME).exclude(metric="run:open")
    by_status[Run.Status.DONE] = finished.aggregate(n=Sum("count"))["n"] or 0
    failures = list(
        Run.objects.filter(status=Run.Status.DONE)
        .filter(Q(status_reason__in=["error", "timeout"]) | Q(status_reason__startswith="stopped:"))
        .select_related("agent")
        .only("pk", "agent__slug", "status_reason", "finished_at")
        .order_by("-finished_at")[:8]
    )
    waits, pending = _wait_buckets(now)
    return Dashboard(
        by_status=by_status,
        by_waiting_reason=by_reason,
        pending_tickets=pending,
        oldest_ticket=Ticket.objects.for_operators()
        .select_related("run__agent")
        .order_by("created_at")
        .first(),
        recent_failures=failures,
        hourly=_hourly(now),
        wait_buckets=waits,
        health=dependency_health(now, open_runs),
    )


def dashboard_cached() -> Dashboard:
    """The figures, computed once per AWAKEN_DASHBOARD_CACHE_SECONDS in this process, for
    the page and for the figures pushed to open dashboards."""
    seconds = settings.AWAKEN_DASHBOARD_CACHE_SECONDS
    if not seconds:
        return dashboard()
    figures = cache.get_or_set("runs:dashboard", dashboard, seconds)
    return figures if figures is not None else dashboard()


def open_run_counts() -> list[tuple[str, str, int, int]]:
    """(status, status_reason, agent_version_id, count) of the runs not done: an
    index-only scan of the partial index `run_open_idx` (COUNT(*): counting ids would
    read the table)."""
    return list(
        Run.objects.exclude(status=Run.Status.DONE)
        .values_list("status", "status_reason", "agent_version_id")
        .annotate(n=Count("*"))
        .order_by()
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


def dependency_health(
    now: dt.datetime, open_runs: list[tuple[str, str, int, int]] | None = None
) -> list[HealthRow]:
    """Five queries whatever the number of runs: providers, endpoints, the model → provider
    map, the errors of the last day by pinned version (over the reason index), and those
    versions' specs; the runs running or waiting come from `open_run_counts()`."""
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
    counts = [
        (version, status, n)
        for status, _, version, n in (open_runs if open_runs is not None else open_run_counts())
        if status in (Run.Status.RUNNING, Run.Status.WAITING)
    ]
    counts += (
        Run.objects.filter(status_reason="error", created_at__gte=since)
        .values_list("agent_version_id", "status")
        .annotate(n=Count("*"))
        .order_by()
    )
    specs = dict(
        AgentVersion.objects.filter(pk__in={version for version, _, _ in counts}).values_list(
            "pk", "spec"
        )
    )
    bucket: dict[str, str] = {
        Run.Status.RUNNING: "running",
        Run.Status.WAITING: "waiting",
        Run.Status.DONE: "failed",
    }
    for version, status, n in counts:
        spec = specs.get(version) or {}
        targets = [
            rows.get(("provider", provider_of_model.get(spec.get("model_id") or "") or "")),
            rows.get(("endpoint", spec.get("endpoint_id") or "")),
        ]
        for row in targets:
            if row is not None and status in bucket:
                setattr(row, bucket[status], getattr(row, bucket[status]) + n)
    return list(rows.values())


def _hourly(now: dt.datetime) -> list[dict[str, Any]]:
    start = stats.hour_of(now - dt.timedelta(hours=23))
    hours = [start + dt.timedelta(hours=i) for i in range(24)]
    counts = {hour: dict.fromkeys(stats.OUTCOMES, 0) for hour in hours}
    rows = (
        HourlyStat.objects.filter(hour__gte=start, metric__startswith="run:")
        .values_list("hour", "metric")
        .annotate(n=Sum("count"))
        .order_by()
    )
    for hour, metric, n in rows:
        outcome = metric.removeprefix("run:")
        if stats.hour_of(hour) in counts and outcome in stats.OUTCOMES:
            counts[stats.hour_of(hour)][outcome] += n
    peak = max((sum(c.values()) for c in counts.values()), default=0) or 1
    result = []
    for index, hour in enumerate(hours):
        bucket = counts[hour]
        total = sum(bucket.values())
        y = 100.0
        segments = []
        for outcome in stats.OUTCOMES:
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


def _wait_buckets(now: dt.datetime) -> tuple[list[dict[str, Any]], int]:
    """How long the tickets closed in the last 7 days waited (counters) plus how long the
    pending ones wait so far (one pass over the pending tickets); and the number of
    pending tickets an operator decides (not the waits on a child run)."""
    counts = [0] * len(stats.WAIT_BUCKETS)
    closed = (
        HourlyStat.objects.filter(hour__gte=now - dt.timedelta(days=7), metric__startswith="wait:")
        .values_list("metric")
        .annotate(n=Sum("count"))
        .order_by()
    )
    for metric, n in closed:
        index = int(metric.removeprefix("wait:"))
        if 0 <= index < len(counts):
            counts[index] += n
    ages: dict[str, Any] = {}
    younger: int | None = None
    for index, (_, limit) in enumerate(stats.WAIT_BUCKETS):
        window = Q()
        if limit is not None:
            window &= Q(created_at__gt=now - dt.timedelta(seconds=limit))
        if younger is not None:
            window &= Q(created_at__lte=now - dt.timedelta(seconds=younger))
        ages[f"b{index}"] = Count("pk", filter=window)
        younger = limit
    pending = Ticket.objects.filter(status=Ticket.Status.PENDING).aggregate(
        **ages, operators=Count("pk", filter=~Q(ticket_id__startswith=DELEGATE_TICKET_PREFIX))
    )
    for index in range(len(counts)):
        counts[index] += pending[f"b{index}"]
    peak = max(counts) or 1
    buckets = [
        {"label": label, "count": count, "width": round(100.0 * count / peak, 2)}
        for (label, _), count in zip(stats.WAIT_BUCKETS, counts, strict=True)
    ]
    return buckets, pending["operators"]


# --- threads and audit ------------------------------------------------------------------------------


def thread_list(*, cursor: str | None = None, q: str = "") -> Page:
    threads = Thread.objects.select_related("open_run", "latest_run__agent")
    if q:
        ident = _uuid_or_none(q)
        threads = threads.filter(pk=ident) if ident else threads.filter(Q(title__icontains=q))
    return keyset_page(threads, cursor)


def thread_detail(thread_id: Any) -> tuple[Thread, Rows, Rows] | None:
    """The thread, its newest messages and its newest runs, both oldest first (the last
    run is the latest: the composer offers its agent)."""
    thread = Thread.objects.select_related("open_run__agent").filter(pk=thread_id).first()
    if thread is None:
        return None
    messages = thread_transcript(thread.pk)
    runs = _newest(Run.objects.filter(thread=thread).select_related("agent"))
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


# --- bounded lists of the run and thread pages -----------------------------------------------------

TIMELINE_PAGE = 200  # a run's events shown at once; earlier ones on demand
TRANSCRIPT_PAGE = 100  # a thread's messages shown at once; earlier ones on demand
TRANSCRIPT_LIVE = 3 * TRANSCRIPT_PAGE  # at most, in a live refresh of the run page's transcript
RELATED_PAGE = 50  # children, retries, tickets of a run; runs of a thread


class Rows(list[Any]):
    """Rows a page shows, oldest first, with `more` set when rows were left out (for a log:
    rows older than the first one here). A list, so templates and callers iterate it as
    before. For a log window, `before_seq` and `from_seq` are the range it was read from."""

    def __init__(
        self,
        rows: Any = (),
        *,
        more: bool = False,
        before_seq: int | None = None,
        from_seq: int | None = None,
    ) -> None:
        super().__init__(rows)
        self.more = more
        self.before_seq = before_seq
        self.from_seq = from_seq

    @property
    def first_seq(self) -> int | None:
        """Where the page before this one ends: its `?before_seq=`."""
        return self[0].seq if self else None


def seq_window(
    rows: QuerySet,
    *,
    size: int,
    before_seq: int | None = None,
    from_seq: int | None = None,
) -> Rows:
    """The newest `size` rows of an append-only log (events of a run, messages of a
    thread: unique on (owner, seq), so this reads size + 1 index entries backwards) with
    from_seq <= seq < before_seq. One row more than shown tells whether older ones exist."""
    if before_seq is not None:
        rows = rows.filter(seq__lt=before_seq)
    if from_seq is not None:
        rows = rows.filter(seq__gte=from_seq)
    newest = list(rows.order_by("-seq")[: size + 1])
    return Rows(
        reversed(newest[:size]),
        more=len(newest) > size,
        before_seq=before_seq,
        from_seq=from_seq,
    )


def _newest(rows: QuerySet, size: int = RELATED_PAGE) -> Rows:
    """The newest `size` rows by (created_at, pk), shown oldest first."""
    newest = list(rows.order_by("-created_at", "-pk")[: size + 1])
    return Rows(reversed(newest[:size]), more=len(newest) > size)


def run_timeline(run: Run, *, before_seq: int | None = None) -> Rows:
    """The run's newest events (before `before_seq`). The page's live stream resumes after
    the last one, so the first page always ends with the newest event."""
    return seq_window(RunEvent.objects.filter(run=run), before_seq=before_seq, size=TIMELINE_PAGE)


def thread_transcript(
    thread_id: Any, *, before_seq: int | None = None, from_seq: int | None = None
) -> Rows:
    return seq_window(
        Message.objects.filter(thread_id=thread_id),
        before_seq=before_seq,
        from_seq=from_seq,
        size=TRANSCRIPT_PAGE,
    )


def thread_messages_page(thread_id: Any, *, before_seq: int | None = None) -> Rows | None:
    """A page of the thread page's transcript, None when there is no such thread."""
    if not Thread.objects.filter(pk=thread_id).exists():
        return None
    return thread_transcript(thread_id, before_seq=before_seq)
