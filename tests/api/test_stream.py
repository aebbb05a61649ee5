"""Server-Sent Events: the stream shows a run's events as they are persisted, resumes
from Last-Event-ID with no gap and no duplicate, sends heartbeats, closes after
run_finish unless follow=true, and stops after its maximum duration."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from runs.api import stream
from runs.models import Run, RunEvent, Ticket
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.api.helpers import assert_error
from tests.factories import call, done_run, scripted_agent, token_for, waiting_run
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_stream(monkeypatch):
    monkeypatch.setattr(stream, "POLL_SECONDS", 0.01)
    monkeypatch.setattr(stream, "HEARTBEAT_SECONDS", 0.05)


def url(run: Run) -> str:
    return f"/api/v1/runs/{run.pk}/events/stream"


def parse(chunk: bytes) -> dict[str, Any]:
    """One SSE chunk: {'id', 'data'} for a message, {'comment'} for a comment line."""
    text = chunk.decode()
    assert text.endswith("\n\n"), text
    message: dict[str, Any] = {}
    for line in text.strip("\n").split("\n"):
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "":
            message.setdefault("comment", value)
        elif field == "data":
            message["data"] = json.loads(value)
        else:
            message[field] = value
    return message


class Reader:
    def __init__(self, response: Any, status: int = 200) -> None:
        assert response.status_code == status, response.content
        assert response["Content-Type"] == "text/event-stream"
        assert response["Cache-Control"] == "no-cache"
        self.response = response
        self.chunks = iter(response.streaming_content)
        self.ended = False

    def next(self) -> dict[str, Any] | None:
        try:
            return parse(next(self.chunks))
        except StopIteration:
            self.ended = True
            return None

    def events(self, count: int | None = None) -> list[dict[str, Any]]:
        """Read messages (skipping comments) until `count` events or the end."""
        found: list[dict[str, Any]] = []
        while count is None or len(found) < count:
            message = self.next()
            if message is None:
                break
            if "data" in message:
                assert message["id"] == str(message["data"]["seq"])
                found.append(message["data"])
        return found

    def close(self) -> None:
        """The client goes away (the test client's own close would fire request_finished
        and close the test's database connection)."""
        self.chunks = iter(())


def seqs(events: list[dict[str, Any]]) -> list[int]:
    return [e["seq"] for e in events]


def test_stream_shows_a_runs_events_and_closes_after_run_finish(operator_api):
    run = done_run()
    reader = Reader(operator_api.get(url(run)))
    opening = reader.next()
    assert opening is not None and opening["retry"] == "2000"
    events = reader.events()
    assert reader.ended
    assert seqs(events) == list(range(1, run.last_event_seq + 1))
    stored = [e.as_frame() for e in RunEvent.objects.filter(run=run).order_by("seq")]
    assert [json.loads(json.dumps(frame)) for frame in stored] == events
    assert events[-1]["event_type"] == "run_finish"


def test_stream_delivers_events_as_the_worker_persists_them(operator_api):
    agent = scripted_agent([{"text": "live"}])
    run = run_start(agent=agent, messages="go")
    reader = Reader(operator_api.get(url(run)))
    reader.next()  # opening
    first = reader.next()  # committed with the submission
    assert first["data"]["event_type"] == "run_start"
    heartbeat = reader.next()  # nothing more persisted yet: the connection is kept alive
    assert heartbeat == {"comment": "heartbeat"}
    drive(run)  # the worker commits while the client is connected
    events = [first["data"], *reader.events()]
    assert events[-1]["event_type"] == "run_finish"
    assert seqs(events) == list(range(1, Run.objects.get(pk=run.pk).last_event_seq + 1))
    assert reader.ended


def test_reconnecting_with_last_event_id_resumes_with_no_gap_and_no_duplicate(operator_api):
    run = done_run()
    first = Reader(operator_api.get(url(run)))
    seen = first.events(4)
    first.close()
    assert seqs(seen) == [1, 2, 3, 4]
    second = Reader(operator_api.get(url(run), HTTP_LAST_EVENT_ID=str(seen[-1]["seq"])))
    rest = second.events()
    assert second.ended
    assert seqs(seen + rest) == list(range(1, run.last_event_seq + 1))
    # after_seq does the same; Last-Event-ID wins when both are sent
    by_param = Reader(operator_api.get(url(run), {"after_seq": 6})).events()
    assert seqs(by_param)[0] == 7
    both = Reader(operator_api.get(url(run), {"after_seq": 1}, HTTP_LAST_EVENT_ID="5")).events()
    assert seqs(both)[0] == 6


def test_without_follow_a_waiting_run_closes_after_its_run_finish(operator_api):
    run = waiting_run()
    reader = Reader(operator_api.get(url(run)))
    events = reader.events()
    assert reader.ended
    assert events[-1]["event_type"] == "run_finish"
    assert events[-1]["termination"] == {"type": "suspended"}


def test_without_follow_an_interrupted_activation_does_not_close_the_stream(operator_api):
    from runs.services.execution import runs_sweep
    from runs.services.leases import run_claim
    from tests.runs.helpers import expire_lease

    run = run_start(agent=scripted_agent([{"text": "made it"}]), messages="go")
    assert run_claim(run_id=run.pk, worker="dies") is not None
    expire_lease(run)
    assert runs_sweep()["recovered"] == 1  # closes the dead worker's activation
    reader = Reader(operator_api.get(url(run)))
    first = reader.events(2)
    assert [e["event_type"] for e in first] == ["run_start", "error"]
    assert first[-1]["code"] == "activation_interrupted"
    drive(run)  # the run goes on in a new activation, and the client sees its end
    rest = reader.events()
    assert reader.ended
    assert rest[0]["event_type"] == "run_start"
    assert rest[-1]["event_type"] == "run_finish" and rest[-1]["result"]["status"] == "done"


def test_follow_keeps_streaming_while_the_run_resumes(operator_api):
    run = waiting_run()
    reader = Reader(operator_api.get(url(run), {"follow": "true"}))
    first = reader.events(run.last_event_seq)
    assert first[-1]["event_type"] == "run_finish"
    message = reader.next()
    while message is not None and "data" not in message and message.get("comment") != "heartbeat":
        message = reader.next()
    assert message == {"comment": "heartbeat"}  # still open, and alive
    ticket = Ticket.objects.get(run=run)
    decision_submit(ticket=ticket, action="approve")
    drive(run)
    rest = reader.events()
    assert reader.ended  # the run is done: nothing more can come
    assert rest[0]["event_type"] == "ticket_decided"
    assert rest[-1]["event_type"] == "run_finish" and rest[-1]["result"]["status"] == "done"
    run.refresh_from_db()
    assert seqs(first + rest) == list(range(1, run.last_event_seq + 1))


def test_stream_of_a_finished_run_from_its_end_closes_at_once(operator_api):
    run = done_run()
    reader = Reader(
        operator_api.get(url(run), {"follow": "true"}, HTTP_LAST_EVENT_ID=str(run.last_event_seq))
    )
    assert reader.events() == [] and reader.ended


def test_stream_stops_after_its_maximum_duration(operator_api, monkeypatch):
    monkeypatch.setattr(stream, "MAX_STREAM_SECONDS", 0.1)
    run = waiting_run()
    reader = Reader(operator_api.get(url(run), {"follow": "true", "after_seq": run.last_event_seq}))
    comments = []
    while (message := reader.next()) is not None:
        comments.append(message.get("comment", ""))
    assert any("max duration" in c for c in comments)


def test_stream_errors_are_json(operator_api, viewer_api, anonymous_api):
    run = done_run()
    assert_error(
        operator_api.get("/api/v1/runs/0190e7a0-0000-7000-8000-000000000000/events/stream"),
        404,
        "not_found",
    )
    assert_error(operator_api.get(url(run), HTTP_LAST_EVENT_ID="abc"), 400, "invalid")
    assert_error(operator_api.get(url(run), {"after_seq": "-3"}), 400, "invalid")
    assert_error(
        anonymous_api.get(url(run), HTTP_ACCEPT="text/event-stream"), 401, "not_authenticated"
    )
    assert viewer_api.get(url(run)).status_code == 200


def test_stream_under_asgi_uses_an_async_iterator(operator_user):
    run = done_run()
    client = AsyncClient()
    auth = {"Authorization": f"Bearer {token_for(operator_user)}"}

    async def read() -> tuple[Any, list[bytes]]:
        response = await client.get(url(run), {"after_seq": 2}, headers=auth)
        assert response.is_async
        return response, [chunk async for chunk in response.streaming_content]

    response, chunks = async_to_sync(read)()
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    events = [m["data"] for m in map(parse, chunks) if "data" in m]
    assert seqs(events) == list(range(3, run.last_event_seq + 1))


def test_asgi_stream_sends_before_the_run_ends(operator_user, monkeypatch):
    """Under ASGI the chunks go out as they come (a sync iterator would be read whole first)."""
    monkeypatch.setattr(stream, "MAX_STREAM_SECONDS", 5.0)
    run = run_start(agent=scripted_agent([{"text": "x"}]), messages="go")  # run_start only
    client = AsyncClient()
    auth = {"Authorization": f"Bearer {token_for(operator_user)}"}

    async def first_two() -> list[bytes]:
        response = await client.get(url(run), {"follow": "true"}, headers=auth)
        iterator = aiter(response.streaming_content)
        chunks = [await anext(iterator), await anext(iterator)]
        await iterator.aclose()
        return chunks

    opening, first = map(parse, async_to_sync(first_two)())
    # the submission committed the run's first event: a client sees it begin at once
    assert opening["retry"] == "2000" and first["data"]["event_type"] == "run_start"


class _BrokenLayer:
    """A channel layer whose Redis is away."""

    async def new_channel(self) -> str:
        return "specific.broken!1"

    async def group_add(self, group: str, channel: str) -> None:
        raise ConnectionError("redis is down")

    async def group_discard(self, group: str, channel: str) -> None:
        raise ConnectionError("redis is down")


def test_asgi_stream_polls_the_log_when_the_channel_layer_is_down(operator_user, monkeypatch):
    monkeypatch.setattr(stream, "get_channel_layer", lambda: _BrokenLayer())
    run = done_run()
    client = AsyncClient()
    auth = {"Authorization": f"Bearer {token_for(operator_user)}"}

    async def read() -> tuple[Any, list[bytes]]:
        response = await client.get(url(run), headers=auth)
        return response, [chunk async for chunk in response.streaming_content]

    response, chunks = async_to_sync(read)()
    assert response.status_code == 200
    events = [m["data"] for m in map(parse, chunks) if "data" in m]
    assert seqs(events) == list(range(1, run.last_event_seq + 1))
    assert events[-1]["event_type"] == "run_finish"


def test_post_runs_with_accept_event_stream_streams_the_new_run(operator_api, operator_user):
    """Upstream's POST /v1/runs answers with the run's events: one request per run."""
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("calculator", {"expression": "6*7"})]}, {"text": "42"}]
    )
    response = operator_api.post(
        "/api/v1/runs",
        {"agent_id": agent.slug, "messages": [{"role": "user", "content": "6*7?"}]},
        format="json",
        HTTP_ACCEPT="text/event-stream",
    )
    reader = Reader(response, status=201)
    run = Run.objects.get(pk=response["X-Run-ID"])
    assert response["Location"] == f"/api/v1/runs/{run.pk}"
    reader.next()  # opening
    first = reader.next()  # committed with the run: there before any worker
    assert first["data"]["event_type"] == "run_start" and first["data"]["run_id"] == str(run.pk)
    drive(run)
    events = [first["data"], *reader.events()]
    assert reader.ended and events[-1]["event_type"] == "run_finish"
    assert seqs(events) == list(range(1, Run.objects.get(pk=run.pk).last_event_seq + 1))


def test_streaming_post_errors_and_the_list_stay_json(operator_api):
    sse = {"HTTP_ACCEPT": "text/event-stream"}
    body = {"agent_id": "nobody", "messages": [{"role": "user", "content": "hi"}]}
    assert_error(operator_api.post("/api/v1/runs", body, format="json", **sse), 404, "not_found")
    listed = operator_api.get("/api/v1/runs", **sse)  # a list is JSON whatever the client accepts
    assert listed.status_code == 200 and listed["Content-Type"] == "application/json"
