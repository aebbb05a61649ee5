"""Deciding a ticket from where operators are, Slack or e-mail
(docs/approvals-slack-email.md): the same decision service as the pages
(`decision_submit`), with the same checks: the user's role in the ticket's team, the
team's freeze and required reason, someone else's claim on the ticket; idempotent by
the caller's key (the Slack interaction, the e-mail link's nonce). The decision is
audited with its source (`slack`, `email`) and shown as "<user> (Slack)"."""

from __future__ import annotations

from typing import Any

from django.db.models.functions import Now

from common.access import allowed_unfrozen
from common.audit import Actor
from common.errors import Forbidden, IllegalTransition
from common.teams import ensure_writable
from runs.models import Decision, Ticket
from runs.permissions import DECIDE
from runs.selectors.claims import minutes_until
from runs.services.tickets import decision_submit_or_repeat

SOURCES = {"slack": "Slack", "email": "e-mail"}


def remote_actor(user: Any, source: str, request_id: str = "") -> Actor:
    label = f"{user.get_username()} ({SOURCES[source]})"
    return Actor(user=user, label=label[:200], source=source, request_id=request_id)


def ticket_for_decision(ticket_id: Any) -> Ticket | None:
    return Ticket.objects.select_related("run__agent", "tool_call").filter(pk=ticket_id).first()


def ensure_may_decide(user: Any, ticket: Ticket) -> None:
    """Forbidden when the user's role in the ticket's team may not decide; Frozen when
    only the team's freeze refuses it; IllegalTransition when someone else holds a claim
    on it (the pages ask first; from here there is nobody to ask)."""
    if not user.is_active or not user.has_perm(DECIDE, ticket.run):
        if user.is_active and allowed_unfrozen(user, DECIDE, ticket.run):
            ensure_writable(ticket.run.agent.team_id)
        raise Forbidden("your role may not decide tickets in this team")
    claim = (
        Ticket.objects.filter(pk=ticket.pk)
        .annotate(db_now=Now())
        .values("claimed_by_id", "claimed_by__username", "claimed_until", "db_now")
        .first()
    )
    if (
        claim is not None
        and claim["claimed_by_id"] not in (None, user.pk)
        and claim["claimed_until"] is not None
        and claim["claimed_until"] >= claim["db_now"]
    ):
        left = minutes_until(claim["claimed_until"], claim["db_now"])
        raise IllegalTransition(
            f"{claim['claimed_by__username']} is on this ticket for {left} more "
            f"minute{'s' if left != 1 else ''}: decide it on the run page if you must"
        )


def remote_decide(
    *,
    ticket: Ticket,
    user: Any,
    source: str,
    action: str,
    decision_key: str,
    comment: str = "",
    payload: Any = None,
    request_id: str = "",
) -> tuple[Decision, bool]:
    """Decide `ticket` as `user` from `source`; (the decision, whether it is an earlier
    one with the same key: the same interaction or link again). Raises the service's
    errors: Forbidden, Frozen, InvalidInput (a reason required, a bad answer),
    DecisionConflict (decided first by someone else: who and when)."""
    earlier = Decision.objects.filter(ticket=ticket, decision_id=decision_key).first()
    if earlier is not None:
        return earlier, True
    ensure_may_decide(user, ticket)
    return decision_submit_or_repeat(
        ticket=ticket,
        action=action,
        payload=payload,
        comment=comment.strip(),
        decision_id=decision_key,
        actor=remote_actor(user, source, request_id),
    )
