"""Rules from decisions in the API: propose (and save into the draft) a permission rule from
a decided permission ticket."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents.services.permissions import PermissionPreview
from agents.services.rules_from_decisions import (
    RulePreview,
    RuleSaved,
    rule_add_to_draft,
    rule_preview,
    rule_proposal,
)
from common.api.auth import actor_for
from common.api.base import ApiView, validated
from common.api.errors import error_responses
from common.errors import IllegalTransition
from runs.api.views.lookups import get_ticket
from runs.api.views.params import TICKET_ID
from runs.decisions.api import rule_serializers as rs
from runs.decisions.views.rules import CHANGE_AGENT, rule_candidate

EXAMPLES = [
    OpenApiExample("Propose", value={"behavior": "allow"}, request_only=True),
    OpenApiExample(
        "Save an edited pattern into the draft",
        value={"behavior": "allow", "pattern": 'write_note(title ~ "lunch*")', "save": True},
        request_only=True,
    ),
]


def _verdict(preview: PermissionPreview) -> dict[str, Any]:
    explanation = preview.explanation
    return {
        "outcome": preview.outcome,
        "summary": preview.summary,
        "reason": explanation.reason if explanation else "",
    }


def preview_json(preview: RulePreview) -> dict[str, Any]:
    after = preview.after
    checks = after.explanation.checks if after and after.explanation else []
    return {
        **(_verdict(after) if after else {"outcome": "invalid", "summary": "", "reason": ""}),
        "verdict": preview.verdict,
        "decides": preview.decides,
        "already": preview.already,
        "position": preview.position,
        "error": preview.error,
        "notes": list(after.notes) if after else [],
        "checks": [
            {
                "position": check.position,
                "tool": check.rule.pattern.source,
                "behavior": check.rule.behavior.value,
                "matched": check.matched,
                "detail": check.detail,
            }
            for check in checks
        ],
        "current": _verdict(preview.current),
    }


def saved_json(saved: RuleSaved) -> dict[str, Any]:
    latest = saved.status.latest
    return {
        "added": saved.added,
        "position": saved.position,
        "draft_status": saved.status.state,
        "draft_status_label": saved.status.label,
        "latest_version": latest.number if latest else None,
    }


class TicketRuleProposalView(ApiView):
    required_perms = {"POST": CHANGE_AGENT}

    @extend_schema(
        operation_id="tickets_rule_proposal",
        summary="Propose a permission rule from a decided ticket",
        description="For a decided permission ticket: the rule `behavior` for such calls, "
        "its pattern (proposed from the tool and arguments, or `pattern`), the other "
        "proposed patterns, and a preview of the agent's draft with the rule (which rule "
        "decides the call and why). With `save` the rule is added to the draft (validated, "
        "audited); publish the draft to use it in runs. Needs agents.change_agent.",
        tags=["tickets"],
        parameters=[TICKET_ID],
        request=rs.RuleProposalRequestSerializer,
        examples=EXAMPLES,
        responses={200: rs.RuleProposalSerializer, **error_responses(404, 409, body=True)},
    )
    def post(self, request: Request, ticket_id: str) -> Response:
        ticket = get_ticket(ticket_id, request)
        data = validated(rs.RuleProposalRequestSerializer, request.data)
        if not rule_candidate(ticket):
            raise IllegalTransition(
                f"ticket {ticket.pk} is not a decided permission ticket: only a tool call the "
                "permission rules asked about, once decided, can become a rule",
                {"status": ticket.status, "reason": ticket.reason},
            )
        agent = ticket.run.agent
        proposal = rule_proposal(agent, ticket.tool_name, ticket.arguments, data["behavior"])
        rule = proposal.rule((data.get("pattern") or "").strip() or None)
        saved = None
        if data["save"]:
            saved = rule_add_to_draft(agent, rule, actor_for(request), ticket_id=str(ticket.pk))
            agent = saved.agent
        preview = rule_preview(agent, rule, ticket.tool_name, ticket.arguments)
        return Response(
            {
                "ticket_id": str(ticket.pk),
                "agent_id": agent.slug,
                "tool_name": ticket.tool_name,
                "arguments": ticket.arguments,
                "behavior": proposal.behavior.value,
                "rule": preview.rule,
                "options": [
                    {"pattern": o.pattern, "label": o.label, "argument": o.argument}
                    for o in proposal.options
                ],
                "skipped": proposal.skipped,
                "preview": preview_json(preview),
                "saved": saved_json(saved) if saved else None,
            }
        )
