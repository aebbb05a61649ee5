"""The stock a2a-sdk client against our A2A server, for tests: in process (httpx's ASGI
transport into the site's ASGI application) or over HTTP (a daphne process)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import ParseDict

JSONRPC, REST = "JSONRPC", "HTTP+JSON"
# what the stock client raises: transport errors (a 401) and the errors the server answered
REFUSED = (A2AClientError, A2AError)
LEFTOVER_SECONDS = 5.0
T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` on a loop of its own, then give what it left running (the fan-out
    hub's receive tasks of the in-process app) LEFTOVER_SECONDS to end once cancelled:
    `asyncio.run` waits for them without limit, and a channels_redis BRPOP cancelled
    after a Redis restart can take minutes to give up."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        leftover = asyncio.all_tasks(loop)
        for task in leftover:
            task.cancel()
        if leftover:
            loop.run_until_complete(asyncio.wait(leftover, timeout=LEFTOVER_SECONDS))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def message(
    text: str = "",
    *,
    task_id: str = "",
    context_id: str = "",
    data: dict[str, Any] | None = None,
    message_id: str | None = None,
) -> Message:
    msg = Message(
        role=Role.ROLE_USER,
        message_id=message_id or str(uuid.uuid4()),
        task_id=task_id,
        context_id=context_id,
    )
    if text:
        msg.parts.append(Part(text=text))
    if data is not None:
        ParseDict(data, msg.parts.add().data)
    return msg


class A2AClient:
    """One agent's card and a stock client pinned to one binding."""

    def __init__(
        self,
        base_url: str,
        slug: str,
        *,
        token: str | None = None,
        binding: str = JSONRPC,
        app: Any = None,
    ) -> None:
        self.base_url, self.slug, self.token, self.binding, self.app = (
            base_url,
            slug,
            token,
            binding,
            app,
        )

    def _http(self) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        transport = httpx.ASGITransport(app=self.app) if self.app is not None else None
        return httpx.AsyncClient(
            transport=transport, headers=headers, timeout=60, base_url=self.base_url
        )

    async def card(self) -> AgentCard:
        async with self._http() as http:
            return await A2ACardResolver(http, f"{self.base_url}/a2a/{self.slug}").get_agent_card()

    async def _call(self, work: Any, *, streaming: bool = False) -> Any:
        async with self._http() as http:
            card = await A2ACardResolver(http, f"{self.base_url}/a2a/{self.slug}").get_agent_card()
            config = ClientConfig(
                streaming=streaming, httpx_client=http, supported_protocol_bindings=[self.binding]
            )
            client = ClientFactory(config).create(card)
            return await work(client)

    async def send(self, msg: Message, *, wait: bool = True) -> Task | Message:
        request = SendMessageRequest(
            message=msg, configuration=SendMessageConfiguration(return_immediately=not wait)
        )

        async def work(client: Any) -> Any:
            last = None
            async for item in client.send_message(request):
                last = item
            return last.task if last.HasField("task") else last.message

        return await self._call(work)

    async def stream(self, msg: Message) -> list[StreamResponse]:
        request = SendMessageRequest(message=msg)

        async def work(client: Any) -> list[StreamResponse]:
            return [item async for item in client.send_message(request)]

        return await self._call(work, streaming=True)

    async def subscribe(self, task_id: str) -> list[StreamResponse]:
        async def work(client: Any) -> list[StreamResponse]:
            return [item async for item in client.subscribe(SubscribeToTaskRequest(id=task_id))]

        return await self._call(work, streaming=True)

    async def get(self, task_id: str, history_length: int | None = None) -> Task:
        request = GetTaskRequest(id=task_id)
        if history_length is not None:
            request.history_length = history_length
        return await self._call(lambda client: client.get_task(request))

    async def cancel(self, task_id: str) -> Task:
        return await self._call(lambda client: client.cancel_task(CancelTaskRequest(id=task_id)))

    async def list(self, **fields: Any) -> ListTasksResponse:
        return await self._call(lambda client: client.list_tasks(ListTasksRequest(**fields)))
