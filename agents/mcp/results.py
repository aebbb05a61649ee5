"""An MCP tool result as the runtime's ToolResult.

What the model reads (the result's message): the text blocks, then a note for each block
that is not shown (images, audio, binary resources: "[image/png, 68 bytes: not shown]"),
or the structured content as JSON when there is no text. The data recorded with the call
keeps the structured content and the notes. Text is cut at `max_chars` with a note, so a
huge result costs the run's history nothing beyond the limit. `isError` is a tool error
the model sees and may correct; it is not a transport failure."""

from __future__ import annotations

import json
from typing import Any

from mcp import types as mcp_types

from runs.runtime.types import ToolResult


def _blob_size(data: str) -> int:
    return len(data) * 3 // 4 if data else 0


def _note(kind: str, mime: str, data: str) -> str:
    return f"[{kind} {mime or 'unknown type'}, {_blob_size(data)} bytes: not shown]"


def _block_text(block: Any) -> tuple[str | None, str | None]:
    """(text shown, note of what is not shown) for one content block."""
    if isinstance(block, mcp_types.TextContent):
        return block.text, None
    if isinstance(block, mcp_types.ImageContent):
        return None, _note("image", block.mime_type, block.data)
    if isinstance(block, mcp_types.AudioContent):
        return None, _note("audio", block.mime_type, block.data)
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return resource.text, None
        blob = getattr(resource, "blob", "")
        return None, _note(f"resource {resource.uri}", resource.mime_type or "", blob)
    if isinstance(block, mcp_types.ResourceLink):
        return f"[resource link: {block.uri}]", None
    return None, f"[{getattr(block, 'type', 'unknown')} content: not shown]"


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n[… {len(text) - max_chars} more characters not shown]"


def tool_result(name: str, result: mcp_types.CallToolResult, *, max_chars: int) -> ToolResult:
    """The ToolResult of `name` (the agent's tool name) for the server's result."""
    texts: list[str] = []
    notes: list[str] = []
    for block in result.content:
        text, note = _block_text(block)
        if text is not None:
            texts.append(text)
        if note is not None:
            notes.append(note)
    structured = result.structured_content
    shown = "\n".join(texts)
    if not shown and structured is not None:
        shown = json.dumps(structured, ensure_ascii=False, default=str)
    message = _cut("\n".join([shown, *notes]).strip() if notes else shown, max_chars)
    if result.is_error:
        return ToolResult.error(name, message or f"Tool '{name}' failed (no message).")
    data: dict[str, Any] = {"text": message}
    if structured is not None:
        structured_text = json.dumps(structured, ensure_ascii=False, default=str)
        data["structured_content"] = (
            structured if len(structured_text) <= max_chars else _cut(structured_text, max_chars)
        )
    if notes:
        data["not_shown"] = notes
    return ToolResult.success(name, data, message or "(the tool returned no content)")
