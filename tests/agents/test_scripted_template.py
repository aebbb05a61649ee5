"""The scripted model's `{last_tool_result}`: a turn's text gets the text of the last tool
message before that turn; everything else of the script is played as written."""

from __future__ import annotations

from agents.providers.scripted import ScriptedModelClient
from runs.runtime.ports import CancellationToken, InferenceRequest, TextChunk
from runs.runtime.types import Message, ToolCall


def played_text(script, messages):
    client = ScriptedModelClient("scripted", script)
    request = InferenceRequest(model="scripted", system_prompt="", messages=messages, tools=[])
    chunks = client.stream(request, CancellationToken())
    return "".join(c.text for c in chunks if isinstance(c, TextChunk))


def conversation(*results):
    messages = [Message.user("compute")]
    for index, result in enumerate(results):
        call = ToolCall(id=f"c{index}", name="calculator", arguments={})
        messages += [Message.assistant("", [call]), Message.tool(f"c{index}", result)]
    return messages


SCRIPT = [{"text": "one"}, {"text": "two"}, {"text": "Result: {last_tool_result}!"}]


def test_the_placeholder_is_the_last_tool_result_before_the_turn():
    assert played_text(SCRIPT, conversation("5", "35")) == "Result: 35!"


def test_no_tool_result_yet_leaves_it_empty():
    script = [{"text": "Result: {last_tool_result}."}]
    assert played_text(script, [Message.user("hi")]) == "Result: ."


def test_other_braces_and_turns_without_it_are_unchanged():
    script = [{"text": "{last_tool_result:x} {other} stays"}]
    assert played_text(script, [Message.user("hi")]) == "{last_tool_result:x} {other} stays"
    assert played_text(SCRIPT, conversation("5")) == "two"
