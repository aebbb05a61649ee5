"""The dashboard: counts of runs and tickets, the last day by hour, how long tickets
wait, and the health of the providers and endpoints runs depend on."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone
from django.utils.http import urlencode

from agents.models import AgentVersion, Model, ModelProvider, RemoteEndpoint
from agents.models_mcp import McpServer
from runs.models import DELEGATE_TICKET_PREFIX, HourlyStat, Run, Ticket
from runs.operations.models.failures import FailureGroup
from runs.operations.selectors.failures import recent_failure_groups
from runs.runtime.types import waiting_reason_from_status_reason
from runs.services import stats


@dataclass
class Dashboard:
    by_status: dict[str, int]
    by_waiting_reason: dict[str, int]
    pending_tickets: int
    oldest_ticket: Ticket | None
    recent_failures: list[FailureGroup]  # open failure groups, latest first
    hourly: list[dict[str, Any]]
    wait_buckets: list[dict[str, Any]]
    health: list[HealthRow] = field(default_factory=list)
    hourly_axis: list[dict[str, Any]] = field(default_factory=list)  # y ticks: value, y
    wait_axis: list[dict[str, Any]] = field(default_factory=list)  # x ticks: value, x
    wait_height: int = 0  # the wait-times bars' drawing height (SVG units)


def _of(rows: QuerySet[Any], agent_ids: list[int] | None, path: str = "agent_id") -> Any:
    """`rows` of the agents `agent_ids` (the user's teams'); None: all."""
    return rows if agent_ids is None else rows.filter(**{f"{path}__in": agent_ids})


def dashboard(
    now: dt.datetime | None = None,
    agent_ids: list[int] | None = None,
    teams: Collection[int] | None = None,
) -> Dashboard:
    """Counters (runs.services.stats) and small index scans: the runs not done (partial
    index `run_open_idx`), the pending tickets, the failures index. `agent_ids`: only
    these agents' (a user's teams', `teams`: whose providers and endpoints show with the
    shared ones); None: every team."""
    now = now or timezone.now()
    by_status = {status: 0 for status in Run.Status.values}
    by_reason: dict[str, int] = {}
    open_runs = open_run_counts(agent_ids)
    for status, status_reason, _, count in open_runs:
        by_status[status] += count
        if status == Run.Status.WAITING:
            reason = waiting_reason_from_status_reason(status_reason or None).value
            by_reason[reason] = by_reason.get(reason, 0) + count
    finished = _of(HourlyStat.objects.filter(hour=stats.ALL_TIME), agent_ids)
    finished = finished.exclude(metric="run:open")
    by_status[Run.Status.DONE] = finished.aggregate(n=Sum("count"))["n"] or 0
    # the same failure once, with its count (runs/operations/selectors/failures.py)
    failures = recent_failure_groups(None if agent_ids is None else list(teams or ()))
    for group in failures:  # cached and pushed to every dashboard: keep what is shown
        group.sample_message = group.sample_message[:ERROR_CHARS]
    waits, pending = _wait_buckets(now, agent_ids)
    hourly, hourly_peak = _hourly(now, agent_ids)
    wait_peak = max(waits_peak(waits), 1)
    return Dashboard(
        by_status=by_status,
        by_waiting_reason=by_reason,
        pending_tickets=pending,
        oldest_ticket=_of(Ticket.objects.for_operators(), agent_ids)
        .select_related("run__agent")
        .order_by("created_at")
        .first(),
        recent_failures=failures,
        hourly=hourly,
        wait_buckets=waits,
        health=dependency_health(now, open_runs, agent_ids, teams),
        hourly_axis=[
            {"value": value, "y": round(CHART_HEIGHT * (1 - value / hourly_peak), 2)}
            for value in axis_ticks(hourly_peak)
        ],
        wait_axis=[
            {"value": value, "x": round(WAIT_BAR_WIDTH * value / wait_peak, 2)}
            for value in axis_ticks(wait_peak)
        ],
        wait_height=WAIT_ROW * len(waits),
    )


ERROR_CHARS = 300  # of a failed run's error message, on the dashboard
CHART_HEIGHT = 100.0  # the runs-per-hour bars' drawing height (SVG units): the peak's bar
WAIT_BAR_WIDTH = 200.0  # the wait-times bars' drawing width (SVG units): the peak's bar
WAIT_ROW = 20  # the height of a wait-times bar's row (SVG units)


def axis_ticks(peak: int) -> list[int]:
    """Whole-number ticks of an axis from 0 to `peak`: 0, about the middle, and the peak."""
    peak = max(int(peak), 1)
    return sorted({0, (peak + 1) // 2, peak})


def waits_peak(buckets: list[dict[str, Any]]) -> int:
    return max((bucket["count"] for bucket in buckets), default=0)


def dashboard_cached(
    agent_ids: list[int] | None = None, teams: Collection[int] | None = None
) -> Dashboard:
    """The figures, computed once per AWAKEN_DASHBOARD_CACHE_SECONDS in this process, for
    the page and for the figures pushed to open dashboards. A user of some teams only
    (`agent_ids`: their agents, `teams`: those teams) gets their teams' figures, computed
    for them."""
    if agent_ids is not None:
        return dashboard(agent_ids=agent_ids, teams=teams)
    seconds = settings.AWAKEN_DASHBOARD_CACHE_SECONDS
    if not seconds:
        return dashboard()
    figures = cache.get_or_set("runs:dashboard", dashboard, seconds)
    return figures if figures is not None else dashboard()


def open_run_counts(agent_ids: list[int] | None = None) -> list[tuple[str, str, int, int]]:
    """(status, status_reason, agent_version_id, count) of the runs not done: an
    index-only scan of the partial index `run_open_idx` (COUNT(*): counting ids would
    read the table); `agent_ids`: of these agents only."""
    return list(
        _of(Run.objects.all(), agent_ids)
        .exclude(status=Run.Status.DONE)
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

    kind: str  # "provider" | "endpoint" | "mcp" (an MCP server: no run-list filter)
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
    now: dt.datetime,
    open_runs: list[tuple[str, str, int, int]] | None = None,
    agent_ids: list[int] | None = None,
    teams: Collection[int] | None = None,
) -> list[HealthRow]:
    """Five queries whatever the number of runs: providers, endpoints, the model → provider
    map, the errors of the last day by pinned version (over the reason index), and those
    versions' specs; the runs running or waiting come from `open_run_counts()`.

    A user of some teams only (`agent_ids`: their agents, `teams`: those teams) sees their
    teams' providers and endpoints and the shared ones (no team), and counts only their
    agents' runs; `open_runs` must be counted for the same agents. None: every team."""
    fields = ("pk", "slug", "name", "health", "health_error", "health_checked_at")
    shown = Q()
    if agent_ids is not None:  # of some teams: theirs and the shared ones
        shown = Q(team__isnull=True) | Q(team_id__in=list(teams or ()))
    providers = list(
        ModelProvider.objects.filter(shown).only(*fields).order_by("slug")[:HEALTH_ROWS_MAX]
    )
    endpoints = list(
        RemoteEndpoint.objects.filter(shown).only(*fields).order_by("slug")[:HEALTH_ROWS_MAX]
    )
    mcp_servers = list(
        McpServer.objects.filter(shown).only(*fields).order_by("slug")[:HEALTH_ROWS_MAX]
    )
    if not providers and not endpoints and not mcp_servers:
        return []
    since = now - FAILED_WINDOW
    rows = _health_rows(providers, endpoints, since, mcp_servers)
    provider_of_model = dict(
        Model.objects.filter(provider__in=providers).values_list("slug", "provider__slug")
    )
    counts = [
        (version, status, n)
        for status, _, version, n in (
            open_runs if open_runs is not None else open_run_counts(agent_ids)
        )
        if status in (Run.Status.RUNNING, Run.Status.WAITING)
    ]
    counts += (
        _of(Run.objects.filter(status_reason="error", created_at__gte=since), agent_ids)
        .values_list("agent_version_id", "status")
        .annotate(n=Count("*"))
        .order_by()
    )
    specs = dict(
        AgentVersion.objects.filter(pk__in={version for version, _, _ in counts}).values_list(
            "pk", "spec"
        )
    )
    _add_counts(rows, counts, specs, provider_of_model)
    return list(rows.values())


def _health_rows(
    providers: list[Any], endpoints: list[Any], since: dt.datetime, mcp_servers: list[Any]
) -> dict[tuple[str, str], HealthRow]:
    """A row per provider and endpoint, by (kind, slug), linking to its failed runs
    since `since`."""
    since_text = timezone.localtime(since).strftime("%Y-%m-%dT%H:%M")
    rows: dict[tuple[str, str], HealthRow] = {}
    for kind, items in (("provider", providers), ("endpoint", endpoints), ("mcp", mcp_servers)):
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
    return rows


def _add_counts(
    rows: dict[tuple[str, str], HealthRow],
    counts: list[Any],
    specs: dict[Any, Any],
    provider_of_model: dict[str, str],
) -> None:
    """Add each (version, status, n) to the rows of the provider of the version's model
    and of its endpoint: running, waiting, or failed (done with an error)."""
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
        # an MCP server's row counts the runs of versions that froze one of its tools
        servers = {entry.get("server") for entry in (spec.get("mcp_tools") or {}).values()}
        targets += [rows.get(("mcp", str(server))) for server in sorted(servers, key=str)]
        for row in targets:
            if row is not None and status in bucket:
                setattr(row, bucket[status], getattr(row, bucket[status]) + n)


def _hourly(now: dt.datetime, agent_ids: list[int] | None) -> tuple[list[dict[str, Any]], int]:
    """The runs created in each of the last 24 hours by outcome, as stacked bars (SVG
    units: 10 wide per hour, CHART_HEIGHT for the busiest hour), and that busiest hour's
    count (at least 1: the y axis' top)."""
    start = stats.hour_of(now - dt.timedelta(hours=23))
    hours = [start + dt.timedelta(hours=i) for i in range(24)]
    counts = {hour: dict.fromkeys(stats.OUTCOMES, 0) for hour in hours}
    rows = (
        _of(HourlyStat.objects.filter(hour__gte=start, metric__startswith="run:"), agent_ids)
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
        y = CHART_HEIGHT
        segments = []
        for outcome in stats.OUTCOMES:
            height = CHART_HEIGHT * bucket[outcome] / peak
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
        result.append(
            {
                "hour": hour,
                "x": index * 10,
                "total": total,
                "segments": segments,
                "tick": index % 6 == 0 or index == len(hours) - 1,  # labelled on the x axis
            }
        )
    return result, peak


def _wait_buckets(
    now: dt.datetime, agent_ids: list[int] | None
) -> tuple[list[dict[str, Any]], int]:
    """How long the tickets closed in the last 7 days waited (counters) plus how long the
    pending ones wait so far (one pass over the pending tickets, from the index
    `ticket_pending_age_idx` alone: counts of a column it holds); and the number of
    pending tickets an operator decides (not the waits on a child run)."""
    counts = [0] * len(stats.WAIT_BUCKETS)
    recent = HourlyStat.objects.filter(hour__gte=now - dt.timedelta(days=7))
    closed = (
        _of(recent.filter(metric__startswith="wait:"), agent_ids)
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
        ages[f"b{index}"] = Count("created_at", filter=window)
        younger = limit
    pending = _of(Ticket.objects.filter(status=Ticket.Status.PENDING), agent_ids).aggregate(
        **ages,
        operators=Count("created_at", filter=~Q(ticket_id__startswith=DELEGATE_TICKET_PREFIX)),
    )
    for index in range(len(counts)):
        counts[index] += pending[f"b{index}"]
    peak = max(counts) or 1
    buckets = [
        {
            "label": label,
            "count": count,
            "length": round(WAIT_BAR_WIDTH * count / peak, 2),  # SVG units
            "y": index * WAIT_ROW,
        }
        for index, ((label, _), count) in enumerate(zip(stats.WAIT_BUCKETS, counts, strict=True))
    ]
    return buckets, pending["operators"]
