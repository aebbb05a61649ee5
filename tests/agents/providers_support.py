"""Shared by the provider, cost, health and secrets tests: providers pointing at the real
local OpenAI-compatible server, published agents using them, and the admin form data."""

from __future__ import annotations

import secrets as pysecrets
from decimal import Decimal
from typing import Any

from agents.models import Agent, Model, ModelProvider
from agents.selectors import agent_version_latest
from agents.services.agents import agent_publish
from common.audit import SYSTEM
from runs.models import Run
from runs.services.submission_flow import run_start
from tests.factories import AgentFactory
from tests.runs.helpers import drive

from .openai_server import FakeOpenAIServer


def unique_secret() -> str:
    return f"sk-test-{pysecrets.token_hex(16)}"


def published(agent: Agent) -> Agent:
    if agent_version_latest(agent) is None:
        agent_publish(agent=agent, actor=SYSTEM)
    return agent


def openai_provider(
    server: FakeOpenAIServer | None,
    *,
    slug: str = "local",
    key: str = "",
    headers: dict[str, str] | None = None,
    **fields: Any,
) -> ModelProvider:
    provider = ModelProvider(
        slug=slug,
        name=fields.pop("name", f"Local {slug}"),
        kind=ModelProvider.Kind.OPENAI,
        base_url=server.base_url if server is not None else fields.pop("base_url"),
        headers=headers or {},
        timeout_seconds=fields.pop("timeout_seconds", 5),
        **fields,
    )
    if key:
        provider.set_api_key(key)
    provider.save()
    return provider


def priced_model(
    provider: ModelProvider,
    *,
    slug: str = "gpt-local",
    input_price: str | None = None,
    output_price: str | None = None,
    **fields: Any,
) -> Model:
    return Model.objects.create(
        slug=slug,
        provider=provider,
        upstream_model=fields.pop("upstream_model", "gpt-test"),
        input_price_per_million_usd=Decimal(input_price) if input_price is not None else None,
        output_price_per_million_usd=Decimal(output_price) if output_price is not None else None,
        **fields,
    )


def agent_on(model: Model, slug: str | None = None, **kwargs: Any) -> Agent:
    extra = {"slug": slug} if slug else {}
    return published(AgentFactory(model=model, tools=[], **extra, **kwargs))


def run_to_end(agent: Agent, text: str = "hello") -> Run:
    return drive(run_start(agent=agent, messages=text))


def provider_form(provider: ModelProvider | None = None, **overrides: Any) -> dict[str, Any]:
    """The admin change form's POST data for `provider` (or a new one), with overrides."""
    data: dict[str, Any] = {
        "slug": provider.slug if provider else "local",
        "name": provider.name if provider else "Local",
        "kind": provider.kind if provider else ModelProvider.Kind.OPENAI,
        "base_url": provider.base_url if provider else "http://127.0.0.1:9/v1",
        "api_key": "",
        "api_key_env": provider.api_key_env if provider else "",
        "headers": "{}",
        "timeout_seconds": provider.timeout_seconds if provider else 30,
    }
    if provider is not None:
        import json

        data["headers"] = json.dumps(provider.headers)
    data.update(overrides)
    return {key: value for key, value in data.items() if value is not None}
