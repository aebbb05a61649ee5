"""Writes and validation for agent configuration."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.models import Agent, AgentVersion
from runs.runtime.permissions import PatternError, PermissionPolicy
from runs.runtime.stop import StopConfigError, StopPolicies


def agent_config_errors(
    *, tools: Any, permission: Any, max_rounds: int, stop_conditions: Any
) -> dict[str, str]:
    """Field -> message for every invalid part of an agent's configuration."""
    from agents.tools import tool_names

    errors: dict[str, str] = {}
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        errors["tools"] = "Tools must be a list of tool names."
    else:
        unknown = sorted(set(tools) - set(tool_names()))
        if unknown:
            errors["tools"] = (
                f"Unknown tools: {', '.join(unknown)}. Known: {', '.join(tool_names())}."
            )
    try:
        PermissionPolicy.from_json(permission or None)
    except PatternError as exc:
        errors["permission"] = str(exc)
    try:
        StopPolicies.from_spec(
            max_rounds, stop_conditions if isinstance(stop_conditions, list) else None
        )
        if not isinstance(stop_conditions, list):
            errors["stop_conditions"] = "Stop conditions must be a list."
    except StopConfigError as exc:
        errors["stop_conditions"] = str(exc)
    return errors


def agent_spec(agent: Agent) -> dict[str, Any]:
    """The configuration a run pins: everything needed to resolve the agent later."""
    return {
        "id": agent.slug,
        "name": agent.name,
        "description": agent.description,
        "model_id": agent.model.slug if agent.model else None,
        "system_prompt": agent.system_prompt,
        "tools": list(agent.tools),
        "permission": agent.permission or {},
        "max_rounds": agent.max_rounds,
        "stop_conditions": list(agent.stop_conditions or []),
        "delegates": sorted(agent.delegates.values_list("slug", flat=True)),
        "ticket_deadline_seconds": agent.ticket_deadline_seconds,
        "ticket_default_action": agent.ticket_default_action,
    }


@transaction.atomic
def agent_version_current(*, agent: Agent) -> AgentVersion:
    """The latest published version, publishing a new one if the config changed since."""
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    spec = agent_spec(locked)
    latest = locked.versions.order_by("-number").first()
    if latest is not None and latest.spec == spec:
        return latest
    number = latest.number + 1 if latest else 1
    return AgentVersion.objects.create(agent=locked, number=number, spec=spec)
