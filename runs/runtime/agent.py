"""An agent ready to run: its spec (model, prompt, limits), model client, tools and policies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .permissions import PermissionPolicy
from .ports import ModelClient, Tool
from .stop import StopPolicies


@dataclass
class AgentSpec:
    id: str
    model: str
    system_prompt: str = ""
    max_rounds: int = 16
    stop_conditions: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ResolvedAgent:
    """An agent ready to run: its spec, model client, tools and policies."""

    spec: AgentSpec
    llm: ModelClient
    tools: dict[str, Tool] = field(default_factory=dict)
    permission: PermissionPolicy | None = None  # None: every tool call is allowed
    plugins: list[Any] = field(default_factory=list)

    def with_tool(self, tool: Tool) -> ResolvedAgent:
        self.tools[tool.descriptor.name] = tool
        return self

    @property
    def stop_policies(self) -> StopPolicies:
        return StopPolicies.from_spec(self.spec.max_rounds, self.spec.stop_conditions)
