"""Personal API tokens: issue, verify, revoke. A token reads `awk_<lookup>_<secret>`;
only its sha256 is stored, the non-secret `awk_<lookup>` prefix finds the row."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from typing import Any

from django.db import transaction
from django.utils import timezone

from runs.models import ApiToken
from runs.services.audit import Actor, audit_record
from runs.services.errors import IllegalTransition, InvalidInput

TOKEN_PREFIX = "awk_"
# last_used_at is written at most this often per token (seconds)
LAST_USED_GRANULARITY = 60.0
MAX_NAME = 100


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def token_prefix(raw: str) -> str | None:
    """The lookup part of a well-formed token, else None."""
    if not raw.startswith(TOKEN_PREFIX):
        return None
    parts = raw.split("_", 2)
    if len(parts) != 3 or not parts[1] or not parts[2]:
        return None
    return f"{TOKEN_PREFIX}{parts[1]}"


@transaction.atomic
def token_create(
    *, user: Any, name: str, expires_at: dt.datetime | None = None, actor: Actor
) -> tuple[ApiToken, str]:
    """Issue a token for `user`. Returns the row and the raw token, shown once."""
    name = (name or "").strip()
    if not name:
        raise InvalidInput("give the token a name")
    if len(name) > MAX_NAME:
        raise InvalidInput(f"the name is longer than {MAX_NAME} characters")
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidInput("the expiry must be in the future")
    lookup = secrets.token_hex(6)
    raw = f"{TOKEN_PREFIX}{lookup}_{secrets.token_urlsafe(32)}"
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=f"{TOKEN_PREFIX}{lookup}",
        token_hash=token_hash(raw),
        expires_at=expires_at,
    )
    audit_record(
        actor=actor,
        action="token.create",
        target_type="api_token",
        target_id=token.pk,
        after={
            "name": token.name,
            "prefix": token.prefix,
            "user": user.get_username(),
            "expires_at": expires_at.isoformat() if expires_at else None,
        },
    )
    return token, raw


@transaction.atomic
def token_revoke(*, token: ApiToken, actor: Actor) -> ApiToken:
    token = ApiToken.objects.select_for_update().get(pk=token.pk)
    if token.revoked_at is not None:
        raise IllegalTransition(f"token {token.prefix} is already revoked")
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    audit_record(
        actor=actor,
        action="token.revoke",
        target_type="api_token",
        target_id=token.pk,
        before={"name": token.name, "prefix": token.prefix},
    )
    return token


def token_verify(raw: str) -> ApiToken | None:
    """The active token `raw` names (and marks it used), else None."""
    prefix = token_prefix(raw)
    if prefix is None:
        return None
    token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
    if token is None or not hmac.compare_digest(token.token_hash, token_hash(raw)):
        return None
    if not token.is_active or not token.user.is_active:
        return None
    now = timezone.now()
    last = token.last_used_at
    if last is None or (now - last).total_seconds() >= LAST_USED_GRANULARITY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
