"""`current_time` and `sleep`: the clock, which models do not have, and waiting on it."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from runs.runtime.ports import ToolCallContext
from runs.runtime.types import ToolDescriptor, ToolResult


class CurrentTimeTool:
    """The current date and time: models have no clock of their own."""

    name = "current_time"

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description="Get the current date and time in an IANA time zone (default UTC).",
            parameters={
                "type": "object",
                "properties": {
                    "timezone": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 64,
                        "pattern": r"^[A-Za-z0-9_+\-/]+$",
                        "description": "IANA time zone name, e.g. Europe/Paris. Default: UTC.",
                    }
                },
                "required": [],
                "additionalProperties": False,
            },
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        name = arguments.get("timezone") or "UTC"
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            return ToolResult.error(
                self.name, f"Unknown time zone '{name}'. Use an IANA name such as Europe/Paris."
            )
        now = datetime.now(zone)
        return ToolResult.success(
            self.name,
            {
                "timezone": name,
                "iso": now.isoformat(timespec="seconds"),
                "unix": int(now.timestamp()),
            },
        )


class SleepTool:
    """Waits a while, giving way at once to cancellation: for pacing workflows and for
    exercising long-running tool calls (leases, worker crashes, cancellation)."""

    name = "sleep"
    max_seconds = 300

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description="Wait for the given number of seconds (at most 300) before continuing.",
            parameters={
                "type": "object",
                "properties": {
                    "seconds": {"type": "number", "minimum": 0, "maximum": self.max_seconds}
                },
                "required": ["seconds"],
                "additionalProperties": False,
            },
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        seconds = float(arguments["seconds"])
        if ctx.cancel.wait(seconds):
            return ToolResult.error(self.name, f"cancelled before {seconds:g} seconds had passed")
        return ToolResult.success(self.name, {"slept_seconds": seconds})
