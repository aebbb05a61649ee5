"""Authentication (bearer tokens and the browser session), per-action permissions,
per-token throttling, and the audit Actor of an API request."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from typing import Any

import redis
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.base import InvalidCacheBackendError
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions, throttling
from rest_framework.settings import api_settings

from common.audit import Actor, request_actor
from common.models import ApiToken

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
    target_class = "common.api.auth.ApiTokenAuthentication"
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


def actor_for(request: Any) -> Actor:
    """Who acts: the user, and which of their tokens when a token authenticated."""
    return request_actor(request, "api")


THROTTLE_CACHE = "api_throttle"

# A sliding window in one round trip, atomic across processes: the request times of the
# last `window` ms in a sorted set, by Redis's clock. The same rule as DRF's
# SimpleRateThrottle (a history of request times), whose Retry-After is the time until
# the oldest request leaves the window.
_SLIDING_WINDOW = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now, t[1] .. t[2] .. ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return -1
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(tonumber(oldest[2]) + window - now, 1)
"""
# Short: a slow Redis must not slow the API down; the throttle fails open instead.
THROTTLE_REDIS_TIMEOUT = 0.5
# After a Redis error the throttle skips Redis (allows) for this long, so an outage costs
# one timeout per process and period, not one per request.
THROTTLE_BACKOFF_SECONDS = 5.0


class _ThrottleRedis:
    """One Redis connection pool per process (made again after a fork) and the
    registered script. Django's RedisCache made a client and a pool per thread, and
    daphne runs each request on a new thread: a new Redis connection per request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[int, str] | None = None
        self._script: Any = None
        self._down_until = 0.0

    def script(self) -> Any:
        """The script bound to this process's client, or None while backing off after
        an error."""
        url = settings.REDIS_URL
        if time.monotonic() < self._down_until:
            return None
        key = (os.getpid(), url)
        if self._key != key:
            with self._lock:
                if self._key != key:
                    pool = redis.ConnectionPool.from_url(
                        url,
                        socket_timeout=THROTTLE_REDIS_TIMEOUT,
                        socket_connect_timeout=THROTTLE_REDIS_TIMEOUT,
                        socket_keepalive=True,
                        health_check_interval=30,
                    )
                    client = redis.Redis(connection_pool=pool)
                    self._script = client.register_script(_SLIDING_WINDOW)
                    self._key = key
        return self._script

    def failed(self) -> None:
        self._down_until = time.monotonic() + THROTTLE_BACKOFF_SECONDS


_throttle_redis = _ThrottleRedis()


class TokenRateThrottle(throttling.SimpleRateThrottle):
    """Requests per token (per user for the browser session), rate from
    REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']['api_token'] (env API_THROTTLE_RATE).

    With REDIS_URL: a sliding window shared by every process, one EVALSHA per request
    over a per-process connection pool. Without: DRF's throttle on the process-local
    cache. Either way a cache or Redis outage lets requests through (fail open)."""

    scope = "api_token"

    def __init__(self) -> None:
        super().__init__()
        self._wait: float | None = None

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
        if self.rate is None:
            return True
        if not settings.REDIS_URL:
            return self._allow_local(request, view)
        try:
            script = _throttle_redis.script()
            if script is None:  # backing off after an error
                return True
            key = self.get_cache_key(request, view)
            if key is None:
                return True
            wait_ms = int(
                script(
                    keys=[f"awaken:{key}"],
                    args=[self.num_requests, int(self.duration * 1000), uuid.uuid4().hex[:8]],
                )
            )
        except Exception:  # a Redis outage must not take the API down: fail open
            _throttle_redis.failed()
            logger.warning("API throttle store unavailable; requests allowed", exc_info=True)
            return True
        if wait_ms < 0:
            return True
        self._wait = wait_ms / 1000
        return False

    def _allow_local(self, request: Any, view: Any) -> bool:
        try:
            self.cache = caches[THROTTLE_CACHE]
        except InvalidCacheBackendError:
            self.cache = caches["default"]
        try:
            return bool(super().allow_request(request, view))
        except Exception:  # fail open, as with Redis
            logger.warning("API throttle cache unavailable; request allowed", exc_info=True)
            return True

    def wait(self) -> float | None:
        if self._wait is not None:
            return self._wait
        return super().wait()
