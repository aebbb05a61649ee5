"""Model providers: the connection probe (`provider_probe`: list the provider's models,
record its health) and the operator's audited check (`provider_check`, the admin's "Test
connection"). The network call happens outside any transaction."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.db import transaction

from agents import secrets
from agents.models import Health, ModelProvider
from agents.providers import (
    ProviderConfigError,
    openai_client_class,
    provider_address_policy,
    resolve_api_key,
)
from common.audit import Actor, audit_record
from common.teams import ensure_writable
from runs.runtime.netguard import AddressRefusedError
from runs.runtime.ports import ModelError

from .health import ERROR_LIMIT, provider_health_record

if TYPE_CHECKING:  # the SDK loads with the first client built (`openai_client_class`)
    from agents.providers.openai_client import OpenAIChatClient

TEST_TIMEOUT_SECONDS = 20.0
MODELS_SHOWN = 20
ALLOW_PRIVATE_HINT = (
    "Use a public address, or allow this one with AWAKEN_PROVIDERS_ALLOW_PRIVATE: its "
    "addresses or networks (e.g. 127.0.0.1,::1 for Ollama or vLLM on this machine, "
    "10.0.0.0/8 for an internal network), or true for every non-public address."
)


def provider_address_error(base_url: str) -> str | None:
    """The SSRF guard at save time: why a provider may not use `base_url`, or None. A
    host that resolves to an address the guard refuses (private, loopback, link-local,
    …; AWAKEN_PROVIDERS_ALLOW_PRIVATE allows some or all) is refused. A host that does not
    resolve here is accepted: every connection is vetted again when it is made."""
    parts = urlsplit(base_url)
    host = parts.hostname
    if not host:
        return None  # the form's URL checks say what is missing
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        return f"Invalid port: {exc}."
    try:
        host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return f"Invalid host name '{host}'."
    try:
        provider_address_policy().vet(host, port)
    except AddressRefusedError as exc:
        if "non-public" in str(exc):
            return f"Refused: {exc}. {ALLOW_PRIVATE_HINT}"
    return None


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
        address_policy=provider_address_policy(),
    )


def _provider_contact(provider: ModelProvider) -> ConnectionCheck:
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


def provider_probe(provider: ModelProvider) -> ConnectionCheck:
    """Contact the provider and record its health (not audited)."""
    check = _provider_contact(provider)
    provider_health_record(provider_id=provider.pk, ok=check.ok, error=check.error)
    return check


def provider_check(*, provider: ModelProvider, actor: Actor) -> ConnectionCheck:
    """An operator-requested probe (the admin's "Test connection"): contact the provider,
    then record its health and the audit entry in one transaction. Refused while the
    provider's team is frozen."""
    ensure_writable(provider.team_id)
    check = _provider_contact(provider)
    with transaction.atomic():
        provider_health_record(provider_id=provider.pk, ok=check.ok, error=check.error)
        audit_record(
            actor=actor,
            action="modelprovider.test_connection",
            target_type="modelprovider",
            target_id=provider.pk,
            team=provider.team_id,
            after={
                "health": Health.HEALTHY if check.ok else Health.FAILING,
                "error": check.error[:ERROR_LIMIT],
                "models": len(check.models),
            },
        )
    return check
