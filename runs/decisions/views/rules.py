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
from common.access import allowed_unfrozen, frozen_team_of
from common.audit import request_actor
from common.errors import ServiceError
from runs.models import Ticket
from runs.permissions import denied, forbidden, require, visible_or_404
from runs.runtime.permissions import Behavior
from runs.runtime.tool_batch import PERMISSION_ACTION
from runs.views.forms import FormError, page_action, render_form_error

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


def _rule_error(request: HttpRequest, error: FormError, ticket_id: Any) -> HttpResponse:
    """The rule page with the reason (409 while the team is frozen, the proposal still
    shown); a ticket that cannot become a rule gets the reason alone."""
    ticket = get_object_or_404(
        Ticket.objects.select_related("run__agent", "decision"), pk=ticket_id
    )
    visible_or_404(request.user, ticket.run)
    if not rule_candidate(ticket):
        return _refused(error.text, error.status)
    try:
        behavior = parse_behavior(error.value("behavior") or Behavior.ALLOW.value)
    except ServiceError:
        behavior = Behavior.ALLOW
    proposal = rule_proposal(ticket.run.agent, ticket.tool_name, ticket.arguments, behavior)
    pattern = (error.value("pattern") or "").strip() or proposal.pattern
    verb = "Not saved" if request.method == "POST" else "Cannot be saved"
    context = _context(ticket, proposal, pattern, error=f"{verb}: {error.text}.")
    context["frozen"] = frozen_team_of(request.user, ticket.run)
    error.shown = True  # the page's error line says it
    return render_form_error(request, "runs/rule_from_decision.html", context, error)


@require_http_methods(["GET", "HEAD", "POST"])
@page_action(_rule_error)
@require(CHANGE_AGENT, "turn decisions into permission rules")
def rule_from_decision(request: HttpRequest, ticket_id: Any) -> HttpResponse:
    """GET: the proposal for `?behavior=` (and an edited `?pattern=`) with its preview;
    POST: save that rule into the agent's draft."""
    ticket = get_object_or_404(
        Ticket.objects.select_related("run__agent", "decision"), pk=ticket_id
    )
    if request.method == "POST":  # a frozen team's save: 409 team_frozen
        refused = denied(request, CHANGE_AGENT, ticket.run, "change this team's agents")
    else:  # reading the proposal: a frozen team's page shows Save disabled, saying why
        visible_or_404(request.user, ticket.run)
        may = allowed_unfrozen(request.user, CHANGE_AGENT, ticket.run)
        refused = None if may else forbidden(request, "change this team's agents")
    if refused is not None:
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
        context = _context(ticket, proposal, pattern)
        context["frozen"] = frozen_team_of(request.user, ticket.run)
        return render(request, "runs/rule_from_decision.html", context)
    saved = rule_add_to_draft(
        ticket.run.agent,
        {"tool": pattern, "behavior": behavior.value},
        request_actor(request, "ui"),
        ticket_id=str(ticket.pk),
    )
    if saved.added:
        text = (
            f"Saved rule {saved.position} ({pattern} → {behavior.value}) into the draft of "
            f"{saved.agent.slug}. Publish the draft to use it in new runs."
        )
    else:
        text = f"The draft of {saved.agent.slug} already has this rule (rule {saved.position})."
    messages.success(request, text)
    return HttpResponseRedirect(_page_url(ticket, behavior.value, pattern))
