"""Runs: list, start, read, cancel, retry, their events, and decisions on their tickets."""

from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.auth import actor_for
from common.api.base import ApiView, parse_uuid, validated
from common.api.errors import error_responses
from common.errors import NotFound
from runs import permissions as perms
from runs import selectors
from runs.api import input_serializers as si
from runs.api import request_serializers as sq
from runs.api import serializers as s
from runs.api import team_serializers as st
from runs.api.pagination import check_cursor
from runs.api.stream import SseView
from runs.api.views.commands import decide, start_run
from runs.api.views.lookups import get_agent, get_run, get_thread, tickets_query
from runs.api.views.params import DECISION_EXAMPLES, DECISION_RESPONSES, IDEMPOTENCY_KEY, RUN_ID
from runs.api.views.records import run_record_json
from runs.models import RunEvent
from runs.services.runs import run_cancel, run_retry, run_set_priority
from runs.services.tickets import normalize_decision_body, ticket_for_target

START_EXAMPLE = OpenApiExample(
    "Start a run",
    value={"agent_id": "assistant", "messages": [{"role": "user", "content": "Note: buy milk"}]},
    request_only=True,
)


# Clients choose JSON or the event stream with Accept; DRF's ?format= stays undocumented.
NO_FORMAT = OpenApiParameter("format", exclude=True)


def run_filters(query: dict[str, Any]) -> selectors.RunFilters:
    """The filters of a validated RunListQuerySerializer (the list and its CSV export)."""
    return selectors.RunFilters(
        status=query.get("status") or "",
        waiting_reason=query.get("waiting_reason") or "",
        agent=query.get("agent_id") or "",
        thread=str(query["thread_id"]) if query.get("thread_id") else "",
        since=query.get("created_after"),
        until=query.get("created_before"),
        q=query.get("q") or "",
        reason=query.get("reason") or "",
        provider=query.get("provider") or "",
        endpoint=query.get("endpoint") or "",
        waiting_tool=query.get("waiting_tool") or "",
        waiting_longer_than=query.get("waiting_longer_than"),
        sort=query["sort"],
    )


class RunListView(SseView):
    required_perms = {"GET": perms.VIEW, "POST": perms.START}

    @extend_schema(
        operation_id="runs_list",
        summary="List runs, newest first",
        tags=["runs"],
        parameters=[sq.RunListQuerySerializer, NO_FORMAT],
        responses={200: s.RunPageSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        query = validated(sq.RunListQuerySerializer, request.query_params)
        cursor = check_cursor(query.get("cursor"), uuid_pk=True)
        filters = run_filters(query)
        filters.agent_ids = perms.visible_agent_ids(request.user)  # the user's teams' runs only
        page = selectors.run_list(filters=filters, cursor=cursor, size=query["limit"])
        items = s.RunSummarySerializer(page.items, many=True).data
        return Response(
            {"items": items, "next_cursor": page.next_cursor, "prev_cursor": page.prev_cursor}
        )

    @extend_schema(
        operation_id="runs_create",
        summary="Start a run",
        description="Starts a run of `agent_id` on a new thread, or on `thread_id`. New input "
        "for a thread whose open run waits continues that run (same id, HTTP 200) and rejects "
        "the run's open tickets as superseded: a `reject` decision by `system` with the comment "
        '"superseded by a new user message" each. The response does not list them; each is a '
        "`ticket_decided` event in /runs/{run_id}/events. A repeat "
        "with the same `idempotency_key` (or `Idempotency-Key` header) by the same user, "
        "through any of their tokens, returns the first run with HTTP 200; other users' keys "
        "never match. On an existing thread whose open run is created or running it is 409: "
        "this endpoint starts or continues runs only; to queue, steer or interrupt, send the "
        "input to POST /threads/{thread_id}/messages or /runs/{run_id}/inputs with a `mode`.",
        tags=["runs"],
        parameters=[IDEMPOTENCY_KEY, NO_FORMAT],
        request=sq.RunCreateSerializer,
        examples=[START_EXAMPLE],
        responses={
            201: OpenApiResponse(s.RunRecordSerializer, description="Started."),
            200: OpenApiResponse(
                s.RunRecordSerializer, description="Same run: idempotency key repeat, or continued."
            ),
            (201, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR,
                description="With `Accept: text/event-stream` (upstream's behaviour): the run's "
                "events as in /runs/{run_id}/events/stream, until its first run_finish or error; "
                "the run id in the Location and X-Run-ID headers.",
            ),
            **error_responses(404, 409, body=True),
        },
    )
    def post(self, request: Request) -> Response | StreamingHttpResponse:
        data = validated(sq.RunCreateSerializer, request.data)
        if data.get("thread_id"):
            agent: Any = get_agent(data["agent_id"], request)
            thread = get_thread(data["thread_id"], request)
        else:  # looked up in the submission's transaction: one transaction for the POST
            agent, thread = (lambda: get_agent(data["agent_id"], request)), None
        key = data.get("idempotency_key") or request.headers.get("Idempotency-Key", "")[:200]
        return start_run(request, agent=agent, messages=data["messages"], thread=thread, key=key)


class RunDetailView(ApiView):
    required_perms = {"GET": perms.VIEW}

    @extend_schema(
        operation_id="runs_retrieve",
        summary="A run: the full RunRecord",
        tags=["runs"],
        parameters=[RUN_ID],
        responses={200: s.RunRecordSerializer, **error_responses(404)},
    )
    def get(self, request: Request, run_id: str) -> Response:
        return Response(run_record_json(get_run(run_id, request)))


class RunCancelView(ApiView):
    required_perms = {"POST": perms.CANCEL}

    @extend_schema(
        operation_id="runs_cancel",
        summary="Cancel a run",
        description="A created or waiting run ends done/cancelled at once; a running one is "
        "asked to stop and ends at its next check (`cancel_requested_at` is set). 409 when "
        "the run is already done.",
        tags=["runs"],
        parameters=[RUN_ID],
        request=st.CancelRequestSerializer,
        responses={200: s.RunRecordSerializer, **error_responses(404, 409, body=True)},
    )
    def post(self, request: Request, run_id: str) -> Response:
        body = request.data if isinstance(request.data, dict) and request.data else {}
        data = validated(st.CancelRequestSerializer, body)
        run = run_cancel(
            run=get_run(run_id, request), actor=actor_for(request), reason=data["reason"]
        )
        return Response(run_record_json(run))


class RunRetryView(ApiView):
    required_perms = {"POST": perms.RETRY}

    @extend_schema(
        operation_id="runs_retry",
        summary="Retry a failed run",
        description="A new run on the same thread from the last checkpoint, pinned to the same "
        "agent version. 409 unless the run failed (error, timeout, stopped).",
        tags=["runs"],
        parameters=[RUN_ID],
        request=None,
        responses={201: s.RunRecordSerializer, **error_responses(404, 409)},
    )
    def post(self, request: Request, run_id: str) -> Response:
        retry = run_retry(run=get_run(run_id, request), actor=actor_for(request))
        return Response(run_record_json(retry), status=201)


class RunPriorityView(ApiView):
    required_perms = {"POST": perms.PRIORITIZE}

    @extend_schema(
        operation_id="runs_priority",
        summary="Change a queued run's priority",
        description="0 (high) … 255 (low): workers take due runs by priority, then age. Only "
        "a created run no worker has taken yet; 409 once it runs, waits or is done.",
        tags=["runs"],
        parameters=[RUN_ID],
        request=si.PrioritySerializer,
        responses={200: s.RunRecordSerializer, **error_responses(404, 409, body=True)},
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = get_run(run_id, request)
        data = validated(si.PrioritySerializer, request.data)
        run = run_set_priority(run=run, priority=data["priority"], actor=actor_for(request))
        return Response(run_record_json(run))


class RunEventsView(ApiView):
    required_perms = {"GET": perms.VIEW}

    @extend_schema(
        operation_id="runs_events",
        summary="A run's persisted events after a seq",
        tags=["events"],
        parameters=[RUN_ID, sq.EventsQuerySerializer],
        responses={200: s.EventPageSerializer, **error_responses(404)},
    )
    def get(self, request: Request, run_id: str) -> Response:
        query = validated(sq.EventsQuerySerializer, request.query_params)
        pk = get_run(run_id, request).pk  # another team's run: not found
        after, limit = query["after_seq"], query["limit"]
        rows = list(RunEvent.objects.filter(run_id=pk, seq__gt=after).order_by("seq")[: limit + 1])
        items = [row.as_frame() for row in rows[:limit]]
        return Response(
            {
                "items": items,
                "next_after_seq": items[-1]["seq"] if items else after,
                "has_more": len(rows) > limit,
            }
        )


class RunDecisionsView(ApiView):
    required_perms = {"POST": perms.DECIDE}

    @extend_schema(
        operation_id="runs_decide",
        summary="Decide one of a run's tickets",
        description="Names the ticket with `ticket_id` (upstream ticket id, tool call id or "
        "global ticket id) or upstream's `toolCallId`. Accepts upstream's body "
        "`{toolCallId, action: resume|cancel, payload}` too. The first decision wins: a later "
        "one gets 409 `already_decided` with the winning decision in `details.decision`.",
        tags=["tickets"],
        parameters=[RUN_ID],
        request=sq.DecisionRequestSerializer,
        examples=DECISION_EXAMPLES,
        responses=DECISION_RESPONSES,
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = get_run(run_id, request)
        data = validated(sq.DecisionRequestSerializer, request.data)
        body = normalize_decision_body(data)
        target = body.get("target")
        ticket = None
        if target:
            try:
                ticket = tickets_query().filter(run=run, pk=parse_uuid(target, "ticket")).first()
            except NotFound:
                ticket = None
        if ticket is None:
            ticket = ticket_for_target(run=run, target=target)
        return decide(request, ticket, body)
