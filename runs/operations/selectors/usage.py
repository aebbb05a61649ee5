"""Cost, tokens and latency at a glance: per agent and per model over a window (runs,
success rate, p50/p95 duration, tokens, cost per day), per tool (calls, failure rate,
p95 latency). Two grouped reads of the hourly usage counters (runs.services.stats),
whatever the number of runs (docs/stats.md); the hours that can no longer change are
summed once an hour (`_sums`)."""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from collections import defaultdict
from decimal import Decimal
from typing import Any

from django.core.cache import cache
from django.db.models import Min, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from runs.models import HourlyUsage
from runs.services import stats

WINDOWS = {"24h": dt.timedelta(hours=24), "7d": dt.timedelta(days=7), "30d": dt.timedelta(days=30)}
DEFAULT_WINDOW = "7d"
MAX_SPAN = dt.timedelta(days=366)
NANO = Decimal(1_000_000_000)


def window_bounds(window: str, now: dt.datetime | None = None) -> tuple[dt.datetime, dt.datetime]:
    """[start, end) of a named window: whole hours, the current one included."""
    end = stats.hour_of(now or timezone.now()) + dt.timedelta(hours=1)
    return end - WINDOWS[window], end


def _empty() -> dict[str, Any]:
    return {"metrics": defaultdict(int), "days": defaultdict(int)}


def usage(
    start: dt.datetime,
    end: dt.datetime,
    agent: str | None = None,
    agent_ids: list[int] | None = None,
) -> dict[str, Any]:
    """The figures of the runs and tool calls that finished in [start, end) (whole UTC
    hours), of one agent (its slug) or all (`agent_ids`: of these agents only, a user's
    teams'; None: every team)."""
    groups: dict[tuple[str, str], dict[str, Any]] = defaultdict(_empty)
    totals, daily = _sums(start, end, agent, agent_ids)
    for slug, kind, name, metric, n in totals:
        groups[_group(kind, slug, name)]["metrics"][metric] += n
    for slug, kind, name, day, n in daily:
        groups[_group(kind, slug, name)]["days"][day] += n
    days = _days(start, end)
    return {
        "window": {"start": start, "end": end, "days": len(days)},
        "by_agent": _runs_rows(groups, HourlyUsage.Kind.AGENT, "agent", days),
        "by_model": _runs_rows(groups, HourlyUsage.Kind.MODEL, "model", days),
        "by_tool": _tool_rows(groups),
    }


Sums = tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]

# The counters of an hour change while runs and tool calls finish in it (each counts in
# the hour of the transaction that records it finished); an hour that ended more than
# SETTLE ago no longer changes, so what the earlier hours of a window sum to is kept in
# Django's cache for SETTLED_SECONDS, under the counters' generation (`_generation`).
SETTLE = dt.timedelta(minutes=5)
SETTLED_SECONDS = 3600


def _generation() -> int | None:
    """Which set of counter rows the cached sums were read from: only `rebuild_stats`
    deletes counter rows (and writes them anew, with new ids), so the smallest id changes
    then and only then, in every process at once. One read of the primary key's index."""
    return HourlyUsage.objects.aggregate(first=Min("id"))["first"]


def _sums(
    start: dt.datetime, end: dt.datetime, agent: str | None, agent_ids: list[int] | None
) -> Sums:
    """The counters of [start, end): (agent, kind, name, metric, sum) and the cost by day
    (agent, kind, name, day, sum). The hours that ended more than SETTLE ago are read
    once per SETTLED_SECONDS, the others each time; two grouped reads each."""
    settled = stats.hour_of(timezone.now() - SETTLE)
    cut = min(max(start, settled), end)  # [start, cut) settled, [cut, end) live
    totals: list[tuple[Any, ...]] = []
    daily: list[tuple[Any, ...]] = []
    if start < cut:
        teams = "all" if agent_ids is None else ",".join(map(str, sorted(agent_ids)))
        scope = f"{_generation()}|{start}|{cut}|{agent}|{teams}"
        key = "runs:usage:" + hashlib.sha256(scope.encode()).hexdigest()
        earlier = cache.get(key)
        if earlier is None:
            earlier = _read_sums(start, cut, agent, agent_ids)
            cache.set(key, earlier, SETTLED_SECONDS)
        totals += earlier[0]
        daily += earlier[1]
    if cut < end:
        latest = _read_sums(cut, end, agent, agent_ids)
        totals += latest[0]
        daily += latest[1]
    return totals, daily


def _read_sums(
    start: dt.datetime, end: dt.datetime, agent: str | None, agent_ids: list[int] | None
) -> Sums:
    rows = HourlyUsage.objects.filter(hour__gte=start, hour__lt=end)
    if agent_ids is not None:
        rows = rows.filter(agent_id__in=agent_ids)
    if agent:
        rows = rows.filter(agent__slug=agent)
    totals = (
        rows.values_list("agent__slug", "kind", "name", "metric")
        .annotate(n=Sum("count"))
        .order_by()
    )
    daily = (
        rows.filter(metric="cost_nusd")
        .exclude(kind=HourlyUsage.Kind.TOOL)
        .annotate(day=TruncDate("hour", tzinfo=dt.UTC))
        .values_list("agent__slug", "kind", "name", "day")
        .annotate(n=Sum("count"))
        .order_by()
    )
    return list(totals), list(daily)


def _group(kind: str, slug: str, name: str) -> tuple[str, str]:
    """Agents by slug; models and tools by name over all agents."""
    return (kind, slug if kind == HourlyUsage.Kind.AGENT else name)


def _days(start: dt.datetime, end: dt.datetime) -> list[dt.date]:
    first, last = start.astimezone(dt.UTC).date(), (end - dt.timedelta(microseconds=1)).date()
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def _buckets(metrics: dict[str, int]) -> dict[int, int]:
    return {
        int(metric.removeprefix("dur:")): n
        for metric, n in metrics.items()
        if metric.startswith("dur:") and n > 0
    }


def _usd(nano: int) -> Decimal:
    return Decimal(nano) / NANO


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _runs_rows(
    groups: dict[tuple[str, str], dict[str, Any]], kind: str, label: str, days: list[dt.date]
) -> list[dict[str, Any]]:
    result = []
    for (group_kind, name), group in sorted(groups.items()):
        metrics = group["metrics"]
        if group_kind != kind or metrics["runs"] <= 0:
            continue
        buckets = _buckets(metrics)
        result.append(
            {
                label: name,
                "runs": metrics["runs"],
                "succeeded": metrics["succeeded"],
                "success_rate": _rate(metrics["succeeded"], metrics["runs"]),
                "p50_seconds": stats.percentile(buckets, 0.5),
                "p95_seconds": stats.percentile(buckets, 0.95),
                "input_tokens": metrics["in_tokens"],
                "output_tokens": metrics["out_tokens"],
                "cost_usd": _usd(metrics["cost_nusd"]),
                "cost_per_day": [
                    {"day": day, "cost_usd": _usd(group["days"].get(day, 0))} for day in days
                ],
            }
        )
    return result


def _tool_rows(groups: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    result = []
    for (kind, name), group in sorted(groups.items()):
        metrics = group["metrics"]
        if kind != HourlyUsage.Kind.TOOL or metrics["calls"] <= 0:
            continue
        result.append(
            {
                "tool": name,
                "calls": metrics["calls"],
                "failures": metrics["failed"],
                "failure_rate": _rate(metrics["failed"], metrics["calls"]),
                "p95_seconds": stats.percentile(_buckets(metrics), 0.95),
            }
        )
    return result


# --- the dashboard's charts (SVG units) ------------------------------------------------------

CHART_WIDTH = 240.0  # the plotting area of both charts
COST_HEIGHT = 100.0  # the cost bars' height: the most expensive day
DURATION_ROW = 24  # a duration chart row: the p50 and the p95 bar of one agent
SERIES = 6  # colour classes series-0 … series-5, cycled over the agents


def nice_top(peak: float) -> float:
    """The axis end for `peak`: the smallest of 1, 2, 2.5, 5 times a power of ten that holds
    it, so the ticks read as round numbers."""
    if peak <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(peak))
    return next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= peak * (1 - 1e-9))


def _ticks(top: float, scale: float, unit: str) -> list[dict[str, Any]]:
    """0, the middle and the end of an axis `scale` SVG units long, labelled (the last
    one anchored at its end, so it stays inside the chart)."""
    return [
        {
            "label": f"{value:.3g}{unit}",
            "at": round(scale * value / top, 2),
            "anchor": "end" if value == top else "middle",
        }
        for value in (0.0, top / 2, top)
    ]


def _cost_bars(
    agents: list[dict[str, Any]], days: list[Any], slot: float, peak: float
) -> list[dict[str, Any]]:
    """One bar per day, its agents' costs stacked bottom up (scaled to `peak`), every
    sixth day's label shown, and the last one's."""
    bars = []
    for index, day in enumerate(days):
        y, segments = COST_HEIGHT, []
        for number, agent in enumerate(agents):
            cost = agent["cost_per_day"][index]["cost_usd"]
            height = COST_HEIGHT * float(cost) / peak
            y -= height
            if cost:
                segments.append(
                    {"agent": agent["agent"], "series": number % SERIES, "cost": cost}
                    | {"y": round(y, 2), "height": round(height, 2)}
                )
        label_every = max(len(days) // 6, 1)
        bars.append(
            {
                "day": day,
                "x": round(index * slot + slot * 0.1, 2),
                "mid": round(index * slot + slot / 2, 2),
                "segments": segments,
                "tick": index % label_every == 0 or index == len(days) - 1,
            }
        )
    return bars


def glance(
    window: str, now: dt.datetime | None = None, agent_ids: list[int] | None = None
) -> dict[str, Any]:
    """The figures of a named window and the geometry of their two charts: cost per day
    stacked by agent, p50 and p95 duration per agent."""
    start, end = window_bounds(window, now)
    figures = usage(start, end, agent_ids=agent_ids)
    agents = figures["by_agent"]
    days = [entry["day"] for entry in agents[0]["cost_per_day"]] if agents else _days(start, end)
    slot = CHART_WIDTH / max(len(days), 1)
    daily = [sum(a["cost_per_day"][i]["cost_usd"] for a in agents) for i in range(len(days))]
    peak = nice_top(float(max(daily, default=0)))
    bars = _cost_bars(agents, days, slot, peak)
    slowest = nice_top(float(max((a["p95_seconds"] or 0 for a in agents), default=0)))
    rows = [
        {
            "agent": agent["agent"],
            "y": index * DURATION_ROW,
            "p50": agent["p50_seconds"],
            "p95": agent["p95_seconds"],
            "p50_length": round(CHART_WIDTH * (agent["p50_seconds"] or 0) / slowest, 2),
            "p95_length": round(CHART_WIDTH * (agent["p95_seconds"] or 0) / slowest, 2),
        }
        for index, agent in enumerate(agents)
    ]
    return {
        "window": window,
        "windows": list(WINDOWS),
        "figures": figures,
        "cost": {
            "bars": bars,
            "bar_width": round(slot * 0.8, 2),
            "axis": [{**t, "y": round(COST_HEIGHT - t["at"], 2)} for t in _ticks(peak, 100, "")],
            "legend": [{"agent": a["agent"], "series": i % SERIES} for i, a in enumerate(agents)],
        },
        "durations": {
            "rows": rows,
            "height": DURATION_ROW * max(len(rows), 1),
            "axis": _ticks(float(slowest), CHART_WIDTH, " s"),
        },
    }
