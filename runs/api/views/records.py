"""A run as the API answers it: the RunRecord with the open tickets and this service's
bookkeeping fields."""

from __future__ import annotations

from typing import Any

from agents.pricing import cost_text, run_cost_usd
from runs.api import serializers as s
from runs.api.views.lookups import tickets_query
from runs.models import BackgroundTask, Run, Ticket
from runs.runtime.background import BACKGROUND_KEY
from runs.store import record_from_row, record_to_json


def run_record_json(run: Run, *, fresh: bool = False) -> dict[str, Any]:
    """The full RunRecord (upstream's JSON) with the open tickets in `waiting.tickets`
    and this service's bookkeeping fields. `fresh`: `run` is as just written, with its
    agent and version (a run just created); otherwise it is read again."""
    if not fresh:
        run = Run.objects.select_related("agent", "agent_version").get(pk=run.pk)
    record = record_to_json(record_from_row(run))
    if record["waiting"] is not None:
        tickets = (
            tickets_query().filter(run=run, status=Ticket.Status.PENDING).order_by("created_at")
        )
        record["waiting"]["tickets"] = s.TicketSerializer(tickets, many=True).data
    cancel_at = run.cancel_requested_at
    record.update(
        waiting_reason=run.waiting_reason,
        agent_version=run.agent_version.number,
        retry_of=str(run.retry_of_id) if run.retry_of_id else None,
        last_event_seq=run.last_event_seq,
        cancel_requested_at=int(cancel_at.timestamp()) if cancel_at else None,
        idempotency_key=run.idempotency_key or None,
        cost_usd=cost_text(run_cost_usd(run)),
        priority=run.priority,
        run_mode=run.run_mode,
        schedule_id=str(run.schedule_id) if run.schedule_id else None,
        pending_inputs=run.pending_inputs,
        background_tasks=background_tasks_json(run),
    )
    return record


def background_tasks_json(run: Run) -> list[Any]:
    """The run's background work (no query for a run whose state never listed any)."""
    if not ((run.state or {}).get("extensions") or {}).get(BACKGROUND_KEY):
        return []
    rows = BackgroundTask.objects.filter(run_id=run.pk).order_by("created_at")
    return list(s.BackgroundTaskSerializer(rows, many=True).data)
