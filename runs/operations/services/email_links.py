"""E-mailed decision links (docs/approvals-slack-email.md): a ticket's notice by e-mail
carries one link per action (Approve, Reject; Answer, Reject for a question), each
signed (django.core.signing, its own salt), expiring after AWAKEN_EMAIL_APPROVAL_SECONDS,
and single-use: its nonce is the decision's idempotency key (`email:<nonce>`), so a link
decides once and is refused after. A link sent to a subscriber names them: only they can
use it. Opening one decides nothing (mail scanners open links): the page it opens asks
to confirm, and the confirmation, by a signed-in user with the role, decides
(runs/decisions/views/email_approvals.py)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing
from django.urls import reverse

SALT = "awaken.email-approval"
ACTIONS = ("approve", "reject", "respond")
# an altered link, and one whose ticket is gone or not the user's to see (the same words:
# another team's ticket is not confirmed to exist)
NOT_VALID = (
    "This link is not valid: it was changed or cut, or its ticket is gone. Use the link as "
    "sent, or decide from the approvals inbox."
)


class LinkRefused(Exception):
    """The link cannot be used: `reason` is "expired" or "altered"."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class ApprovalLink:
    ticket_id: str
    action: str
    nonce: str
    user_id: int | None  # the subscriber it was sent to; None: a channel's recipients

    @property
    def decision_id(self) -> str:
        return f"email:{self.nonce}"


def approval_token(ticket_id: Any, action: str, user_id: int | None = None) -> str:
    """`<ticket>.<action>.<nonce>.<user>:<time>:<signature>`: short and readable (no long
    opaque run), signed with its own salt, stamped for the expiry."""
    if action not in ACTIONS:
        raise ValueError(f"no e-mail link for {action!r}")
    value = f"{ticket_id}.{action}.{secrets.token_urlsafe(12)}.{user_id or ''}"
    return signing.TimestampSigner(salt=SALT).sign(value)


def approval_url(ticket_id: Any, action: str, user_id: int | None = None) -> str:
    path = reverse("runs:email-approval", args=[approval_token(ticket_id, action, user_id)])
    return f"{settings.AWAKEN_PUBLIC_URL}{path}"


def approval_links(
    ticket_id: Any, question: bool, user_id: int | None = None
) -> list[tuple[str, str]]:
    """(label, URL) of each action for a ticket's notice."""
    first = ("Answer", "respond") if question else ("Approve", "approve")
    return [
        (label, approval_url(ticket_id, action, user_id))
        for label, action in (first, ("Reject", "reject"))
    ]


def approval_link_read(token: str) -> ApprovalLink:
    """The link `token` stands for; LinkRefused when it was altered or has expired."""
    try:
        value = signing.TimestampSigner(salt=SALT).unsign(
            token, max_age=settings.AWAKEN_EMAIL_APPROVAL_SECONDS
        )
    except signing.SignatureExpired:
        raise LinkRefused(
            "expired",
            "This link has expired: decide the ticket from the approvals inbox instead.",
        ) from None
    except signing.BadSignature:
        raise LinkRefused("altered", NOT_VALID) from None
    parts = value.split(".")
    if len(parts) != 4 or parts[1] not in ACTIONS or (parts[3] and not parts[3].isdigit()):
        raise LinkRefused("altered", NOT_VALID)
    ticket, action, nonce, user = parts
    return ApprovalLink(
        ticket_id=ticket, action=action, nonce=nonce, user_id=int(user) if user else None
    )
