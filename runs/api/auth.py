"""Authentication (bearer tokens and the browser session), per-action permissions,
per-token throttling, and the audit Actor of an API request."""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from django.core.cache import caches
from django.core.cache.backends.base import InvalidCacheBackendError
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions, throttling
from rest_framework.settings import api_settings

from runs.models import ApiToken
from runs.services.audit import Actor

from .tokens import token_verify

logger = logging.getLogger(__name__)


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer awk_…`: a personal token acting as its user."""

    keyword = "Bearer"

    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "Malformed Authorization header: use 'Bearer <token>'."
            )
        try:
            raw = header[1].decode()
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("The token contains invalid characters.") from exc
        token = token_verify(raw)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        return f'{self.keyword} realm="api"'


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "runs.api.auth.ApiTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "awk_<lookup>_<secret>",
            "description": "A personal API token from the 'API tokens' page or "
            "`manage.py create_api_token`.",
        }


class ActionPermission(permissions.BasePermission):
    """The Django permission a view names for the request's method (`required_perms`)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        required: dict[str, str] = getattr(view, "required_perms", {})
        method = "GET" if request.method in ("HEAD", "OPTIONS") else request.method
        perm = required.get(method)
        if perm is None:
            return True
        if not request.user.has_perm(perm):
            self.message = f"You need the permission {perm} to do this."
            return False
        return True


def request_id(request: Any) -> str:
    cached = getattr(request, "_awaken_request_id", None)
    if cached:
        return str(cached)
    raw = request.headers.get("X-Request-ID", "")
    value = re.sub(r"[^A-Za-z0-9._:-]", "", raw)[:64] or uuid.uuid4().hex
    request._awaken_request_id = value
    return value


def actor_for(request: Any) -> Actor:
    """Who acts: the user, and which of their tokens when a token authenticated."""
    user = request.user
    token = request.auth if isinstance(request.auth, ApiToken) else None
    label = user.get_username()
    if token is not None:
        label = f"{label} (token {token.name})"
    return Actor(user=user, label=label[:200], source="api", request_id=request_id(request))


THROTTLE_CACHE = "api_throttle"


class TokenRateThrottle(throttling.SimpleRateThrottle):
    """Requests per token (per user for the browser session), rate from
    REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']['api_token'] (env API_THROTTLE_RATE)."""

    scope = "api_token"

    def __init__(self) -> None:
        try:
            self.cache = caches[THROTTLE_CACHE]
        except InvalidCacheBackendError:
            self.cache = caches["default"]
        super().__init__()

    def get_rate(self) -> str | None:
        # read at request time so settings overrides apply
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        if isinstance(request.auth, ApiToken):
            ident = f"token:{request.auth.prefix}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request: Any, view: Any) -> bool:
        try:
            return bool(super().allow_request(request, view))
        except Exception:  # a cache outage must not take the API down: fail open
            logger.warning("API throttle cache unavailable; request allowed", exc_info=True)
            return True
