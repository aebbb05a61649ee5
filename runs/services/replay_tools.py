"""The tools a replay run gets (docs/replays.md): wrapped at resolution, so no tool checks
whether it runs in a replay.

A tool declares its replay behaviour:
- `dry_run(arguments) -> data`: it has a side effect (`write_note`, `send_email`); a
  replay answers that data (what it would have done) and never calls `execute`;
- `replay_recorded = True`: it reads the outside world (`http_get`); with the set's
  http_mode `recorded` a replay answers from the original run's recorded result for the
  same arguments (else an error result), with `live` it calls the tool for real.
Any other tool runs as it is (pure tools: the calculator, the clock, ask_human).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from runs.models import ReplayItem, ReplaySet, Run, RunEvent, ToolCall
from runs.runtime.ports import Tool, ToolCallContext
from runs.runtime.types import ToolDescriptor, ToolResult, ToolStatus


def arguments_key(arguments: Any) -> str:
    """Arguments compared by value (key order does not matter)."""
    return json.dumps(arguments, sort_keys=True, default=str)


class DryTool:
    """A tool with a side effect, answering what it would have done."""

    def __init__(self, tool: Any) -> None:
        self.tool = tool

    @property
    def descriptor(self) -> ToolDescriptor:
        return self.tool.descriptor  # type: ignore[no-any-return]

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        return ToolResult.success(self.descriptor.name, self.tool.dry_run(arguments))


class RecordedTool:
    """A tool answered from the original run's results (`answers`: arguments key ->
    the recorded ToolResult JSON)."""

    def __init__(self, tool: Any, answers: dict[str, dict[str, Any]]) -> None:
        self.tool = tool
        self.answers = answers

    @property
    def descriptor(self) -> ToolDescriptor:
        return self.tool.descriptor  # type: ignore[no-any-return]

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        name = self.descriptor.name
        recorded = self.answers.get(arguments_key(arguments))
        if recorded is None:
            what = arguments.get("url") if isinstance(arguments, dict) else None
            return ToolResult.error(
                name, f"no recorded answer for {what or arguments_key(arguments)}"
            )
        try:
            status = ToolStatus(str(recorded.get("status")))
        except ValueError:
            status = ToolStatus.ERROR
        if status is ToolStatus.PENDING:  # the original waited for a person: not an answer
            return ToolResult.error(name, "the recorded call waited for a decision")
        return ToolResult(name, status, recorded.get("data"), recorded.get("message"))


def recorded_answers(original_run_id: Any, tool_names: set[str]) -> dict[str, dict[str, Any]]:
    """(tool name + arguments key) -> the first finished result the original run got."""
    if original_run_id is None or not tool_names:
        return {}
    calls = dict(
        ToolCall.objects.filter(run_id=original_run_id, tool_name__in=tool_names).values_list(
            "call_id", "arguments"
        )
    )
    answers: dict[str, dict[str, Any]] = {}
    done = RunEvent.objects.filter(run_id=original_run_id, event_type="tool_call_done")
    for payload in done.order_by("seq").values_list("payload", flat=True):
        call_id = payload.get("id")
        result = payload.get("result") or {}
        if call_id not in calls or result.get("status") == ToolStatus.PENDING.value:
            continue
        key = f"{result.get('tool_name')}:{arguments_key(calls[call_id])}"
        answers.setdefault(key, result)
    return answers


def replay_tool_wrapper(run: Run) -> Callable[[Tool], Tool] | None:
    """The wrapper for a replay run's tools (None for any other run)."""
    if run.run_mode != "replay":
        return None
    item = ReplayItem.objects.filter(replay_run=run).select_related("replay_set").first()
    recorded = item is not None and item.replay_set.http_mode == ReplaySet.HttpMode.RECORDED
    original_id = item.original_run_id if item is not None else None

    def wrap(tool: Tool) -> Tool:
        if callable(getattr(tool, "dry_run", None)):
            return DryTool(tool)
        if getattr(tool, "replay_recorded", False) and (recorded or item is None):
            name = tool.descriptor.name
            answers = recorded_answers(original_id, {name})
            prefix = f"{name}:"
            return RecordedTool(tool, {k[len(prefix) :]: v for k, v in answers.items()})
        return tool

    return wrap
