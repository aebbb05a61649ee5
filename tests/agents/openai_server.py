"""A real, scriptable OpenAI-compatible Chat Completions server for tests.

`FakeOpenAIServer` listens on 127.0.0.1 with an ephemeral port (stdlib
`ThreadingHTTPServer`, HTTP/1.1) and answers `POST /v1/chat/completions` with the
streaming protocol: chunked `text/event-stream` bodies of `data: {json}\\n\\n` events
(`object: chat.completion.chunk`, `choices[0].delta`), a final usage chunk with
`choices: []`, then `data: [DONE]`.

`GET /v1/models` lists `server.models` (or answers with `server.models_error`).
Each chat request consumes the next behaviour of the queue (`server.script(...)`); when the
queue is empty the `fallback` behaviour answers (by default a 500 saying so). Request
bodies and headers (names lower-cased) are recorded in `server.requests` / `server.headers`.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# --- behaviours -----------------------------------------------------------------------------


@dataclass
class Reply:
    """One scripted answer.

    `status` 200 streams `events` (dicts are JSON-encoded, strings sent verbatim as the
    `data:` payload); `stall_after`/`stall_seconds` pause the stream after that many events
    (the connection stays open and silent); `delay_headers` waits before answering at all.
    Other statuses send `error_body` as JSON.
    """

    status: int = 200
    events: list[dict[str, Any] | str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    error_body: dict[str, Any] | None = None
    stall_after: int | None = None
    stall_seconds: float = 0.0
    delay_headers: float = 0.0
    done: bool = True


def usage_event(
    prompt: int,
    completion: int,
    total: int | None = None,
    *,
    cached: int | None = None,
    reasoning: int | None = None,
) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion if total is None else total,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return {"choices": [], "usage": usage}


def delta_event(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


def text_reply(
    *parts: str,
    usage: tuple[int, int] | dict[str, Any] | None = (11, 7),
    reasoning: list[str] | None = None,
) -> Reply:
    """A text answer streamed in `parts`, optionally preceded by reasoning fragments."""
    events: list[dict[str, Any] | str] = [delta_event({"role": "assistant", "content": ""})]
    events += [delta_event({"reasoning_content": text}) for text in reasoning or []]
    events += [delta_event({"content": part}) for part in parts]
    events.append(delta_event({}, "stop"))
    if usage is not None:
        events.append(usage if isinstance(usage, dict) else usage_event(*usage))
    return Reply(events=events)


@dataclass
class CallSpec:
    """A tool call as the server streams it: `fragments` are the argument pieces."""

    id: str
    name: str
    fragments: list[str]
    index: int | None = None


def tool_call_reply(
    *calls: CallSpec,
    text: str = "",
    usage: tuple[int, int] | dict[str, Any] | None = (20, 9),
    repeat_id: bool = False,
    name_with_arguments: bool = False,
    interleave: bool = False,
) -> Reply:
    """Tool calls split across chunks: a header chunk (index, id, type, name, empty
    arguments) then one chunk per argument fragment carrying only the index (and the id
    again with `repeat_id`). `name_with_arguments` puts the first fragment in the header
    chunk; `interleave` alternates the calls' fragments."""
    events: list[dict[str, Any] | str] = [delta_event({"role": "assistant", "content": None})]
    if text:
        events.append(delta_event({"content": text}))
    per_call: list[list[dict[str, Any]]] = []
    for position, call in enumerate(calls):
        index = position if call.index is None else call.index
        fragments = list(call.fragments)
        first = fragments.pop(0) if name_with_arguments and fragments else ""
        header = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": first},
        }
        pieces = [header]
        for fragment in fragments:
            piece: dict[str, Any] = {"index": index, "function": {"arguments": fragment}}
            if repeat_id:
                piece["id"] = call.id
            pieces.append(piece)
        per_call.append(pieces)
    if interleave:
        longest = max((len(p) for p in per_call), default=0)
        ordered = [p[i] for i in range(longest) for p in per_call if i < len(p)]
    else:
        ordered = [piece for pieces in per_call for piece in pieces]
    events += [delta_event({"tool_calls": [piece]}) for piece in ordered]
    events.append(delta_event({}, "tool_calls"))
    if usage is not None:
        events.append(usage if isinstance(usage, dict) else usage_event(*usage))
    return Reply(events=events)


def error_reply(
    status: int,
    message: str,
    error_type: str = "server_error",
    *,
    retry_after_ms: int | None = 10,
    headers: dict[str, str] | None = None,
) -> Reply:
    extra = dict(headers or {})
    if retry_after_ms is not None:
        extra["retry-after-ms"] = str(retry_after_ms)
    return Reply(
        status=status,
        headers=extra,
        error_body={"error": {"message": message, "type": error_type, "param": None, "code": None}},
    )


def rate_limit_reply(message: str = "Rate limit reached for requests") -> Reply:
    return error_reply(429, message, "rate_limit_exceeded", retry_after_ms=10)


def stall_reply(first_text: str = "Hel", seconds: float = 10.0) -> Reply:
    """Sends the role chunk and one text chunk, then goes silent for `seconds`."""
    reply = text_reply(first_text, "lo")
    reply.stall_after = 2
    reply.stall_seconds = seconds
    return reply


def raw_reply(*payloads: str, done: bool = True) -> Reply:
    """Arbitrary `data:` payloads, e.g. malformed JSON."""
    return Reply(events=list(payloads), done=done)


# --- the server -------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        """`GET /v1/models`: `server.models` as a model list, or `server.models_error`."""
        owner = self.server.owner
        owner._record(self.path, None, dict(self.headers.items()))
        if self.path.rstrip("/") != "/v1/models":
            self._send_json(
                404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
            )
            return
        error = owner.models_error
        if error is not None:
            self._send_json(error.status, error.error_body or {}, error.headers)
            return
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in owner.models
        ]
        self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        owner._record(self.path, body, dict(self.headers.items()))
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send_json(
                404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}
            )
            return
        reply = owner._next_reply()
        if reply.delay_headers:
            owner._stalled.wait(reply.delay_headers)
        if reply.status != 200:
            self._send_json(reply.status, reply.error_body or {}, reply.headers)
            return
        self._stream(reply, body.get("model") if isinstance(body, dict) else None)

    def _send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _stream(self, reply: Reply, model: str | None) -> None:
        owner = self.server.owner
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.flush()
        completion_id = f"chatcmpl-{owner.request_count}"
        try:
            for position, event in enumerate(reply.events):
                if reply.stall_after is not None and position == reply.stall_after:
                    owner._stalled.wait(reply.stall_seconds)
                    self.close_connection = True
                    return
                if isinstance(event, str):
                    payload = event
                else:
                    payload = json.dumps(
                        {
                            "id": completion_id,
                            "object": "chat.completion.chunk",
                            "created": int(time.time()),
                            "model": model or "test-model",
                            **event,
                        }
                    )
                self._chunk(f"data: {payload}\n\n".encode())
            if reply.done:
                self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: FakeOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # clients that hang up (cancelled or timed-out streams, pooled connections) are normal
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeOpenAIServer:
    def __init__(self) -> None:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._stalled = threading.Event()  # set on stop: releases stalled streams
        self.fallback: Reply = error_reply(500, "fake server: no scripted reply left")
        self.models: list[str] = ["gpt-test"]
        self.models_error: Reply | None = None  # set: GET /v1/models answers with it
        self.requests: list[Any] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def script(self, *replies: Reply) -> FakeOpenAIServer:
        with self._lock:
            self._queue.extend(replies)
        return self

    def always(self, reply: Reply) -> FakeOpenAIServer:
        """Answer every request (once the queue is empty) with `reply`."""
        self.fallback = reply
        return self

    def _record(self, path: str, body: Any, headers: dict[str, str]) -> None:
        with self._lock:
            self.paths.append(path)
            self.requests.append(body)
            self.headers.append({name.lower(): value for name, value in headers.items()})

    def _next_reply(self) -> Reply:
        with self._lock:
            return self._queue.popleft() if self._queue else self.fallback

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stalled.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
