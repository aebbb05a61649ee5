"""The two runs' heads and the summary table of a compare (docs/compare.md): outcome,
steps, tokens, cost, duration, agent and version, each side as stored and as shown."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from agents.pricing import cost_label, cost_text, run_cost_usd
from runs.models import Run


def version_label(run: Run) -> str:
    version = run.agent_version
    return f"v{version.number}" + (" draft" if version.draft else "")


def run_head(run: Run) -> dict[str, Any]:
    return {
        "id": str(run.pk),
        "thread_id": str(run.thread_id),
        "agent": run.agent.slug,
        "agent_version": version_label(run),
        "status": run.status,
        "status_reason": run.status_reason or None,
        "run_mode": run.run_mode,
        "retry_of": str(run.retry_of_id) if run.retry_of_id else None,
        "forked_from": str(run.forked_from_id) if run.forked_from_id else None,
        "fork_step": run.fork_step,
        "created_at": run.created_at.isoformat(),
        "final_output": run.final_output,
    }


def _duration(run: Run) -> float | None:
    if run.started_at is None or run.finished_at is None:
        return None
    return round((run.finished_at - run.started_at).total_seconds(), 3)


def _duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    value = dt.timedelta(seconds=seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(value.total_seconds()), 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def _outcome(run: Run) -> str:
    return f"{run.status} ({run.status_reason})" if run.status_reason else run.status


def _cost(run: Run) -> Decimal | None:
    return run_cost_usd(run)


def run_summary(a: Run, b: Run) -> list[dict[str, Any]]:
    """One row per compared figure: its value on each side (`a`, `b`), as shown (`a_text`,
    `b_text`), and whether they differ (the values; the duration as shown, to a tenth of a
    second). Cost is the exact decimal (null: unpriced); duration needs both times."""
    figures: list[tuple[str, str, Any, Any, str, str]] = []

    def add(key: str, label: str, value: Any, shown: Any = str) -> None:
        figures.append((key, label, value(a), value(b), shown(value(a)), shown(value(b))))

    add("outcome", "outcome", _outcome)
    add("steps", "steps", lambda r: r.steps)
    add("input_tokens", "input tokens", lambda r: r.input_tokens)
    add("output_tokens", "output tokens", lambda r: r.output_tokens)
    add("cost_usd", "cost", lambda r: cost_text(_cost(r)), lambda v: cost_label(_decimal(v)))
    add("duration_seconds", "duration", _duration, _duration_text)
    add("agent", "agent", lambda r: r.agent.slug)
    add("agent_version", "version", version_label)
    return [
        {
            "key": key,
            "label": label,
            "a": value_a,
            "b": value_b,
            "a_text": text_a,
            "b_text": text_b,
            "different": text_a != text_b if key == "duration_seconds" else value_a != value_b,
        }
        for key, label, value_a, value_b, text_a, text_b in _exact_costs(figures)
    ]


def _exact_costs(figures: list[tuple[str, str, Any, Any, str, str]]) -> list[Any]:
    """Two different costs that round to the same label are shown exactly."""
    shown = []
    for key, label, value_a, value_b, text_a, text_b in figures:
        if key == "cost_usd" and value_a != value_b and text_a == text_b:
            text_a, text_b = (f"${v}" if v is not None else "—" for v in (value_a, value_b))
        shown.append((key, label, value_a, value_b, text_a, text_b))
    return shown


def _decimal(value: str | None) -> Decimal | None:
    return Decimal(value) if value is not None else None
