"""One AG-UI run as Server-Sent Events: the run's event log (runs/api/stream.py, the same
reading, waking and gap filling) translated by `AguiTranslator` and written with
`ag-ui-protocol`'s `EventEncoder` (docs/ag-ui.md).

The AG-UI run starts with RUN_STARTED as the stream opens and ends with RUN_FINISHED (an
answer, a cancellation, or an interrupt: tickets to decide) or RUN_ERROR. Waiting on
background work or on a child run does not end it: the stream follows the run until one
of those. A stream that closes without one (its maximum duration, or the run ended
before the events it was given to read) gets its last event from the run's row.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from ag_ui.core import BaseEvent, Interrupt, RunAgentInput
from ag_ui.encoder import EventEncoder
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse, StreamingHttpResponse
from rest_framework.request import Request

from runs.api import stream
from runs.api.agui_events import AguiTranslator, make_interrupt

__all__ = [
    "AguiTranslator",
    "RunAgentInput",
    "agui_finished_response",
    "agui_stream_response",
    "pending_interrupts",
]
from runs.models import Run, Ticket
from runs.sql import release_connection

ENCODER = EventEncoder()
FAILED_REASONS = ("error", "timeout", "stopped")


def encoded(events: list[BaseEvent]) -> list[bytes]:
    return [ENCODER.encode(event).encode() for event in events]


def pending_interrupts(run_id: Any) -> list[Interrupt]:
    """The run's waiting tickets as interrupts, oldest first."""
    tickets = (
        Ticket.objects.filter(run_id=run_id, status=Ticket.Status.PENDING)
        .select_related("tool_call")
        .order_by("created_at")
    )
    return [
        make_interrupt(
            ticket_id=ticket.ticket_id,
            tool_call_id=ticket.tool_call.call_id,
            tool_name=ticket.tool_name,
            arguments=ticket.arguments,
            message=ticket.message,
            resume_mode=ticket.resume_mode,
            run_id=str(run_id),
        )
        for ticket in tickets
    ]


class AguiStream(stream.EventStream):
    """The run's events after seq `after`, as the AG-UI run `translator` describes."""

    def __init__(self, run_id: Any, after: int, translator: AguiTranslator) -> None:
        super().__init__(run_id, after, follow=True)
        self.translator = translator

    def opening(self) -> bytes:
        return f"retry: {stream.RETRY_MS}\n\n".encode() + b"".join(
            encoded(self.translator.started())
        )

    def encode(self, frame: dict[str, Any]) -> list[bytes]:
        chunks = encoded(self.translator.translate(frame))
        if self.translator.finished:
            self.done = True
        return chunks

    def closing(self) -> list[bytes]:
        """The AG-UI run's last event when the log did not give it (reads the run row)."""
        if self.translator.finished:
            return []
        try:
            return encoded(self._last_events())
        finally:
            release_connection()

    def _last_events(self) -> list[BaseEvent]:
        row = Run.objects.filter(pk=self.run_id).values("status", "status_reason").first()
        if row is None:
            return self.translator.failed("the run was deleted", "run_deleted")
        status, reason = row["status"], row["status_reason"]
        if status == Run.Status.DONE:
            if reason == "cancelled":
                return self.translator.finished_with(None, cancelled=True)
            if reason in FAILED_REASONS:
                return self.translator.failed(f"the run ended: {reason}", "run_error")
            return self.translator.finished_with({"status": status, "status_reason": reason})
        interrupts = pending_interrupts(self.run_id) if status == Run.Status.WAITING else []
        if interrupts:
            return self.translator.interrupted(interrupts)
        return self.translator.failed(
            f"the stream closed while the run is {status}; it goes on: POST again on the "
            "thread with no new message to follow it",
            "stream_closed",
        )

    def __iter__(self) -> Iterator[bytes]:
        yield from super().__iter__()
        yield from self.closing()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in super().__aiter__():
            yield chunk
        for chunk in await sync_to_async(self.closing)():
            yield chunk


def agui_stream_response(
    request: Request, run: Run, *, after: int, translator: AguiTranslator
) -> StreamingHttpResponse:
    agui = AguiStream(run.pk, after, translator)
    is_async = isinstance(getattr(request, "_request", request), ASGIRequest)
    response = StreamingHttpResponse(
        agui.__aiter__() if is_async else iter(agui),
        content_type=ENCODER.get_content_type(),
    )
    return _headers(response, run)


def agui_finished_response(run: Run, events: list[BaseEvent]) -> HttpResponse:
    """An AG-UI run that ends at once (it waits for tickets still to decide)."""
    response = HttpResponse(b"".join(encoded(events)), content_type=ENCODER.get_content_type())
    return _headers(response, run)


def _headers(response: Any, run: Run) -> Any:
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    response["X-Run-ID"] = str(run.pk)
    response["Location"] = f"/api/v1/runs/{run.pk}"
    return response
