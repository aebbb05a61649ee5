"""The archive retention writes before it deletes: one JSON line per removed run (its
row, events, tool calls, tickets and decisions, and its thread's when that goes too), a
gzip member per batch in one file per invocation."""

from __future__ import annotations

import gzip
import json
import logging
import os
import uuid
from collections import defaultdict
from pathlib import Path
from typing import IO, Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet
from django.utils import timezone

from runs.models import (
    BackgroundTask,
    Decision,
    Message,
    PendingInput,
    Run,
    RunEvent,
    Thread,
    Ticket,
    ToolCall,
)
from runs.operations.services.retention_results import RetentionError

logger = logging.getLogger(__name__)


def _rows(query: QuerySet[Any]) -> list[dict[str, Any]]:
    return [dict(row) for row in query.order_by().values()]


def _grouped(rows: list[dict[str, Any]], key: str) -> dict[Any, list[dict[str, Any]]]:
    groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[row[key]].append(row)
    return groups


def archive_lines(ids: list[uuid.UUID], orphans: list[uuid.UUID]) -> bytes:
    """One JSON object per run: its row, events, tool calls, tickets, decisions and
    background tasks; the row, messages and inputs of a thread that goes with the batch
    ride on the line of its last run (every archived message appears once)."""
    runs = sorted(_rows(Run.objects.filter(pk__in=ids)), key=lambda r: (r["created_at"], r["id"]))
    events = _grouped(
        sorted(_rows(RunEvent.objects.filter(run_id__in=ids)), key=lambda r: r["seq"]), "run_id"
    )
    tool_calls = _grouped(
        sorted(_rows(ToolCall.objects.filter(run_id__in=ids)), key=lambda r: r["id"]), "run_id"
    )
    ticket_rows = sorted(
        _rows(Ticket.objects.filter(run_id__in=ids)), key=lambda r: r["created_at"]
    )
    tickets = _grouped(ticket_rows, "run_id")
    ticket_runs = {row["id"]: row["run_id"] for row in ticket_rows}
    decisions = _grouped(
        [
            {**row, "run_id": ticket_runs[row["ticket_id"]]}
            for row in _rows(Decision.objects.filter(ticket__run_id__in=ids))
        ],
        "run_id",
    )
    threads = {row["id"]: row for row in _rows(Thread.objects.filter(pk__in=orphans))}
    messages = _grouped(
        sorted(_rows(Message.objects.filter(thread_id__in=orphans)), key=lambda r: r["seq"]),
        "thread_id",
    )
    background = _grouped(
        sorted(_rows(BackgroundTask.objects.filter(run_id__in=ids)), key=lambda r: r["id"]),
        "run_id",
    )
    inputs = _grouped(
        sorted(_rows(PendingInput.objects.filter(thread_id__in=orphans)), key=lambda r: r["seq"]),
        "thread_id",
    )
    last_run = {run["thread_id"]: run["id"] for run in runs}  # runs are oldest first
    out = []
    for run in runs:
        carries = last_run[run["thread_id"]] == run["id"] and run["thread_id"] in threads
        record = {
            "run": run,
            "events": events.get(run["id"], []),
            "tool_calls": tool_calls.get(run["id"], []),
            "tickets": tickets.get(run["id"], []),
            "decisions": decisions.get(run["id"], []),
            "background_tasks": background.get(run["id"], []),
            "thread": threads[run["thread_id"]] if carries else None,
            "messages": messages.get(run["thread_id"], []) if carries else [],
            "inputs": inputs.get(run["thread_id"], []) if carries else [],
        }
        out.append(json.dumps(record, cls=DjangoJSONEncoder, ensure_ascii=False))
        out.append("\n")
    return "".join(out).encode()


def check_archive_dir(directory: Path) -> None:
    """Before anything is deleted: the directory exists and is writable, or can be
    created (its nearest existing parent is a writable directory)."""
    existing = directory
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if existing != directory and not existing.is_dir():
        raise RetentionError(f"cannot create archive directory {directory}: {existing} is a file")
    if not existing.is_dir():
        raise RetentionError(f"archive directory {directory} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RetentionError(f"archive directory {existing} is not writable")


class Archive:
    """One gzip file per invocation; each batch appends one complete gzip member (readers
    such as `gzip.open` and `zcat` read the members as one stream). The member is on disk
    (fsync) before the batch deletes anything, and cut off again if the batch rolls
    back, so a retried batch is not archived twice."""

    def __init__(self, path: Path, handle: IO[bytes]) -> None:
        self.path = path
        self._handle = handle

    @classmethod
    def open(cls, directory: Path) -> Archive:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RetentionError(f"cannot create archive directory {directory}: {exc}") from exc
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        for suffix in ("", *(f"-{n}" for n in range(1, 100))):
            path = directory / f"runs-{stamp}{suffix}.jsonl.gz"
            try:
                return cls(path, path.open("xb"))
            except FileExistsError:
                continue
            except OSError as exc:
                raise RetentionError(
                    f"cannot write to archive directory {directory}: {exc}"
                ) from exc
        raise RetentionError(f"too many archives named runs-{stamp}* in {directory}")

    def mark(self) -> int:
        return self._handle.tell()

    def write(self, data: bytes) -> None:
        if not data:
            return
        self._handle.write(gzip.compress(data))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def rewind(self, mark: int) -> None:
        try:
            self._handle.seek(mark)
            self._handle.truncate()
            self._handle.flush()
        except OSError:
            logger.exception("could not cut a rolled-back batch off %s", self.path)

    def close(self, *, keep: bool) -> None:
        self._handle.close()
        if not keep:
            self.path.unlink(missing_ok=True)
