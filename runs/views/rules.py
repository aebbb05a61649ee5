"""Rules from decisions: from a decided permission ticket, an admin proposes a permission
rule (always allow / ask / deny such calls), previews it against the agent's draft and
saves it into the draft; publishing the draft stays the admin's Publish step."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from agents.services.agents import agent_draft_status
from agents.services.rules_from_decisions import (
    MAX_PATTERN_CHARS,
    RuleProposal,
    parse_behavior,
    rule_add_to_draft,
    rule_preview,
    rule_proposal,
)
from common.audit import request_actor
from common.errors import ServiceError
from runs.models import Ticket
from runs.permissions import denied, require
from runs.runtime.permissions import Behavior
from runs.runtime.tool_batch import PERMISSION_ACTION

CHANGE_AGENT = "agents.change_agent"


def rule_candidate(ticket: Ticket) -> bool:
    """A ticket a rule could have decided: a permission ask that a person decided."""
    return ticket.status == Ticket.Status.DECIDED and ticket.reason == PERMISSION_ACTION


def _refused(text: str, status: int) -> HttpResponse:
    html = render_to_string("runs/partials/flash.html", {"level": "error", "text": text})
    return HttpResponse(html, status=status)


def _page_url(ticket: Ticket, behavior: str, pattern: str) -> str:
    query = urlencode({"behavior": behavior, "pattern": pattern})
    return f"{reverse('runs:ticket-rule', args=[ticket.pk])}?{query}"


def _context(
    ticket: Ticket, proposal: RuleProposal, pattern: str, error: str = ""
) -> dict[str, Any]:
    agent = ticket.run.agent
    behavior = proposal.behavior.value
    arguments = ticket.arguments if isinstance(ticket.arguments, dict) else {}
    return {
        "ticket": ticket,
        "decision": getattr(ticket, "decision", None),
        "run": ticket.run,
        "agent": agent,
        "proposal": proposal,
        "options": [
            (option, _page_url(ticket, behavior, option.pattern)) for option in proposal.options
        ],
        "pattern": pattern,
        "behavior": behavior,
        "behaviors": [b.value for b in Behavior],
        "preview": rule_preview(
            agent, {"tool": pattern, "behavior": behavior}, ticket.tool_name, arguments
        ),
        "status": agent_draft_status(agent),
        "error": error,
        "max_pattern": MAX_PATTERN_CHARS,
        "nav": "runs",
    }


@require_http_methods(["GET", "HEAD", "POST"])
@require(CHANGE_AGENT, "turn decisions into permission rules")
def rule_from_decision(request: HttpRequest, ticket_id: Any) -> HttpResponse:
    """GET: the proposal for `?behavior=` (and an edited `?pattern=`) with its preview;
    POST: save that rule into the agent's draft."""
    ticket = get_object_or_404(
        Ticket.objects.select_related("run__agent", "decision"), pk=ticket_id
    )
    if (
        refused := denied(request, CHANGE_AGENT, ticket.run, "change this team's agents")
    ) is not None:
        return refused
    if not rule_candidate(ticket):
        return _refused(
            "Only a decided permission ticket (a tool call the rules asked about) can become "
            "a rule.",
            409,
        )
    data = request.POST if request.method == "POST" else request.GET
    try:
        behavior = parse_behavior(data.get("behavior") or Behavior.ALLOW.value)
    except ServiceError as exc:
        return _refused(exc.message, exc.status)
    proposal = rule_proposal(ticket.run.agent, ticket.tool_name, ticket.arguments, behavior)
    pattern = (data.get("pattern") or "").strip() or proposal.pattern
    if request.method != "POST":
        return render(request, "runs/rule_from_decision.html", _context(ticket, proposal, pattern))
    try:
        saved = rule_add_to_draft(
            ticket.run.agent,
            {"tool": pattern, "behavior": behavior.value},
            request_actor(request, "ui"),
            ticket_id=str(ticket.pk),
        )
    except ServiceError as exc:
        context = _context(ticket, proposal, pattern, error=f"Not saved: {exc.message}.")
        return render(request, "runs/rule_from_decision.html", context, status=exc.status)
    if saved.added:
        text = (
            f"Saved rule {saved.position} ({pattern} → {behavior.value}) into the draft of "
            f"{saved.agent.slug}. Publish the draft to use it in new runs."
        )
    else:
        text = f"The draft of {saved.agent.slug} already has this rule (rule {saved.position})."
    messages.success(request, text)
    return HttpResponseRedirect(_page_url(ticket, behavior.value, pattern))
