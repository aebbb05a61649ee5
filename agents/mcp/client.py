"""Sessions to MCP servers, awaited on the process's event loop (runs.runtime.aio).

One session per server configuration per process, opened on first use and reused by
every run of the process; a session whose transport failed is dropped and the next call
opens a new one. A call that fails before it reached the server (the connection was
refused, or the server restarted and no longer knows the session) is sent once more on
a fresh session; a call that may have reached it is never repeated.

An MCP `Client` lives in an "owner" task that entered it (anyio scopes must be left by
the task that entered them) and waits until the session is closed; calls are made from
the callers' tasks and fail at once, with a clear error, when the owner ends (its
transport failed). No Django here: the connection settings come in a `Connection`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx2
from mcp import Client
from mcp import types as mcp_types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from agents.providers.guarded_http import guarded_async_http_client
from runs.runtime.netguard import AddressPolicy

from .stdio import bounded_stdio

T = TypeVar("T")
MAX_TOOL_PAGES = 20  # a tools/list that pages on and on is cut here
MAX_EVENT_BYTES = 8 * 1024 * 1024  # one streamed message (a tool result) at most
PING_TIMEOUT = 5.0


class McpTransportError(Exception):
    """The server could not be reached, answered something that is not MCP, went away
    or did not answer in time. The message says which, for operators and the model."""


class McpTimeout(McpTransportError):
    pass


@dataclass(frozen=True)
class Connection:
    """How to reach one server. `argv` (stdio) comes from the allow-list setting only."""

    name: str
    transport: str  # "http" or "stdio"
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    argv: tuple[str, ...] = ()
    timeout: float = 30.0
    policy: AddressPolicy = field(default_factory=AddressPolicy)

    @property
    def key(self) -> str:
        """The pool's key: the same settings share a session; the secrets are hashed."""
        raw = json.dumps(
            [self.name, self.transport, self.url, self.headers, self.argv, repr(self.policy)]
        )
        return hashlib.sha256(raw.encode()).hexdigest()

    @property
    def where(self) -> str:
        return self.url if self.transport == "http" else f"command '{self.argv[0]}'"


def _transport(connection: Connection) -> Any:
    if connection.transport == "stdio":
        return bounded_stdio(connection.argv, MAX_EVENT_BYTES)
    timeout = httpx2.Timeout(connection.timeout, connect=min(connection.timeout, 10.0))
    client = guarded_async_http_client(connection.policy, timeout)
    client.headers.update(dict(connection.headers))
    client.follow_redirects = False
    client.event_hooks["response"].append(_refuse_oversized)
    return streamable_http_client(
        connection.url, http_client=client, max_sse_event_size=MAX_EVENT_BYTES
    )


class ResponseTooLarge(Exception):
    pass


async def _refuse_oversized(response: httpx2.Response) -> None:
    """A JSON answer whose declared length is over MAX_EVENT_BYTES is refused before it
    is read (an SSE stream is bounded per event by the SDK)."""
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_EVENT_BYTES:
        await response.aclose()
        raise ResponseTooLarge(
            f"the server answered {int(length) // (1024 * 1024)} MB, more than "
            f"{MAX_EVENT_BYTES // (1024 * 1024)} MB"
        )


def describe(exc: BaseException | None) -> str:
    """One line about a transport failure, from the innermost useful exception."""
    if exc is None:
        return "the connection ended"
    if isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        return describe(inner[0] if inner else None)
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, McpTransportError) else f"{type(exc).__name__}: {text}"


def _never_sent(exc: BaseException | None) -> bool:
    """Whether a failure means the request cannot have reached the server: the connection
    was refused, or the server answered that it does not know the session (restarted)."""
    if exc is None:
        return False
    if isinstance(exc, BaseExceptionGroup):
        return any(_never_sent(e) for e in exc.exceptions)
    if isinstance(exc, httpx2.ConnectError):
        return True
    if isinstance(exc, MCPError) and "Session terminated" in exc.error.message:
        return True
    return _never_sent(exc.__cause__)


class _Session:
    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.client: Client | None = None
        self.closing = asyncio.Event()
        self.failure: BaseException | None = None
        self.owner: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.owner is not None and not self.owner.done()

    async def open(self) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.owner = asyncio.create_task(self._own(ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.connection.timeout)
        except TimeoutError:
            await self.close()
            raise McpTimeout(
                f"no MCP session with {self.connection.where} within {self.connection.timeout:g}s"
            ) from None
        except asyncio.CancelledError:
            await self.close()
            raise
        except Exception as exc:
            raise McpTransportError(
                f"could not open an MCP session with {self.connection.where}: {describe(exc)}"
            ) from exc

    async def _own(self, ready: asyncio.Future[None]) -> None:
        try:
            async with Client(_transport(self.connection), mode="auto") as client:
                self.client = client
                ready.set_result(None)
                await self.closing.wait()
        except BaseException as exc:  # the transport's failure, kept for the callers
            self.failure = exc
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            if not isinstance(exc, Exception):
                raise

    async def request(self, make: Callable[[Client], Awaitable[T]]) -> T:
        assert self.client is not None and self.owner is not None
        task = asyncio.ensure_future(make(self.client))
        try:
            await asyncio.wait({task, self.owner}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task.done():
            return task.result()
        task.cancel()
        raise McpTransportError(
            f"the connection to {self.connection.where} was lost: {describe(self.failure)}"
        )

    async def close(self) -> None:
        self.closing.set()
        if self.owner is not None and not self.owner.done():
            done, _ = await asyncio.wait({self.owner}, timeout=5)
            if not done:
                self.owner.cancel()


class SessionPool:
    """The sessions of one event loop, by connection key; one per server name at a time
    (a changed configuration closes the old one)."""

    def __init__(self) -> None:
        self.sessions: dict[str, _Session] = {}
        self.by_name: dict[str, str] = {}
        self.locks: dict[str, asyncio.Lock] = {}

    async def session(self, connection: Connection) -> tuple[_Session, bool]:
        """(a live session, whether it was just opened)."""
        key = connection.key
        async with self.locks.setdefault(key, asyncio.Lock()):
            current = self.sessions.get(key)
            if current is not None and current.alive:
                return current, False
            old_key = self.by_name.get(connection.name)
            if old_key is not None and old_key != key and old_key in self.sessions:
                await self.sessions.pop(old_key).close()
            session = _Session(connection)
            await session.open()
            self.sessions[key] = session
            self.by_name[connection.name] = key
            return session, True

    async def discard(self, session: _Session) -> None:
        key = session.connection.key
        if self.sessions.get(key) is session:
            del self.sessions[key]
        await session.close()

    async def close_all(self) -> None:
        for session in list(self.sessions.values()):
            await self.discard(session)


_pools: dict[int, SessionPool] = {}


def pool() -> SessionPool:
    """The pool of the running loop (the process's loop in a worker)."""
    loop = asyncio.get_running_loop()
    return _pools.setdefault(id(loop), SessionPool())


async def _with_session(
    connection: Connection, what: str, make: Callable[[Client], Awaitable[T]]
) -> T:
    sessions = pool()
    for _attempt in range(2):
        session, fresh = await sessions.session(connection)
        failure: BaseException | None = None
        try:
            return await asyncio.wait_for(session.request(make), connection.timeout)
        except TimeoutError:
            await _keep_if_alive(sessions, session)
            raise McpTimeout(
                f"{what} on {connection.where} did not answer within {connection.timeout:g}s"
            ) from None
        except McpTransportError:
            pass
        except MCPError as exc:
            if exc.code != mcp_types.CONNECTION_CLOSED and not _never_sent(exc):
                raise  # the server's answer to this request
            failure = exc
        await sessions.discard(session)
        failure = session.failure or failure
        if fresh or not _never_sent(failure):
            raise McpTransportError(
                f"the connection to {connection.where} was lost: {describe(failure)}"
            )
    raise AssertionError("unreachable")


async def _keep_if_alive(sessions: SessionPool, session: _Session) -> None:
    """After a call timed out: keep the session if it still answers (a slow tool), drop it
    if not (a server stuck), so the next call starts afresh. The probe is a tools/list:
    `ping` is gone from the protocol since 2026-07-28."""
    try:
        await asyncio.wait_for(
            session.request(lambda client: client.session.list_tools()), PING_TIMEOUT
        )
    except (TimeoutError, McpTransportError, MCPError):
        await sessions.discard(session)


async def list_tools(connection: Connection) -> list[mcp_types.Tool]:
    """Every tool the server lists (following pages, at most MAX_TOOL_PAGES)."""

    async def walk(client: Client) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _page in range(MAX_TOOL_PAGES):
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await client.session.list_tools(params=params)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    return await _with_session(connection, "tools/list", walk)


async def call_tool(
    connection: Connection,
    name: str,
    arguments: dict[str, Any],
    on_progress: ProgressFnT | None = None,
) -> mcp_types.CallToolResult:
    """The server's result for one call; McpTransportError (McpTimeout) when there is none."""

    async def call(client: Client) -> mcp_types.CallToolResult:
        return await client.session.call_tool(name, arguments, progress_callback=on_progress)

    return await _with_session(connection, f"tool '{name}'", call)
