"""Turns a pinned agent version into the runtime's ResolvedAgent."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from agents.models import Agent, AgentVersion, Model
from agents.providers import client_for, model_snapshot
from agents.selectors import agent_version_latest
from agents.services.mcp import is_mcp_tool, mcp_tools_for_spec
from agents.tools import get_tool
from runs.runtime.backends import DelegateTool
from runs.runtime.backends.delegate import DelegateRunner
from runs.runtime.loop import AgentSpec, ResolvedAgent
from runs.runtime.permissions import PermissionPolicy
from runs.runtime.ports import Tool

ToolWrapper = Callable[[Tool], Tool]


class AgentNotResolvable(LookupError):
    """An agent id with no published version, or a version naming a model that is gone."""


class VersionResolver:
    """Resolves agent ids: pinned versions first, else the agent's latest published version
    (delegates); a draft is never used. `tool_wrapper` wraps each tool the agents get
    (replays: dry side effects, recorded answers; see runs.replays.services.replay_tools)."""

    def __init__(
        self,
        pinned: dict[str, AgentVersion],
        delegate_runner: DelegateRunner | None = None,
        tool_wrapper: ToolWrapper | None = None,
    ) -> None:
        self.pinned = dict(pinned)
        self.delegate_runner = delegate_runner
        self.tool_wrapper = tool_wrapper
        self._resolved: dict[str, ResolvedAgent] = {}

    def preload(self, agent_id: str) -> None:
        """Resolve now (inside the caller's transaction) what `resolve` will be asked for;
        a failure is left for `resolve` to raise where the run expects it."""
        with contextlib.suppress(AgentNotResolvable):
            self.resolve(agent_id)

    def version(self, agent_id: str) -> AgentVersion:
        if agent_id not in self.pinned:
            agent = Agent.objects.filter(slug=agent_id).first()
            if agent is None:
                raise AgentNotResolvable(f"agent '{agent_id}' does not exist")
            latest = agent_version_latest(agent)
            if latest is None:
                raise AgentNotResolvable(
                    f"agent '{agent_id}' has no published version; publish it in the admin"
                )
            self.pinned[agent_id] = latest
        return self.pinned[agent_id]

    def _description(self, agent_id: str) -> str:
        """A delegate's published description (offered to the model with its tool)."""
        try:
            return str(self.version(agent_id).spec.get("description") or "")
        except AgentNotResolvable:
            return ""  # calling it fails with the same clear error

    def resolve(self, agent_id: str) -> ResolvedAgent:
        if agent_id not in self._resolved:
            self._resolved[agent_id] = self._resolve(agent_id)
        return self._resolved[agent_id]

    def _resolve(self, agent_id: str) -> ResolvedAgent:
        version = self.version(agent_id)
        spec: dict[str, Any] = version.spec
        if not spec.get("model_id"):
            raise AgentNotResolvable(
                f"agent '{agent_id}' v{version.number} has no local model"
                + (
                    f" (it runs on endpoint '{spec['endpoint_id']}')"
                    if spec.get("endpoint_id")
                    else ""
                )
            )
        model = Model.objects.select_related("provider").filter(slug=spec["model_id"]).first()
        if model is None:
            raise AgentNotResolvable(
                f"agent '{agent_id}' v{version.number} uses model '{spec['model_id']}', "
                "which no longer exists"
            )
        tools: dict[str, Any] = {
            name: get_tool(name) for name in spec.get("tools") or [] if not is_mcp_tool(name)
        }
        # MCP tools as the version froze them; a name it did not freeze stays unknown
        tools.update(mcp_tools_for_spec(spec))
        if self.tool_wrapper is not None:
            tools = {name: self.tool_wrapper(tool) for name, tool in tools.items()}
        if self.delegate_runner is not None:
            for delegate_id in spec.get("delegates") or []:
                description = self._description(delegate_id)
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
