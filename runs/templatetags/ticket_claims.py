"""Template helpers of ticket claims (runs/services/claims.py)."""

from __future__ import annotations

from typing import Any

from django import template

from runs.services.claims import Claim, live_claim

register = template.Library()


@register.simple_tag(takes_context=True)
def ticket_claim(context: template.Context, ticket: Any) -> Claim | None:
    """`{% ticket_claim t as claim %}`: the ticket's live claim as the signed-in user sees
    it (`claim.mine`, `claim.by`, `claim.left` "2 min", `claim.ask` the question to
    confirm before deciding a ticket someone else is on), or None."""
    request = context.get("request")
    viewer = getattr(request, "user", None) or context.get("user")
    return live_claim(ticket, viewer)
