"""Claims and assignment of tickets (runs/decisions/services/claims.py): who is on a ticket now,
and whose it is. Neither stops a decision; they tell the other operators."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.auth import actor_for
from common.api.base import ApiView, validated
from common.api.errors import error_responses
from runs import permissions as perms
from runs.api import serializers as s
from runs.api.views.lookups import get_ticket
from runs.api.views.params import TICKET_ID
from runs.decisions.api.claim_serializers import AssignRequestSerializer, ClaimRequestSerializer
from runs.decisions.services.claims import (
    assignee_named,
    may_release_any,
    ticket_assign,
    ticket_claim,
    ticket_release,
)

CLAIM_CONFLICT = (
    "409 `conflict` when someone else is on it (`details.claimant`, `details.claimed_until`) "
    "or the ticket is no longer pending (`details.ticket_status`)."
)


class TicketClaimView(ApiView):
    required_perms = {"POST": perms.DECIDE, "DELETE": perms.DECIDE}

    @extend_schema(
        operation_id="tickets_claim",
        summary="Claim a ticket (or renew your claim)",
        description="Say you are on a pending ticket for `minutes` (default 5, 1 to 60): it "
        "succeeds when nobody is on it, their claim has lapsed, or it is yours (a renewal). "
        + CLAIM_CONFLICT
        + " A claim does not stop others deciding it; a decision ends it.",
        tags=["tickets"],
        parameters=[TICKET_ID],
        request=ClaimRequestSerializer,
        examples=[OpenApiExample("Ten minutes", value={"minutes": 10}, request_only=True)],
        responses={200: s.TicketSerializer, **error_responses(404, 409, body=True)},
    )
    def post(self, request: Request, ticket_id: str) -> Response:
        ticket = get_ticket(ticket_id, request)
        data = validated(ClaimRequestSerializer, request.data)
        ticket = ticket_claim(ticket, actor_for(request), minutes=data["minutes"])
        return Response(s.TicketSerializer(ticket).data)

    @extend_schema(
        operation_id="tickets_release",
        summary="Release a claim",
        description="End your claim on a ticket (an admin may end anyone's). Releasing a "
        "ticket nobody is on changes nothing. 409 `conflict` when someone else is on it.",
        tags=["tickets"],
        parameters=[TICKET_ID],
        responses={200: s.TicketSerializer, **error_responses(404, 409)},
    )
    def delete(self, request: Request, ticket_id: str) -> Response:
        ticket = get_ticket(ticket_id, request)
        force = may_release_any(request.user)
        ticket = ticket_release(ticket, actor_for(request), force=force)
        return Response(s.TicketSerializer(ticket).data)


class TicketAssignView(ApiView):
    required_perms = {"POST": perms.DECIDE}

    @extend_schema(
        operation_id="tickets_assign",
        summary="Assign a ticket",
        description="Assign a pending ticket to a user who may decide tickets (`user`, a "
        "username), or to nobody (`user`: null). 400 `invalid` for an unknown, inactive or "
        "read-only user; 409 `conflict` when the ticket is no longer pending.",
        tags=["tickets"],
        parameters=[TICKET_ID],
        request=AssignRequestSerializer,
        examples=[
            OpenApiExample("To olivia", value={"user": "olivia"}, request_only=True),
            OpenApiExample("To nobody", value={"user": None}, request_only=True),
        ],
        responses={200: s.TicketSerializer, **error_responses(404, 409, body=True)},
    )
    def post(self, request: Request, ticket_id: str) -> Response:
        ticket = get_ticket(ticket_id, request)
        data = validated(AssignRequestSerializer, request.data)
        assignee = assignee_named(data["user"])
        ticket = ticket_assign(ticket, assignee, actor_for(request))
        return Response(s.TicketSerializer(ticket).data)
