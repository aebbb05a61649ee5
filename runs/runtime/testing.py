"""In-memory fakes of the ports, for tests of the runtime and for ephemeral runs."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import events as ev
from .agent import AgentSpec, ResolvedAgent
from .events import Event
from .ports import (
    BackgroundStart,
    CancellationToken,
    Checkpoint,
    InferenceRequest,
    ModelError,
    StreamChunk,
    TextChunk,
    ToolCallArgsChunk,
    ToolCallContext,
    ToolCallStartChunk,
    UsageChunk,
    VersionConflictError,
)
from .types import Message, RunRecord, TokenUsage, ToolCallState, ToolDescriptor, ToolResult


class RecordingSink:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [event["event_type"] for event in self.events]


@dataclass
class InMemoryStore:
    """A thread log, run records and an event log with the ORM store's guarantees."""

    messages: dict[str, list[Message]] = field(default_factory=dict)
    runs: dict[str, RunRecord] = field(default_factory=dict)
    tool_calls: dict[str, dict[str, ToolCallState]] = field(default_factory=dict)
    events: dict[str, list[Event]] = field(default_factory=dict)
    checkpoints: int = 0
    inbox: dict[str, list[list[Message]]] = field(default_factory=dict)
    background: list[BackgroundStart] = field(default_factory=list)

    def append_messages(self, thread_id: str, messages: list[Message]) -> None:
        self.messages.setdefault(thread_id, []).extend(copy.deepcopy(messages))

    def load_messages(self, thread_id: str) -> list[Message]:
        return copy.deepcopy(self.messages.get(thread_id, []))

    def load_run(self, run_id: str) -> RunRecord | None:
        record = self.runs.get(run_id)
        return copy.deepcopy(record)

    def send_input(self, run_id: str, messages: list[Message]) -> None:
        """Steer: input for `run_id`, delivered at its next step boundary."""
        self.inbox.setdefault(run_id, []).append(messages)

    def checkpoint(self, checkpoint: Checkpoint) -> list[Message] | None:
        log = self.messages.setdefault(checkpoint.thread_id, [])
        if len(log) != checkpoint.expected_message_count:
            raise VersionConflictError(checkpoint.expected_message_count, len(log))
        log.extend(copy.deepcopy(checkpoint.new_messages))
        record = checkpoint.record
        self.runs[record.run_id] = copy.deepcopy(record)
        calls = self.tool_calls.setdefault(record.run_id, {})
        for call in checkpoint.tool_calls:
            calls[call.call_id] = copy.deepcopy(call)
        self.events.setdefault(record.run_id, []).extend(copy.deepcopy(checkpoint.events))
        self.background.extend(copy.deepcopy(checkpoint.background_starts))
        self.checkpoints += 1
        waiting = self.inbox.pop(record.run_id, []) if checkpoint.accepts_input else []
        delivered: list[Message] = []
        for index, messages in enumerate(waiting):
            delivered.extend(copy.deepcopy(messages))
            ids = [m.id or "" for m in messages]
            self.events[record.run_id].append(
                ev.input_delivered(
                    f"input-{index + 1}", "steer", "next_step", ids, [m.to_json() for m in messages]
                )
            )
        log.extend(copy.deepcopy(delivered))
        return delivered or None


@dataclass
class Turn:
    """One scripted model reply: text and/or tool calls; `error` raises a model error."""

    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    delay: float = 0.0
    usage: TokenUsage | None = None
    error: str | None = None
    raw_arguments: dict[str, str] = field(default_factory=dict)


def text_turn(text: str, **kwargs: Any) -> Turn:
    return Turn(text=text, **kwargs)


def tool_turn(
    name: str, arguments: dict[str, Any], call_id: str, text: str = "", **kwargs: Any
) -> Turn:
    return Turn(
        text=text, tool_calls=[{"id": call_id, "name": name, "arguments": arguments}], **kwargs
    )


class ScriptedLlm:
    """Plays turns in order, one per inference; asserts when exhausted."""

    name = "scripted"

    def __init__(self, turns: list[Turn]) -> None:
        self.turns = list(turns)
        self.requests: list[InferenceRequest] = []
        self._lock = threading.Lock()

    def stream(self, request: InferenceRequest, cancel: CancellationToken) -> Iterator[StreamChunk]:
        with self._lock:
            self.requests.append(request)
            if not self.turns:
                raise AssertionError("scripted LLM exhausted")
            turn = self.turns.pop(0)
        return play_turn(turn, cancel)


def play_turn(turn: Turn, cancel: CancellationToken) -> Iterator[StreamChunk]:
    if turn.error:
        raise ModelError(turn.error)
    words = turn.text.split(" ") if turn.text else []
    pause = turn.delay / max(len(words), 1) if turn.delay else 0.0
    for index, word in enumerate(words):
        if pause and cancel.wait(pause):
            return
        yield TextChunk(word if index == len(words) - 1 else word + " ")
    for call in turn.tool_calls:
        yield ToolCallStartChunk(call["id"], call["name"])
        raw = turn.raw_arguments.get(call["id"])
        yield ToolCallArgsChunk(
            call["id"], raw if raw is not None else json.dumps(call.get("arguments", {}))
        )
    yield UsageChunk(
        turn.usage
        or TokenUsage(
            prompt_tokens=10,
            completion_tokens=max(len(words), 1),
            total_tokens=10 + max(len(words), 1),
        )
    )


class EchoTool:
    def __init__(self, name: str = "echo") -> None:
        self._descriptor = ToolDescriptor(
            name,
            "Echoes its input back",
            {"type": "object", "properties": {"message": {"type": "string"}}},
        )
        self.calls: list[dict[str, Any]] = []

    @property
    def descriptor(self) -> ToolDescriptor:
        return self._descriptor

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        self.calls.append(arguments)
        return ToolResult.success(self._descriptor.name, arguments)


class FixedResolver:
    def __init__(self, agents: dict[str, ResolvedAgent]) -> None:
        self.agents = agents

    def resolve(self, agent_id: str) -> ResolvedAgent:
        if agent_id not in self.agents:
            raise KeyError(agent_id)
        return self.agents[agent_id]


def agent(agent_id: str, llm: Any, **kwargs: Any) -> ResolvedAgent:
    return ResolvedAgent(
        spec=AgentSpec(id=agent_id, model="m", system_prompt="sys"), llm=llm, **kwargs
    )
