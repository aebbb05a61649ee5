"""The Chat Completions wire format of the `openai` model client, both ways: runtime
messages and tools as the request's `messages` and `tools`, and the server's streamed
chunks (text, reasoning, tool-call pieces, usage) as the runtime's stream chunks. Pure
translation: no network, no SDK client."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runs.runtime.ports import (
    InferenceRequest,
    ModelError,
    ReasoningChunk,
    StreamChunk,
    TextChunk,
    ToolCallArgsChunk,
    ToolCallStartChunk,
    UsageChunk,
)
from runs.runtime.types import Message, Role, TokenUsage, ToolDescriptor

# --- request conversion -------------------------------------------------------------------


def _arguments_json(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments if arguments is not None else {}, ensure_ascii=False, default=str)


def convert_message(message: Message) -> dict[str, Any]:
    """One runtime message as a Chat Completions message."""
    text = message.text()
    if message.role is Role.ASSISTANT:
        data: dict[str, Any] = {"role": "assistant"}
        if message.tool_calls:
            data["content"] = text or None
            data["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _arguments_json(call.arguments)},
                }
                for call in message.tool_calls
            ]
        else:
            data["content"] = text
        return data
    if message.role is Role.TOOL:
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": text}
    return {"role": message.role.value, "content": text}


def convert_tool(tool: ToolDescriptor) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters or {"type": "object", "properties": {}},
        },
    }


def build_messages(request: InferenceRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    messages.extend(convert_message(message) for message in request.messages)
    return messages


# --- stream translation -------------------------------------------------------------------


@dataclass
class _ToolCallSlot:
    id: str
    name: str = ""
    started: bool = False
    pending_args: list[str] = field(default_factory=list)


def _field(obj: Any, name: str) -> Any:
    """An attribute of an SDK model (declared or extra) or a key of a plain mapping."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None)
        if isinstance(extra, Mapping):
            value = extra.get(name)
    return value


def _int_or_none(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"expected a token count, got {value!r}")
    return int(value)


def usage_from(raw: Any) -> TokenUsage:
    prompt = _int_or_none(_field(raw, "prompt_tokens"))
    completion = _int_or_none(_field(raw, "completion_tokens"))
    total = _int_or_none(_field(raw, "total_tokens"))
    if total is None and (prompt is not None or completion is not None):
        total = (prompt or 0) + (completion or 0)
    prompt_details = _field(raw, "prompt_tokens_details")
    completion_details = _field(raw, "completion_tokens_details")
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        cache_read_tokens=_int_or_none(_field(prompt_details, "cached_tokens")),
        cache_creation_tokens=_int_or_none(_field(prompt_details, "cache_write_tokens")),
        thinking_tokens=_int_or_none(_field(completion_details, "reasoning_tokens")),
    )


class StreamTranslator:
    """Turns `chat.completion.chunk` objects into runtime chunks.

    Tool calls are tracked by their `index`: the first fragment of an index (with its id
    and name) starts the call, its `function.arguments` pieces follow as argument chunks.
    Servers differ: some repeat the id (or name) on every fragment, some send the name and
    the first arguments together, some omit the id (one is made up), and some number every
    parallel call 0 (a new id with a name under a known index starts a new call). Usage is
    reported once, at the end: the last usage the server sent."""

    def __init__(self) -> None:
        self._by_key: dict[Any, _ToolCallSlot] = {}
        self._slots: list[_ToolCallSlot] = []
        self._ids: set[str] = set()
        self.usage: TokenUsage | None = None

    def feed(self, chunk: Any) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        usage = _field(chunk, "usage")
        if usage is not None:
            self.usage = usage_from(usage)
        for choice in _field(chunk, "choices") or []:
            if _field(choice, "index") not in (0, None):
                continue  # n > 1 is never requested; ignore other choices
            delta = _field(choice, "delta")
            if delta is None:
                continue
            for name in ("reasoning_content", "reasoning"):
                reasoning = _field(delta, name)
                if isinstance(reasoning, str) and reasoning:
                    out.append(ReasoningChunk(reasoning))
                    break
            content = _field(delta, "content")
            if isinstance(content, str) and content:
                out.append(TextChunk(content))
            for position, call in enumerate(_field(delta, "tool_calls") or []):
                out.extend(self._tool_call(position, call))
        return out

    def _tool_call(self, position: int, call: Any) -> list[StreamChunk]:
        index = _field(call, "index")
        call_id = _field(call, "id") or None
        function = _field(call, "function")
        name = _field(function, "name") or None
        arguments = _field(function, "arguments")
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)  # some servers send objects
        key: Any = index if index is not None else (call_id or f"position:{position}")

        slot = self._by_key.get(key)
        if slot is not None and call_id and call_id != slot.id and name:
            slot = None  # every parallel call under one index: a new id and name, a new call
        if slot is None:
            slot = _ToolCallSlot(id=self._unique_id(call_id))
            self._by_key[key] = slot
            self._slots.append(slot)

        out: list[StreamChunk] = []
        if not slot.started:
            if name:
                slot.name = name
                slot.started = True
                out.append(ToolCallStartChunk(slot.id, slot.name))
                out.extend(ToolCallArgsChunk(slot.id, piece) for piece in slot.pending_args)
                slot.pending_args.clear()
            elif arguments:
                slot.pending_args.append(arguments)  # no name yet: hold the arguments
                return out
        if arguments and slot.started:
            out.append(ToolCallArgsChunk(slot.id, arguments))
        return out

    def _unique_id(self, call_id: str | None) -> str:
        candidate = call_id or f"call_{uuid.uuid4().hex[:24]}"
        if candidate in self._ids:
            candidate = f"{candidate}_{len(self._ids)}"
        self._ids.add(candidate)
        return candidate

    def finish(self) -> list[StreamChunk]:
        unnamed = [slot.id for slot in self._slots if not slot.started]
        if unnamed:
            raise ModelError(
                f"malformed stream data from provider: tool call {unnamed[0]!r} has no function name"
            )
        return [UsageChunk(self.usage)] if self.usage is not None else []
