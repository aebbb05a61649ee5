"""The `scripted` model client: deterministic and offline.

With a script it plays the model's turns in order: the turn played is the number of
assistant messages since the last user message, so a resumed or re-run step gets the
same turn again. Without a script it follows a small demo policy that picks a tool from
the user's words, so the seeded demo agents behave plausibly with no network.
Tool call ids are derived from the triggering message, so a step replayed after a crash
calls its tools with the same ids (and idempotent tools do not act twice).

A scripted turn's text may contain `{last_tool_result}` (LAST_TOOL_RESULT): it is replaced
by the text of the last tool message the model reads before that turn (empty when there
is none), so a test can see a changed tool result (an edited fork) reach the answer.
Nothing else of the text is interpreted.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

from runs.runtime.ports import CancellationToken, InferenceRequest, StreamChunk
from runs.runtime.testing import Turn, play_turn
from runs.runtime.types import Message, Role, TokenUsage, ToolDescriptor

END_OF_SCRIPT = "(end of script)"
LAST_TOOL_RESULT = "{last_tool_result}"
DEMO_WORD_DELAY = 0.03


def _turn_position(messages: list[Message]) -> tuple[str, int]:
    last_user = -1
    for index, message in enumerate(messages):
        if message.role is Role.USER:
            last_user = index
    anchor = messages[last_user].id if last_user >= 0 and messages[last_user].id else "start"
    produced = sum(1 for m in messages[last_user + 1 :] if m.role is Role.ASSISTANT)
    return str(anchor), produced


def _call_id(anchor: str, turn: int, index: int) -> str:
    digest = hashlib.sha1(f"{anchor}:{turn}:{index}".encode()).hexdigest()[:16]
    return f"call_{digest}"


def _with_last_tool_result(text: str, messages: list[Message]) -> str:
    """`text` with LAST_TOOL_RESULT replaced by the last tool message's text."""
    if LAST_TOOL_RESULT not in text:
        return text
    last = next((m for m in reversed(messages) if m.role is Role.TOOL), None)
    return text.replace(LAST_TOOL_RESULT, last.text() if last else "")


def _usage(request: InferenceRequest, text: str) -> TokenUsage:
    prompt = len(request.system_prompt.split()) + sum(
        len(m.text().split()) for m in request.messages
    )
    completion = max(len(text.split()), 1)
    return TokenUsage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


class ScriptedModelClient:
    name = "scripted"

    def __init__(self, model_id: str, script: list[dict[str, Any]]) -> None:
        self.model_id = model_id
        self.script = script

    def stream(self, request: InferenceRequest, cancel: CancellationToken) -> Iterator[StreamChunk]:
        anchor, position = _turn_position(request.messages)
        raw: dict[str, Any]
        if self.script:
            raw = self.script[position] if position < len(self.script) else {"text": END_OF_SCRIPT}
        else:
            raw = demo_policy(request)
        calls = [
            {
                "id": call.get("id") or _call_id(anchor, position, index),
                "name": call["name"],
                "arguments": call.get("arguments", {}),
            }
            for index, call in enumerate(raw.get("tool_calls") or [])
        ]
        # scripts give malformed arguments by call position: {"raw_arguments": {"0": "{oops"}}
        raw_arguments = {
            calls[int(position_key)]["id"]: str(text)
            for position_key, text in (raw.get("raw_arguments") or {}).items()
            if int(position_key) < len(calls)
        }
        turn = Turn(
            text=_with_last_tool_result(raw.get("text", ""), request.messages),
            tool_calls=calls,
            delay=float(raw.get("delay", 0)),
            error=raw.get("error"),
            raw_arguments=raw_arguments,
        )
        turn.usage = _usage(request, turn.text)
        return play_turn(turn, cancel)


_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
_URL = re.compile(r"https?://\S+")
# "prepare a report on Q3 sales in 5 seconds": the topic, and how long the work takes
_REPORT = re.compile(
    r"(?is)\breport\b(?:\s+(?:on|about|for|of)\b)?\s*(.*?)"
    r"(?:\s+in\s+(\d{1,4})\s*(?:s|secs?|seconds?))?\s*[.!?]*\s*$"
)
# the head of a finished background task's message: "[background task <label> (<id>) <status>]"
BACKGROUND_RESULT = "[background task "
_BACKGROUND_HEAD = re.compile(r"^\[background task (.*) \(([^()]*)\) (\w+)\]$")
_MATH = re.compile(r"[-+*/%().\d\s^]*\d[-+*/%().\d\s^]*[-+*/%^][-+*/%().\d\s^]*\d[-+*/%().\d\s^]*")


def demo_policy(request: InferenceRequest) -> dict[str, Any]:
    messages = request.messages
    tools = {tool.name for tool in request.tools}
    last_user = next((m for m in reversed(messages) if m.role is Role.USER), None)
    if messages and messages[-1].role is Role.TOOL:
        started = _reports_started(messages)
        if started:
            return {
                "text": f"I've started the report on {started}; I'll share it when it's ready.",
                "delay": DEMO_WORD_DELAY * 8,
            }
        return {"text": _summarize(messages), "delay": DEMO_WORD_DELAY * 8}
    if messages and messages[-1].role is Role.USER and _is_background_result(messages[-1]):
        return {"text": _background_summary(messages), "delay": DEMO_WORD_DELAY * 8}
    text = last_user.text() if last_user else ""
    lowered = text.lower()
    call = _pick_tool(text, lowered, tools) or _pick_mcp_tool(text, lowered, request.tools)
    if call is None:
        available = ", ".join(sorted(tools)) or "no tools"
        return {
            "text": (
                f"You said: {text!r}. I am a demo agent with {available}. Try: "
                "'write a note about lunch', 'what time is it', 'compute 6*7', "
                "'email ops@example.com about the deploy' or 'ask a human which color'."
            ),
            "delay": DEMO_WORD_DELAY * 10,
        }
    return {"text": f"Using {call['name']}.", "tool_calls": [call], "delay": DEMO_WORD_DELAY * 3}


def _pick_tool(text: str, lowered: str, tools: set[str]) -> dict[str, Any] | None:
    delegates = sorted(name for name in tools if name.startswith("agent_run_"))
    if delegates and (
        "delegate" in lowered or "ask agent" in lowered or len(tools) == len(delegates)
    ):
        return {"name": delegates[0], "arguments": {"prompt": text}}
    if "write_note" in tools and "note" in lowered:
        title = re.sub(r"(?i).*note( about| on| that)?", "", text).strip(" .:") or "Note"
        return {"name": "write_note", "arguments": {"title": title[:200], "body": text[:20000]}}
    if "send_email" in tools and ("email" in lowered or "mail" in lowered):
        found = _EMAIL.search(text)
        to = found.group(0) if found else "ops@example.com"
        return {
            "name": "send_email",
            "arguments": {"to": [to], "subject": text[:200], "body": text[:20000]},
        }
    if "slow_report" in tools and "report" in lowered:
        return {"name": "slow_report", "arguments": _report_arguments(text)}
    if "ask_human" in tools and ("human" in lowered or "ask" in lowered or lowered.endswith("?")):
        return {"name": "ask_human", "arguments": {"question": text[:2000]}}
    if "current_time" in tools and ("time" in lowered or "clock" in lowered or "date" in lowered):
        return {"name": "current_time", "arguments": {"timezone": "UTC"}}
    if "http_get" in tools:
        url = _URL.search(text)
        if url:
            return {"name": "http_get", "arguments": {"url": url.group(0)}}
    if "calculator" in tools:
        expression = _MATH.search(text)
        if expression:
            return {
                "name": "calculator",
                "arguments": {"expression": expression.group(0).strip().replace("^", "**")},
            }
    if delegates:
        return {"name": delegates[0], "arguments": {"prompt": text}}
    return None


def _pick_mcp_tool(text: str, lowered: str, tools: list[ToolDescriptor]) -> dict[str, Any] | None:
    """An MCP tool (`mcp__<server>__<tool>`) a word of whose name the user said ("count
    the words: …" → word_count), its string arguments the text after the first ':'."""
    subject = text.split(":", 1)[1].strip() if ":" in text else text
    for tool in sorted(tools, key=lambda t: t.name):
        if not tool.name.startswith("mcp__"):
            continue
        words = [w for w in tool.name.rsplit("__", 1)[-1].split("_") if len(w) > 3]
        if any(word in lowered for word in words):
            properties = tool.parameters.get("properties") or {}
            arguments = {
                name: subject[:2000]
                for name, prop in properties.items()
                if isinstance(prop, dict) and prop.get("type") == "string"
            }
            return {"name": tool.name, "arguments": arguments}
    return None


def _summarize(messages: list[Message]) -> str:
    results: list[str] = []
    for message in reversed(messages):
        if message.role is not Role.TOOL:
            break
        results.append(message.text())
    parts = []
    for raw in reversed(results):
        try:
            data = json.loads(raw)
        except ValueError:
            parts.append(raw[:300])
            continue
        if isinstance(data, dict) and data.get("response"):
            parts.append(str(data["response"])[:500])
        elif isinstance(data, dict) and data.get("approved") is False:
            parts.append(f"the call was rejected ({data.get('message') or 'no reason given'})")
        else:
            parts.append(json.dumps(data, ensure_ascii=False)[:300])
    return "Done. " + " ".join(parts)


def _report_arguments(text: str) -> dict[str, Any]:
    found = _REPORT.search(text)
    topic = (found.group(1) if found else "").strip(" .:") or text.strip() or "the request"
    seconds = int(found.group(2)) if found and found.group(2) else 20
    return {"topic": topic[:200], "seconds": min(max(seconds, 1), 600)}


def _reports_started(messages: list[Message]) -> str:
    """The topics of the reports the last tool results say were started ("" unless every
    one of those results is such a start)."""
    results = []
    for message in reversed(messages):
        if message.role is not Role.TOOL:
            break
        results.append(message)
    calls = {
        call.id: call
        for message in messages
        if message.role is Role.ASSISTANT
        for call in message.tool_calls or []
    }
    topics = []
    for result in reversed(results):
        call = calls.get(result.tool_call_id or "")
        if call is None or call.name != "slow_report":
            return ""
        if not result.text().startswith("Started the report"):
            return ""
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        topics.append(str(arguments.get("topic") or "your topic"))
    return " and ".join(topics)


def _is_background_result(message: Message) -> bool:
    return message.role is Role.USER and message.text().startswith(BACKGROUND_RESULT)


def _background_summary(messages: list[Message]) -> str:
    """What the demo says when background work it started has finished."""
    finished = []
    for message in reversed(messages):
        if not _is_background_result(message):
            break
        finished.append(message.text())
    parts = []
    for text in reversed(finished):
        head, _, body = text.partition("\n")
        found = _BACKGROUND_HEAD.match(head)
        label, status = (found.group(1), found.group(3)) if found else ("background task", "")
        what = f"The {label}" if label.startswith("report ") else f"The background task {label}"
        body = body.strip()[:500]
        if status == "completed":
            parts.append(f"{what} is ready: {body}")
        elif status == "cancelled":
            parts.append(f"{what} was cancelled.")
        else:
            parts.append(f"{what} failed: {body or 'no reason given'}")
    return " ".join(parts)
