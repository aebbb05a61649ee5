"""The `openai` model client against a real local Chat Completions server (no mocks)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from agents.providers import ProviderConfigError, client_for, model_snapshot
from agents.providers.openai_client import OpenAIChatClient
from agents.providers.openai_wire import StreamTranslator
from runs.runtime.loop import AgentLoop, RunIdentity
from runs.runtime.netguard import AddressPolicy
from runs.runtime.ports import (
    CancellationToken,
    InferenceRequest,
    ModelError,
    ReasoningChunk,
    StreamChunk,
    TextChunk,
    ToolCallArgsChunk,
    ToolCallStartChunk,
    UsageChunk,
)
from runs.runtime.testing import EchoTool, InMemoryStore, RecordingSink, agent
from runs.runtime.types import (
    Message,
    RunRecord,
    RunStatus,
    TerminationReason,
    TokenUsage,
    ToolCall,
    ToolDescriptor,
)

from .openai_server import (
    CallSpec,
    FakeOpenAIServer,
    Reply,
    error_reply,
    rate_limit_reply,
    raw_reply,
    stall_reply,
    text_reply,
    tool_call_reply,
    usage_event,
)

# --- helpers -------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


# the fake server listens on this machine: the explicit opt-in a local model server needs
LOCAL = AddressPolicy.from_setting(["127.0.0.1", "::1"])


def make_client(
    server: FakeOpenAIServer, *, timeout: float = 5, max_retries: int = 3, **kwargs: Any
) -> OpenAIChatClient:
    return OpenAIChatClient(
        model_id="local",
        upstream_model=kwargs.pop("upstream_model", "gpt-test"),
        base_url=kwargs.pop("base_url", server.base_url),
        api_key=kwargs.pop("api_key", None),
        timeout=timeout,
        max_retries=max_retries,
        address_policy=kwargs.pop("address_policy", LOCAL),
        **kwargs,
    )


def simple_request(tools: list[ToolDescriptor] | None = None) -> InferenceRequest:
    return InferenceRequest(
        model="local", system_prompt="sys", messages=[Message.user("hello")], tools=tools or []
    )


def collect(
    client: OpenAIChatClient,
    request: InferenceRequest | None = None,
    cancel: CancellationToken | None = None,
) -> list[StreamChunk]:
    return list(client.stream(request or simple_request(), cancel or CancellationToken()))


def arguments_by_call(chunks: list[StreamChunk]) -> dict[str, str]:
    started: dict[str, str] = {}
    args: dict[str, str] = {}
    for chunk in chunks:
        if isinstance(chunk, ToolCallStartChunk):
            assert chunk.id not in started, "a call is started once"
            started[chunk.id] = chunk.name
            args[chunk.id] = ""
        elif isinstance(chunk, ToolCallArgsChunk):
            assert chunk.id in started, "arguments come after their call's start"
            args[chunk.id] += chunk.delta
    return args


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


ECHO = EchoTool().descriptor


# --- streaming -------------------------------------------------------------------------------


def test_streamed_text_becomes_text_chunks_and_usage(server: FakeOpenAIServer) -> None:
    server.script(text_reply("Hel", "lo, ", "world", usage=(12, 5)))

    chunks = collect(make_client(server))

    assert chunks == [
        TextChunk("Hel"),
        TextChunk("lo, "),
        TextChunk("world"),
        UsageChunk(TokenUsage(prompt_tokens=12, completion_tokens=5, total_tokens=17)),
    ]


def test_usage_details_and_reasoning(server: FakeOpenAIServer) -> None:
    server.script(
        text_reply(
            "42",
            reasoning=["Let me ", "think."],
            usage=usage_event(100, 30, 130, cached=64, reasoning=20),
        )
    )

    chunks = collect(make_client(server))

    assert chunks == [
        ReasoningChunk("Let me "),
        ReasoningChunk("think."),
        TextChunk("42"),
        UsageChunk(
            TokenUsage(
                prompt_tokens=100,
                completion_tokens=30,
                total_tokens=130,
                cache_read_tokens=64,
                thinking_tokens=20,
            )
        ),
    ]


def test_reasoning_field_is_also_understood(server: FakeOpenAIServer) -> None:
    reply = text_reply("ok")
    reply.events.insert(1, {"choices": [{"index": 0, "delta": {"reasoning": "hmm"}}]})
    server.script(reply)

    chunks = collect(make_client(server))

    assert chunks[:2] == [ReasoningChunk("hmm"), TextChunk("ok")]


def test_tool_call_streamed_in_fragments(server: FakeOpenAIServer) -> None:
    fragments = ['{"mess', 'age": "hi', ' there", "n"', ": 3}"]
    server.script(tool_call_reply(CallSpec("call_abc", "echo", fragments), usage=(20, 9)))

    chunks = collect(make_client(server), simple_request([ECHO]))

    starts = [c for c in chunks if isinstance(c, ToolCallStartChunk)]
    assert starts == [ToolCallStartChunk("call_abc", "echo")]
    assert chunks.index(starts[0]) < min(
        i for i, c in enumerate(chunks) if isinstance(c, ToolCallArgsChunk)
    )
    deltas = [c.delta for c in chunks if isinstance(c, ToolCallArgsChunk)]
    assert deltas == fragments
    assert json.loads(arguments_by_call(chunks)["call_abc"]) == {"message": "hi there", "n": 3}
    assert chunks[-1] == UsageChunk(
        TokenUsage(prompt_tokens=20, completion_tokens=9, total_tokens=29)
    )


def test_two_parallel_tool_calls(server: FakeOpenAIServer) -> None:
    server.script(
        tool_call_reply(
            CallSpec("call_1", "echo", ['{"message"', ': "one"}']),
            CallSpec("call_2", "lookup", ['{"q": ', '"two"}']),
            text="Calling both.",
            interleave=True,
        )
    )

    chunks = collect(make_client(server), simple_request([ECHO]))

    assert TextChunk("Calling both.") in chunks
    assert [c for c in chunks if isinstance(c, ToolCallStartChunk)] == [
        ToolCallStartChunk("call_1", "echo"),
        ToolCallStartChunk("call_2", "lookup"),
    ]
    args = arguments_by_call(chunks)
    assert {key: json.loads(value) for key, value in args.items()} == {
        "call_1": {"message": "one"},
        "call_2": {"q": "two"},
    }


@pytest.mark.parametrize(
    ("repeat_id", "name_with_arguments"), [(True, False), (False, True), (True, True)]
)
def test_server_variants_of_tool_call_fragments(
    server: FakeOpenAIServer, repeat_id: bool, name_with_arguments: bool
) -> None:
    server.script(
        tool_call_reply(
            CallSpec("call_1", "echo", ['{"message": ', '"x"}']),
            CallSpec("call_2", "echo", ["{}"]),
            repeat_id=repeat_id,
            name_with_arguments=name_with_arguments,
        )
    )

    chunks = collect(make_client(server))

    assert [c.id for c in chunks if isinstance(c, ToolCallStartChunk)] == ["call_1", "call_2"]
    args = arguments_by_call(chunks)
    assert json.loads(args["call_1"]) == {"message": "x"}
    assert json.loads(args["call_2"]) == {}


def test_parallel_calls_that_all_claim_index_zero_stay_apart() -> None:
    translator = StreamTranslator()
    out: list[StreamChunk] = []
    for call_id, arguments in (("a", '{"x": 1}'), ("b", '{"y": 2}')):
        out += translator.feed(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": call_id,
                                    "function": {"name": "echo", "arguments": arguments},
                                }
                            ]
                        },
                    }
                ]
            }
        )
    assert arguments_by_call(out) == {"a": '{"x": 1}', "b": '{"y": 2}'}


def test_a_call_without_id_gets_one() -> None:
    translator = StreamTranslator()
    out = translator.feed(
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "echo"}}]}}]}
    )
    out += translator.feed(
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]}
    )
    start = out[0]
    assert isinstance(start, ToolCallStartChunk)
    assert start.id.startswith("call_")
    assert out[1] == ToolCallArgsChunk(start.id, "{}")


# --- the request ---------------------------------------------------------------------------------


def test_request_body_has_system_prompt_history_tool_calls_and_tools(
    server: FakeOpenAIServer,
) -> None:
    server.script(text_reply("ok"))
    assistant = Message.assistant(
        "Let me check.",
        [
            ToolCall("call_1", "echo", {"message": "hi"}),
            ToolCall("call_2", "echo", '{"message": "raw"}'),
        ],
    )
    request = InferenceRequest(
        model="local",
        system_prompt="You are terse.",
        messages=[
            Message.user("say hi twice"),
            assistant,
            Message.tool("call_1", '{"message": "hi"}'),
            Message.tool("call_2", "raw result"),
            Message.assistant("", [ToolCall("call_3", "echo", {})]),
            Message.tool("call_3", "{}"),
        ],
        tools=[ECHO],
    )
    client = make_client(server, api_key="sk-test", extra_headers={"X-Trace": "t-1"})

    collect(client, request)

    body = server.requests[0]
    assert body["model"] == "gpt-test"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "say hi twice"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "echo", "arguments": '{"message": "hi"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "echo", "arguments": '{"message": "raw"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"message": "hi"}'},
        {"role": "tool", "tool_call_id": "call_2", "content": "raw result"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_3",
                    "type": "function",
                    "function": {"name": "echo", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_3", "content": "{}"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "echo",
                "description": ECHO.description,
                "parameters": ECHO.parameters,
            },
        }
    ]
    assert server.paths == ["/v1/chat/completions"]
    assert server.headers[0]["authorization"] == "Bearer sk-test"
    assert server.headers[0]["x-trace"] == "t-1"


def test_no_tools_no_system_prompt(server: FakeOpenAIServer) -> None:
    server.script(text_reply("ok"))
    request = InferenceRequest(model="m", system_prompt="", messages=[Message.user("hi")], tools=[])

    collect(make_client(server), request)

    body = server.requests[0]
    assert "tools" not in body
    assert body["messages"] == [{"role": "user", "content": "hi"}]


# --- errors ---------------------------------------------------------------------------------------


def test_rate_limited_twice_then_success(server: FakeOpenAIServer) -> None:
    server.script(rate_limit_reply(), rate_limit_reply(), text_reply("finally"))
    started = time.monotonic()

    chunks = collect(make_client(server, max_retries=3))

    assert time.monotonic() - started < 2
    assert TextChunk("finally") in chunks
    assert server.request_count == 3


def test_rate_limited_forever_gives_up_after_the_retries(server: FakeOpenAIServer) -> None:
    server.always(rate_limit_reply("Rate limit reached for gpt-test on requests per min"))

    with pytest.raises(ModelError) as caught:
        collect(make_client(server, max_retries=2))

    message = str(caught.value)
    assert "rate limited by provider after 2 retries" in message
    assert "Rate limit reached for gpt-test on requests per min" in message
    assert server.request_count == 3  # the first try and 2 retries, then it stops


def test_server_error_carries_status_and_provider_message(server: FakeOpenAIServer) -> None:
    server.always(error_reply(500, "The server had an error while processing your request."))

    with pytest.raises(ModelError) as caught:
        collect(make_client(server, max_retries=1))

    assert str(caught.value) == (
        "provider error 500: The server had an error while processing your request."
    )
    assert server.request_count == 2


def test_client_error_is_not_retried(server: FakeOpenAIServer) -> None:
    server.always(error_reply(400, "Invalid value for 'model'", "invalid_request_error"))

    with pytest.raises(ModelError, match=r"provider error 400: Invalid value for 'model'"):
        collect(make_client(server))

    assert server.request_count == 1


def test_stalled_stream_times_out(server: FakeOpenAIServer) -> None:
    server.script(stall_reply(seconds=10))
    started = time.monotonic()

    with pytest.raises(ModelError, match=r"provider timed out after 1s"):
        collect(make_client(server, timeout=1))

    assert time.monotonic() - started < 3


def test_cancel_ends_a_stalled_stream_quickly(server: FakeOpenAIServer) -> None:
    server.script(stall_reply("Hel", seconds=10))
    cancel = CancellationToken()
    stream = make_client(server, timeout=30).stream(simple_request(), cancel)
    chunks = [next(stream)]  # the server is silent after this one
    threading.Timer(0.3, cancel.cancel).start()
    started = time.monotonic()

    chunks.extend(stream)

    elapsed = time.monotonic() - started
    assert elapsed < 1
    assert chunks == [TextChunk("Hel")]


def test_calls_in_flight_take_no_thread_each(server: FakeOpenAIServer) -> None:
    """Streams are awaited on the process's one loop: eight calls waiting on the
    server at once add no thread beyond the eight callers."""
    server.always(Reply(delay_headers=0.5, events=text_reply("ok").events))

    def client_side() -> int:  # the test server answers each connection on a thread
        return sum("process_request" not in t.name for t in threading.enumerate())

    before = client_side()
    counts: list[int] = []
    results: list[list[Any]] = []

    def call() -> None:
        results.append(collect(make_client(server, timeout=30)))

    callers = [threading.Thread(target=call) for _ in range(8)]
    for caller in callers:
        caller.start()
    time.sleep(0.3)  # every call is waiting for its headers now
    counts.append(client_side())
    for caller in callers:
        caller.join(10)

    assert len(results) == 8 and all(r[0] == TextChunk("ok") for r in results)
    # the callers, the loop's thread and its few resolver helpers
    assert counts[0] - before <= 8 + 1 + 6, (before, counts)


def test_cancel_while_waiting_for_the_response(server: FakeOpenAIServer) -> None:
    server.script(Reply(delay_headers=10, events=text_reply("late").events))
    cancel = CancellationToken()
    threading.Timer(0.3, cancel.cancel).start()
    started = time.monotonic()

    chunks = collect(make_client(server, timeout=30), cancel=cancel)

    assert chunks == []
    assert time.monotonic() - started < 1


def test_cancel_during_rate_limit_backoff(server: FakeOpenAIServer) -> None:
    server.always(error_reply(429, "slow down", "rate_limit_exceeded", retry_after_ms=5000))
    cancel = CancellationToken()
    threading.Timer(0.3, cancel.cancel).start()
    started = time.monotonic()

    chunks = collect(make_client(server), cancel=cancel)

    assert chunks == []
    assert time.monotonic() - started < 1


def test_closing_the_iterator_mid_stream(server: FakeOpenAIServer) -> None:
    server.script(stall_reply("Hel", seconds=10))
    stream = make_client(server, timeout=30).stream(simple_request(), CancellationToken())

    assert next(stream) == TextChunk("Hel")
    started = time.monotonic()
    stream.close()  # type: ignore[attr-defined]
    assert time.monotonic() - started < 0.5


def test_unreachable_provider() -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    client = OpenAIChatClient(
        "local", "gpt-test", base_url, None, timeout=2, max_retries=0, address_policy=LOCAL
    )

    with pytest.raises(ModelError) as caught:
        collect(client)

    assert str(caught.value).startswith(f"cannot reach provider at {base_url}: ")


def test_malformed_stream_data(server: FakeOpenAIServer) -> None:
    server.script(raw_reply("this is not json"))

    with pytest.raises(ModelError, match="malformed stream data from provider"):
        collect(make_client(server))


def test_error_event_inside_the_stream(server: FakeOpenAIServer) -> None:
    server.script(raw_reply(json.dumps({"error": {"message": "model overloaded", "type": "x"}})))

    with pytest.raises(ModelError, match="provider error: model overloaded"):
        collect(make_client(server))


# --- end to end through the runtime -----------------------------------------------------------


def run_loop(llm: OpenAIChatClient) -> tuple[Any, InMemoryStore, EchoTool]:
    store = InMemoryStore()
    store.append_messages("t1", [Message.user("echo hi please")])
    store.runs["r1"] = RunRecord(run_id="r1", thread_id="t1", agent_id="a")
    echo = EchoTool()
    resolved = agent("a", llm).with_tool(echo)
    result = AgentLoop(
        agent=resolved,
        identity=RunIdentity("t1", "r1", "a"),
        messages=store.load_messages("t1"),
        sink=RecordingSink(),
        store=store,
        previous=store.load_run("r1"),
    ).run()
    return result, store, echo


def test_agent_loop_runs_a_tool_call_then_answers(server: FakeOpenAIServer) -> None:
    server.script(
        tool_call_reply(CallSpec("call_e1", "echo", ['{"message"', ': "hi"}']), usage=(20, 9)),
        text_reply("Echoed ", "hi.", usage=(41, 4)),
    )

    result, store, echo = run_loop(make_client(server))

    assert result.termination == TerminationReason.natural_end()
    assert result.response == "Echoed hi."
    assert echo.calls == [{"message": "hi"}]
    record = store.runs["r1"]
    assert record.status is RunStatus.DONE
    assert (record.input_tokens, record.output_tokens) == (20 + 41, 9 + 4)
    second = server.requests[1]["messages"]
    assert second[0] == {"role": "system", "content": "sys"}
    assert second[2]["tool_calls"][0]["function"] == {
        "name": "echo",
        "arguments": '{"message": "hi"}',
    }
    assert second[3]["role"] == "tool"
    assert second[3]["tool_call_id"] == "call_e1"
    assert json.loads(second[3]["content"]) == {"message": "hi"}


def test_agent_loop_ends_with_the_provider_error(server: FakeOpenAIServer) -> None:
    server.always(error_reply(500, "upstream exploded"))

    result, store, echo = run_loop(make_client(server, max_retries=1))

    assert result.termination.type == TerminationReason.ERROR
    record = store.runs["r1"]
    assert (record.status, record.status_reason) == (RunStatus.DONE, "error")
    assert record.error_payload == {"message": "provider error 500: upstream exploded"}
    assert echo.calls == []


# --- registration ---------------------------------------------------------------------------


def snapshot(**provider: Any) -> dict[str, Any]:
    defaults = {
        "slug": "local-provider",
        "kind": "openai",
        "base_url": "http://127.0.0.1:1/v1",
        "api_key_env": "",
        "timeout_seconds": 42.0,
    }
    model = SimpleNamespace(
        slug=provider.pop("model_slug", "my-model"),
        upstream_model=provider.pop("upstream_model", ""),
        script=[],
        provider=SimpleNamespace(**{**defaults, **provider}),
    )
    return model_snapshot(model)


def test_client_for_builds_the_openai_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWAKEN_TEST_OPENAI_KEY", "sk-from-env")
    data = snapshot(api_key_env="AWAKEN_TEST_OPENAI_KEY", upstream_model="gpt-x")

    client = client_for(data)

    assert isinstance(client, OpenAIChatClient)
    assert client.name == "openai"
    assert (client.upstream_model, client.base_url, client.timeout) == (
        "gpt-x",
        "http://127.0.0.1:1/v1",
        42.0,
    )
    assert client._client.api_key == "sk-from-env"


def test_client_for_falls_back_to_the_slug_and_no_key() -> None:
    client = client_for(snapshot())

    assert isinstance(client, OpenAIChatClient)
    assert client.upstream_model == "my-model"
    assert client._client.api_key == "not-needed"


def test_client_for_names_a_missing_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWAKEN_TEST_MISSING_KEY", raising=False)

    with pytest.raises(ProviderConfigError, match="AWAKEN_TEST_MISSING_KEY"):
        client_for(snapshot(api_key_env="AWAKEN_TEST_MISSING_KEY"))
