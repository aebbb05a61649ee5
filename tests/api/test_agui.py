"""AG-UI: `POST /api/v1/agents/{slug}/ag-ui` runs the agent from a RunAgentInput and answers
the AG-UI event stream, parsed back here with ag-ui-protocol's own models: a plain
answer, a tool call, a ticket as the protocol's interrupt and its resume, an error; and
the refusals (another team's thread or agent, a bad body, no token, a viewer)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from ag_ui.core import Event, EventType, RunAgentInput
from asgiref.sync import async_to_sync
from django.test import AsyncClient
from pydantic import TypeAdapter

from agents.models import Agent
from common.models import AuditEntry
from runs.api import stream
from runs.models import Message, Run, Thread, Ticket
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.api.helpers import assert_error
from tests.factories import (
    APPROVAL,
    bearer,
    call,
    note_call,
    scripted_agent,
    team,
    team_member,
    token_for,
)
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

EVENT = TypeAdapter(Event)
T = EventType


@pytest.fixture(autouse=True)
def fast_stream(monkeypatch):
    monkeypatch.setattr(stream, "POLL_SECONDS", 0.01)
    monkeypatch.setattr(stream, "HEARTBEAT_SECONDS", 0.05)


def url(agent: Agent) -> str:
    return f"/api/v1/agents/{agent.slug}/ag-ui"


def body(thread_id: Any = None, text: str | None = "hi", **more: Any) -> dict[str, Any]:
    messages = [{"id": "u1", "role": "user", "content": text}] if text is not None else []
    data = {
        "threadId": str(thread_id or uuid.uuid4()),
        "runId": more.pop("runId", f"client-{uuid.uuid4()}"),
        "messages": messages,
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        **more,
    }
    RunAgentInput.model_validate(data)  # what a stock client sends
    return data


class AguiReader:
    """The response's AG-UI events, each validated by ag-ui-protocol's Event union."""

    def __init__(self, response: Any, chunks: list[bytes] | None = None) -> None:
        assert response.status_code == 200, getattr(response, "content", b"")[:500]
        assert response["Content-Type"] == "text/event-stream"
        self.response = response
        if chunks is not None:  # read already (ASGI)
            self.chunks = iter(chunks)
        elif response.streaming:
            self.chunks = iter(response.streaming_content)
        else:
            self.chunks = iter([response.content])
        self.events: list[Any] = []

    def read(self, until: int | None = None) -> list[Any]:
        """Events until `until` more arrived, or the end."""
        start = len(self.events)
        for chunk in self.chunks:
            for block in chunk.decode().split("\n\n"):
                for line in block.split("\n"):
                    if line.startswith("data: "):
                        self.events.append(EVENT.validate_python(json.loads(line[6:])))
            if until is not None and len(self.events) - start >= until:
                break
        return self.events[start:]

    @property
    def run(self) -> Run:
        return Run.objects.get(pk=self.response["X-Run-ID"])


def types(events: list[Any]) -> list[str]:
    return [e.type.value for e in events]


def started(response: Any) -> AguiReader:
    """The reader, after RUN_STARTED (sent before any worker ran)."""
    reader = AguiReader(response)
    (first,) = reader.read(until=1)
    assert first.type is T.RUN_STARTED
    return reader


def test_a_plain_answer(operator_api, operator_user):
    agent = scripted_agent([{"text": "hello there"}])
    thread_id = uuid.uuid4()
    data = body(thread_id, "hi", runId="client-run-1")
    reader = started(operator_api.post(url(agent), data, format="json"))
    run = drive(reader.run)
    events = reader.read()
    assert types(reader.events) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT",
        "STEP_FINISHED",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    first, last = reader.events[0], events[-1]
    assert (first.thread_id, first.run_id) == (str(thread_id), "client-run-1")
    assert first.metadata == {"awaken": {"runId": str(run.pk)}}
    assert run.thread_id == thread_id  # the threadId is the thread's id
    assert Thread.objects.get(pk=thread_id).team_id == agent.team_id
    text = [e for e in events if e.type is T.TEXT_MESSAGE_CONTENT]
    assert [e.delta for e in text] == ["hello there"]
    assert last.run_id == "client-run-1" and last.outcome is None
    assert last.result["response"] == "hello there"
    assert last.usage and last.usage[0].output_tokens == 2
    entry = AuditEntry.objects.get(action="run.start", target_id=str(run.pk))
    assert entry.source == "ag-ui" and entry.actor_label.startswith("olga")


def test_a_tool_call(operator_api):
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("calculator", {"expression": "6*7"})]}, {"text": "42"}]
    )
    reader = started(operator_api.post(url(agent), body(text="6*7?"), format="json"))
    drive(reader.run)
    events = reader.read()
    assert types(reader.events) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "STATE_SNAPSHOT",
        "STEP_FINISHED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT",
        "STEP_FINISHED",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    start, args, end, result = events[1:5]
    assert start.tool_call_name == "calculator" and start.parent_message_id
    assert args.tool_call_id == end.tool_call_id == result.tool_call_id == start.tool_call_id
    assert json.loads(args.delta) == {"expression": "6*7"}
    assert json.loads(result.content) == {"expression": "6*7", "result": 42}
    assert result.role == "tool"


def test_a_ticket_is_an_interrupt_and_resume_decides_it(operator_api):
    agent = scripted_agent(
        [{"text": "noting", "tool_calls": [note_call("lunch")]}, {"text": "all done"}],
        permission=APPROVAL,
    )
    thread_id = uuid.uuid4()
    reader = started(operator_api.post(url(agent), body(thread_id, "note it"), format="json"))
    run = drive(reader.run)
    assert run.status == Run.Status.WAITING
    reader.read()
    assert types(reader.events) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "STATE_SNAPSHOT",
        "STEP_FINISHED",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    ticket = Ticket.objects.get(run=run)
    outcome = reader.events[-1].outcome
    assert outcome.type == "interrupt"
    (interrupt,) = outcome.interrupts
    assert interrupt.id == ticket.ticket_id and interrupt.reason == "tool_approval"
    assert interrupt.tool_call_id == ticket.tool_call.call_id
    assert interrupt.response_schema["required"] == ["action"]
    assert interrupt.metadata["awaken"]["arguments"] == {"title": "lunch", "body": "b"}

    # nothing new on the thread: the run still waits, the same interrupt at once
    again = AguiReader(operator_api.post(url(agent), body(thread_id, None), format="json"))
    assert types(again.read()) == ["RUN_STARTED", "RUN_FINISHED"]
    assert again.events[-1].outcome.interrupts == [interrupt]  # the same, read from the ticket

    # resume: the entry decides the ticket, the stream shows the run going on
    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"action": "approve"}}]
    reader = started(
        operator_api.post(url(agent), body(thread_id, None, resume=resume), format="json")
    )
    assert reader.run.pk == run.pk
    ticket.refresh_from_db()
    assert ticket.status == Ticket.Status.DECIDED and ticket.decision.action == "approve"
    assert ticket.decision.actor_label.startswith("olga")
    drive(run)
    events = reader.read()
    assert types(events) == [
        "CUSTOM",
        "TOOL_CALL_RESULT",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT",
        "STEP_FINISHED",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert events[0].name == "awaken.ticket_decided" and events[0].value["action"] == "approve"
    assert events[1].tool_call_id == interrupt.tool_call_id
    assert json.loads(events[1].content)["title"] == "lunch"
    assert events[-1].outcome is None and events[-1].result["response"] == "all done"


def test_a_ticket_decided_elsewhere_then_resumed_shows_the_decision(operator_api):
    agent = scripted_agent(
        [{"text": "", "tool_calls": [note_call("tea")]}, {"text": "ok"}], permission=APPROVAL
    )
    thread_id = uuid.uuid4()
    reader = started(operator_api.post(url(agent), body(thread_id, "note tea"), format="json"))
    run = drive(reader.run)
    interrupt = reader.read()[-1].outcome.interrupts[0]
    ticket = Ticket.objects.get(run=run)
    decision_submit(ticket=ticket, action="reject", comment="no tea")  # the inbox, say
    drive(run)
    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"action": "approve"}}]
    reader = AguiReader(
        operator_api.post(url(agent), body(thread_id, None, resume=resume), format="json")
    )
    events = reader.read()
    assert events[1].name == "awaken.ticket_decided" and events[1].value["action"] == "reject"
    assert events[-1].type is T.RUN_FINISHED and events[-1].result["response"] == "ok"
    ticket.refresh_from_db()
    assert ticket.decision.action == "reject"  # the first decision stands


def test_an_ask_human_ticket_is_answered_by_a_resume_payload(operator_api):
    agent = scripted_agent(
        [
            {"text": "", "tool_calls": [call("ask_human", {"question": "colour?"})]},
            {"text": "you said {last_tool_result}"},
        ],
        tools=["ask_human"],
    )
    thread_id = uuid.uuid4()
    reader = started(operator_api.post(url(agent), body(thread_id, "ask me"), format="json"))
    drive(reader.run)
    interrupt = reader.read()[-1].outcome.interrupts[0]
    assert interrupt.reason == "input_required" and interrupt.message == "colour?"
    assert interrupt.response_schema["properties"]["action"]["enum"] == ["respond", "reject"]
    resume = [{"interruptId": interrupt.id, "status": "resolved", "payload": "blue"}]
    reader = started(
        operator_api.post(url(agent), body(thread_id, None, resume=resume), format="json")
    )
    drive(reader.run)
    events = reader.read()
    assert events[-1].type is T.RUN_FINISHED
    assert "blue" in events[-1].result["response"]


def test_a_cancelled_resume_rejects_the_ticket(operator_api):
    agent = scripted_agent(
        [{"text": "", "tool_calls": [note_call("x")]}, {"text": "fine"}], permission=APPROVAL
    )
    thread_id = uuid.uuid4()
    reader = started(operator_api.post(url(agent), body(thread_id, "note x"), format="json"))
    drive(reader.run)
    interrupt = reader.read()[-1].outcome.interrupts[0]
    resume = [{"interruptId": interrupt.id, "status": "cancelled"}]
    reader = started(
        operator_api.post(url(agent), body(thread_id, None, resume=resume), format="json")
    )
    drive(reader.run)
    reader.read()
    assert Ticket.objects.get(run=reader.run).decision.action == "reject"
    assert reader.events[-1].type is T.RUN_FINISHED


def test_an_error_ends_with_run_error(operator_api):
    agent = scripted_agent([{"error": "model exploded"}])
    reader = started(operator_api.post(url(agent), body(), format="json"))
    drive(reader.run)
    reader.read()
    assert types(reader.events) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "STATE_SNAPSHOT",
        "STEP_FINISHED",
        "STATE_SNAPSHOT",
        "RUN_ERROR",
    ]
    assert reader.events[-1].message == "model exploded"
    assert reader.events[-1].code == "run_error"


def test_a_second_message_on_the_thread_continues_it(operator_api):
    agent = scripted_agent([{"text": "one"}])
    thread_id = uuid.uuid4()
    first = started(operator_api.post(url(agent), body(thread_id, "a"), format="json"))
    drive(first.run)
    first.read()
    history = [
        {"id": "u1", "role": "user", "content": "a"},
        {"id": "a1", "role": "assistant", "content": "one"},
        {"id": "u2", "role": "user", "content": [{"type": "text", "text": "b"}]},
    ]
    data = {**body(thread_id, None), "messages": history}
    second = started(operator_api.post(url(agent), data, format="json"))
    run = drive(second.run)
    assert run.pk != first.run.pk and run.thread_id == thread_id
    assert second.read()[-1].type is T.RUN_FINISHED
    users = Message.objects.filter(thread_id=thread_id, role="user").order_by("seq")
    # the earlier message is not sent again: the thread has each once
    assert [m.content[0]["text"] for m in users] == ["a", "b"]


def test_another_teams_thread_or_agent_is_not_found(db):
    alpha_agent = scripted_agent([{"text": "a"}], team=team("alpha"))
    beta_agent = scripted_agent([{"text": "b"}], team=team("beta"))
    beta_run = run_start(agent=beta_agent, messages="secret")
    alpha = bearer(token_for(team_member("operator", "alpha")))
    response = alpha.post(url(alpha_agent), body(beta_run.thread_id, "hi"), format="json")
    error = assert_error(response, 404, "not_found")
    assert "secret" not in json.dumps(error)
    assert_error(alpha.post(url(beta_agent), body(), format="json"), 404, "not_found")
    assert Run.objects.filter(thread_id=beta_run.thread_id).count() == 1


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"runId": "r", "messages": []}, "threadId"),
        ({"threadId": str(uuid.uuid4()), "messages": []}, "runId"),
        ({"threadId": "t", "runId": "r", "messages": [{"role": "user"}]}, "messages"),
        ({"threadId": str(uuid.uuid4()), "runId": "r", "messages": "hi"}, "messages"),
        ([1, 2], "body"),
    ],
)
def test_a_bad_body_is_a_400(operator_api, data, field):
    agent = scripted_agent([{"text": "x"}])
    error = assert_error(operator_api.post(url(agent), data, format="json"), 400, "invalid")
    assert field in error["message"] or field in json.dumps(error["details"])


def test_bad_inputs_are_clear_400s(operator_api):
    agent = scripted_agent([{"text": "x"}])
    error = assert_error(
        operator_api.post(url(agent), body("thread-1"), format="json"), 400, "invalid"
    )
    assert "threadId must be a UUID" in error["message"]
    error = assert_error(
        operator_api.post(url(agent), body(text=None), format="json"), 400, "invalid"
    )
    assert "nothing to run" in error["message"]
    image = {"type": "image", "source": {"type": "url", "value": "https://x.test/a.png"}}
    data = {**body(), "messages": [{"id": "u", "role": "user", "content": [image]}]}
    error = assert_error(operator_api.post(url(agent), data, format="json"), 400, "invalid")
    assert "only text parts" in error["message"]
    response = operator_api.post(url(agent), "{nope", content_type="application/json")
    assert_error(response, 400, "parse_error")
    resume = [{"interruptId": "nope", "status": "resolved"}]
    response = operator_api.post(url(agent), body(None, None, resume=resume), format="json")
    assert_error(response, 404, "not_found")
    assert not Run.objects.exists()


def test_no_token_is_401_and_a_viewer_is_403(anonymous_api, viewer_api):
    agent = scripted_agent([{"text": "x"}])
    assert_error(anonymous_api.post(url(agent), body(), format="json"), 401, "not_authenticated")
    assert_error(viewer_api.post(url(agent), body(), format="json"), 403, "permission_denied")
    assert not Run.objects.exists()


def test_a_repeated_run_id_does_not_start_another_run(operator_api):
    agent = scripted_agent([{"text": "once"}])
    data = body(uuid.uuid4(), "go", runId="same-run")
    first = started(operator_api.post(url(agent), data, format="json"))
    drive(first.run)
    first.read()
    again = AguiReader(operator_api.post(url(agent), data, format="json"))
    again.read()
    assert again.run.pk == first.run.pk and Run.objects.count() == 1
    assert types(again.events) == types(first.events)


def test_the_operation_is_in_the_openapi_document(operator_api):
    schema = operator_api.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/v1/agents/{agent_id}/ag-ui"]["post"]
    assert operation["operationId"] == "agents_ag_ui"
    assert "text/event-stream" in operation["responses"]["200"]["content"]


def test_under_asgi_the_stream_is_an_async_iterator(operator_api, operator_user):
    agent = scripted_agent([{"text": "async hello"}])
    data = body(uuid.uuid4(), "go", runId="asgi-run")
    first = started(operator_api.post(url(agent), data, format="json"))
    drive(first.run)
    first.read()
    client = AsyncClient()
    auth = {"Authorization": f"Bearer {token_for(operator_user, 'asgi')}"}

    async def read() -> tuple[Any, list[bytes]]:
        response = await client.post(
            url(agent), data, content_type="application/json", headers=auth
        )
        assert response.is_async
        return response, [chunk async for chunk in response.streaming_content]

    response, chunks = async_to_sync(read)()
    reader = AguiReader(response, chunks)
    assert types(reader.read()) == types(first.events)


def test_a_stream_that_closes_before_the_end_says_so(operator_api, monkeypatch):
    monkeypatch.setattr(stream, "MAX_STREAM_SECONDS", 0.2)
    agent = scripted_agent([{"text": "never driven"}])
    reader = AguiReader(operator_api.post(url(agent), body(), format="json"))
    events = reader.read()
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1].code == "stream_closed" and "goes on" in events[-1].message
