"""Model clients: adapters of the runtime's ModelClient port.

A provider's API key is stored encrypted (or named by an environment variable). The
frozen model description (`model_snapshot`) carries only the ciphertext; `client_for`
decrypts it into the SDK client and nowhere else, so no snapshot, event, log line or
error message holds the key. An `openai` client reports each call's outcome back to the
provider's health (failing with the provider's message; healthy again after a success),
and connects only through the SSRF guard: a base URL on a non-public address is refused
unless AWAKEN_PROVIDERS_ALLOW_PRIVATE allows it (`provider_address_policy`).

The `openai` SDK is imported when the first `openai` client is built
(`openai_client_class`), not with this package: the admin imports this package at Django
setup, and a process that never calls an `openai` provider should not carry the SDK.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from django.conf import settings

from agents import secrets
from agents.services.health import HealthReporter, provider_health_record
from runs.runtime.netguard import AddressPolicy
from runs.runtime.ports import ModelClient

from .scripted import ScriptedModelClient

if TYPE_CHECKING:
    from .openai_client import OpenAIChatClient


class ProviderConfigError(Exception):
    pass


def client_for(model: dict[str, Any]) -> ModelClient:
    """Build the client for a model row's frozen description (see `model_snapshot`)."""
    kind = model["provider_kind"]
    if kind == "scripted":
        return ScriptedModelClient(model["id"], model.get("script") or [])
    if kind == "openai":
        try:
            return _openai_client(model)
        except ProviderConfigError as exc:
            _report_failure(model, str(exc))
            raise
    raise ProviderConfigError(f"model provider kind {kind!r} is not available in this build")


def _report_failure(model: dict[str, Any], message: str) -> None:
    pk = model.get("provider_pk")
    if pk is not None:
        provider_health_record(provider_id=pk, ok=False, error=message)


def resolve_api_key(*, ciphertext: str, key_env: str, who: str) -> str | None:
    """The stored key, else the named environment variable's value, else None (no key).

    Raises ProviderConfigError (naming the variable, never a value) when the stored key
    cannot be decrypted or the variable is not set."""
    if ciphertext:
        try:
            return secrets.decrypt(ciphertext)
        except secrets.SecretError as exc:
            raise ProviderConfigError(f"{who}: {exc}") from None
    key_env = key_env.strip()
    if not key_env:
        return None
    value = os.environ.get(key_env)
    if value is None:
        raise ProviderConfigError(
            f"{who}: environment variable {key_env!r} (the provider's API key) is not set"
        )
    return value


def provider_address_policy() -> AddressPolicy:
    """The non-public addresses a provider's base URL may reach: none unless
    AWAKEN_PROVIDERS_ALLOW_PRIVATE (true, or the addresses and networks allowed)."""
    return AddressPolicy.from_setting(getattr(settings, "AWAKEN_PROVIDERS_ALLOW_PRIVATE", False))


def openai_client_class() -> type[OpenAIChatClient]:
    """The `openai` model client class (a blank `base_url` means OpenAI's own API)."""
    # imported here, not at the top: the openai SDK costs ~40 MB and ~0.5 s of every
    # process that imports it, and only processes calling an `openai` provider need it
    from .openai_client import OpenAIChatClient  # noqa: PLC0415 (openai SDK, loaded on first use)

    return OpenAIChatClient


def _openai_client(model: dict[str, Any]) -> OpenAIChatClient:
    api_key = resolve_api_key(
        ciphertext=model.get("api_key_ciphertext") or "",
        key_env=model.get("api_key_env") or "",
        who=f"model {model['id']!r} (provider {model.get('provider_id') or '?'!r})",
    )
    base_url = (model.get("base_url") or "").strip()
    timeout = model.get("timeout")
    reporter = None
    if model.get("provider_pk") is not None:
        reporter = HealthReporter(
            model["provider_pk"], healthy=model.get("provider_health") == "healthy"
        )
    client_class = openai_client_class()
    return client_class(
        model_id=model["id"],
        upstream_model=(model.get("upstream_model") or "").strip() or model["id"],
        base_url=base_url,
        api_key=api_key,
        timeout=float(timeout) if timeout else 300.0,
        extra_headers={str(k): str(v) for k, v in (model.get("headers") or {}).items()},
        on_outcome=reporter,
        address_policy=provider_address_policy(),
    )


def model_snapshot(model: Any) -> dict[str, Any]:
    """What `client_for` needs, from a Model row with its provider: the key only as
    ciphertext, plus the provider's row id and health for the outcome reports."""
    provider = model.provider
    return {
        "id": model.slug,
        "provider_id": provider.slug,
        "provider_pk": getattr(provider, "pk", None),
        "provider_kind": provider.kind,
        "provider_health": getattr(provider, "health", ""),
        "upstream_model": model.upstream_model,
        "script": model.script,
        "base_url": provider.base_url,
        "timeout": provider.timeout_seconds,
        "api_key_env": provider.api_key_env,
        "api_key_ciphertext": getattr(provider, "api_key_encrypted", "") or "",
        "headers": dict(getattr(provider, "headers", None) or {}),
    }
