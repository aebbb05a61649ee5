"""What the API's run, ticket and thread views share: path parameters and examples of
the schema, the lookups of a path's id (404 when there is no such row), the RunRecord
answer, and starting a run or deciding a ticket."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Agent
from agents.pricing import cost_text, run_cost_usd
from agents.selectors import agents_with_latest_version
from common.api.auth import actor_for
from common.api.base import get_or_not_found
from common.api.errors import error_responses
from common.errors import Forbidden, NotFound
from common.teams import ensure_not_frozen_only
from runs.api import serializers as s
from runs.api.stream import SseView, event_stream_response
from runs.models import BackgroundTask, PendingInput, Run, Thread, Ticket
from runs.runtime.background import BACKGROUND_KEY
from runs.services.submission import Submission
from runs.services.submission_flow import submission_accept
from runs.services.tickets import decision_json, decision_submit_or_repeat
from runs.store import record_from_row, record_to_json


def path_uuid(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, OpenApiTypes.UUID, OpenApiParameter.PATH, description=description)


RUN_ID = path_uuid("run_id", "Run id.")
TICKET_ID = path_uuid("ticket_id", "Global ticket id (the `id` of a ticket).")
THREAD_ID = path_uuid("thread_id", "Thread id.")
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Same as idempotency_key in the body (the body wins).",
)

DECISION_EXAMPLES = [
    OpenApiExample(
        "Approve", value={"action": "approve", "ticket_id": "perm_call_1"}, request_only=True
    ),
    OpenApiExample(
        "Edit",
        value={"action": "edit", "ticket_id": "perm_call_1", "arguments": {"title": "milk"}},
        request_only=True,
    ),
    OpenApiExample(
        "Reject",
        value={"action": "reject", "ticket_id": "perm_call_1", "comment": "not now"},
        request_only=True,
    ),
    OpenApiExample(
        "Respond",
        value={"action": "respond", "ticket_id": "call_7", "payload": "Yes, Tuesday"},
        request_only=True,
    ),
    OpenApiExample(
        "Upstream body",
        value={"toolCallId": "call_1", "action": "resume", "payload": {"approved": True}},
        request_only=True,
    ),
]


def allowed(request: Request, obj: Any, what: str, value: Any, **details: Any) -> Any:
    """`obj` when the request's user may see it and, in its team, do what the view requires
    for the request's method. Another team's object is not found, in the words of an
    unknown id (`details` as its lookup gives them: its existence is not confirmed); a
    visible one the role there does not allow is 403."""
    user = request.user
    if not user.has_perm(VIEW_PERMS.get(type(obj), "runs.view_run"), obj):
        raise NotFound(f"{what} {value} not found", details or None)
    view = (getattr(request, "parser_context", None) or {}).get("view")
    perm = getattr(view, "required_perms", {}).get(request.method) if view else None
    if perm and not user.has_perm(perm, obj):
        ensure_not_frozen_only(user, perm, obj)  # frozen: 409 team_frozen, not 403
        raise Forbidden(f"your role in this {what}'s team does not allow this")
    return obj


VIEW_PERMS: dict[type, str] = {
    Thread: "runs.view_thread",
    Ticket: "runs.view_ticket",
    PendingInput: "runs.view_pendinginput",
}


def get_run(run_id: Any, request: Request) -> Run:
    run = get_or_not_found(Run.objects.select_related("agent", "agent_version"), "run", run_id)
    return allowed(request, run, "run", run_id)


def get_thread(thread_id: Any, request: Request) -> Thread:
    return allowed(
        request, get_or_not_found(Thread.objects.all(), "thread", thread_id), "thread", thread_id
    )


def get_agent(slug: str, request: Request | None = None) -> Agent:
    """The agent; with `request`, only one of the user's teams where the request's action
    (starting a run) is allowed."""
    # its team's freeze and its model's prices, for run_start
    agents = agents_with_latest_version().select_related("team", "model")
    agent = get_or_not_found(agents, "agent", slug, by="slug", agent_id=slug)
    return agent if request is None else allowed(request, agent, "agent", slug, agent_id=slug)


def get_ticket(ticket_id: Any, request: Request) -> Ticket:
    ticket = get_or_not_found(tickets_query(), "ticket", ticket_id)
    return allowed(request, ticket, "ticket", ticket_id)


def tickets_query() -> QuerySet[Ticket]:
    return Ticket.objects.select_related(
        "run__agent", "tool_call", "decision", "claimed_by", "assigned_to"
    )


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


DECISION_RESPONSES = {
    201: OpenApiResponse(
        s.DecisionResultSerializer,
        description="Decided; the run resumes when it was its last open ticket.",
    ),
    200: OpenApiResponse(
        s.DecisionResultSerializer, description="The same decision_id again: the first result."
    ),
    **error_responses(404, 409, body=True),
}
