"""The one HTTP client every system behind an HTTP API is measured with (httpx, asyncio).

A system is an adapter with two coroutines, `plain` (one 2-step run, submit -> finish
seen on its event stream) and `approval` (submit, see the ticket or interrupt, approve or
resume, see the finish); each returns a `Sample` of client-side times. `drive()` runs
`count` of them with `concurrency` in flight on one `httpx.AsyncClient` and times the
round from the first request to the last finish. The SSE reader, the connection pool,
the timeouts and the timing are shared, so only the routes differ between systems.

Everything is bounded: a per-operation timeout and a per-round deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

OPERATION_TIMEOUT = 30.0  # one run or one approval cycle
ROUND_DEADLINE = 120.0
LANES_PER_CLIENT = 32


class LoadError(RuntimeError):
    """An operation answered something unexpected (status, missing event, wrong result)."""


@dataclass
class Sample:
    first_ms: float  # request start -> first event seen
    finish_ms: float  # request start -> finish seen (for an approval: of the whole cycle)
    approve_ms: float | None = None  # approve/resume request start -> finish seen


@dataclass
class Round:
    system: str
    kind: str
    count: int
    concurrency: int
    seconds: float
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return len(self.samples) / self.seconds if self.seconds > 0 else float("nan")


class System(Protocol):
    label: str

    async def plain(self, client: httpx.AsyncClient) -> Sample: ...

    async def approval(self, client: httpx.AsyncClient) -> Sample: ...


@dataclass
class SseMessage:
    event: str
    data: str
    id: str

    def json(self) -> Any:
        return json.loads(self.data)


def ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


async def sse(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    json_body: Any = None,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[SseMessage]:
    """The messages of one Server-Sent Events response, until the server closes it.
    Comments and `retry:` lines are skipped; a message is yielded at its blank line."""
    request_headers = {"Accept": "text/event-stream", **(headers or {})}
    async with client.stream(method, url, json=json_body, headers=request_headers) as response:
        if response.status_code not in (200, 201):  # 201: a stream that created a run
            body = (await response.aread())[:300]
            raise LoadError(f"{method} {url}: HTTP {response.status_code} {body!r}")
        event, last_id = "message", ""
        data: list[str] = []
        async for line in response.aiter_lines():
            if not line:
                if data:
                    yield SseMessage(event, "\n".join(data), last_id)
                event, data = "message", []
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
            elif name == "id":
                last_id = value
        if data:
            yield SseMessage(event, "\n".join(data), last_id)


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    body: Any,
    *,
    headers: dict[str, str] | None = None,
    expect: tuple[int, ...] = (200, 201),
) -> Any:
    response = await client.post(url, json=body, headers=headers)
    if response.status_code not in expect:
        raise LoadError(f"POST {url}: HTTP {response.status_code} {response.text[:300]!r}")
    return response.json()


async def _drive(
    system: System,
    kind: str,
    count: int,
    concurrency: int,
    operation_timeout: float = OPERATION_TIMEOUT,
    deadline: float = ROUND_DEADLINE,
) -> Round:
    operation = system.plain if kind == "plain" else system.approval
    # One AsyncClient per LANES_PER_CLIENT lanes: httpx's pool (httpcore) re-scans all of
    # its requests and connections whenever one starts or ends, so a client with hundreds
    # in flight spends its time there: 1,000 one-second requests on one client took 26 s
    # on the 2-core machine, ~3 s spread over clients of 10-32.
    per_client = min(concurrency, LANES_PER_CLIENT)
    limits = httpx.Limits(max_connections=2 * per_client, max_keepalive_connections=2 * per_client)
    timeout = httpx.Timeout(operation_timeout)
    result = Round(system.label, kind, count, concurrency, 0.0)
    next_index = 0
    lanes_count = min(concurrency, count)
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(limits=limits, timeout=timeout, trust_env=False)
            )
            for _ in range(max(1, -(-lanes_count // LANES_PER_CLIENT)))
        ]

        async def one_lane(client: httpx.AsyncClient) -> None:
            nonlocal next_index
            while next_index < count:
                next_index += 1
                try:
                    sample = await asyncio.wait_for(operation(client), operation_timeout)
                except Exception as exc:  # recorded, the round goes on
                    result.errors.append(f"{type(exc).__name__}: {exc}"[:500])
                else:
                    result.samples.append(sample)

        started = time.perf_counter()
        lanes = [
            asyncio.create_task(one_lane(clients[index // LANES_PER_CLIENT]))
            for index in range(lanes_count)
        ]
        _, pending = await asyncio.wait(lanes, timeout=deadline)
        for task in pending:
            task.cancel()
        result.seconds = time.perf_counter() - started
        if pending:
            result.errors.append(f"round deadline of {deadline:.0f}s reached")
    return result


def drive(
    system: System,
    kind: str,
    count: int,
    concurrency: int,
    *,
    operation_timeout: float = OPERATION_TIMEOUT,
    deadline: float = ROUND_DEADLINE,
) -> Round:
    """`count` operations of `kind` ("plain" or "approval") with `concurrency` in flight."""
    if kind not in ("plain", "approval"):
        raise ValueError(kind)
    return asyncio.run(_drive(system, kind, count, concurrency, operation_timeout, deadline))


# --- the systems ------------------------------------------------------------------------------


USER_TEXT = "what is 6*7?"


class AwakenHttp:
    """Awaken Ops' REST API: POST /api/v1/runs answering with the run's event stream
    until `run_finish`; tickets are approved with POST /api/v1/runs/{id}/decisions, then
    the run is followed on GET /api/v1/runs/{id}/events/stream after its last seq."""

    label = "Awaken Ops"

    def __init__(self, base_url: str, token: str, plain_agent: str, approval_agent: str) -> None:
        self.base = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"}
        self.plain_agent = plain_agent
        self.approval_agent = approval_agent

    async def _start(
        self, client: httpx.AsyncClient, agent: str, started: float
    ) -> tuple[str, float, int, list[dict[str, Any]]]:
        """POST /api/v1/runs with `Accept: text/event-stream` (upstream's POST /v1/runs):
        one request starts the run and streams its events until its first run_finish;
        returns (run id, ms to the first event, last seq, the events)."""
        body = {"agent_id": agent, "messages": [{"role": "user", "content": USER_TEXT}]}
        first_ms = float("nan")
        events: list[dict[str, Any]] = []
        url = f"{self.base}/api/v1/runs"
        async for message in sse(client, "POST", url, json_body=body, headers=self.headers):
            if not events:
                first_ms = ms_since(started)
            event = message.json()
            events.append(event)
            if event.get("event_type") in ("run_finish", "error"):
                return str(events[0]["run_id"]), first_ms, int(event["seq"]), events
        raise LoadError(f"POST {url}: the stream closed before run_finish")

    async def _follow(
        self, client: httpx.AsyncClient, run_id: str, after: int, started: float
    ) -> tuple[float, int, list[dict[str, Any]]]:
        """Read the run's stream after seq `after` until `run_finish`; returns (ms to the
        first event, last seq, the events)."""
        headers = dict(self.headers)
        if after:
            headers["Last-Event-ID"] = str(after)
        first_ms = float("nan")
        events: list[dict[str, Any]] = []
        url = f"{self.base}/api/v1/runs/{run_id}/events/stream"
        async for message in sse(client, "GET", url, headers=headers):
            if not events:
                first_ms = ms_since(started)
            event = message.json()
            events.append(event)
            if event.get("event_type") in ("run_finish", "error"):
                return first_ms, int(event["seq"]), events
        raise LoadError(f"run {run_id}: the stream closed before run_finish")

    async def plain(self, client: httpx.AsyncClient) -> Sample:
        started = time.perf_counter()
        run_id, first_ms, _, events = await self._start(client, self.plain_agent, started)
        finish_ms = ms_since(started)
        _check_finished(run_id, events[-1])
        return Sample(first_ms, finish_ms)

    async def approval(self, client: httpx.AsyncClient) -> Sample:
        started = time.perf_counter()
        run_id, first_ms, seq, events = await self._start(client, self.approval_agent, started)
        termination = events[-1].get("termination") or {}
        if termination.get("type") != "suspended" and "suspend" not in json.dumps(termination):
            raise LoadError(f"run {run_id}: expected a suspension, got {events[-1]}")
        calls = [e["id"] for e in events if e.get("event_type") == "tool_call_ready"]
        if not calls:
            raise LoadError(f"run {run_id}: no tool_call_ready before the suspension")
        approve_started = time.perf_counter()
        await post_json(
            client,
            f"{self.base}/api/v1/runs/{run_id}/decisions",
            {"action": "approve", "ticket_id": calls[-1]},
            headers=self.headers,
            expect=(201,),
        )
        _, _, resumed = await self._follow(client, run_id, seq, approve_started)
        _check_finished(run_id, resumed[-1])
        return Sample(first_ms, ms_since(started), ms_since(approve_started))


def _check_finished(run_id: str, event: dict[str, Any]) -> None:
    if event.get("event_type") != "run_finish":
        raise LoadError(f"run {run_id} ended with {event}")
    if "42" not in json.dumps(event.get("result")):
        raise LoadError(f"run {run_id}: no '42' in the result {event.get('result')!r}")


class LangGraphHttp:
    """LangGraph Agent Server (`langgraph dev`): POST /threads, then
    POST /threads/{id}/runs/stream until the server closes the stream. The approval graph
    is compiled with interrupt_before=["tools"]; the client resumes with `input: null`."""

    label = "LangGraph dev"

    def __init__(self, base_url: str, plain_graph: str, approval_graph: str) -> None:
        self.base = base_url.rstrip("/")
        self.plain_graph = plain_graph
        self.approval_graph = approval_graph

    async def _stream(
        self, client: httpx.AsyncClient, thread_id: str, body: dict[str, Any], started: float
    ) -> tuple[float, list[SseMessage]]:
        """Messages of one run; ms to the first message after `metadata` (the first step's
        output: `metadata` only acknowledges the run)."""
        first_ms = float("nan")
        messages: list[SseMessage] = []
        url = f"{self.base}/threads/{thread_id}/runs/stream"
        async for message in sse(client, "POST", url, json_body=body):
            if message.event == "error":
                raise LoadError(f"thread {thread_id}: {message.data[:300]}")
            if message.event != "metadata" and first_ms != first_ms:
                first_ms = ms_since(started)
            messages.append(message)
        return first_ms, messages

    async def _thread(self, client: httpx.AsyncClient) -> str:
        return str((await post_json(client, f"{self.base}/threads", {}))["thread_id"])

    def _body(self, graph: str, with_input: bool) -> dict[str, Any]:
        return {
            "assistant_id": graph,
            "input": {"messages": [{"role": "user", "content": USER_TEXT}]} if with_input else None,
            "stream_mode": ["updates"],
        }

    async def plain(self, client: httpx.AsyncClient) -> Sample:
        started = time.perf_counter()
        thread_id = await self._thread(client)
        first_ms, messages = await self._stream(
            client, thread_id, self._body(self.plain_graph, True), started
        )
        _check_answer(thread_id, messages)
        return Sample(first_ms, ms_since(started))

    async def approval(self, client: httpx.AsyncClient) -> Sample:
        started = time.perf_counter()
        thread_id = await self._thread(client)
        first_ms, messages = await self._stream(
            client, thread_id, self._body(self.approval_graph, True), started
        )
        if not any("__interrupt__" in m.data for m in messages):
            raise LoadError(f"thread {thread_id}: no interrupt before the tool step")
        resume_started = time.perf_counter()
        _, resumed = await self._stream(
            client, thread_id, self._body(self.approval_graph, False), resume_started
        )
        _check_answer(thread_id, resumed)
        return Sample(first_ms, ms_since(started), ms_since(resume_started))


def _check_answer(thread_id: str, messages: list[SseMessage]) -> None:
    updates = [m.json() for m in messages if m.event == "updates"]
    last = updates[-1] if updates else {}
    answer = (last.get("model") or {}).get("messages") or [{}]
    if "42" not in str(answer[-1].get("content")):  # "42", or a model's "The answer is 42."
        raise LoadError(f"thread {thread_id}: last update {str(last)[:300]}")
