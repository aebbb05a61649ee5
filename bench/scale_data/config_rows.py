"""The few configuration rows of the scale data set (users, providers, models, the remote
endpoint, the ten agents and their published versions), made through the application's
ORM and services in a fixed order, so two databases set up this way get the same ids.

Django and the application are imported inside the functions: they need django.setup(),
which runs after the environment is set (see bench/common.py)."""

from __future__ import annotations

from typing import Any

from bench.scale_data.dataset import (
    ADMIN,
    AGENTS,
    ENDPOINT,
    OPERATORS,
    PROVIDER_OPENAI,
    PROVIDER_SCRIPTED,
)


def ensure_config() -> dict[str, Any]:
    """Users, providers, models, the remote endpoint and the agents with their versions,
    made through the ORM and `agent_publish` in a fixed order (same ids in every fresh
    database). Idempotent. Returns ids the SQL load needs."""
    ensure_users()
    endpoint = ensure_models_and_endpoint()
    ensure_agents(endpoint)
    return config_ids()


def ensure_users() -> None:
    from django.contrib.auth import get_user_model

    users = get_user_model()
    if not users.objects.filter(username=ADMIN).exists():
        users.objects.create_superuser(ADMIN, "admin@bench.invalid", "bench-password")
    for name in OPERATORS:
        if not users.objects.filter(username=name).exists():
            users.objects.create_user(name, f"{name}@bench.invalid", "bench-password")


def ensure_models_and_endpoint() -> Any:
    """The scripted and OpenAI-compatible providers, their three models and the remote
    endpoint; returns the endpoint."""
    from agents.models import Model, ModelProvider, RemoteEndpoint

    scripted, _ = ModelProvider.objects.get_or_create(
        slug=PROVIDER_SCRIPTED,
        defaults={"name": "Scripted (offline)", "kind": ModelProvider.Kind.SCRIPTED},
    )
    openai, _ = ModelProvider.objects.get_or_create(
        slug=PROVIDER_OPENAI,
        defaults={
            "name": "OpenAI-compatible gateway",
            "kind": ModelProvider.Kind.OPENAI,
            "base_url": "https://llm.example.com/v1",
            "api_key_env": "BENCH_LLM_API_KEY",
        },
    )
    models = {
        "bench-scripted-small": (scripted, "", None, None),
        "bench-gpt-large": (openai, "gpt-large", "2.5000", "10.0000"),
        "bench-gpt-mini": (openai, "gpt-mini", "0.1500", "0.6000"),
    }
    for slug, (provider, upstream, price_in, price_out) in models.items():
        Model.objects.get_or_create(
            slug=slug,
            defaults={
                "provider": provider,
                "upstream_model": upstream,
                "input_price_per_million_usd": price_in,
                "output_price_per_million_usd": price_out,
            },
        )
    endpoint, _ = RemoteEndpoint.objects.get_or_create(
        slug=ENDPOINT,
        defaults={"name": "Partner agent (A2A)", "base_url": "https://partner.example.com/a2a"},
    )
    return endpoint


def ensure_agents(endpoint: Any) -> None:
    """The ten agents (on a model, or on the remote endpoint), each published once or
    twice."""
    from agents.models import Agent, Model
    from agents.services.agents import agent_publish
    from common.audit import Actor

    actor = Actor(label="bench", source="cli")
    permission = {
        "default_behavior": "allow",
        "rules": [
            {"tool": "write_note", "behavior": "ask"},
            {"tool": "send_email", "behavior": "ask"},
        ],
    }
    for slug, model_slug, two_versions in AGENTS:
        agent = Agent.objects.filter(slug=slug).first()
        if agent is not None:
            continue
        agent = Agent.objects.create(
            slug=slug,
            name=slug.replace("-", " ").capitalize(),
            description=f"The team's {slug.replace('-', ' ')}.",
            model=Model.objects.get(slug=model_slug) if model_slug else None,
            endpoint=None if model_slug else endpoint,
            system_prompt=f"You are the {slug.replace('-', ' ')} of the team.",
            tools=["calculator", "current_time", "write_note", "send_email"],
            permission=permission,
        )
        agent_publish(agent=agent, actor=actor, note="first version")
        if two_versions:
            agent.system_prompt += " Keep answers short."
            agent.save(update_fields=["system_prompt"])
            agent_publish(agent=agent, actor=actor, note="shorter answers")


def config_ids() -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from agents.models import Agent, Model

    agents = []
    for index, (slug, _, _) in enumerate(AGENTS):
        agent = Agent.objects.get(slug=slug)
        numbers = list(agent.versions.order_by("number").values_list("pk", flat=True))
        model = Model.objects.filter(pk=agent.model_id).first()
        agents.append(
            {
                "idx": index,
                "id": agent.pk,
                "slug": slug,
                "v1": numbers[0],
                "v2": numbers[-1],
                "price_in": model.input_price_per_million_usd if model else None,
                "price_out": model.output_price_per_million_usd if model else None,
            }
        )
    users = get_user_model().objects
    operators = [users.get(username=name).pk for name in OPERATORS]
    return {"agents": agents, "operators": operators}
