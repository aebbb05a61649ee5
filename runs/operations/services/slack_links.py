"""Which Slack user is which user here (docs/approvals-slack-email.md).

A Slack user who presses a button unlinked is shown a link (signed: their workspace and
user id, valid LINK_SECONDS) to their notifications page here; signed in, they confirm,
and from then on their presses decide as them. With AWAKEN_SLACK_LINK_BY_EMAIL, a Slack
user whose e-mail address Slack has confirmed, and that is the address of exactly one
active user here, is linked to that user at their first press. Linking and unlinking
are audited."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.db import IntegrityError, transaction
from django.urls import reverse

from common.audit import Actor, audit_record
from common.errors import IllegalTransition, InvalidInput
from runs.operations.models.slack import SlackUserLink

SALT = "awaken.slack-link"
LINK_SECONDS = 15 * 60


@dataclass(frozen=True)
class SlackIdentity:
    team_id: str
    user_id: str
    name: str = ""


def link_url(identity: SlackIdentity) -> str:
    token = signing.dumps(
        {"t": identity.team_id, "u": identity.user_id, "n": identity.name[:100]}, salt=SALT
    )
    return f"{settings.AWAKEN_PUBLIC_URL}{reverse('runs:slack-link', args=[token])}"


def link_token_read(token: str) -> SlackIdentity:
    try:
        data = signing.loads(token, salt=SALT, max_age=LINK_SECONDS)
    except signing.SignatureExpired:
        raise InvalidInput(
            "This link has expired: press a button in Slack again for a new one."
        ) from None
    except signing.BadSignature:
        raise InvalidInput("This link is not valid: use the link Slack showed, as shown.") from None
    return SlackIdentity(str(data["t"]), str(data["u"]), str(data.get("n") or ""))


def linked_user(identity: SlackIdentity) -> Any:
    """The active user the Slack user is linked to, or None."""
    link = (
        SlackUserLink.objects.filter(slack_team_id=identity.team_id, slack_user_id=identity.user_id)
        .select_related("user")
        .first()
    )
    if link is None or not link.user.is_active:
        return None
    return link.user


def slack_user_link(user: Any, identity: SlackIdentity, how: str, actor: Actor) -> SlackUserLink:
    """Link the Slack user to `user`; IllegalTransition when it is linked to another."""
    existing = SlackUserLink.objects.filter(
        slack_team_id=identity.team_id, slack_user_id=identity.user_id
    ).first()
    if existing is not None:
        if existing.user_id == user.pk:
            return existing
        raise IllegalTransition(
            "This Slack user is already linked to another user here; they must unlink it first."
        )
    try:
        with transaction.atomic():
            link = SlackUserLink.objects.create(
                user=user,
                slack_team_id=identity.team_id,
                slack_user_id=identity.user_id,
                slack_name=identity.name[:200],
                how=how,
            )
            audit_record(
                actor=actor,
                action="slack.link",
                target_type="user",
                target_id=user.pk,
                after={"slack_team": identity.team_id, "slack_user": identity.user_id, "how": how},
            )
    except IntegrityError:  # linked by a request racing this one
        raise IllegalTransition("This Slack user was linked meanwhile.") from None
    return link


def slack_user_unlink(link: SlackUserLink, actor: Actor) -> None:
    with transaction.atomic():
        audit_record(
            actor=actor,
            action="slack.unlink",
            target_type="user",
            target_id=link.user_id,
            before={"slack_team": link.slack_team_id, "slack_user": link.slack_user_id},
        )
        link.delete()


def user_by_verified_email(profile: dict[str, Any]) -> Any:
    """The one active user here whose e-mail address is the one Slack confirmed (users.info
    of a user whose `is_email_confirmed` is true), or None."""
    email = str((profile.get("profile") or {}).get("email") or "").strip()
    if not email or profile.get("is_email_confirmed") is not True:
        return None
    users = list(get_user_model().objects.filter(email__iexact=email, is_active=True)[:2])
    return users[0] if len(users) == 1 else None
