"""Model clients: adapters of the runtime's ModelClient port."""

from __future__ import annotations

from typing import Any

from runs.runtime.ports import ModelClient

from .scripted import ScriptedModelClient


class ProviderConfigError(Exception):
    pass


def client_for(model: dict[str, Any]) -> ModelClient:
    """Build the client for a model row's frozen description (see `model_snapshot`)."""
    kind = model["provider_kind"]
    if kind == "scripted":
        return ScriptedModelClient(model["id"], model.get("script") or [])
    raise ProviderConfigError(f"model provider kind {kind!r} is not available in this build")


def model_snapshot(model: Any) -> dict[str, Any]:
    return {
        "id": model.slug,
        "provider_id": model.provider.slug,
        "provider_kind": model.provider.kind,
        "upstream_model": model.upstream_model,
        "script": model.script,
    }
