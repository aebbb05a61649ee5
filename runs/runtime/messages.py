"""Thread messages and the tool calls an assistant message carries."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .stamps import drop_none, new_id

# --- Messages ------------------------------------------------------------------------------


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: Any

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolCall:
        return cls(id=data["id"], name=data["name"], arguments=data.get("arguments"))


@dataclass
class Message:
    role: Role
    content: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    visibility: str = "all"
    run_id: str | None = None
    step_index: int | None = None
    id: str | None = field(default_factory=new_id)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(Role.USER, [{"type": "text", "text": text}])

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(Role.SYSTEM, [{"type": "text", "text": text}])

    @classmethod
    def assistant(cls, text: str, tool_calls: list[ToolCall] | None = None) -> Message:
        content = [{"type": "text", "text": text}] if text else []
        return cls(Role.ASSISTANT, content, tool_calls=tool_calls or None)

    @classmethod
    def tool(cls, tool_call_id: str, text: str) -> Message:
        return cls(Role.TOOL, [{"type": "text", "text": text}], tool_call_id=tool_call_id)

    def text(self) -> str:
        return "".join(
            block.get("text", "") for block in self.content if block.get("type") == "text"
        )

    def produced_by_run_id(self) -> str | None:
        return self.run_id

    def mark_produced_by(self, run_id: str, step_index: int | None) -> None:
        """Stamp the producer; never overwrites an existing stamp."""
        if self.run_id is None:
            self.run_id = run_id
        if self.step_index is None:
            self.step_index = step_index

    def to_json(self) -> dict[str, Any]:
        metadata = drop_none({"run_id": self.run_id, "step_index": self.step_index})
        data: dict[str, Any] = {"id": self.id, "role": self.role.value, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_json() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.visibility != "all":
            data["visibility"] = self.visibility
        if metadata:
            data["metadata"] = metadata
        return drop_none(data)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Message:
        metadata = data.get("metadata") or {}
        calls = data.get("tool_calls") or None
        return cls(
            role=Role(data["role"]),
            content=list(data.get("content") or []),
            tool_calls=[ToolCall.from_json(call) for call in calls] if calls else None,
            tool_call_id=data.get("tool_call_id"),
            visibility=data.get("visibility", "all"),
            run_id=metadata.get("run_id"),
            step_index=metadata.get("step_index"),
            id=data.get("id"),
        )


def model_visible_messages(messages: list[Message]) -> list[Message]:
    """What the model sees of the log: every answered call followed directly by its answer
    (the last one: a suspended placeholder gives way to the real result, even when the
    result was appended after later input); unanswered calls are left out."""
    answers: dict[str, Message] = {}
    for message in messages:
        if message.role is Role.TOOL and message.tool_call_id:
            answers[message.tool_call_id] = message
    visible: list[Message] = []
    for message in messages:
        if message.role is Role.TOOL:
            continue
        if message.role is Role.ASSISTANT and message.tool_calls:
            answered = [call for call in message.tool_calls if call.id in answers]
            if not answered and not message.text():
                continue
            if len(answered) != len(message.tool_calls):
                message = Message(
                    role=message.role,
                    content=message.content,
                    tool_calls=answered or None,
                    id=message.id,
                    run_id=message.run_id,
                    step_index=message.step_index,
                )
            visible.append(message)
            visible.extend(answers[call.id] for call in answered)
            continue
        visible.append(message)
    while (
        visible
        and visible[-1].role is Role.ASSISTANT
        and not visible[-1].text()
        and not visible[-1].tool_calls
    ):
        visible.pop()
    return visible
