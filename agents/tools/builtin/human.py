"""`ask_human`: the run waits on a ticket until an operator answers."""

from __future__ import annotations

from typing import Any

from runs.runtime.ports import ToolCallContext
from runs.runtime.types import (
    PendingToolCall,
    SuspendTicket,
    Suspension,
    ToolCallResumeMode,
    ToolDescriptor,
    ToolResult,
)

from .patterns import NOT_BLANK


class AskHumanTool:
    """Ask an operator a question: the run waits until a human answers, and the answer
    becomes this call's result."""

    name = "ask_human"

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name=self.name,
            description=(
                "Ask a human operator a question and wait for the answer. Optionally offer choices."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "question": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 2000,
                        "pattern": NOT_BLANK,
                    },
                    "choices": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": 20,
                        "uniqueItems": True,
                        "items": {"type": "string", "minLength": 1, "maxLength": 200},
                    },
                },
                "required": ["question"],
                "additionalProperties": False,
            },
        )

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        if ctx.resume_input is not None:
            return ToolResult.success(self.name, ctx.resume_input.result)
        question: str = arguments["question"]
        ticket = SuspendTicket(
            Suspension(
                id=f"suspend_{ctx.call_id}",
                action=f"tool:{self.name}",
                message=question,
                parameters=arguments,
            ),
            PendingToolCall(ctx.call_id, self.name, arguments),
            ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT,
        )
        return ToolResult.pending(self.name, ticket, f"Waiting for a human to answer: {question}")
