"""Decisions on many tickets at once: by a filter (a policy) or by their ids."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from common.access import scope
from common.api.auth import actor_for
from common.api.base import ApiView, validated
from common.api.errors import error_responses
from runs import permissions as perms
from runs.api import serializers as s
from runs.decisions.api import bulk_serializers as sb
from runs.decisions.services.bulk import (
    MAX_BULK,
    BulkItem,
    TicketPolicy,
    bulk_decide,
    tickets_matching,
)
from runs.models import Ticket

BULK_EXAMPLES = [
    OpenApiExample(
        "Preview a policy",
        value={
            "filter": {"tool": "write_note", "arguments_pattern": 'title ~ "lunch*"'},
            "action": "approve",
            "dry_run": True,
        },
        request_only=True,
    ),
    OpenApiExample(
        "Decide the previewed tickets",
        value={"ticket_ids": ["0197…"], "action": "reject", "comment": "not today"},
        request_only=True,
    ),
]


def _named(ids: list[Any], user: Any) -> list[Ticket]:
    """The named tickets that still wait for an operator, in the order named: of the
    teams where `user` may decide, as a filter matches them (another team's ticket is as
    an unknown id, left out)."""
    tickets = Ticket.objects.for_operators().filter(pk__in=ids)
    found = {
        ticket.pk: ticket
        for ticket in scope(tickets, user, "run__agent__team_id", perms.DECIDE).select_related(
            "run__agent", "tool_call"
        )
    }
    return [found[ident] for ident in ids if ident in found]


def _result(item: BulkItem) -> dict[str, Any]:
    result: dict[str, Any] = {"ticket_id": item.ticket_id, "outcome": item.outcome}
    if item.decision is not None:
        result["decision"] = item.decision
    if item.message:
        result["message"] = item.message
    return result


class BulkDecisionView(ApiView):
    required_perms = {"POST": perms.DECIDE}

    @extend_schema(
        operation_id="tickets_bulk_decide",
        summary="Approve or reject many tickets: by a filter or by ids",
        description="`filter` matches the pending tickets (agent, tool, argument pattern in "
        f"the permission rules' syntax, waiting longer than N minutes), oldest first, at most "
        f"{MAX_BULK}; `ticket_ids` names them. With `dry_run` nothing is decided: `results` "
        "lists the matched tickets (outcome `matched`: named ids that are unknown, decided, or "
        "of a team where you may not decide are left out); pass their ids back to decide "
        "exactly those. Each ticket is decided on its own: `decided`, `conflict` (decided first by "
        "someone else: `decision` is theirs) or `error` (`message`); a ticket is never "
        "decided twice. One `tickets.bulk_decide` audit entry records the filter and counts.",
        tags=["tickets"],
        request=sb.BulkDecisionRequestSerializer,
        examples=BULK_EXAMPLES,
        responses={200: sb.BulkDecisionResponseSerializer, **error_responses(body=True)},
    )
    def post(self, request: Request) -> Response:
        data = validated(sb.BulkDecisionRequestSerializer, request.data)
        policy: TicketPolicy | None = None
        more = False
        if "filter" in data:
            given = data["filter"]
            policy = TicketPolicy(
                agent=given.get("agent_id") or "",
                tool=given.get("tool") or "",
                arguments_pattern=given.get("arguments_pattern") or "",
                waiting_longer_than=given.get("waiting_longer_than_minutes"),
            )
            tickets = tickets_matching(policy, limit=MAX_BULK + 1, user=request.user)
            more, tickets = len(tickets) > MAX_BULK, tickets[:MAX_BULK]
            ids = [ticket.pk for ticket in tickets]
        else:
            ids = list(dict.fromkeys(data["ticket_ids"]))
            tickets = _named(ids, request.user) if data["dry_run"] else []
        if data["dry_run"]:
            results = [
                {"ticket_id": str(t.pk), "outcome": "matched", "ticket": s.TicketSerializer(t).data}
                for t in tickets
            ]
            return Response({"matched": len(results), "more": more, "results": results})
        if not ids:
            return Response({"matched": 0, "more": False, "results": []})
        outcome = bulk_decide(
            ids,
            data["action"],
            data["comment"],
            actor_for(request),
            policy=policy,
            confirm=data["confirm"],
        )
        results = [_result(item) for item in outcome.items]
        return Response({"matched": len(ids), "more": more, "results": results})
