from __future__ import annotations

from typing import Any

import factory

from agents.models import Agent, AgentVersion, Model, ModelProvider


class ProviderFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ModelProvider
        django_get_or_create = ("slug",)

    slug = "scripted"
    name = "Scripted"
    kind = ModelProvider.Kind.SCRIPTED


class ModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Model

    slug = factory.Sequence(lambda n: f"model-{n}")
    provider = factory.SubFactory(ProviderFactory)
    script: Any = factory.LazyFunction(list)


class AgentFactory(factory.django.DjangoModelFactory):
    """An agent with v1 published (runs need a published version); `published=False`
    leaves it a never-published draft."""

    class Meta:
        model = Agent
        skip_postgeneration_save = True

    slug = factory.Sequence(lambda n: f"agent-{n}")
    name = factory.LazyAttribute(lambda o: o.slug)
    model = factory.SubFactory(ModelFactory)
    system_prompt = "You are a test agent."
    tools: Any = factory.LazyFunction(lambda: ["calculator", "write_note"])
    permission: Any = factory.LazyFunction(lambda: {"default_behavior": "allow", "rules": []})

    @factory.post_generation
    def published(obj: Agent, create: bool, extracted: Any, **kwargs: Any) -> None:
        if create and extracted is not False:
            publish(obj)


def publish(agent: Agent) -> AgentVersion:
    """Freeze the agent's current draft as its next version (test setup: no validation, no
    audit entry; the admin's path is `agents.services.agent_publish`)."""
    from agents.services import agent_spec, agent_version_latest

    latest = agent_version_latest(agent)
    return AgentVersion.objects.create(
        agent=agent, number=latest.number + 1 if latest else 1, spec=agent_spec(agent)
    )


def scripted_agent(script: list[dict[str, Any]], **kwargs: Any) -> Agent:
    return AgentFactory(model=ModelFactory(script=script), **kwargs)


def call(name: str, arguments: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"name": name, "arguments": arguments}
    if call_id:
        data["id"] = call_id
    return data


def role_group(name: str) -> Any:
    """The role's group; recreated if a transactional test's flush removed it."""
    from django.contrib.auth.models import Group, Permission

    from runs.roles import ROLES

    group, created = Group.objects.get_or_create(name=name)
    if created or not group.permissions.exists():
        for app_label, codename in ROLES[name]:
            group.permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )
    return group


def user_with_role(role: str, username: str | None = None) -> Any:
    from django.contrib.auth.models import User

    user = User.objects.create_user(username or role, password="pw")
    user.groups.add(role_group(role))
    return User.objects.get(pk=user.pk)  # fresh: no cached permissions
