"""What the API's views do the same way: start a run (its record, or its events as
Server-Sent Events) and decide a ticket (201, or 200 for the same decision_id again)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import StreamingHttpResponse
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Agent
from common.api.auth import actor_for
from runs.api.stream import SseView, event_stream_response
from runs.api.views.records import run_record_json
from runs.models import Thread, Ticket
from runs.services.submission import Submission
from runs.services.submission_flow import submission_accept
from runs.services.tickets import decision_json, decision_submit_or_repeat


def start_run(
    request: Request,
    *,
    agent: Agent | Callable[[], Agent],
    messages: list[Any],
    thread: Thread | None,
    key: str,
) -> Response | StreamingHttpResponse:
    """The submission (mode START) accepted; 201 for a new run, 200 for the same run again (idempotency key
    repeat, or new input continuing the thread's waiting run). With `Accept: text/event-stream`, as
    upstream's `POST /v1/runs`: the run's events as Server-Sent Events instead of its
    record (a new run's from its first, a continued run's from the new input on), until
    its first `run_finish` or `error`; the run id is in `Location` and `X-Run-ID`. `agent`
    may be its lookup, made in the submission's transaction."""
    command = Submission.build_start(
        agent=agent,
        messages=[dict(m) for m in messages],
        thread=thread,
        idempotency_key=key,
        actor=actor_for(request),
    )
    outcome = submission_accept(command)
    run, created = outcome.run, outcome.created
    assert run is not None  # START never leaves input waiting
    status = 201 if created else 200
    if not SseView.wants_stream(request):
        return Response(run_record_json(run, fresh=created), status=status)
    after = 0 if created else run.last_event_seq  # a continued run: from the new input on
    response = event_stream_response(request, run.pk, after=after, follow=False, status=status)
    response["Location"] = f"/api/v1/runs/{run.pk}"
    response["X-Run-ID"] = str(run.pk)
    return response


def decide(request: Request, ticket: Ticket, body: dict[str, Any]) -> Response:
    decision, repeat = decision_submit_or_repeat(
        ticket=ticket,
        action=body["action"],
        arguments=body.get("arguments"),
        payload=body.get("payload"),
        comment=body.get("comment") or "",
        decision_id=body.get("decision_id") or None,
        actor=actor_for(request),
    )
    result = {
        **decision_json(decision),
        "run_id": str(ticket.run_id),
        "ticket_id": ticket.ticket_id,
    }
    return Response(result, status=200 if repeat else 201)
