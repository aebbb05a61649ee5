"""The a2a-sdk client of one endpoint: sending a message and waiting for its task to settle
(subscribe, falling back to polling), cancelling a task, the agent card and the health
probe, on a process's asyncio loop (the sdk is asyncio-only, a run's thread is not)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    GetTaskRequest,
    Part,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
)
from a2a.types import Message as A2AMessage
from a2a.types import Role as A2ARole
from a2a.utils.errors import TaskNotFoundError
from google.protobuf.json_format import MessageToDict

from ... import aio
from ..base import ExecutionBackendError
from .config import BINDINGS, A2AConfig
from .errors import error_text
from .mapping import SETTLED_STATES, Reply, state_label, stream_state
from .transport import choose_interface, describe_interface, http_client, not_served

logger = logging.getLogger(__name__)

ABORT_SECONDS = 5.0  # how long cancelling or closing may take before it is given up


@dataclass
class Progress:
    """What the worker thread needs to know about an exchange in flight (to abort it)."""

    task_id: str | None = None
    context_id: str | None = None
    state: str | None = None
    sent: threading.Event = field(default_factory=threading.Event)


class RemoteClient:
    """The a2a-sdk clients of one endpoint, used on the private loop."""

    def __init__(self, config: A2AConfig) -> None:
        self.config = config
        self.interface: AgentInterface | None = None
        self.remote_card: AgentCard | None = None
        self._http: httpx.AsyncClient | None = None
        self._sender: Any = None
        self._subscriber: Any = None
        self._subscribe_works = True

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = http_client(self.config)
        return self._http

    async def _open(self) -> None:
        """Fetch the agent card and build the clients for the interface it leads to."""
        if self._sender is not None:
            return
        card = await self.card()
        interface = choose_interface(card, self.config)
        # The factory is handed a card with only the chosen interface, so that sending,
        # subscribing and the health check all use the same one (and its resolved URL and
        # tenant); the factory still picks the SDK transport for its binding and version.
        pinned = AgentCard()
        pinned.CopyFrom(card)
        del pinned.supported_interfaces[:]
        pinned.supported_interfaces.append(interface)
        clients = []
        for streaming in (False, True):
            settings = ClientConfig(
                streaming=streaming,
                httpx_client=self._client(),
                supported_protocol_bindings=list(BINDINGS),
            )
            clients.append(ClientFactory(settings).create(pinned))
        self.remote_card, self.interface = card, interface
        self._sender, self._subscriber = clients

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def follow(self, progress: Progress) -> Reply:
        """Wait for a task an earlier (crashed) segment already sent, without sending."""
        await self._open()
        assert progress.task_id is not None
        progress.sent.set()
        task = await self._sender.get_task(self._get(progress.task_id))
        return await self._settle(task, progress)

    async def exchange(self, texts: list[str], progress: Progress, message_id: str) -> Reply:
        await self._open()
        message = A2AMessage(
            role=A2ARole.ROLE_USER,
            message_id=message_id,
            parts=[Part(text=text) for text in texts],
        )
        if progress.task_id:
            message.task_id = progress.task_id
        if progress.context_id:
            message.context_id = progress.context_id
        configuration = SendMessageConfiguration(return_immediately=self.config.return_immediately)
        if self.config.history_length is not None:
            configuration.history_length = self.config.history_length
        request = SendMessageRequest(message=message, configuration=configuration)
        response = None
        try:
            async for item in self._sender.send_message(request):
                response = item
        finally:
            progress.sent.set()
        if response is None:
            raise ExecutionBackendError("remote_error", "the remote agent sent no response")
        if response.HasField("message"):
            progress.context_id = response.message.context_id or progress.context_id
            progress.state = "completed"
            return Reply(message=response.message)
        return await self._settle(response.task, progress)

    async def _settle(self, task: Task, progress: Progress) -> Reply:
        progress.task_id, progress.context_id = task.id, task.context_id
        progress.state = state_label(task.status.state)
        while task.status.state not in SETTLED_STATES:
            task = await self._next(task)
            progress.state = state_label(task.status.state)
        return Reply(task=task)

    def _get(self, task_id: str) -> GetTaskRequest:
        request = GetTaskRequest(id=task_id)
        if self.config.history_length is not None:
            request.history_length = self.config.history_length
        return request

    async def _next(self, task: Task) -> Task:
        """Wait for the task to move: subscribe to it, else poll it."""
        if self._subscribe_works:
            settled = False
            try:
                stream = self._subscriber.subscribe(SubscribeToTaskRequest(id=task.id))
                async with contextlib.aclosing(stream):
                    async for item in stream:
                        if stream_state(item) in SETTLED_STATES:
                            settled = True
                            break
            except Exception as exc:  # not supported, already settled, stream broke: poll
                logger.debug("A2A subscribe to task %s failed (%s); polling", task.id, exc)
                settled = False
            if not settled:
                self._subscribe_works = False
            return await self._sender.get_task(self._get(task.id))
        await asyncio.sleep(self.config.poll_interval_ms / 1000)
        return await self._sender.get_task(self._get(task.id))

    async def cancel(self, task_id: str) -> Task:
        await self._open()
        return await self._sender.cancel_task(CancelTaskRequest(id=task_id))

    async def card(self) -> AgentCard:
        resolver = A2ACardResolver(self._client(), self.config.base_url)
        return await resolver.get_agent_card()

    async def probe(self) -> None:
        """One cheap call over the chosen interface: GetTask of a task that cannot exist.
        A remote that speaks the binding there answers TaskNotFound; anything else (a 404
        from a server speaking another binding, a refused token, a refused address) means
        runs would fail too. GetTask is also what runs use to follow a task."""
        await self._open()
        assert self.interface is not None
        try:
            await self._sender.get_task(GetTaskRequest(id=f"health-check-{uuid.uuid4()}"))
        except TaskNotFoundError:
            return
        except Exception as exc:  # reported below, with the interface it concerns
            problem = exc
        else:
            return
        # raised outside the except block: describe_error would otherwise dig the cause
        # out of the exception's context and drop the interface from the message
        offered = describe_interface(self.interface)
        binding = self.interface.protocol_binding
        if not_served(problem):
            reason = f"nothing there answers {binding} ({error_text(problem)})"
        else:
            reason = f"calling it failed: {error_text(problem)}"
        raise ExecutionBackendError(
            "remote_error",
            f"A2A endpoint {self.config.base_url}: the agent card offers {offered}, but {reason}",
        )


class LoopThread:
    """The process's loop (runs.runtime.aio) seen from a synchronous caller: the remote
    calls of every run in flight are awaited there, none holds a loop or a thread."""

    def __init__(self) -> None:
        self.loop = aio.process_loop.get()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        future = self.submit(coro)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        """Nothing to stop: the loop is the process's."""


def cancel_task(config: A2AConfig, task_id: str) -> None:
    """Cancel a remote task (a run cancelled while nobody executed it)."""
    loop = LoopThread()
    remote = RemoteClient(config)
    try:
        loop.run(remote.cancel(task_id), timeout=ABORT_SECONDS)
    finally:
        try:
            loop.run(remote.close(), timeout=ABORT_SECONDS)
        finally:
            loop.close()


def fetch_agent_card(config: A2AConfig) -> dict[str, Any]:
    """The remote agent card (`/.well-known/agent-card.json`) as JSON."""
    loop = LoopThread()
    remote = RemoteClient(config)
    limit = min(config.timeout_ms / 1000, 30.0) + 1
    try:
        card = loop.run(remote.card(), timeout=limit)
    finally:
        try:
            loop.run(remote.close(), timeout=ABORT_SECONDS)
        finally:
            loop.close()
    return dict(MessageToDict(card))


def check_endpoint(config: A2AConfig) -> dict[str, Any]:
    """Fetch the agent card, choose the transport and probe it (see `A2ABackend.check`)."""
    loop = LoopThread()
    remote = RemoteClient(config)
    # two requests (the card, the probe), each bounded by the HTTP client's timeout
    limit = 2 * min(config.timeout_ms / 1000, 30.0) + 1
    try:
        loop.run(remote.probe(), timeout=limit)
    finally:
        try:
            loop.run(remote.close(), timeout=ABORT_SECONDS)
        finally:
            loop.close()
    assert remote.remote_card is not None and remote.interface is not None
    interface = remote.interface
    return {
        "card": dict(MessageToDict(remote.remote_card)),
        "transport": {
            "binding": interface.protocol_binding,
            "url": interface.url,
            "protocol_version": interface.protocol_version,
        },
    }
