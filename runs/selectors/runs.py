"""The runs list (its filters and the message search) and the run page."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings
from django.db.models import Count, Exists, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone
from django.utils.module_loading import import_string

from agents.models import AgentVersion, Model
from runs.models import Message, Run, RunEvent, Ticket
from runs.runtime.types import WaitingReason
from runs.selectors.base import (
    PAGE_SIZE,
    RELATED_PAGE,
    TIMELINE_PAGE,
    TRANSCRIPT_LIVE,
    TRANSCRIPT_PAGE,
    Page,
    Rows,
    agent_id_for_slug,
    keyset_page,
    newest_rows,
    seq_window,
    uuid_or_none,
)
from runs.selectors.run_sort import LONGEST, longest_page
from runs.selectors.waiting import LONGEST_WAITING, longest_waiting_page, runs_waiting

# The waiting reasons (docs/run-model.md), as offered in filters.
WAITING_REASONS = [reason.value for reason in WaitingReason]


class RunScope(Protocol):
    """A set of runs an app above the core keeps with its own index (a failure group's
    links, runs.operations): the runs list and its export narrow to it, and the list's
    page is read from that index."""

    def narrow(self, runs: QuerySet[Run]) -> QuerySet[Run]: ...

    def page(self, runs: QuerySet[Run], cursor: str | None, size: int) -> Page: ...


def run_scope(name: str, value: str) -> RunScope | None:
    """The scope the runs list's parameter `name` selects with `value`, as the app that
    owns it declares it (setting AWAKEN_RUN_LIST_SCOPES: parameter -> dotted path of a
    function of the value); None without a value."""
    path = settings.AWAKEN_RUN_LIST_SCOPES.get(name) if value else None
    return import_string(path)(value) if path else None


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
    waiting_tool: str = ""  # waiting on a pending ticket of this tool ...
    waiting_longer_than: int | None = None  # ... created more than this many minutes ago
    failure_group: str = ""  # the runs of a failure group: its `scope` (runs.operations)
    sort: str = ""  # "" newest first, LONGEST_WAITING (with a waiting filter), LONGEST
    # the requesting user's teams' agents (runs.permissions.visible_agent_ids); None: all
    agent_ids: list[int] | None = None

    @property
    def waiting_filter(self) -> bool:
        return bool(self.waiting_tool) or self.waiting_longer_than is not None

    @property
    def scope(self) -> RunScope | None:
        return run_scope("failure_group", self.failure_group)

    @property
    def active(self) -> bool:
        return any(
            [
                self.waiting_filter,
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
                self.failure_group,
            ]
        )


WAITING_REASON_FILTERS = {
    "tool_permission": Q(status_reason__in=["suspended", "auth_required"]),
    "user_input": Q(status_reason__in=["input_required", "user_input_required"]),
    "background_tasks": Q(status_reason="awaiting_tasks"),
    "rate_limit": Q(status_reason="rate_limit"),
    "manual_pause": Q(status_reason="manual_pause"),
    "budget": Q(status_reason="budget"),
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


# What a row of the runs list page reads (runs/templatetags/run_columns.py `run_row`) and
# nothing more: a row was three model instances of every column, and building them was a
# fifth of the page's time at 50 rows.
ROW_FIELDS = (
    "thread",
    "agent",
    "agent_version",
    "parent_run",
    "status",
    "status_reason",
    "steps",
    "started_at",
    "finished_at",
    "input_tokens",
    "output_tokens",
    "input_price_per_million_usd",
    "output_price_per_million_usd",
    "open_tickets",
    "created_at",
    "agent__slug",
    "agent__team",
    "agent_version__number",
    "thread__title",
)


def runs_for_rows() -> QuerySet[Run]:
    return Run.objects.select_related("agent", "agent_version", "thread").only(*ROW_FIELDS)


def run_list(
    *,
    filters: RunFilters,
    cursor: str | None = None,
    size: int = PAGE_SIZE,
    rows: QuerySet[Run] | None = None,
) -> Page:
    """Each filter maps onto an index ending in (created_at, id) (runs.models.Run.Meta), so
    a page reads about `size` index entries whatever the table holds. `rows`: the runs with
    what the caller reads of them loaded (default `runs_for_list`)."""
    runs = filter_runs(runs_for_list() if rows is None else rows, filters)
    if filters.waiting_filter and filters.sort == LONGEST_WAITING:
        tool, minutes = filters.waiting_tool, filters.waiting_longer_than
        return longest_waiting_page(runs, tool, minutes, cursor, size)
    if filters.sort == LONGEST:  # finished runs by duration (runs.selectors.run_sort)
        return longest_page(runs, cursor, size, since=filters.since, until=filters.until)
    scope = filters.scope
    if scope is not None:  # by the scope's own index (a failure group's links)
        return scope.page(runs, cursor, size)
    return keyset_page(runs, cursor, size)


def filter_runs(runs: QuerySet[Run], filters: RunFilters) -> QuerySet[Run]:
    """`runs` narrowed by `filters`, unordered: the runs list's page and its CSV export
    (runs.operations.services.exports) select the same runs."""
    if filters.agent_ids is not None:  # the user's teams: a short list of agent ids
        runs = runs.filter(agent_id__in=filters.agent_ids)
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
    agent_id = agent_id_for_slug(filters.agent) if filters.agent else None
    if agent_id is not None:  # by id, so the planner sees one value of (agent, created_at, id)
        runs = runs.filter(agent_id=agent_id)
    if filters.thread:
        runs = runs.filter(thread_id=uuid_or_none(filters.thread))
    if filters.provider or filters.endpoint:  # through the pinned versions' specs
        versions = _versions_using(filters.provider, filters.endpoint, agent_id)
        runs = runs.filter(agent_version_id__in=versions)  # none: no query at all
    if filters.reason:
        runs = runs.filter(status_reason=filters.reason)
    scope = filters.scope
    if scope is not None:
        runs = scope.narrow(runs)
    if filters.since:
        runs = runs.filter(created_at__gte=filters.since)
    if filters.until:
        runs = runs.filter(created_at__lt=filters.until)
    if filters.q:
        term = filters.q.strip()
        ident = uuid_or_none(term)
        if ident is not None:
            runs = runs.filter(Q(pk=ident) | Q(thread_id=ident))
        else:
            runs = runs.filter(_threads_saying(term))
    if filters.waiting_filter:  # see runs.selectors.waiting for the indexes
        runs = runs_waiting(runs, filters.waiting_tool, filters.waiting_longer_than)
    return runs


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


def run_row(run_id: Any) -> Run | None:
    run = runs_for_rows().filter(pk=run_id).first()
    if run is not None:
        list_row_extras([run])
    return run


def list_row_extras(runs: list[Run]) -> None:
    """What a runs list row shows beyond its columns, in one query for the page: on each
    run `waits_tool` and `waits_since` (the tool and the creation time of its oldest
    pending ticket, None when nothing waits) and `child_count` (its child runs). Each is a
    correlated subquery per row of the page only: the pending ticket through the run's
    pending-ticket index, the children through the index on `parent_run`."""
    for run in runs:
        run.waits_tool = run.waits_since = None  # type: ignore[attr-defined]
        run.child_count = 0  # type: ignore[attr-defined]
    if not runs:
        return
    oldest = Ticket.objects.filter(run_id=OuterRef("pk"), status=Ticket.Status.PENDING).order_by(
        "created_at", "pk"
    )
    children = (
        Run.objects.filter(parent_run_id=OuterRef("pk"))
        .order_by()
        .values("parent_run_id")
        .annotate(n=Count("*"))
        .values("n")
    )
    rows = (
        Run.objects.filter(pk__in=[run.pk for run in runs])
        .annotate(
            oldest_tool=Subquery(oldest.values("tool_name")[:1]),
            oldest_since=Subquery(oldest.values("created_at")[:1]),
            child_runs=Subquery(children, output_field=IntegerField()),
        )
        .values_list("pk", "oldest_tool", "oldest_since", "child_runs")
    )
    found = {pk: (tool, since, children) for pk, tool, since, children in rows}
    for run in runs:
        tool, since, children = found.get(run.pk, (None, None, 0))
        run.waits_tool, run.waits_since = tool, since  # type: ignore[attr-defined]
        run.child_count = children or 0  # type: ignore[attr-defined]


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
    waiting_on: Ticket | None = None  # the oldest open ticket of a waiting run (the header)


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
    # the primary key picks one row: no ORDER BY (first() would add one, and Django's
    # compiler hashes each of the seven joined models' columns to order a select)
    found = Run.objects.select_related(
        "agent", "agent_version", "thread", "parent_run__agent", "retry_of"
    ).filter(pk=run_id)
    run = next(iter(found.order_by()[:1]), None)
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
            newest_rows(
                Ticket.objects.filter(run=run)
                .exclude(status=Ticket.Status.PENDING)
                .select_related("decision", "tool_call")
            )
            if tickets
            else Rows()
        ),
        children=newest_rows(Run.objects.filter(parent_run=run).select_related("agent"))
        if header
        else Rows(),
        ancestors=_ancestors(run) if header else [],
        retries=newest_rows(Run.objects.filter(retry_of=run).only("id", "status", "status_reason"))
        if header
        else Rows(),
        newer_version=(
            run.agent_version.number
            < (run.agent.versions.order_by("-number").values_list("number", flat=True).first() or 0)
        )
        if header
        else False,
        duration=_duration(run),
        waiting_on=_waiting_on(run) if header else None,
    )


def _waiting_on(run: Run) -> Ticket | None:
    """The oldest open ticket of a waiting run: what the header says the run waits for.
    No query for a run that is not waiting on a ticket."""
    if run.status != Run.Status.WAITING or not run.open_tickets:
        return None
    return (
        Ticket.objects.filter(run=run, status=Ticket.Status.PENDING)
        .only(
            "id",
            "run_id",
            "ticket_id",
            "tool_name",
            "resume_mode",
            "reason",
            "message",
            "created_at",
        )
        .order_by("created_at", "pk")
        .first()
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
        .select_related("tool_call", "claimed_by", "assigned_to")
        .order_by("created_at", "pk")[: RELATED_PAGE + 1]
    )
    return Rows(rows[:RELATED_PAGE], more=len(rows) > RELATED_PAGE)


def run_timeline(run: Run, *, before_seq: int | None = None) -> Rows:
    """The run's newest events (before `before_seq`). The page's live stream resumes after
    the last one, so the first page always ends with the newest event."""
    return seq_window(RunEvent.objects.filter(run=run), before_seq=before_seq, size=TIMELINE_PAGE)
