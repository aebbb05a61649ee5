"""Tickets across runs (the approvals inbox) and decisions on them."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.base import ApiView, validated
from common.api.errors import error_responses
from runs import permissions as perms
from runs.api import request_serializers as sq
from runs.api import serializers as s
from runs.api.pagination import check_cursor
from runs.api.views.commands import decide
from runs.api.views.lookups import get_ticket
from runs.api.views.params import DECISION_EXAMPLES, DECISION_RESPONSES, TICKET_ID
from runs.decisions.selectors.inbox import ticket_list
from runs.services.tickets import normalize_decision_body


class TicketListView(ApiView):
    required_perms = {"GET": perms.VIEW_TICKET}

    @extend_schema(
        operation_id="tickets_list",
        summary="Tickets across runs (the approvals inbox)",
        description="Pending tickets oldest first (default), or decided/cancelled ones newest "
        "first (by creation), a page at a time: pass `next_cursor` back as `cursor`.",
        tags=["tickets"],
        parameters=[sq.TicketListQuerySerializer],
        responses={200: s.TicketPageSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        query = validated(sq.TicketListQuerySerializer, request.query_params)
        page = ticket_list(
            status=query["status"],
            agent=query.get("agent_id") or "",
            tool=query.get("tool") or "",
            cursor=check_cursor(query.get("cursor"), uuid_pk=True),
            size=query["limit"],
            waiting_longer_than=query.get("waiting_longer_than"),
            who=query["who"],
            user=request.user,
            agent_ids=perms.visible_agent_ids(request.user, perms.VIEW_TICKET),
        )
        items = s.TicketSerializer(page.items, many=True).data
        return Response({"items": items, "next_cursor": page.next_cursor})


class TicketDetailView(ApiView):
    required_perms = {"GET": perms.VIEW_TICKET}

    @extend_schema(
        operation_id="tickets_retrieve",
        summary="A ticket",
        tags=["tickets"],
        parameters=[TICKET_ID],
        responses={200: s.TicketSerializer, **error_responses(404)},
    )
    def get(self, request: Request, ticket_id: str) -> Response:
        return Response(s.TicketSerializer(get_ticket(ticket_id, request)).data)


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
        request=sq.DecisionRequestSerializer,
        examples=DECISION_EXAMPLES,
        responses=DECISION_RESPONSES,
    )
    def post(self, request: Request, ticket_id: str) -> Response:
        ticket = get_ticket(ticket_id, request)
        data = validated(sq.DecisionRequestSerializer, request.data)
        return decide(request, ticket, normalize_decision_body(data))
