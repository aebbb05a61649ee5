"""Personal API tokens: issue, verify, revoke. A token reads `awk_<lookup>_<secret>`;
only its sha256 is stored, the non-secret `awk_<lookup>` prefix finds the row.

The secret is 256 random bits, so a plain sha256 is the right hash (a slow KDF guards
low-entropy passwords, and buys nothing here); verifying costs a database round trip,
which a short in-process cache saves (TOKEN_CACHE_SECONDS, see `token_verify`)."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import hmac
import secrets
import threading
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.utils import timezone

from common.audit import Actor, audit_record
from common.errors import IllegalTransition, InvalidInput
from common.models import ApiToken

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


class _TokenCache:
    """Verified tokens (with their user) for a few seconds, per process: prefix ->
    (sha256 of the token, time cached, token). Never the raw token. Entries of a token
    saved or deleted, or of a user saved or given other groups or permissions, in this
    process are dropped at once (revoke, admin edits, deactivation, role changes);
    changes made by another process, or by queryset `update()`s, which send no signal,
    show within the TTL."""

    MAX_ENTRIES = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[str, float, ApiToken]] = {}

    def get(self, prefix: str, digest: str, ttl: float) -> ApiToken | None:
        entry = self._entries.get(prefix)
        if entry is None:
            return None
        cached_digest, cached_at, token = entry
        if time.monotonic() - cached_at >= ttl:
            with self._lock:
                if self._entries.get(prefix) is entry:
                    del self._entries[prefix]
            return None
        if not hmac.compare_digest(cached_digest, digest):
            return None
        return token

    def put(self, prefix: str, digest: str, token: ApiToken) -> None:
        with self._lock:
            if len(self._entries) >= self.MAX_ENTRIES:
                self._entries.clear()
            self._entries[prefix] = (digest, time.monotonic(), token)

    def drop_token(self, prefix: str) -> None:
        with self._lock:
            self._entries.pop(prefix, None)

    def drop_user(self, user_id: Any) -> None:
        with self._lock:
            for prefix, (_, _, token) in list(self._entries.items()):
                if token.user_id == user_id:
                    del self._entries[prefix]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


token_cache = _TokenCache()


def _token_changed(sender: Any, instance: ApiToken, **kwargs: Any) -> None:
    token_cache.drop_token(instance.prefix)


def _user_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    token_cache.drop_user(instance.pk)


post_save.connect(_token_changed, sender=ApiToken, dispatch_uid="api-token-cache-save")
post_delete.connect(_token_changed, sender=ApiToken, dispatch_uid="api-token-cache-delete")


def _roles_changed(sender: Any, instance: Any, reverse: bool, action: str, **kwargs: Any) -> None:
    """Group membership or permissions changed: a token's cached permissions are stale."""
    if not action.startswith("post_"):
        return
    if isinstance(instance, get_user_model()):
        token_cache.drop_user(instance.pk)
    else:  # a group (or permission) side: whoever holds it
        token_cache.clear()


post_save.connect(_user_changed, sender=get_user_model(), dispatch_uid="api-token-cache-user")
for _relation in (
    get_user_model().groups.through,
    get_user_model().user_permissions.through,
    Group.permissions.through,
):
    m2m_changed.connect(
        _roles_changed, sender=_relation, dispatch_uid=f"api-token-cache-{_relation}"
    )
post_delete.connect(_user_changed, sender=get_user_model(), dispatch_uid="api-token-cache-user-del")


def _for_request(token: ApiToken) -> ApiToken:
    """A copy per request, so that one request's changes to the objects (Django caches
    permissions on the user) stay out of the shared cache entry."""
    mine = copy.copy(token)
    mine.user = copy.copy(token.user)
    return mine


def token_verify(raw: str) -> ApiToken | None:
    """The active token `raw` names (and marks it used), else None.

    A verified token is reused for up to TOKEN_CACHE_SECONDS (AWAKEN_TOKEN_CACHE_SECONDS)
    without asking the database: revoking a token, or deactivating its user, in another
    process takes effect within that time, in this process at once. Expiry is checked
    on every request."""
    prefix = token_prefix(raw)
    if prefix is None:
        return None
    digest = token_hash(raw)
    ttl = float(getattr(settings, "AWAKEN_TOKEN_CACHE_SECONDS", 0.0))
    token = token_cache.get(prefix, digest, ttl) if ttl > 0 else None
    if token is None:
        token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
        if token is None or not hmac.compare_digest(token.token_hash, digest):
            return None
        if ttl > 0 and token.is_active and token.user.is_active:
            # its permissions too: every request's copy starts with them (role changes
            # elsewhere show within the TTL, like a revocation)
            token.user.get_all_permissions()
            token_cache.put(prefix, digest, token)
    if not token.is_active or not token.user.is_active:
        return None
    now = timezone.now()
    last = token.last_used_at
    if last is None or (now - last).total_seconds() >= LAST_USED_GRANULARITY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now  # also in the cache entry: written once a minute
    return _for_request(token)
