"""Provider health: recorded from connection tests and from the outcome of real model calls.

Writes are guarded updates: a result older than the one already recorded never overwrites
it, and a success only writes when the provider was not already healthy, so a healthy
provider costs no write per model call."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import transaction

from agents import secrets
from agents.health import ERROR_LIMIT, health_record
from agents.models import Health, ModelProvider
from runs.runtime.ports import ModelError
from runs.services.audit import Actor, audit_record

from . import ProviderConfigError, openai_client_class, resolve_api_key

if TYPE_CHECKING:
    from .openai_client import OpenAIChatClient

logger = logging.getLogger(__name__)

TEST_TIMEOUT_SECONDS = 20.0
MODELS_SHOWN = 20


def provider_health_record(
    *,
    provider_id: Any,
    error: str | None = None,
    only_if_changed: bool = False,
    now: dt.datetime | None = None,
) -> bool:
    """Record a check's outcome: healthy when `error` is None, else failing with it."""
    return health_record(
        ModelProvider, provider_id, error=error, at=now, only_if_changed=only_if_changed
    )


class HealthReporter:
    """The `on_outcome` hook of a run's model client: marks the provider failing with the
    provider's message, and healthy again after a success (one write, not one per call)."""

    def __init__(self, provider_id: Any, *, healthy: bool) -> None:
        self.provider_id = provider_id
        self.healthy = healthy

    def __call__(self, error: str | None) -> None:
        if error is None and self.healthy:
            return
        provider_health_record(provider_id=self.provider_id, error=error, only_if_changed=True)
        self.healthy = error is None


@dataclass(frozen=True)
class ConnectionCheck:
    ok: bool
    models: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def summary(self) -> str:
        if not self.ok:
            return self.error
        if not self.models:
            return "connected; the provider lists no models"
        shown = ", ".join(self.models[:MODELS_SHOWN])
        more = len(self.models) - MODELS_SHOWN
        return f"connected; {len(self.models)} models: {shown}" + (
            f" and {more} more" if more > 0 else ""
        )


def provider_client(provider: ModelProvider, *, timeout: float | None = None) -> OpenAIChatClient:
    """An SDK client for the provider's stored settings (key decrypted here)."""
    api_key = resolve_api_key(
        ciphertext=provider.api_key_encrypted,
        key_env=provider.api_key_env,
        who=f"provider {provider.slug!r}",
    )
    client_class = openai_client_class()
    return client_class(
        model_id=provider.slug,
        upstream_model="",
        base_url=provider.base_url.strip(),
        api_key=api_key,
        timeout=timeout if timeout is not None else provider.timeout_seconds,
        max_retries=0,
        extra_headers={str(k): str(v) for k, v in (provider.headers or {}).items()},
    )


def provider_check(provider: ModelProvider) -> ConnectionCheck:
    """List the provider's models (`GET /models` through the SDK); no database writes, so
    callers never hold a transaction open across the network call. A scripted provider
    needs no network and is always healthy."""
    if provider.kind == ModelProvider.Kind.SCRIPTED:
        slugs = provider.models.order_by("slug").values_list("slug", flat=True)
        return ConnectionCheck(ok=True, models=list(slugs))
    try:
        client = provider_client(
            provider, timeout=min(provider.timeout_seconds, TEST_TIMEOUT_SECONDS)
        )
    except (ProviderConfigError, secrets.SecretError) as exc:
        return ConnectionCheck(ok=False, error=str(exc))
    try:
        return ConnectionCheck(ok=True, models=client.list_models())
    except ModelError as exc:
        return ConnectionCheck(ok=False, error=str(exc))
    finally:
        client.close()


def provider_test_connection(
    *, provider: ModelProvider, actor: Actor | None = None
) -> ConnectionCheck:
    """Check the provider, then record its health (and, given an actor, the audit entry)
    in one transaction."""
    check = provider_check(provider)
    with transaction.atomic():
        provider_health_record(provider_id=provider.pk, error=None if check.ok else check.error)
        if actor is not None:
            audit_record(
                actor=actor,
                action="modelprovider.test_connection",
                target_type="modelprovider",
                target_id=provider.pk,
                after={
                    "health": Health.HEALTHY if check.ok else Health.FAILING,
                    "error": check.error[:ERROR_LIMIT],
                    "models": len(check.models),
                },
            )
    return check
