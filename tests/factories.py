from __future__ import annotations

from typing import Any

import factory

from agents.models import Agent, AgentVersion, Model, ModelProvider

# A permission that asks before `write_note` and allows every other tool: a run whose
# script writes a note waits for a human decision.
APPROVAL: dict[str, Any] = {
    "default_behavior": "allow",
    "rules": [{"tool": "write_note", "behavior": "ask"}],
}


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
    audit entry; the admin's path is `agents.services.agents.agent_publish`)."""
    from agents.selectors import agent_version_latest
    from agents.services.agents import agent_spec

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

    from common.roles import ROLES

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


def team(slug: str, **fields: Any) -> Any:
    """The team `slug` (made if missing), with `fields` set."""
    from common.models import Team

    row, _ = Team.objects.update_or_create(slug=slug, defaults={"name": slug.title(), **fields})
    return row


def team_member(role: str, team_slug: str, username: str | None = None) -> Any:
    """A user whose one role is `role` in team `team_slug` (no role group: nothing
    site-wide)."""
    from django.contrib.auth.models import User

    from common.models import Membership

    user = User.objects.create_user(username or f"{role}-{team_slug}", password="pw")
    Membership.objects.create(team=team(team_slug), user=user, role=role)
    return User.objects.get(pk=user.pk)  # fresh: no cached permissions


def view_only_user(username: str = "viewer") -> Any:
    """A user in no role whose one permission is `runs.view_run`."""
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user(username, password="x")
    user.user_permissions.add(Permission.objects.get(codename="view_run"))
    return User.objects.get(pk=user.pk)  # fresh: no cached permissions


def superuser(username: str = "root") -> Any:
    from django.contrib.auth.models import User

    return User.objects.create_superuser(username, password="pw")


# --- runs in a known state -------------------------------------------------------------------


def note_call(title: str = "lunch") -> dict[str, Any]:
    """A scripted `write_note` call (the tool APPROVAL asks about)."""
    return call("write_note", {"title": title, "body": "b"})


# the `write_note` call of a default `waiting_run`
NOTE = note_call()


def waiting_run(
    title: str = "lunch",
    *,
    script: list[dict[str, Any]] | None = None,
    permission: dict[str, Any] = APPROVAL,
    tools: list[str] | None = None,
) -> Any:
    """A run of a new scripted agent driven until it waits: by default its agent asks
    (APPROVAL) before writing the note `title`, then answers "all done"."""
    from runs.models import Run
    from runs.services.submission_flow import run_start
    from tests.runs.helpers import drive

    agent = scripted_agent(
        script or [{"text": "noting", "tool_calls": [note_call(title)]}, {"text": "all done"}],
        permission=permission,
        **({"tools": tools} if tools else {}),
    )
    run = drive(run_start(agent=agent, messages="write it down"))
    assert run.status == Run.Status.WAITING, run.status_reason
    return run


def step_end_event(run: Any, seq: int) -> Any:
    """An unsaved `step_end` event row of `run` at `seq` (for logs grown without running)."""
    from runs.models import RunEvent

    return RunEvent(run=run, seq=seq, event_type="step_end", payload={"event_type": "step_end"})


def done_run(text: str = "hi there") -> Any:
    """A run of a new scripted agent that answered `text` and finished."""
    from runs.models import Run
    from runs.services.submission_flow import run_start
    from tests.runs.helpers import drive

    agent = scripted_agent([{"text": text}])
    run = drive(run_start(agent=agent, messages="hello"))
    assert run.status == Run.Status.DONE
    return run


# --- API credentials -------------------------------------------------------------------------


def token_for(user: Any, name: str = "test", **kwargs: Any) -> str:
    """A new API token of `user`; returns its raw value."""
    from common.api.tokens import token_create
    from common.audit import Actor

    _, raw = token_create(user=user, name=name, actor=Actor(label="test", source="cli"), **kwargs)
    return raw


def bearer(raw: str) -> Any:
    """An APIClient that sends the raw token `raw`."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client
