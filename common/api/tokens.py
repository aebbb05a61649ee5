"""Personal API tokens: issue, verify, revoke. A token reads `awk_<lookup>_<secret>`;
only its sha256 is stored, the non-secret `awk_<lookup>` prefix finds the row.

The secret is 256 random bits, so a plain sha256 is the right hash (a slow KDF guards
low-entropy passwords, and buys nothing here); verifying costs a database round trip,
which a short in-process cache saves (TOKEN_CACHE_SECONDS, see `token_verify`)."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.cache import BaseCache, caches
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
    """Verified tokens (with their user and permissions) for a few seconds, per process,
    in the local-memory cache alias `api_tokens`: key the token's prefix, value (sha256 of
    the token, when the entry expires, the token). Never the raw token. Each read unpickles
    its own copy, so one request's changes stay out of the entry. Entries of a token saved
    or deleted in this process are dropped at once, and the whole cache when a user is
    saved or given other groups or permissions (revoke, admin edits, deactivation, role
    changes); changes made by another process, or by queryset `update()`s, which send no
    signal, show within the TTL."""

    ALIAS = "api_tokens"

    @property
    def _cache(self) -> BaseCache:
        return caches[self.ALIAS]

    def get(self, prefix: str, digest: str) -> tuple[ApiToken, float] | None:
        """The cached token and the (wall-clock) time its entry expires."""
        entry = self._cache.get(prefix)
        if entry is None:
            return None
        cached_digest, expires, token = entry
        if not hmac.compare_digest(cached_digest, digest):
            return None
        return token, expires

    def put(self, prefix: str, digest: str, token: ApiToken, ttl: float) -> None:
        """Cache `token` for `ttl` seconds (an entry put again keeps its first expiry: pass
        what is left of it)."""
        if ttl > 0:
            self._cache.set(prefix, (digest, time.time() + ttl, token), ttl)

    def drop_token(self, prefix: str) -> None:
        self._cache.delete(prefix)

    def drop_user(self, user_id: Any) -> None:
        """A user changed: their tokens' entries are stale. The cache has no index by user,
        and users change rarely next to API requests: every entry goes."""
        self.clear()

    def clear(self) -> None:
        self._cache.clear()


token_cache = _TokenCache()


def _token_changed(sender: Any, instance: ApiToken, **kwargs: Any) -> None:
    token_cache.drop_token(instance.prefix)


def _user_changed(
    sender: Any, instance: Any, update_fields: frozenset[str] | None = None, **kwargs: Any
) -> None:
    if update_fields == {"last_login"}:  # every sign-in saves this; no token depends on it
        return
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
    cached = token_cache.get(prefix, digest) if ttl > 0 else None
    token, expires = cached if cached is not None else (None, time.time() + ttl)
    if token is None:
        token = ApiToken.objects.select_related("user").filter(prefix=prefix).first()
        if token is None or not hmac.compare_digest(token.token_hash, digest):
            return None
        if ttl > 0 and token.is_active and token.user.is_active:
            # its permissions too: every request's copy starts with them (role changes
            # elsewhere show within the TTL, like a revocation)
            token.user.get_all_permissions()
            token_cache.put(prefix, digest, token, ttl)
    if not token.is_active or not token.user.is_active:
        return None
    now = timezone.now()
    last = token.last_used_at
    if last is None or (now - last).total_seconds() >= LAST_USED_GRANULARITY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
        if ttl > 0:  # the entry too (written once a minute), keeping its expiry
            token_cache.put(prefix, digest, token, expires - time.time())
    return token
