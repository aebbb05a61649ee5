"""Turns a pinned agent version into the runtime's ResolvedAgent."""

from __future__ import annotations

from typing import Any

from agents.models import Agent, AgentVersion, Model
from agents.providers import client_for, model_snapshot
from agents.services import agent_version_current
from agents.tools import get_tool
from runs.runtime.backends import DelegateTool
from runs.runtime.backends.delegate import DelegateRunner
from runs.runtime.loop import AgentSpec, ResolvedAgent
from runs.runtime.permissions import PermissionPolicy


class VersionResolver:
    """Resolves agent ids: pinned versions first, else the agent's current version."""

    def __init__(
        self, pinned: dict[str, AgentVersion], delegate_runner: DelegateRunner | None = None
    ) -> None:
        self.pinned = dict(pinned)
        self.delegate_runner = delegate_runner

    def version(self, agent_id: str) -> AgentVersion:
        if agent_id not in self.pinned:
            agent = Agent.objects.get(slug=agent_id)
            self.pinned[agent_id] = agent_version_current(agent=agent)
        return self.pinned[agent_id]

    def resolve(self, agent_id: str) -> ResolvedAgent:
        spec: dict[str, Any] = self.version(agent_id).spec
        model = Model.objects.select_related("provider").get(slug=spec["model_id"])
        tools = {name: get_tool(name) for name in spec.get("tools") or []}
        if self.delegate_runner is not None:
            for delegate_id in spec.get("delegates") or []:
                description = (
                    Agent.objects.filter(slug=delegate_id)
                    .values_list("description", flat=True)
                    .first()
                    or ""
                )
                tool = DelegateTool(delegate_id, description, self.delegate_runner)
                tools[tool.descriptor.name] = tool
        return ResolvedAgent(
            spec=AgentSpec(
                id=spec["id"],
                model=model.slug,
                system_prompt=spec.get("system_prompt") or "",
                max_rounds=int(spec.get("max_rounds", 16)),
                stop_conditions=list(spec.get("stop_conditions") or []),
            ),
            llm=client_for(model_snapshot(model)),
            tools=tools,
            permission=PermissionPolicy.from_json(spec.get("permission") or None),
        )
