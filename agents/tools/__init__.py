"""Tools agents can call. `registry` holds the built-ins; agents name them in `Agent.tools`."""

from __future__ import annotations

from runs.runtime.ports import Tool

from .registry import ToolRegistry, UnknownToolError, default_registry, registry

__all__ = [
    "ToolRegistry",
    "UnknownToolError",
    "default_registry",
    "get_tool",
    "registry",
    "tool_names",
]


def get_tool(name: str) -> Tool:
    """The registered tool called `name`; raises UnknownToolError listing the known names."""
    return registry.get(name)


def tool_names() -> list[str]:
    """Every registered tool name, sorted."""
    return registry.names()
