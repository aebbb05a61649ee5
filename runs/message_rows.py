"""Thread messages between their rows and the runtime's `Message`; the text of a row's
content and the part of its thread's log a run read and wrote."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from common.jsonsafe import without_nul
from runs.models import Message, Run
from runs.runtime import types as rt


def message_from_row(row: Message) -> rt.Message:
    calls = row.tool_calls or None
    return rt.Message(
        role=rt.Role(row.role),
        content=list(row.content or []),
        tool_calls=[rt.ToolCall.from_json(c) for c in calls] if calls else None,
        tool_call_id=row.tool_call_id or None,
        visibility=row.visibility,
        run_id=str(row.produced_by_run_id) if row.produced_by_run_id else None,
        step_index=row.step_index,
        id=str(row.id),
    )


def message_to_row(thread_id: Any, seq: int, message: rt.Message) -> Message:
    return Message(
        id=UUID(message.id) if message.id else None,
        thread_id=thread_id,
        seq=seq,
        role=message.role.value,
        content=without_nul(message.content),
        tool_calls=without_nul([c.to_json() for c in message.tool_calls])
        if message.tool_calls
        else None,
        tool_call_id=message.tool_call_id or "",
        visibility=message.visibility,
        produced_by_run_id=message.run_id,
        step_index=message.step_index,
    )


def message_text(content: Any) -> str:
    """The text blocks of a message's content (a list of {type, text} blocks)."""
    if not isinstance(content, list):
        return ""
    return "".join(
        str(block.get("text", ""))
        for block in content
        if isinstance(block, dict) and block.get("type") == "text"
    )


def message_range(run: Run) -> tuple[int, int] | None:
    """The part of its thread's log a run read and wrote: from the first message of its
    input range to the last of its output range (None when it recorded neither)."""
    ranges = [
        part["range"]
        for part in (run.input, run.output)
        if isinstance(part, dict) and isinstance(part.get("range"), dict)
    ]
    if not ranges:
        return None
    return min(int(r["from_seq"]) for r in ranges), max(int(r["to_seq"]) for r in ranges)
