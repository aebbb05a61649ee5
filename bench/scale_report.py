"""The scale benchmark's summary: one row per figure (value, goal, verdict), the pages'
results folded into rows, and the final table."""

from __future__ import annotations

from dataclasses import dataclass

from bench.common import print_header
from bench.scale_pages import GOAL_P50_MS, GOAL_P99_MS, Result


@dataclass
class Row:
    """One line of the final table."""

    figure: str
    value: str
    goal: str
    verdict: str


def print_table(rows: list[Row]) -> None:
    print_header("Summary")
    headers = Row("figure", "value", "goal", "met")
    table = [headers, *rows]
    widths = [
        max(len(getattr(row, name)) for row in table)
        for name in ("figure", "value", "goal", "verdict")
    ]
    for index, row in enumerate(table):
        cells = (row.figure, row.value, row.goal, row.verdict)
        print("  " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))
        if index == 0:
            print("  " + "-+-".join("-" * w for w in widths))
    met = sum(1 for row in rows if row.verdict == "met")
    not_met = sum(1 for row in rows if row.verdict.startswith("NOT"))
    errors = sum(1 for row in rows if row.verdict == "ERROR")
    print(f"\n  {met} met, {not_met} NOT met, {errors} errors, {len(rows)} figures", flush=True)


def page_rows(results: list[Result]) -> list[Row]:
    """One row per measured request; the ones not offered (an API filter that does not
    exist, a list without cursor) collapse into one row per reason."""
    goal = f"p50<{GOAL_P50_MS:.0f}, p99<{GOAL_P99_MS:.0f} ms, queries = ref"
    rows = []
    skipped: dict[str, list[str]] = {}
    for result in results:
        if result.skipped:
            skipped.setdefault(result.skipped, []).append(result.name)
            continue
        value = result.value()
        if result.error:
            value = "ERROR: " + result.error[:60]
        rows.append(Row(result.name, value, goal, result.verdict()))
    for reason, names in skipped.items():
        figure = names[0] if len(names) == 1 else f"{len(names)} requests, e.g. {names[0]}"
        rows.append(Row(figure, f"not measured: {reason}", goal, "n/a"))
    return rows
