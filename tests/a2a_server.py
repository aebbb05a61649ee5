"""A real A2A agent server for tests, built with a2a-sdk's server side.

`A2AServer` serves an `AgentExecutor` through the SDK's request handler and its Starlette
agent-card routes and protocol routes, with uvicorn in a background thread on 127.0.0.1 and
an ephemeral port. `bindings` chooses the protocol bindings it speaks, in the order its card
lists them (the first is its preferred one): `HTTP+JSON` (REST, protocol 1.0, at the base
URL) and `JSONRPC` (protocol 1.0, posted to `<base URL>/rpc`, so a client that ignores the
card's interface URL misses it). `interfaces` replaces what the card advertises
("{base_url}" in their URLs stands for the server's), and `legacy_card` serves a protocol
0.3 card (`url`, `preferredTransport`, `additionalInterfaces`) with the JSON-RPC route
answering 0.3 requests as well. What the agent does is chosen by the first word of the
user's message:

- `reply <text>`    completes the task with `<text>` as a text artifact;
- `message <text>`  answers with a single Message (no task);
- `ask <question>`  goes input-required asking `<question>`; the follow-up message on the
                    same task completes it with "Thanks: <follow-up>";
- `auth <text>`     goes auth-required with `<text>`;
- `fail <text>`     fails with `<text>`; `reject <text>` rejects with it;
- `slow`            works until cancelled (and records the cancel);
- `wait <s> <text>` works for `<s>` seconds, then completes with `<text>`.

Every follow-up and cancel is recorded, and so is each request's Authorization header;
with `token=` set, requests without `Authorization: Bearer <token>` get 401, except for the
agent card, which is public (as agents publish it). Any path under `/moved` answers a
redirect to the cloud metadata address (clients must not follow it).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from a2a.helpers import get_message_text, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse, RedirectResponse
from starlette.routing import Route


@dataclass
class Recorder:
    """What the server saw, for assertions (written on the server's loop thread)."""

    prompts: list[tuple[str, str]] = field(default_factory=list)  # (task_id, text)
    message_ids: list[str] = field(default_factory=list)  # of every message received
    followups: list[tuple[str, str]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    authorization: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)


class ScriptedExecutor(AgentExecutor):
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._cancel_events: dict[str, asyncio.Event] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        if context.message is not None:
            self.recorder.message_ids.append(context.message.message_id)
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        current = context.current_task
        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            self.recorder.followups.append((task_id, text))
            updater = TaskUpdater(event_queue, task_id, context_id)
            await updater.add_artifact([new_text_part(f"Thanks: {text}")], name="answer")
            await updater.complete()
            return
        self.recorder.prompts.append((task_id, text))
        verb, _, rest = text.partition(" ")
        if verb == "message":
            await event_queue.enqueue_event(
                new_text_message(rest, context_id=context_id, role=Role.ROLE_AGENT)
            )
            return
        if current is None:
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message] if context.message else [],
                )
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        if verb == "reply":
            await updater.add_artifact([new_text_part(rest)], name="answer")
            await updater.complete()
        elif verb == "ask":
            await updater.requires_input(updater.new_agent_message([new_text_part(rest)]))
        elif verb == "auth":
            await updater.requires_auth(updater.new_agent_message([new_text_part(rest)]))
        elif verb == "fail":
            await updater.failed(updater.new_agent_message([new_text_part(rest)]))
        elif verb == "reject":
            await updater.reject(updater.new_agent_message([new_text_part(rest)]))
        elif verb == "wait":
            seconds, _, answer = rest.partition(" ")
            await asyncio.sleep(float(seconds))
            await updater.add_artifact([new_text_part(answer)], name="answer")
            await updater.complete()
        elif verb == "slow":
            stop = self._cancel_events.setdefault(task_id, asyncio.Event())
            try:
                await asyncio.wait_for(stop.wait(), timeout=60)
            except TimeoutError:
                await updater.failed(updater.new_agent_message([new_text_part("never cancelled")]))
        else:
            await updater.failed(
                updater.new_agent_message([new_text_part(f"unknown verb {verb!r}")])
            )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        self.recorder.cancelled.append(task_id)
        self._cancel_events.setdefault(task_id, asyncio.Event()).set()
        updater = TaskUpdater(event_queue, task_id, context.context_id or "")
        await updater.cancel()


REST = "HTTP+JSON"
JSONRPC = "JSONRPC"
RPC_PATH = "/rpc"


def interface_url(base_url: str, binding: str) -> str:
    """Where this server answers `binding`."""
    return f"{base_url}{RPC_PATH}" if binding == JSONRPC else base_url


def agent_card(
    base_url: str,
    name: str,
    streaming: bool = True,
    bindings: tuple[str, ...] = (REST,),
    interfaces: list[AgentInterface] | None = None,
) -> AgentCard:
    if interfaces is None:
        interfaces = [
            AgentInterface(
                protocol_binding=binding,
                url=interface_url(base_url, binding),
                protocol_version="1.0",
            )
            for binding in bindings
        ]
    else:  # a test's own interfaces, with "{base_url}" standing for this server's
        interfaces = [
            AgentInterface(
                protocol_binding=offer.protocol_binding,
                url=offer.url.replace("{base_url}", base_url),
                protocol_version=offer.protocol_version,
            )
            for offer in interfaces
        ]
    return AgentCard(
        name=name,
        description="A scripted A2A agent for tests.",
        version="1.0.0",
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="script", name="Scripted", description="Follows its prompt", tags=["t"])
        ],
    )


class _Recording(BaseHTTPMiddleware):
    def __init__(self, app: Any, server: A2AServer) -> None:
        super().__init__(app)
        self.server = server

    async def dispatch(self, request: Any, call_next: Any) -> Any:
        header = request.headers.get("authorization", "")
        self.server.recorder.authorization.append(header)
        self.server.recorder.paths.append(request.url.path)
        if request.url.path.startswith("/moved"):  # a redirect to the metadata service
            return RedirectResponse("http://169.254.169.254/latest/meta-data", status_code=302)
        public = request.url.path == AGENT_CARD_WELL_KNOWN_PATH
        if self.server.token and header != f"Bearer {self.server.token}" and not public:
            return JSONResponse({"error": {"code": 401, "message": "bad token"}}, status_code=401)
        return await call_next(request)


class A2AServer:
    def __init__(
        self,
        *,
        token: str = "",
        name: str = "Scripted test agent",
        streaming: bool = True,
        tenant: str = "",
        bindings: tuple[str, ...] = (REST,),
        interfaces: list[AgentInterface] | None = None,
        legacy_card: bool = False,
    ) -> None:
        """`streaming=False` advertises no streaming (subscribe is refused: clients poll);
        `tenant` serves the REST routes under /<tenant> (an endpoint's `target`)."""
        self.token = token
        self.recorder = Recorder()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.card = agent_card(self.base_url, name, streaming, bindings, interfaces)
        handler = DefaultRequestHandler(
            agent_executor=ScriptedExecutor(self.recorder),
            task_store=InMemoryTaskStore(),
            agent_card=self.card,
        )
        routes: list[Any] = []
        if legacy_card:
            routes.append(Route(AGENT_CARD_WELL_KNOWN_PATH, self._legacy_card, methods=["GET"]))
        else:
            routes.extend(create_agent_card_routes(self.card))
        if JSONRPC in bindings:
            routes.extend(create_jsonrpc_routes(handler, RPC_PATH, enable_v0_3_compat=legacy_card))
        if REST in bindings:
            routes.extend(create_rest_routes(handler, path_prefix=f"/{tenant}" if tenant else ""))
        app = Starlette(routes=routes)
        app.add_middleware(_Recording, server=self)
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    async def _legacy_card(self, request: Any) -> JSONResponse:
        """The card as a protocol 0.3 agent publishes it: the preferred transport at `url`,
        the others under `additionalInterfaces`."""
        first, *others = self.card.supported_interfaces
        return JSONResponse(
            {
                "name": self.card.name,
                "description": self.card.description,
                "version": self.card.version,
                "protocolVersion": "0.3.0",
                "url": first.url,
                "preferredTransport": first.protocol_binding,
                "additionalInterfaces": [
                    {"url": other.url, "transport": other.protocol_binding} for other in others
                ],
                "capabilities": {"streaming": self.card.capabilities.streaming},
                "defaultInputModes": ["text/plain"],
                "defaultOutputModes": ["text/plain"],
                "skills": [],
            }
        )

    def start(self) -> A2AServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the A2A test server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def wait_for(self, predicate: Any, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self.recorder):
                return True
            time.sleep(0.02)
        return bool(predicate(self.recorder))


def text_of(message: Any) -> str:
    return str(get_message_text(message))
