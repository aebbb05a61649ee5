"""Exports (docs/exports.md): a run as one JSON document, and what every export shares:
rows read with `.iterator()` in chunks of CHUNK_ROWS and handed on as they come, joined
into pieces of about FLUSH_CHARS characters (`in_pieces`), so what an export holds in
memory does not grow with the rows it writes, and its number of queries does not either.
The runs list and the audit log as CSV: `runs.operations.services.exports_csv`."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from agents.pricing import cost_text, run_cost_usd
from runs.message_rows import message_range
from runs.models import (
    BackgroundTask,
    Decision,
    Message,
    PendingInput,
    Run,
    RunEvent,
    Ticket,
    ToolCall,
)

SCHEMA = "awaken-ops.run-export"
SCHEMA_VERSION = 1
CHUNK_ROWS = 2000  # rows per database round trip
FLUSH_CHARS = 64 * 1024  # about this much text per piece of the response


def export_filename(kind: str, extension: str) -> str:
    """e.g. runs-20250102-030405.csv (UTC)."""
    return f"{kind}-{timezone.now().strftime('%Y%m%d-%H%M%S')}.{extension}"


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _text(value: Any) -> str | None:
    return str(value) if value is not None else None


def _price(value: Decimal | None) -> str | None:
    return cost_text(value)


def in_pieces(parts: Iterable[str]) -> Iterator[bytes]:
    """`parts` joined into pieces of about FLUSH_CHARS, as UTF-8 (a character UTF-8
    cannot hold, which no stored text should contain, becomes "?" instead of breaking the
    download half-way)."""
    buffer: list[str] = []
    size = 0
    for part in parts:
        buffer.append(part)
        size += len(part)
        if size >= FLUSH_CHARS:
            yield "".join(buffer).encode("utf-8", "replace")
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer).encode("utf-8", "replace")


# --- a run as one JSON document -------------------------------------------------------------


def run_for_export(run_id: Any) -> Run | None:
    return Run.objects.select_related("agent", "agent_version").filter(pk=run_id).first()


def run_export(run: Run, *, exported_at: dt.datetime | None = None) -> dict[str, Any]:
    """The whole document as a dict (JSON-safe: ids and times are strings)."""
    head, sections = _document(run, exported_at)
    return {**head, **{name: list(rows) for name, rows in sections}}


def run_export_chunks(run: Run, *, exported_at: dt.datetime | None = None) -> Iterator[bytes]:
    """The same document as JSON text, written as its rows are read."""
    return in_pieces(_json_parts(run, exported_at))


def _json_parts(run: Run, exported_at: dt.datetime | None) -> Iterator[str]:
    head, sections = _document(run, exported_at)
    yield json.dumps(head)[:-1]  # the head's members, the object left open
    for name, rows in sections:
        yield f", {json.dumps(name)}: ["
        separator = ""
        for row in rows:
            yield separator + json.dumps(row)
            separator = ", "
        yield "]"
    yield "}\n"


def _document(
    run: Run, exported_at: dt.datetime | None
) -> tuple[dict[str, Any], list[tuple[str, Iterator[dict[str, Any]]]]]:
    """The document's small members, read now, and its lists, read when iterated."""
    seqs = message_range(run)
    head = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "exported_at": _iso(exported_at or timezone.now()),
        "run": _record(run),
        "message_range": {"from_seq": seqs[0], "to_seq": seqs[1]} if seqs else None,
    }
    sections = [
        ("messages", _messages(run, seqs)),
        ("tool_calls", _tool_calls(run)),
        ("events", _events(run)),
        ("tickets", _tickets(run)),
        ("background_tasks", _background_tasks(run)),
        ("inputs", _inputs(run)),
    ]
    return head, sections


def _ids(runs: QuerySet[Run]) -> list[str]:
    return [str(pk) for pk in runs.order_by("created_at", "pk").values_list("pk", flat=True)]


def _record(run: Run) -> dict[str, Any]:
    return {
        "id": str(run.pk),
        "thread_id": str(run.thread_id),
        "agent": run.agent.slug,
        "agent_version": run.agent_version.number,
        "parent_run_id": _text(run.parent_run_id),
        "parent_tool_call_id": run.parent_tool_call_id or None,
        "child_run_ids": _ids(Run.objects.filter(parent_run_id=run.pk)),
        "retry_of": _text(run.retry_of_id),
        "retried_as": _ids(Run.objects.filter(retry_of_id=run.pk)),
        "origin": run.origin,
        "run_mode": run.run_mode,
        "schedule_id": _text(run.schedule_id),
        "priority": run.priority,
        "status": run.status,
        "status_reason": run.status_reason or None,
        "waiting_reason": run.waiting_reason,
        "termination_reason": run.termination_reason,
        "final_output": run.final_output,
        "error": run.error_payload,
        "waiting": run.waiting,
        "request": run.request,
        "input": run.input,
        "output": run.output,
        "state": run.state,
        "usage": {
            "steps": run.steps,
            "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens,
        },
        "cost_usd": cost_text(run_cost_usd(run)),
        "input_price_per_million_usd": _price(run.input_price_per_million_usd),
        "output_price_per_million_usd": _price(run.output_price_per_million_usd),
        "last_event_seq": run.last_event_seq,
        "open_tickets": run.open_tickets,
        "pending_inputs": run.pending_inputs,
        "attempt": run.attempt,
        "recoveries": run.recoveries,
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "updated_at": _iso(run.updated_at),
        "cancel_requested_at": _iso(run.cancel_requested_at),
    }


def _messages(run: Run, seqs: tuple[int, int] | None) -> Iterator[dict[str, Any]]:
    """The thread's messages in the run's range (without one, those it produced), in
    order; internal ones are left out, as the API leaves them out."""
    rows = Message.objects.filter(thread_id=run.thread_id).exclude(visibility="internal")
    if seqs is None:
        rows = rows.filter(produced_by_run_id=run.pk)
    else:
        rows = rows.filter(seq__gte=seqs[0], seq__lte=seqs[1])
    fields = (
        "pk",
        "seq",
        "role",
        "content",
        "tool_calls",
        "tool_call_id",
        "produced_by_run_id",
        "step_index",
        "created_at",
    )
    for pk, seq, role, content, calls, call_id, produced_by, step, created in (
        rows.order_by("seq").values_list(*fields).iterator(chunk_size=CHUNK_ROWS)
    ):
        yield {
            "id": str(pk),
            "seq": seq,
            "role": role,
            "content": content,
            "tool_calls": calls,
            "tool_call_id": call_id or None,
            "run_id": _text(produced_by),
            "step_index": step,
            "created_at": _iso(created),
        }


def _tool_calls(run: Run) -> Iterator[dict[str, Any]]:
    rows = ToolCall.objects.filter(run_id=run.pk).order_by("created_at", "pk")
    for call in rows.iterator(chunk_size=CHUNK_ROWS):
        yield {
            "call_id": call.call_id,
            "tool_name": call.tool_name,
            "arguments": call.arguments,
            "status": call.status,
            "resume_mode": call.resume_mode,
            "suspension_id": call.suspension_id or None,
            "suspension_reason": call.suspension_reason or None,
            "resume_input": call.resume_input,
            "step_index": call.step_index,
            "created_at": _iso(call.created_at),
            "updated_at": _iso(call.updated_at),
        }


def _events(run: Run) -> Iterator[dict[str, Any]]:
    """Every event of the run, in seq order."""
    rows = RunEvent.objects.filter(run_id=run.pk).order_by("seq")
    fields = ("seq", "event_type", "created_at", "payload")
    for seq, kind, created, payload in rows.values_list(*fields).iterator(chunk_size=CHUNK_ROWS):
        yield {"seq": seq, "event_type": kind, "created_at": _iso(created), "payload": payload}


def _tickets(run: Run) -> Iterator[dict[str, Any]]:
    """The run's tickets, oldest first, each with its decision (null while undecided)."""
    rows = (
        Ticket.objects.filter(run_id=run.pk)
        .select_related("tool_call", "decision", "assigned_to", "claimed_by")
        .order_by("created_at", "pk")
    )
    for ticket in rows.iterator(chunk_size=CHUNK_ROWS):
        try:
            decision: Decision | None = ticket.decision
        except Decision.DoesNotExist:
            decision = None
        yield {
            "id": str(ticket.pk),
            "ticket_id": ticket.ticket_id,
            "tool_call_id": ticket.tool_call.call_id,
            "tool_name": ticket.tool_name,
            "arguments": ticket.arguments,
            "resume_mode": ticket.resume_mode,
            "reason": ticket.reason or None,
            "message": ticket.message or None,
            "status": ticket.status,
            "deadline_at": _iso(ticket.deadline_at),
            "default_action": ticket.default_action,
            "assigned_to": ticket.assigned_to.username if ticket.assigned_to else None,
            "claimed_by": ticket.claimed_by.username if ticket.claimed_by else None,
            "created_at": _iso(ticket.created_at),
            "closed_at": _iso(ticket.closed_at),
            "decision": _decision(decision) if decision is not None else None,
        }


def _decision(decision: Decision) -> dict[str, Any]:
    return {
        "id": str(decision.pk),
        "action": decision.action,
        "decided_by": decision.actor_label,
        "comment": decision.comment,
        "decision_id": decision.decision_id,
        "payload": decision.payload,
        "arguments_before": decision.arguments_before,
        "arguments_after": decision.arguments_after,
        "created_at": _iso(decision.created_at),
    }


def _background_tasks(run: Run) -> Iterator[dict[str, Any]]:
    rows = BackgroundTask.objects.filter(run_id=run.pk).order_by("created_at", "pk")
    for task in rows.iterator(chunk_size=CHUNK_ROWS):
        yield {
            "id": str(task.pk),
            "tool_call_id": task.tool_call_id,
            "kind": task.kind,
            "label": task.label,
            "arguments": task.arguments,
            "status": task.status,
            "result": task.result,
            "error": task.error or None,
            "attempt": task.attempt,
            "created_at": _iso(task.created_at),
            "started_at": _iso(task.started_at),
            "finished_at": _iso(task.finished_at),
            "delivered_at": _iso(task.delivered_at),
        }


def _inputs(run: Run) -> Iterator[dict[str, Any]]:
    """Input sent while the run was open: steering it, or delivered to it."""
    rows = PendingInput.objects.filter(Q(run_id=run.pk) | Q(delivered_run_id=run.pk))
    for sent in rows.order_by("seq").iterator(chunk_size=CHUNK_ROWS):
        yield {
            "id": str(sent.pk),
            "seq": sent.seq,
            "mode": sent.mode,
            "status": sent.status,
            "boundary": sent.boundary or None,
            "priority": sent.priority,
            "messages": sent.messages,
            "message_ids": sent.message_ids,
            "sent_by": sent.actor_label,
            "delivered_to_this_run": sent.delivered_run_id == run.pk,
            "created_at": _iso(sent.created_at),
            "closed_at": _iso(sent.closed_at),
        }
