"""The recorded health of providers, endpoints and MCP servers: the outcome of the last
probe or real call.

Writes are guarded updates: an outcome older than the one already recorded never
overwrites it, and (for a provider's model calls, `only_if_changed`) a success only writes
when the row was not already healthy, so a healthy provider costs no write per call."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Q
from django.utils import timezone

from agents.models import Health, HealthFields, ModelProvider, RemoteEndpoint
from agents.models_mcp import McpServer

ERROR_LIMIT = 2000


def _health_record(
    model: type[HealthFields],
    pk: Any,
    *,
    error: str | None,
    at: dt.datetime | None,
    only_if_changed: bool = False,
) -> bool:
    """Healthy when `error` is None, else failing with it — unless a newer outcome was
    recorded meanwhile. `only_if_changed` skips rewriting a healthy row. Returns whether
    the row changed."""
    at = at or timezone.now()
    rows = model._default_manager.filter(pk=pk).filter(
        Q(health_checked_at__isnull=True) | Q(health_checked_at__lte=at)
    )
    if error is None:
        if only_if_changed:
            rows = rows.exclude(health=Health.HEALTHY)
        changes = {"health": Health.HEALTHY, "health_error": ""}
    else:
        changes = {"health": Health.FAILING, "health_error": error[:ERROR_LIMIT]}
    return bool(rows.update(**changes, health_checked_at=at))


def provider_health_record(
    *,
    provider_id: Any,
    ok: bool,
    error: str = "",
    at: dt.datetime | None = None,
    only_if_changed: bool = False,
) -> bool:
    """Record a provider's probe or model call outcome (at `at`, default now)."""
    return _health_record(
        ModelProvider,
        provider_id,
        error=None if ok else error,
        at=at,
        only_if_changed=only_if_changed,
    )


def endpoint_health_record(
    *, endpoint_id: Any, ok: bool, error: str = "", at: dt.datetime | None = None
) -> bool:
    """Record an endpoint's probe or call outcome (at `at`, default now)."""
    return _health_record(RemoteEndpoint, endpoint_id, error=None if ok else error, at=at)


class HealthReporter:
    """The `on_outcome` hook of a run's model client: marks the provider failing with the
    provider's message, and healthy again after a success (one write, not one per call)."""

    def __init__(self, provider_id: Any, *, healthy: bool) -> None:
        self.provider_id = provider_id
        self.healthy = healthy

    def __call__(self, error: str | None) -> None:
        if error is None and self.healthy:
            return
        provider_health_record(
            provider_id=self.provider_id,
            ok=error is None,
            error=error or "",
            only_if_changed=True,
        )
        self.healthy = error is None


def mcp_server_health_record(
    *,
    server_id: Any,
    ok: bool,
    error: str = "",
    at: dt.datetime | None = None,
    only_if_changed: bool = False,
) -> bool:
    """Record an MCP server's check or call outcome (at `at`, default now)."""
    return _health_record(
        McpServer, server_id, error=None if ok else error, at=at, only_if_changed=only_if_changed
    )
