"""What the replay pages and API show (docs/replays.md): each item's original and replay
side by side, whether the outcome changed, and the set's totals and progress."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.urls import reverse

from agents.pricing import cost_text, run_cost_usd
from runs.models import Run, Ticket, ToolCall
from runs.replays.models.replays import ReplayItem, ReplaySet

PROBLEM_STATUSES = (ToolCall.Status.FAILED, ToolCall.Status.CANCELLED)


def replay_sets() -> QuerySet[ReplaySet]:
    """Sets, newest first, with their item counts by status."""
    return (
        ReplaySet.objects.select_related("agent", "version", "created_by")
        .annotate(
            total=Count("items"),
            done_count=Count("items", filter=Q(items__status=ReplayItem.Status.DONE)),
            running_count=Count("items", filter=Q(items__status=ReplayItem.Status.RUNNING)),
            skipped_count=Count("items", filter=Q(items__status=ReplayItem.Status.SKIPPED)),
        )
        .order_by("-created_at", "-pk")
    )


def outcome_of(run: Run | None) -> str:
    """completed, blocked (a tool denied by permission rules ended it), failed,
    cancelled; waiting, running, queued; "gone" when deleted."""
    if run is None:
        return "gone"
    if run.status == Run.Status.DONE:
        if run.status_reason == "cancelled":
            return "cancelled"
        if (run.status_reason or "").startswith("blocked:"):
            return "blocked"
        return "failed" if run.is_failed else "completed"
    if run.status == Run.Status.CREATED:
        return "queued"
    return str(run.status)


def _summary(
    run: Run | None, tickets: int, tools: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    tools = tools or {}
    if run is None:
        return {"id": None, "outcome": "gone"}
    duration = None
    if run.started_at and run.finished_at:
        duration = round((run.finished_at - run.started_at).total_seconds(), 3)
    cost = run_cost_usd(run)
    return {
        "id": str(run.pk),
        "outcome": outcome_of(run),
        "status": run.status,
        "status_reason": run.status_reason,
        "steps": run.steps,
        "tokens": run.input_tokens + run.output_tokens,
        "cost_usd": cost_text(cost),
        "cost": cost,
        "duration_seconds": duration,
        "tickets": tickets,
        "tools_used": tools.get("used", []),
        "tool_problems": tools.get("problems", []),
        "final_output": run.final_output,
    }


@dataclass
class ReplayRow:
    item: ReplayItem
    original: Run | None
    replay: Run | None
    original_summary: dict[str, Any]
    replay_summary: dict[str, Any] | None
    changed: bool | None  # None until the replay ended
    compare_url: str | None

    @property
    def tickets(self) -> int | None:
        """Tickets the replay raised (which a person would have had to decide)."""
        return self.replay_summary["tickets"] if self.replay_summary else None


def compare_url(original_id: Any, replay_id: Any) -> str:
    return f"{reverse('runs:run-compare')}?a={original_id}&b={replay_id}"


def replay_rows(replay_set: ReplaySet) -> list[ReplayRow]:
    """Every item, in position order, with its two runs summarized (three queries)."""
    items = list(
        ReplayItem.objects.filter(replay_set=replay_set)
        .select_related("original_run__thread", "replay_run")
        .order_by("position")
    )
    run_ids = [r for i in items for r in (i.original_run_id, i.replay_run_id) if r is not None]
    tickets = dict(
        Ticket.objects.filter(run_id__in=run_ids)
        .values("run_id")
        .annotate(n=Count("pk"))
        .values_list("run_id", "n")
    )
    tools = _tools_by_run(run_ids)
    rows = []
    for item in items:
        original, replay = item.original_run, item.replay_run
        before = _summary(
            original,
            tickets.get(original.pk, 0) if original else 0,
            tools.get(original.pk) if original else None,
        )
        after = None
        if replay is not None:
            after = _summary(replay, tickets.get(replay.pk, 0), tools.get(replay.pk))
        changed = None
        if after is not None and replay is not None and replay.status == Run.Status.DONE:
            changed = _signature(before) != _signature(after)
        link = compare_url(original.pk, replay.pk) if original and replay else None
        rows.append(ReplayRow(item, original, replay, before, after, changed, link))
    return rows


def _tools_by_run(run_ids: list[Any]) -> dict[Any, dict[str, list[str]]]:
    """Per run: the tools it called successfully ("used") and those that failed, were
    rejected or cancelled ("problems"), each name once, sorted."""
    found: dict[Any, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    calls = ToolCall.objects.filter(run_id__in=run_ids).values_list("run_id", "tool_name", "status")
    for run_id, tool, status in calls:
        if status == ToolCall.Status.SUCCEEDED:
            found[run_id]["used"].add(tool)
        elif status in PROBLEM_STATUSES:
            found[run_id]["problems"].add(tool)
    return {
        run_id: {kind: sorted(names) for kind, names in kinds.items()}
        for run_id, kinds in found.items()
    }


def _signature(summary: dict[str, Any]) -> tuple[Any, ...]:
    """What "changed" compares: how the run ended and which tools worked or failed."""
    return (summary["outcome"], summary.get("tools_used"), summary.get("tool_problems"))


def _average(values: list[Any]) -> Any:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return sum(values) / len(values)


def _totals(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    costs = [s["cost"] for s in summaries if s.get("cost") is not None]
    total_cost = sum(costs, Decimal(0)) if costs else None
    return {
        "steps": sum(s.get("steps", 0) for s in summaries),
        "tokens": sum(s.get("tokens", 0) for s in summaries),
        "cost_usd": cost_text(total_cost),
        "tickets": sum(s.get("tickets", 0) for s in summaries),
        "average_steps": _average([s.get("steps") for s in summaries]),
        "average_tokens": _average([s.get("tokens") for s in summaries]),
        "average_duration_seconds": _average([s.get("duration_seconds") for s in summaries]),
        "completed": sum(1 for s in summaries if s.get("outcome") == "completed"),
    }


def replay_summary(replay_set: ReplaySet, rows: list[ReplayRow]) -> dict[str, Any]:
    """Progress and totals: of the originals and of the replays that ended (compared
    like for like: the originals of the finished replays)."""
    finished = [row for row in rows if row.changed is not None]
    counts = {status: 0 for status in ReplayItem.Status.values}
    for row in rows:
        counts[row.item.status] += 1
    total = len(rows)
    ended = counts["done"] + counts["skipped"]
    return {
        "total": total,
        "pending": counts["pending"],
        "running": counts["running"],
        "done": counts["done"],
        "skipped": counts["skipped"],
        "progress_percent": round(100 * ended / total) if total else 100,
        "changed": sum(1 for row in finished if row.changed),
        "original": _totals([row.original_summary for row in finished]),
        "replay": _totals([row.replay_summary for row in finished if row.replay_summary]),
    }


def public_summary(summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """A run summary for JSON (the Decimal cost left out: `cost_usd` has it)."""
    if summary is None:
        return None
    return {key: value for key, value in summary.items() if key != "cost"}
