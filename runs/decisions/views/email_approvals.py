"""The pages an e-mailed decision link opens (docs/approvals-slack-email.md): GET shows
the ticket and asks to confirm (it decides nothing: mail scanners open links); POST,
by a signed-in user (LoginRequiredMiddleware sends others to sign in first) whose role
may decide in the ticket's team, decides through `remote_decide`, recorded as from
e-mail. A link used before, expired, altered, or sent to someone else is refused on a
page that says so (404, 400, 403 or 409), and nothing is decided; a link to a ticket the user
may not see answers as an altered one (another team's ticket is not confirmed to
exist)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from common.audit import request_id
from common.errors import DecisionConflict, Forbidden, ServiceError
from runs.decisions.services.remote_decide import remote_decide, ticket_for_decision
from runs.models import Decision, Ticket
from runs.operations.services.email_links import (
    NOT_VALID,
    ApprovalLink,
    LinkRefused,
    approval_link_read,
)
from runs.permissions import VIEW
from runs.ticket_forms import parse_answer

TEMPLATE = "runs/approvals/email.html"
WORDS = {"approve": "Approve", "reject": "Reject", "respond": "Answer"}


def _refused(request: HttpRequest, title: str, text: str, status: int) -> HttpResponse:
    context = {"refused": {"title": title, "text": text}}
    return render(request, TEMPLATE, context, status=status)


def _check(request: HttpRequest, token: str) -> tuple[ApprovalLink, Ticket] | HttpResponse:
    """The link and its ticket, or the refusal page."""
    try:
        link = approval_link_read(token)
    except LinkRefused as exc:
        if exc.reason == "expired":
            return _refused(request, "This link has expired", exc.message, 400)
        return _refused(request, "This link is not valid", NOT_VALID, 404)
    if link.user_id is not None and link.user_id != request.user.pk:
        return _refused(
            request,
            "This link is someone else's",
            "It was e-mailed to another user: sign in as them, or decide from the inbox.",
            403,
        )
    ticket = ticket_for_decision(link.ticket_id)
    if ticket is None or not request.user.has_perm(VIEW, ticket.run):  # as an altered link
        return _refused(request, "This link is not valid", NOT_VALID, 404)
    used = Decision.objects.filter(ticket=ticket, decision_id=link.decision_id).first()
    if used is not None:
        return _refused(
            request,
            "This link was used already",
            f"It decided this ticket ({used.action}) at "
            f"{used.created_at:%Y-%m-%d %H:%M:%S %Z}; a link works once.",
            409,
        )
    if ticket.status != Ticket.Status.PENDING:
        decision = Decision.objects.filter(ticket=ticket).first()
        who = (
            f"{decision.actor_label} decided it ({decision.action}) at "
            f"{decision.created_at:%Y-%m-%d %H:%M:%S %Z}"
            if decision is not None
            else "it was cancelled with its run"
        )
        return _refused(request, "This ticket is closed", f"Nothing was decided: {who}.", 409)
    return link, ticket


def _page(
    request: HttpRequest, link: ApprovalLink, ticket: Ticket, error: str = "", status: int = 200
) -> HttpResponse:
    context: dict[str, Any] = {
        "ticket": ticket,
        "action": link.action,
        "action_word": WORDS[link.action],
        "may_decide": request.user.has_perm("runs.decide_ticket", ticket.run),
        "error": error,
        "comment": request.POST.get("comment", ""),
        "answer": request.POST.get("answer", ""),
    }
    response = render(request, TEMPLATE, context, status=status)
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"  # the link is a credential of sorts
    return response


@require_http_methods(["GET", "POST"])
def email_approval(request: HttpRequest, token: str) -> HttpResponse:
    checked = _check(request, token)
    if isinstance(checked, HttpResponse):
        return checked
    link, ticket = checked
    if request.method != "POST":
        return _page(request, link, ticket)
    try:
        payload = parse_answer(request.POST.get("answer", "")) if link.action == "respond" else None
        decision, _ = remote_decide(
            ticket=ticket,
            user=request.user,
            source="email",
            action=link.action,
            decision_key=link.decision_id,
            comment=request.POST.get("comment", ""),
            payload=payload,
            request_id=request_id(request),
        )
    except ServiceError as exc:
        status = 403 if isinstance(exc, Forbidden) else exc.status
        if isinstance(exc, DecisionConflict):
            return _refused(request, "This ticket is closed", exc.message, 409)
        return _page(request, link, ticket, error=exc.message, status=status)
    context = {"ticket": ticket, "decision": decision, "done": True}
    return render(request, TEMPLATE, context)
