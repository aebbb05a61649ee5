"""The tool registry: the names an agent's `tools` list may refer to, and the objects behind
them. Agents are validated against `names()`; the runtime looks tools up with `get()`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from runs.runtime.ports import Tool
from runs.runtime.types import ToolDescriptor

from .builtin import BUILTIN_TOOLS


class UnknownToolError(LookupError):
    """A tool name that is not registered; the message lists the names that are."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        self.known = sorted(known)
        listed = ", ".join(self.known) or "(none)"
        super().__init__(f"Unknown tool '{name}'. Known tools: {listed}.")


class ToolRegistry:
    """Name -> tool. Names are unique so an agent's configuration is unambiguous."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool, *, replace: bool = False) -> Tool:
        """Add `tool` under its descriptor's name; a duplicate is an error unless `replace`."""
        name = tool.descriptor.name
        if not name:
            raise ValueError("A tool needs a non-empty name.")
        if name in self._tools and not replace:
            raise ValueError(f"A tool named '{name}' is already registered.")
        self._tools[name] = tool
        return tool

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownToolError(name, self._tools) from None

    def names(self) -> list[str]:
        return sorted(self._tools)

    def descriptors(self, names: Iterable[str] | None = None) -> list[ToolDescriptor]:
        """Descriptors of `names` (all tools when None), sorted by name; unknown names raise."""
        selected = self.names() if names is None else sorted(set(names))
        return [self.get(name).descriptor for name in selected]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools[name] for name in self.names())

    def __len__(self) -> int:
        return len(self._tools)


def default_registry() -> ToolRegistry:
    """A fresh registry holding the built-in tools."""
    return ToolRegistry(tool_class() for tool_class in BUILTIN_TOOLS)


registry = default_registry()
