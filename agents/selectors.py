"""Reads of agent configuration: the rows the API and the admin list, and the published
versions runs pin. Nothing here writes."""

from __future__ import annotations

import functools
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from agents.errors import AgentNotPublished
from agents.models import Agent, AgentVersion, RemoteEndpoint


def published(**filters: Any) -> QuerySet[AgentVersion]:
    """Published versions (not the draft snapshots forks and replays run on)."""
    return AgentVersion.objects.filter(draft=False, **filters)


def agent_list() -> QuerySet[Agent]:
    """Agents with what the API shows of them (model, endpoint, delegates, versions)."""
    return Agent.objects.select_related("model", "endpoint").prefetch_related(
        "delegates", "versions"
    )


def endpoint_list() -> QuerySet[RemoteEndpoint]:
    """Remote endpoints with the agents that run on them."""
    return RemoteEndpoint.objects.prefetch_related("agents")


def agent_version_latest(agent: Agent) -> AgentVersion | None:
    """The latest published version, or None if the agent was never published. An agent
    read with `agents_with_latest_version()` answers from its annotation and the cache."""
    version_id = getattr(agent, "latest_version_id", _UNREAD)
    if version_id is _UNREAD:
        return published(agent_id=agent.pk).order_by("-number").first()
    return agent_version_by_id(version_id) if version_id is not None else None


_UNREAD = object()


def agents_with_latest_version() -> QuerySet[Agent]:
    """Agents annotated with `latest_version_id` (None: never published): starting a run
    reads the agent and the version it pins in one query."""
    latest = published(agent=OuterRef("pk")).order_by("-number")
    return Agent.objects.annotate(latest_version_id=Subquery(latest.values("pk")[:1]))


@functools.lru_cache(maxsize=512)
def agent_version_by_id(version_id: int) -> AgentVersion:
    """A version (published, or a draft snapshot), cached per process: versions never change once written
    (tests that roll back rows clear it with `cache_clear()`)."""
    return AgentVersion.objects.get(pk=version_id)


def agent_version_current(*, agent: Agent) -> AgentVersion:
    """The version a new run pins: the latest published one (never the draft)."""
    version = agent_version_latest(agent)
    if version is None:
        raise AgentNotPublished(
            f"agent '{agent.slug}' has no published version; publish it in the admin",
            {"agent_id": agent.slug},
        )
    return version


def agent_versions(agent: Agent) -> list[AgentVersion]:
    """Every published version of `agent`, newest first, with who published it."""
    return list(published(agent=agent).select_related("published_by").order_by("-number"))


def agent_version_by_number(agent: Agent, number: int) -> AgentVersion | None:
    return published(agent=agent, number=number).first()


def agent_version_before(agent: Agent, number: int) -> AgentVersion | None:
    """The version published just before v`number` (None for the first one)."""
    return published(agent=agent, number__lt=number).order_by("-number").first()
