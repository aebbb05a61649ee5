"""`slow_report`: starts background work (the `report` job) and returns at once; the run
receives the report as a message when it is ready (docs/background-work.md)."""

from __future__ import annotations

from typing import Any

from runs.runtime.ports import ToolCallContext
from runs.runtime.types import ToolDescriptor, ToolResult

from .patterns import NOT_BLANK


class SlowReportTool:
    """Prepares a report in the background: the run waits for it if it has nothing else
    to do, and the model reads it once it arrives."""

    name = "slow_report"
    default_seconds = 20
    max_seconds = 600

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description=(
                "Start preparing a report on a topic in the background. Returns at once; "
                "the report arrives later as a message."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "topic": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 200,
                        "pattern": NOT_BLANK,
                        "description": "What the report is about.",
                    },
                    "seconds": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": self.max_seconds,
                        "default": self.default_seconds,
                        "description": "How long the work takes (default 20).",
                    },
                },
                "required": ["topic"],
                "additionalProperties": False,
            },
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        topic = arguments["topic"].strip()
        seconds = int(arguments.get("seconds", self.default_seconds))
        if ctx.start_background is None:
            return ToolResult.error(
                self.name,
                "Background work is not available here (for example in a delegated run): "
                "the report cannot be started.",
            )
        task_id = ctx.start_background(
            "report", {"topic": topic, "seconds": seconds}, f"report on {topic}"
        )
        return ToolResult.success(
            self.name,
            {"task_id": task_id, "topic": topic, "seconds": seconds},
            f"Started the report on {topic} (background task {task_id}); it will arrive "
            "later as a message.",
        )
