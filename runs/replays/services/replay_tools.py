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

from runs.models import Message, Run, RunEvent, ToolCall
from runs.replays.models.replays import ReplayItem, ReplaySet
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
    """(tool name + arguments key) -> the first finished result the original run got.

    The event payloads keep the data but not always its key order (PostgreSQL's jsonb
    sorts keys), so a replay answering from them alone told the model the same JSON in
    another order, and the compare page showed texts that differ where the data does
    not. The data is therefore taken, in its order, from the original's tool message
    (the text the model read, stored as a string) when that text holds the same data."""
    if original_run_id is None or not tool_names:
        return {}
    calls = dict(
        ToolCall.objects.filter(run_id=original_run_id, tool_name__in=tool_names).values_list(
            "call_id", "arguments"
        )
    )
    if not calls:
        return {}
    texts = _tool_message_texts(original_run_id, list(calls))
    answers: dict[str, dict[str, Any]] = {}
    done = RunEvent.objects.filter(run_id=original_run_id, event_type="tool_call_done")
    for payload in done.order_by("seq").values_list("payload", flat=True):
        call_id = payload.get("id")
        result = payload.get("result") or {}
        if call_id not in calls or result.get("status") == ToolStatus.PENDING.value:
            continue
        key = f"{result.get('tool_name')}:{arguments_key(calls[call_id])}"
        if key not in answers:
            answers[key] = _in_recorded_order(result, texts.get(call_id))
    return answers


def _tool_message_texts(run_id: Any, call_ids: list[str]) -> dict[str, str]:
    """The text of the tool message each call of the run got (the first one)."""
    rows = (
        Message.objects.filter(
            produced_by_run_id=run_id, role=Message.Role.TOOL, tool_call_id__in=call_ids
        )
        .order_by("-seq")
        .values_list("tool_call_id", "content")
    )
    texts: dict[str, str] = {}
    for call_id, content in rows:  # newest first: the first message of a call wins
        blocks = content if isinstance(content, list) else []
        texts[call_id] = "".join(
            str(b.get("text", ""))
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return texts


def _in_recorded_order(result: dict[str, Any], text: str | None) -> dict[str, Any]:
    """`result` with its data as the model read it (the keys in their original order)."""
    if text is None or result.get("message") is not None:
        return result  # an error's text is its message, which keeps its characters
    try:
        data = json.loads(text)
    except ValueError:
        return result
    if data != result.get("data"):
        return result  # not the same answer (edited, or not JSON of it): keep the record
    return {**result, "data": data}


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
