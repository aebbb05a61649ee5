"""Delegates: other agents offered to the model as tools `agent_run_<agent_id>`."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ..ports import ToolCallContext
from ..types import (
    BackendRunStatusKind,
    PendingToolCall,
    SuspendTicket,
    Suspension,
    ToolCallResumeMode,
    ToolDescriptor,
    ToolResult,
)
from .base import BackendRunResult, ExecutionBackendError

DelegateRunner = Callable[[str, str, ToolCallContext], BackendRunResult]

DELEGATE_TOOL_PREFIX = "agent_run_"
# The parameters of every delegate tool: the task for the delegated agent.
DELEGATE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"prompt": {"type": "string", "minLength": 1}},
    "required": ["prompt"],
    "additionalProperties": False,
}

_WAIT_ACTIONS = {
    BackendRunStatusKind.WAITING_INPUT: "agent_delegate:input_required",
    BackendRunStatusKind.WAITING_AUTH: "agent_delegate:auth_required",
    BackendRunStatusKind.SUSPENDED: "agent_delegate:suspended",
}


def delegate_tool_name(agent_id: str) -> str:
    return f"{DELEGATE_TOOL_PREFIX}{agent_id}"


def delegate_result_payload(result: BackendRunResult) -> dict[str, Any]:
    """What a delegate call returns to its parent: the delegated run's agent, status,
    response, output and steps."""
    return {
        "agent_id": result.agent_id,
        "status": str(result.status),
        "response": result.response,
        "output": result.output.to_json(),
        "steps": result.steps,
    }


class DelegateTool:
    def __init__(self, agent_id: str, description: str, runner: DelegateRunner) -> None:
        self.agent_id = agent_id
        self.runner = runner
        self._descriptor = ToolDescriptor(
            name=delegate_tool_name(agent_id),
            description=description or f"Ask agent '{agent_id}' to do a task; returns its answer.",
            parameters=copy.deepcopy(DELEGATE_PARAMETERS),
        )

    @property
    def descriptor(self) -> ToolDescriptor:
        return self._descriptor

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        name = self._descriptor.name
        try:
            result = self.runner(self.agent_id, arguments["prompt"], ctx)
        except ExecutionBackendError as exc:
            return ToolResult.error(name, exc.message)
        payload = delegate_result_payload(result)
        metadata = {"child_run_id": result.run_id} if result.run_id else {}
        kind = result.status.kind
        if kind is BackendRunStatusKind.COMPLETED:
            tool_result = ToolResult.success(name, payload)
        elif kind in _WAIT_ACTIONS:
            ticket_id = (
                f"delegate_run:{result.run_id}" if result.run_id else f"delegate_tool:{ctx.call_id}"
            )
            ticket = SuspendTicket(
                suspension=Suspension(
                    id=ticket_id,
                    action=_WAIT_ACTIONS[kind],
                    message=f"waiting for delegated agent '{self.agent_id}'",
                ),
                pending=PendingToolCall(ctx.call_id, name, arguments),
                resume_mode=ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT,
            )
            tool_result = ToolResult.pending(
                name, ticket, f"delegation to {self.agent_id} is waiting"
            )
        else:
            tool_result = ToolResult.error(
                name, f"delegation to {self.agent_id} {result.status}", payload
            )
        tool_result.metadata = metadata
        return tool_result
