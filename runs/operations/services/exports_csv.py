"""Exports (docs/exports.md): the runs list and the audit log as CSV, RFC 4180, streamed
in pieces like every export (`runs.operations.services.exports`). They stop after
AWAKEN_EXPORT_MAX_ROWS rows and then end with a row whose first cell is TRUNCATED. Text
cells a spreadsheet would read as a formula get a leading apostrophe (`neutralize`)."""

from __future__ import annotations

import csv
import datetime as dt
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.conf import settings
from django.db.models import QuerySet, Subquery

from agents.pricing import cost_text, cost_usd
from common.models import AuditEntry
from runs.models import Run
from runs.operations.services.exports import CHUNK_ROWS, in_pieces
from runs.runtime.types import waiting_reason_from_status_reason
from runs.selectors.runs import RunFilters, filter_runs
from runs.selectors.waiting import LONGEST_WAITING, pending_tickets_of_run

DEFAULT_MAX_ROWS = 100_000  # AWAKEN_EXPORT_MAX_ROWS when the setting is absent
TRUNCATED = "# truncated"  # first cell of the last row of a CSV export cut short
# What makes a spreadsheet read a cell as a formula (OWASP, "CSV injection").
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def export_max_rows() -> int:
    return int(getattr(settings, "AWAKEN_EXPORT_MAX_ROWS", DEFAULT_MAX_ROWS))


def neutralize(text: str) -> str:
    """Text a spreadsheet would read as a formula (=, +, -, @, tab or carriage return
    first), with a leading apostrophe: shown as text, never evaluated."""
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def csv_cell(value: Any) -> Any:
    """One cell: numbers as they are, times in ISO 8601, JSON compact, text neutralized."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return value
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dict | list):
        value = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return neutralize(str(value))


class _Echo:
    """A file whose `write` returns what it is given: csv.writer then formats one row at
    a time without a buffer."""

    def write(self, value: str) -> str:
        return value


def csv_chunks(rows: Iterable[Sequence[Any]]) -> Iterator[bytes]:
    """RFC 4180 CSV (quoted where needed, CRLF line ends), UTF-8, in pieces."""
    writer = csv.writer(_Echo())
    return in_pieces(writer.writerow(row) for row in rows)


def _capped(
    header: list[str], rows: QuerySet[Any], limit: int | None, convert: Any
) -> Iterator[list[Any]]:
    """The header, then at most `limit` converted rows; when more matched, a last row
    saying the export was cut short."""
    limit = export_max_rows() if limit is None else limit
    yield header
    for written, row in enumerate(rows[: limit + 1].iterator(chunk_size=CHUNK_ROWS)):
        if written == limit:
            yield [TRUNCATED, f"only the first {limit} rows: narrow the filters for the rest"]
            return
        yield [csv_cell(value) for value in convert(row)]


def runs_export_queryset(filters: RunFilters) -> QuerySet[Run]:
    """The runs the runs list shows with `filters`, in its order: newest first, or by
    the oldest matching ticket for its longest-waiting sort."""
    runs = filter_runs(Run.objects.all(), filters)
    if filters.waiting_filter and filters.sort == LONGEST_WAITING:
        oldest = pending_tickets_of_run(filters.waiting_tool, filters.waiting_longer_than)
        since = Subquery(oldest.order_by("created_at").values("created_at")[:1])
        return runs.annotate(waiting_since=since).order_by("waiting_since", "pk")
    return runs.order_by("-created_at", "-pk")


RUN_COLUMNS = [
    "run_id",
    "created_at",
    "started_at",
    "finished_at",
    "status",
    "status_reason",
    "waiting_reason",
    "agent",
    "agent_version",
    "thread_id",
    "parent_run_id",
    "retry_of",
    "origin",
    "run_mode",
    "priority",
    "steps",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "open_tickets",
]
_RUN_FIELDS = (
    "pk",
    "created_at",
    "started_at",
    "finished_at",
    "status",
    "status_reason",
    "agent__slug",
    "agent_version__number",
    "thread_id",
    "parent_run_id",
    "retry_of_id",
    "origin",
    "run_mode",
    "priority",
    "steps",
    "input_tokens",
    "output_tokens",
    "input_price_per_million_usd",
    "output_price_per_million_usd",
    "open_tickets",
)


def _run_row(values: tuple[Any, ...]) -> list[Any]:
    row = dict(zip(_RUN_FIELDS, values, strict=True))
    status, reason = row["status"], row["status_reason"]
    waiting = (
        waiting_reason_from_status_reason(reason or None).value
        if status == Run.Status.WAITING
        else None
    )
    cost = cost_usd(
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        input_price=row["input_price_per_million_usd"],
        output_price=row["output_price_per_million_usd"],
    )
    return [
        row["pk"],
        row["created_at"],
        row["started_at"],
        row["finished_at"],
        status,
        reason,
        waiting,
        row["agent__slug"],
        row["agent_version__number"],
        row["thread_id"],
        row["parent_run_id"],
        row["retry_of_id"],
        row["origin"],
        row["run_mode"],
        row["priority"],
        row["steps"],
        row["input_tokens"],
        row["output_tokens"],
        cost_text(cost),
        row["open_tickets"],
    ]


def runs_csv_rows(runs: QuerySet[Run], *, limit: int | None = None) -> Iterator[list[Any]]:
    """The header (RUN_COLUMNS) and one row per run of `runs`, in its order."""
    return _capped(RUN_COLUMNS, runs.values_list(*_RUN_FIELDS), limit, _run_row)


AUDIT_COLUMNS = [
    "id",
    "created_at",
    "actor",
    "actor_id",
    "source",
    "action",
    "target_type",
    "target_id",
    "run_id",
    "comment",
    "before",
    "after",
    "request_id",
]
_AUDIT_FIELDS = tuple({"id": "pk", "actor": "actor_label"}.get(c, c) for c in AUDIT_COLUMNS)


def audit_csv_rows(
    entries: QuerySet[AuditEntry], *, limit: int | None = None
) -> Iterator[list[Any]]:
    """The header (AUDIT_COLUMNS) and one row per entry of `entries`, newest first."""
    rows = entries.order_by("-created_at", "-pk").values_list(*_AUDIT_FIELDS)
    return _capped(AUDIT_COLUMNS, rows, limit, list)
