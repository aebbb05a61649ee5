"""A fake OpenAI-compatible model for the benchmarks and integration tests: every answer
takes a fixed delay, as a real model's time to first token does, and costs the server
almost nothing (one asyncio process, no threads, a protocol object per connection).

    python -m bench.model_server --port 8765 --delay 1.0

It behaves like a "calculator agent": when the last message of a Chat Completions request
is a tool result it answers the text "The answer is 42.", otherwise one `calculator` tool
call with {"expression": "6*7"} (the argument name of agents/tools/builtin/calculator.py).

Routes (HTTP/1.1, keep-alive):
- POST /v1/chat/completions: `stream: true` answers Server-Sent Events like OpenAI's
  (`chat.completion.chunk` objects, a usage chunk with `choices: []` when
  `stream_options.include_usage` asks for it, then `data: [DONE]`); otherwise one
  `chat.completion` object. Nothing is sent before the delay has passed. A client that
  closes its connection during the delay is noticed at once (`connection_lost`) and
  counted in `disconnected_early`; its answer is never sent.
- GET /v1/models: one model, `bench-model`.
- GET /stats: {"calls", "answered", "in_flight", "max_in_flight", "disconnected_early",
  "delay", "per_key": {key: calls}}; the key of a call is the text of the first user
  message (tests give each run its own text to count the model calls per run).
- POST /stats/reset: zero the counters (`max_in_flight` restarts from `in_flight`).
- POST /config {"delay": seconds}: change the delay of the answers that start after it.

From Python (the server in its own process):

    server = ModelServerProcess(delay=1.0)
    base_url = server.start()          # "http://127.0.0.1:<port>/v1"
    ...; server.stats(); server.reset(); server.set_delay(0.0)
    server.stop()
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.model_answers import MODEL_ID, completion_body, first_user_text, stream_body

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 32 * 1024 * 1024
ROOT = Path(__file__).resolve().parents[1]


# --- the state ------------------------------------------------------------------------------


@dataclass
class Stats:
    delay: float
    calls: int = 0
    answered: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    disconnected_early: int = 0
    per_key: Counter[str] = field(default_factory=Counter)

    def started(self, key: str) -> None:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.per_key[key] += 1

    def reset(self) -> None:
        self.calls = self.answered = self.disconnected_early = 0
        self.max_in_flight = self.in_flight
        self.per_key.clear()

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "answered": self.answered,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "disconnected_early": self.disconnected_early,
            "delay": self.delay,
            "per_key": dict(self.per_key),
        }


# --- HTTP -----------------------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


def response(status: int, body: bytes, content_type: str, keep_alive: bool) -> bytes:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Too Large"}.get(status, "")
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        f"content-type: {content_type}\r\n"
        f"content-length: {len(body)}\r\n"
        f"connection: {'keep-alive' if keep_alive else 'close'}\r\n"
    )
    if content_type == "text/event-stream":
        head += "cache-control: no-cache\r\n"
    return head.encode() + b"\r\n" + body


def json_response(status: int, payload: Any, keep_alive: bool = True) -> bytes:
    return response(status, json.dumps(payload).encode(), "application/json", keep_alive)


class Connection(asyncio.Protocol):
    """One client connection: requests are parsed from the buffer and answered one at a
    time, in order (HTTP/1.1 without pipelining overlap)."""

    def __init__(self, server: ModelServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.task: asyncio.Task[None] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > MAX_HEADER_BYTES + MAX_BODY_BYTES:
            self.close()
            return
        self.pump()

    def eof_received(self) -> bool:
        self.gone()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.gone()

    def gone(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.task is not None and not self.task.done():
            self.task.cancel()  # counted as an early disconnect by the answering task

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        self.gone()

    def pump(self) -> None:
        """Start answering the next complete request, unless one is being answered."""
        if self.closed or (self.task is not None and not self.task.done()):
            return
        try:
            request = self.parse()
        except ValueError as exc:
            self.write(json_response(400, {"error": {"message": str(exc)}}, False))
            self.close()
            return
        if request is not None:
            self.task = asyncio.get_running_loop().create_task(self.answer(request))
            self.task.add_done_callback(lambda _: self.pump())

    def parse(self) -> Request | None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buffer) > MAX_HEADER_BYTES:
                raise ValueError("headers too large")
            return None
        lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            raise ValueError("malformed request line") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise ValueError("chunked request bodies are not supported")
        length = int(headers.get("content-length") or 0)
        if length > MAX_BODY_BYTES:
            raise ValueError("body too large")
        if len(self.buffer) < end + 4 + length:
            return None
        body = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" and (version != "HTTP/1.0" or connection == "keep-alive")
        return Request(method.upper(), target.split("?", 1)[0], headers, body, keep_alive)

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    async def answer(self, request: Request) -> None:
        try:
            data = await self.server.route(request, self)
        except asyncio.CancelledError:
            return
        self.write(data)
        if not request.keep_alive:
            self.close()


class ModelServer:
    def __init__(self, delay: float) -> None:
        self.stats = Stats(delay=delay)

    async def route(self, request: Request, connection: Connection) -> bytes:
        path = request.path.rstrip("/")
        if request.method == "POST" and path.endswith("/chat/completions"):
            return await self.chat(request, connection)
        if request.method == "GET" and path.endswith("/models"):
            model = {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "bench"}
            return json_response(200, {"object": "list", "data": [model]}, request.keep_alive)
        if request.method == "GET" and path == "/stats":
            return json_response(200, self.stats.to_json(), request.keep_alive)
        if request.method == "POST" and path == "/stats/reset":
            self.stats.reset()
            return json_response(200, self.stats.to_json(), request.keep_alive)
        if request.method == "POST" and path == "/config":
            options = json.loads(request.body or b"{}")
            if "delay" in options:
                self.stats.delay = max(0.0, float(options["delay"]))
            return json_response(200, {"delay": self.stats.delay}, request.keep_alive)
        error = {"error": {"message": f"no route {request.method} {request.path}"}}
        return json_response(404, error, request.keep_alive)

    async def chat(self, request: Request, connection: Connection) -> bytes:
        try:
            body = json.loads(request.body)
            messages = body["messages"]
            if not isinstance(messages, list):
                raise TypeError("messages must be a list")
        except (ValueError, KeyError, TypeError) as exc:
            error = {"error": {"message": f"invalid request: {exc}", "type": "invalid_request"}}
            return json_response(400, error, request.keep_alive)
        stats = self.stats
        stats.started(first_user_text(messages))
        try:
            if stats.delay > 0:
                await asyncio.sleep(stats.delay)
            elif connection.closed:
                raise asyncio.CancelledError
        except asyncio.CancelledError:
            stats.disconnected_early += 1
            raise
        finally:
            stats.in_flight -= 1
        stats.answered += 1
        if body.get("stream"):
            payload = stream_body(body, messages)
            return response(200, payload, "text/event-stream", request.keep_alive)
        return response(200, completion_body(body, messages), "application/json", True)


def raise_file_limit() -> None:
    """As many descriptors as the hard limit allows: a connection per run in flight."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def serve(host: str, port: int, delay: float, parent: int = 0) -> None:
    raise_file_limit()
    server = ModelServer(delay)
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(lambda: Connection(server), host, port, backlog=4096)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watcher = loop.create_task(exit_with_parent(parent, stop)) if parent else None
    bound = listener.sockets[0].getsockname()[1]
    print(f"model server on http://{host}:{bound}/v1, delay {delay:g}s", flush=True)
    async with listener:
        await stop.wait()
    if watcher is not None:
        watcher.cancel()


async def exit_with_parent(parent: int, stop: asyncio.Event) -> None:
    """Stop once the process that started us is gone (we are re-parented): a test or bench
    that dies without calling stop() leaves no server behind."""
    while os.getppid() == parent:
        await asyncio.sleep(1.0)
    stop.set()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--delay", type=float, default=1.0, help="seconds before each answer")
    parser.add_argument("--parent", type=int, default=0, help="exit when this process is gone")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.host, args.port, args.delay, args.parent))


# --- the Python API: the server as a child process --------------------------------------------


class ModelServerProcess:
    """`python -m bench.model_server` as a child process in its own session."""

    def __init__(
        self,
        delay: float = 1.0,
        port: int = 0,
        host: str = "127.0.0.1",
        log_path: Path | str | None = None,
        python: str = sys.executable,
    ) -> None:
        self.delay = delay
        self.host = host
        self.port = port
        self.log_path = Path(log_path) if log_path else None
        self.python = python
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as its base URL."""
        return f"{self.root_url}/v1"

    @property
    def pid(self) -> int:
        if self.popen is None:
            raise RuntimeError("the model server is not started")
        return self.popen.pid

    def start(self, timeout: float = 15.0) -> str:
        """Start the process, wait until it answers; returns the base URL."""
        if not self.port:
            self.port = _free_port(self.host)
        log = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        args = [self.python, "-m", "bench.model_server", "--host", self.host]
        args += ["--port", str(self.port), "--delay", str(self.delay), "--parent", str(os.getpid())]
        self.popen = subprocess.Popen(
            args,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        while True:
            if self.popen.poll() is not None:
                raise RuntimeError(f"the model server exited with {self.popen.returncode}")
            with contextlib.suppress(OSError):
                self._request("GET", "/v1/models", timeout=0.5)
                return self.base_url
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the model server did not answer within {timeout:g}s")
            time.sleep(0.05)

    def _request(self, method: str, path: str, body: Any = None, timeout: float = 5.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.root_url}{path}", data=data, method=method)
        request.add_header("Content-Type", "application/json")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=timeout) as answer:
            return json.loads(answer.read())

    def stats(self) -> dict[str, Any]:
        return dict(self._request("GET", "/stats"))

    def reset(self) -> dict[str, Any]:
        return dict(self._request("POST", "/stats/reset", {}))

    def set_delay(self, delay: float) -> None:
        self._request("POST", "/config", {"delay": delay})
        self.delay = delay

    def stop(self, timeout: float = 5.0) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout)

    def __enter__(self) -> ModelServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_port(host: str) -> int:
    import socket

    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


if __name__ == "__main__":
    main()
