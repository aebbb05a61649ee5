"""Model clients: adapters of the runtime's ModelClient port."""

from __future__ import annotations

import os
from typing import Any

from runs.runtime.ports import ModelClient

from .openai_client import DEFAULT_BASE_URL, OpenAIChatClient
from .scripted import ScriptedModelClient


class ProviderConfigError(Exception):
    pass


def client_for(model: dict[str, Any]) -> ModelClient:
    """Build the client for a model row's frozen description (see `model_snapshot`)."""
    kind = model["provider_kind"]
    if kind == "scripted":
        return ScriptedModelClient(model["id"], model.get("script") or [])
    if kind == "openai":
        return _openai_client(model)
    raise ProviderConfigError(f"model provider kind {kind!r} is not available in this build")


def _openai_client(model: dict[str, Any]) -> OpenAIChatClient:
    api_key: str | None = None
    key_env = (model.get("api_key_env") or "").strip()
    if key_env:
        api_key = os.environ.get(key_env)
        if api_key is None:
            raise ProviderConfigError(
                f"model {model['id']!r}: environment variable {key_env!r} (the provider's "
                "API key) is not set"
            )
    base_url = (model.get("base_url") or "").strip() or DEFAULT_BASE_URL
    timeout = model.get("timeout")
    return OpenAIChatClient(
        model_id=model["id"],
        upstream_model=(model.get("upstream_model") or "").strip() or model["id"],
        base_url=base_url,
        api_key=api_key,
        timeout=float(timeout) if timeout else 300.0,
    )


def model_snapshot(model: Any) -> dict[str, Any]:
    return {
        "id": model.slug,
        "provider_id": model.provider.slug,
        "provider_kind": model.provider.kind,
        "upstream_model": model.upstream_model,
        "script": model.script,
        "base_url": model.provider.base_url,
        "timeout": model.provider.timeout_seconds,
        "api_key_env": model.provider.api_key_env,
    }
