"""How each of the site's Redis clients connects, given REDIS_URL: the channel layer
(websocket fan-out), the Celery broker and the API throttle's cache. settings.py reads
the environment and builds its CHANNEL_LAYERS, CELERY_BROKER_TRANSPORT_OPTIONS and
CACHES from these.

Redis socket timeouts are set explicitly everywhere: redis-py 8 changed its default
`socket_timeout` from None (wait forever) to 5 s, which breaks clients that block on
Redis for 5 s themselves, while None leaves a command hanging forever on a connection
that died silently (failover, NAT timeout). Query parameters in REDIS_URL
(`?socket_timeout=`) override these values."""

from __future__ import annotations

from typing import Any


def channel_layers(redis_url: str, connect_timeout: float) -> dict[str, Any]:
    """channels-redis on `redis_url`, or the in-memory layer without one.

    channels-redis waits for a websocket's next message with a blocking BZPOPMIN of 5 s
    (RedisChannelLayer.brpop_timeout); with redis-py 8's 5 s socket timeout the read
    raced it and an idle consumer died with TimeoutError, closing its websocket with
    1011 about every 5 s. The read timeout must stay above the blocking pop; keepalive
    and the idle-connection PING (health_check_interval) notice dead connections.
    Members of a group are whole processes (runs/fanout.py), which add themselves
    again every quarter of group_expiry: a process that died without leaving stops
    being sent to within group_expiry, while live members never expire."""
    if not redis_url:
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": redis_url,
                        "socket_timeout": 5 + 10.0,  # brpop_timeout + margin
                        "socket_connect_timeout": connect_timeout,
                        "socket_keepalive": True,
                        "health_check_interval": 30,
                    }
                ],
                # messages waiting for one process: channels-redis keeps those of all a
                # process's channels under one key, and drops what a group sends beyond
                # the capacity (an SSE stream then waits for its next read of the log, up
                # to 15 s). 500 was exceeded by one daphne following 256 busy runs.
                "capacity": 10_000,
                "group_expiry": 300,
            },
        }
    }


def broker_transport_options(visibility_timeout: int, connect_timeout: float) -> dict[str, Any]:
    """kombu's Redis transport: the visibility timeout above the longest run segment (the
    lease sweep, not redelivery, recovers runs), and explicit socket timeouts."""
    return {
        "visibility_timeout": visibility_timeout,
        # kombu passes socket_timeout=None (forever) unless told: a publish from daphne to a
        # Redis that vanished without closing the socket would hang its request for good.
        # The worker's BRPOP blocks 1 s (kombu's brpop_timeout), well under 10 s; kombu's
        # own check (health_check_interval) reconnects a silent BRPOP connection.
        "socket_timeout": 10.0,
        "socket_connect_timeout": connect_timeout,
        "socket_keepalive": True,
        "health_check_interval": 25,
    }


def caches(redis_url: str, connect_timeout: float) -> dict[str, Any]:
    """The cache aliases.

    Throttle counters: shared through Redis when there is one, else per process. With
    Redis the throttle (common.api.auth) talks to it through its own per-process connection
    pool, one round trip per request, with 0.5 s socket timeouts (it fails open); this
    cache alias then only names the same Redis database (`clear()` in tests).

    `default` and `api_tokens` are local-memory caches: per process, as what they keep is
    valid only for the process that computed it: the dashboard's figures, the usage sums,
    the database gauges of /metrics, that no notification route exists (each for its
    AWAKEN_*_CACHE_SECONDS), and verified API tokens (AWAKEN_TOKEN_CACHE_SECONDS) in a
    cache of their own, emptied whole when a user's roles change. `shared` is Redis when
    there is one: what a change in one process must reach the others with (budgets)."""
    throttle: dict[str, Any] = (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": redis_url,
            "OPTIONS": {"socket_timeout": 2.0, "socket_connect_timeout": connect_timeout},
        }
        if redis_url
        else {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "api-throttle",
        }
    )
    return {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "api_tokens": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "api-tokens",
            "OPTIONS": {"MAX_ENTRIES": 10_000},
        },
        "api_throttle": throttle,
        # what every process must see changed at once: the budgets (docs/budgets.md)
        "shared": {**throttle, "KEY_PREFIX": "shared"}
        if redis_url
        else {**throttle, "LOCATION": "shared"},
    }
