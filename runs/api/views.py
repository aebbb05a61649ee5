"""Runs, events, decisions, tickets, threads and messages, and the audit log.

Every write goes through `runs.services` (the same code as the pages and the CLI), with
an Actor naming the user and, for a token, which token."""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Agent
from agents.pricing import cost_text, run_cost_usd
from agents.services import agents_with_latest_version
from runs import permissions as perms
from runs import selectors
from runs.models import AuditEntry, Message, Run, RunEvent, Thread, Ticket
from runs.selectors import keyset_page
from runs.services.audit import audit_record
from runs.services.errors import InvalidInput, NotFound
from runs.services.runs import run_cancel, run_retry, run_submit
from runs.services.tickets import (
    decision_json,
    decision_submit_or_repeat,
    normalize_decision_body,
    ticket_for_target,
)
from runs.store import record_from_row, record_to_json

from . import serializers as s
from .auth import actor_for
from .base import ApiView, parse_uuid, validated
from .errors import error_responses
from .pagination import check_cursor
from .stream import SseView, event_stream_response

VIEW_THREAD = "runs.view_thread"
VIEW_TICKET = "runs.view_ticket"


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

START_EXAMPLE = OpenApiExample(
    "Start a run",
    value={"agent_id": "assistant", "messages": [{"role": "user", "content": "Note: buy milk"}]},
    request_only=True,
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


# --- shared -------------------------------------------------------------------------------------------


def get_run(run_id: Any) -> Run:
    pk = parse_uuid(run_id, "run")
    run = Run.objects.select_related("agent", "agent_version").filter(pk=pk).first()
    if run is None:
        raise NotFound(f"run {run_id} not found")
    return run


def get_thread(thread_id: Any) -> Thread:
    pk = parse_uuid(thread_id, "thread")
    thread = Thread.objects.filter(pk=pk).first()
    if thread is None:
        raise NotFound(f"thread {thread_id} not found")
    return thread


def get_agent(slug: str) -> Agent:
    agent = agents_with_latest_version().filter(slug=slug).first()
    if agent is None:
        raise NotFound(f"agent {slug} not found", {"agent_id": slug})
    return agent


def tickets_query() -> Any:
    return Ticket.objects.select_related("run__agent", "tool_call", "decision")


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
    )
    return record


def _start(
    request: Request, *, agent: Agent, messages: list[Any], thread: Thread | None, key: str
) -> Response | StreamingHttpResponse:
    """run_submit; 201 for a new run, 200 for the same run again (idempotency key repeat, or
    new input continuing the thread's waiting run). With `Accept: text/event-stream`, as
    upstream's `POST /v1/runs`: the run's events as Server-Sent Events instead of its
    record (a new run's from its first, a continued run's from the new input on), until
    its first `run_finish` or `error`; the run id is in `Location` and `X-Run-ID`."""
    run, created = run_submit(
        agent=agent,
        messages=[dict(m) for m in messages],
        thread=thread,
        idempotency_key=key,
        actor=actor_for(request),
    )
    status = 201 if created else 200
    if not SseView.wants_stream(request):
        return Response(run_record_json(run, fresh=created), status=status)
    after = 0 if created else run.last_event_seq  # a continued run: from the new input on
    response = event_stream_response(request, run.pk, after=after, follow=False, status=status)
    response["Location"] = f"/api/v1/runs/{run.pk}"
    response["X-Run-ID"] = str(run.pk)
    return response


def _decide(request: Request, ticket: Ticket, body: dict[str, Any]) -> Response:
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


# --- runs -----------------------------------------------------------------------------------------------


# Clients choose JSON or the event stream with Accept; DRF's ?format= stays undocumented.
NO_FORMAT = OpenApiParameter("format", exclude=True)


class RunListView(SseView):
    required_perms = {"GET": perms.VIEW, "POST": perms.START}

    @extend_schema(
        operation_id="runs_list",
        summary="List runs, newest first",
        tags=["runs"],
        parameters=[s.RunListQuerySerializer, NO_FORMAT],
        responses={200: s.RunPageSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        query = validated(s.RunListQuerySerializer, request.query_params)
        cursor = check_cursor(query.get("cursor"), uuid_pk=True)
        filters = selectors.RunFilters(
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
        )
        page = selectors.run_list(filters=filters, cursor=cursor, size=query["limit"])
        items = s.RunSummarySerializer(page.items, many=True).data
        return Response({"items": items, "next_cursor": page.next_cursor})

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
        "never match.",
        tags=["runs"],
        parameters=[IDEMPOTENCY_KEY, NO_FORMAT],
        request=s.RunCreateSerializer,
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
        data = validated(s.RunCreateSerializer, request.data)
        agent = get_agent(data["agent_id"])
        thread = get_thread(data["thread_id"]) if data.get("thread_id") else None
        key = data.get("idempotency_key") or request.headers.get("Idempotency-Key", "")[:200]
        return _start(request, agent=agent, messages=data["messages"], thread=thread, key=key)


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
        return Response(run_record_json(get_run(run_id)))


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
        request=None,
        responses={200: s.RunRecordSerializer, **error_responses(404, 409)},
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = run_cancel(run=get_run(run_id), actor=actor_for(request))
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
        retry = run_retry(run=get_run(run_id), actor=actor_for(request))
        return Response(run_record_json(retry), status=201)


class RunEventsView(ApiView):
    required_perms = {"GET": perms.VIEW}

    @extend_schema(
        operation_id="runs_events",
        summary="A run's persisted events after a seq",
        tags=["events"],
        parameters=[RUN_ID, s.EventsQuerySerializer],
        responses={200: s.EventPageSerializer, **error_responses(404)},
    )
    def get(self, request: Request, run_id: str) -> Response:
        query = validated(s.EventsQuerySerializer, request.query_params)
        pk = parse_uuid(run_id, "run")
        if not Run.objects.filter(pk=pk).exists():
            raise NotFound(f"run {run_id} not found")
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
        request=s.DecisionRequestSerializer,
        examples=DECISION_EXAMPLES,
        responses=DECISION_RESPONSES,
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = get_run(run_id)
        data = validated(s.DecisionRequestSerializer, request.data)
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
        return _decide(request, ticket, body)


# --- tickets -----------------------------------------------------------------------------------------------


def get_ticket(ticket_id: Any) -> Ticket:
    pk = parse_uuid(ticket_id, "ticket")
    ticket = tickets_query().filter(pk=pk).first()
    if ticket is None:
        raise NotFound(f"ticket {ticket_id} not found")
    return ticket


class TicketListView(ApiView):
    required_perms = {"GET": VIEW_TICKET}

    @extend_schema(
        operation_id="tickets_list",
        summary="Tickets across runs (the approvals inbox)",
        description="Pending tickets oldest first (default), or decided/cancelled ones newest "
        "first (by creation), a page at a time: pass `next_cursor` back as `cursor`.",
        tags=["tickets"],
        parameters=[s.TicketListQuerySerializer],
        responses={200: s.TicketPageSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        query = validated(s.TicketListQuerySerializer, request.query_params)
        page = selectors.ticket_list(
            status=query["status"],
            agent=query.get("agent_id") or "",
            tool=query.get("tool") or "",
            cursor=check_cursor(query.get("cursor"), uuid_pk=True),
            size=query["limit"],
        )
        items = s.TicketSerializer(page.items, many=True).data
        return Response({"items": items, "next_cursor": page.next_cursor})


class TicketDetailView(ApiView):
    required_perms = {"GET": VIEW_TICKET}

    @extend_schema(
        operation_id="tickets_retrieve",
        summary="A ticket",
        tags=["tickets"],
        parameters=[TICKET_ID],
        responses={200: s.TicketSerializer, **error_responses(404)},
    )
    def get(self, request: Request, ticket_id: str) -> Response:
        return Response(s.TicketSerializer(get_ticket(ticket_id)).data)


class TicketDecisionView(ApiView):
    required_perms = {"POST": perms.DECIDE}

    @extend_schema(
        operation_id="tickets_decide",
        summary="Decide a ticket",
        description="approve | edit | reject | respond (or upstream's resume | cancel). The "
        "first decision wins: a later one gets 409 `already_decided` with the winning "
        "decision in `details.decision`; the same `decision_id` again returns the first "
        "result (HTTP 200).",
        tags=["tickets"],
        parameters=[TICKET_ID],
        request=s.DecisionRequestSerializer,
        examples=DECISION_EXAMPLES,
        responses=DECISION_RESPONSES,
    )
    def post(self, request: Request, ticket_id: str) -> Response:
        ticket = get_ticket(ticket_id)
        data = validated(s.DecisionRequestSerializer, request.data)
        return _decide(request, ticket, normalize_decision_body(data))


# --- threads ----------------------------------------------------------------------------------------------


class ThreadListView(ApiView):
    required_perms = {"GET": VIEW_THREAD, "POST": perms.START}

    @extend_schema(
        operation_id="threads_list",
        summary="List threads, newest first",
        tags=["threads"],
        parameters=[s.ThreadListQuerySerializer],
        responses={200: s.ThreadPageSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        query = validated(s.ThreadListQuerySerializer, request.query_params)
        cursor = check_cursor(query.get("cursor"), uuid_pk=True)
        page = selectors.thread_list(cursor=cursor, q=(query.get("q") or "").strip())
        items = s.ThreadSerializer(page.items, many=True).data
        return Response({"items": items, "next_cursor": page.next_cursor})

    @extend_schema(
        operation_id="threads_create",
        summary="Create an empty thread",
        tags=["threads"],
        request=s.ThreadCreateSerializer,
        responses={201: s.ThreadSerializer, **error_responses(body=True)},
    )
    def post(self, request: Request) -> Response:
        data = validated(s.ThreadCreateSerializer, request.data)
        thread = Thread.objects.create(
            title=data["title"], resource_id=data["resource_id"], custom=data["custom"]
        )
        audit_record(
            actor=actor_for(request),
            action="thread.create",
            target_type="thread",
            target_id=thread.pk,
            after={"title": thread.title, "resource_id": thread.resource_id},
        )
        return Response(s.ThreadSerializer(thread).data, status=201)


class ThreadDetailView(ApiView):
    required_perms = {"GET": VIEW_THREAD}

    @extend_schema(
        operation_id="threads_retrieve",
        summary="A thread and its runs",
        tags=["threads"],
        parameters=[THREAD_ID],
        responses={200: s.ThreadDetailSerializer, **error_responses(404)},
    )
    def get(self, request: Request, thread_id: str) -> Response:
        return Response(s.ThreadDetailSerializer(get_thread(thread_id)).data)


class ThreadMessagesView(ApiView):
    required_perms = {"GET": VIEW_THREAD, "POST": perms.START}

    @extend_schema(
        operation_id="threads_messages_list",
        summary="A thread's messages after a seq",
        tags=["threads"],
        parameters=[THREAD_ID, s.ThreadMessagesQuerySerializer],
        responses={200: s.MessagePageSerializer, **error_responses(404)},
    )
    def get(self, request: Request, thread_id: str) -> Response:
        thread = get_thread(thread_id)
        query = validated(s.ThreadMessagesQuerySerializer, request.query_params)
        after, limit = query["after_seq"], query["limit"]
        messages = Message.objects.filter(thread=thread, seq__gt=after).exclude(
            visibility="internal"
        )
        if query.get("run_id"):
            run = Run.objects.filter(pk=query["run_id"], thread=thread).first()
            if run is None:
                raise NotFound(f"run {query['run_id']} not found in thread {thread.pk}")
            trigger = set((run.request or {}).get("input_message_ids") or [])
            trigger |= set((run.input or {}).get("trigger_message_ids") or [])
            ids = [parse_uuid(i, "message") for i in trigger]
            messages = messages.filter(Q(produced_by_run=run) | Q(pk__in=ids))
        rows = list(messages.order_by("seq")[: limit + 1])
        items = s.MessageSerializer(rows[:limit], many=True).data
        return Response(
            {
                "items": items,
                "next_after_seq": items[-1]["seq"] if items else after,
                "has_more": len(rows) > limit,
            }
        )

    @extend_schema(
        operation_id="threads_messages_create",
        summary="Send messages to a thread",
        description="Continues the thread's open run when it waits for input (same run, HTTP "
        "200; its open tickets are rejected as superseded), else starts a run (HTTP 201) of "
        "`agent_id`, by default the agent of the thread's latest run. 409 while a run of the "
        "thread is executing.",
        tags=["threads"],
        parameters=[THREAD_ID, IDEMPOTENCY_KEY],
        request=s.ThreadMessageCreateSerializer,
        responses={
            201: OpenApiResponse(s.RunRecordSerializer, description="A run started."),
            200: OpenApiResponse(s.RunRecordSerializer, description="The waiting run continued."),
            **error_responses(404, 409, body=True),
        },
    )
    def post(self, request: Request, thread_id: str) -> Response:
        thread = get_thread(thread_id)
        data = validated(s.ThreadMessageCreateSerializer, request.data)
        if data.get("agent_id"):
            agent = get_agent(data["agent_id"])
        else:
            latest = (
                Run.objects.filter(thread=thread)
                .select_related("agent")
                .order_by("-created_at")
                .first()
            )
            if latest is None:
                raise InvalidInput(
                    "agent_id is required: the thread has no run to take the agent from",
                    {"agent_id": ["This field is required."]},
                )
            agent = latest.agent
        key = data.get("idempotency_key") or request.headers.get("Idempotency-Key", "")[:200]
        return _start(request, agent=agent, messages=data["messages"], thread=thread, key=key)


# --- audit -----------------------------------------------------------------------------------------------


class AuditListView(ApiView):
    required_perms = {"GET": perms.AUDIT}

    @extend_schema(
        operation_id="audit_list",
        summary="The audit log, newest first",
        description="Runs started and continued, cancels, retries, decisions (ticket.*), "
        "threads created, API tokens created and revoked.",
        tags=["audit"],
        parameters=[s.AuditQuerySerializer],
        responses={200: s.AuditPageSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        query = validated(s.AuditQuerySerializer, request.query_params)
        cursor = check_cursor(query.get("cursor"), uuid_pk=False)
        entries = AuditEntry.objects.all()
        if query.get("action"):
            entries = entries.filter(action__startswith=query["action"])
        if query.get("actor"):
            entries = entries.filter(
                Q(actor_label=query["actor"]) | Q(actor__username=query["actor"])
            )
        if query.get("run"):
            entries = entries.filter(run_id=query["run"])
        page = keyset_page(entries, cursor, query["limit"])
        items = s.AuditEntrySerializer(page.items, many=True).data
        return Response({"items": items, "next_cursor": page.next_cursor})
