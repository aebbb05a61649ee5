"""What the fake model of bench/model_server.py answers, as OpenAI's Chat Completions API
does, streamed or not: a "calculator agent" that calls `calculator` with
{"expression": "6*7"} until the last message is a tool result, then answers
"The answer is 42."; usage counted as a quarter of the request's JSON."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

MODEL_ID = "bench-model"
ANSWER = "The answer is 42."
TOOL_NAME = "calculator"
TOOL_ARGUMENTS = {"expression": "6*7"}

_ids = itertools.count(1)


def first_user_text(messages: list[Any]) -> str:
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            return content_text(message.get("content"))
    return ""


def content_text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def wants_tool(messages: list[Any]) -> bool:
    last = messages[-1] if messages else {}
    return not (isinstance(last, dict) and last.get("role") == "tool")


def usage(messages: list[Any], completion_tokens: int) -> dict[str, int]:
    prompt = sum(len(json.dumps(m)) // 4 for m in messages) or 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt + completion_tokens,
    }


def stream_body(body: dict[str, Any], messages: list[Any]) -> bytes:
    """The SSE body of a streamed answer, as OpenAI sends it."""
    number = next(_ids)
    base = {
        "id": f"chatcmpl-bench{number}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": str(body.get("model") or MODEL_ID),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    if wants_tool(messages):
        call = {
            "index": 0,
            "id": f"call_bench{number}",
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": ""},
        }
        arguments = {"index": 0, "function": {"arguments": json.dumps(TOOL_ARGUMENTS)}}
        chunks = [
            chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
            chunk({"tool_calls": [arguments]}),
            chunk({}, "tool_calls"),
        ]
        completion = 12
    else:
        chunks = [
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": ANSWER}),
            chunk({}, "stop"),
        ]
        completion = 6
    options = body.get("stream_options") or {}
    if isinstance(options, dict) and options.get("include_usage"):
        chunks.append({**base, "choices": [], "usage": usage(messages, completion)})
    lines = [b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n" for c in chunks]
    return b"".join(lines) + b"data: [DONE]\n\n"


def completion_body(body: dict[str, Any], messages: list[Any]) -> bytes:
    """A non-streamed `chat.completion`."""
    number = next(_ids)
    if wants_tool(messages):
        call = {
            "id": f"call_bench{number}",
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": json.dumps(TOOL_ARGUMENTS)},
        }
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish, completion = "tool_calls", 12
    else:
        message, finish, completion = {"role": "assistant", "content": ANSWER}, "stop", 6
    answer = {
        "id": f"chatcmpl-bench{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or MODEL_ID),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage(messages, completion),
    }
    return json.dumps(answer).encode()
