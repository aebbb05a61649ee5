"""`McpTool`: a tool of an MCP server as the runtime calls it, named
`mcp__<server>__<tool>`, with the input schema its published agent version froze.

The call is awaited on the process's event loop (runs.runtime.aio): the run's thread
waits on it, cancelling the run cancels the call at once, and its progress notifications
become `activity_snapshot` events (`tool-call-progress`), at most one every
PROGRESS_EVERY seconds and MAX_PROGRESS_EVENTS per call. Transport failures and timeouts
are tool errors that say so; so is a call to a tool the server no longer has."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from mcp.shared.exceptions import MCPError

from runs.runtime import aio
from runs.runtime import events as ev
from runs.runtime.ports import ToolCallContext
from runs.runtime.types import ToolDescriptor, ToolResult

from .client import Connection, McpTransportError, call_tool, list_tools
from .results import tool_result

logger = logging.getLogger(__name__)
PROGRESS_EVERY = 0.5
MAX_PROGRESS_EVENTS = 100
PROGRESS_QUEUE = 16
_MISSING_HINTS = ("unknown tool", "not found", "no such tool", "tool_not_found")


class McpTool:
    """One frozen MCP tool. `connection` is None when the server cannot be used (deleted,
    misconfigured): every call then fails with `unavailable`."""

    # what a call does outside is unknown: a replay answers it from the original run's
    # recorded result, or calls the server only when its set says `live` (docs/replays.md)
    replay_recorded = True

    def __init__(
        self,
        *,
        name: str,
        server: str,
        tool: str,
        description: str,
        input_schema: dict[str, Any],
        connection: Connection | None,
        unavailable: str = "",
        max_chars: int = 100_000,
        on_outcome: Callable[[str | None], None] | None = None,
    ) -> None:
        self.name = name
        self.server = server
        self.tool = tool
        self.connection = connection
        self.unavailable = unavailable
        self.max_chars = max_chars
        # told each call's transport outcome (None: reached the server): the server's health
        self.on_outcome = on_outcome
        self._descriptor = ToolDescriptor(name, description, input_schema)

    @property
    def descriptor(self) -> ToolDescriptor:
        return self._descriptor

    def execute(self, arguments: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        if self.connection is None:
            return ToolResult.error(self.name, self.unavailable)
        if ctx.cancel.is_cancelled():
            return ToolResult.error(self.name, "Cancelled before calling the MCP server.")
        connection = self.connection
        progress = _ProgressEmitter(ctx)
        result = None
        try:
            for kind, value in aio.iterate(lambda: self._stream(connection, arguments), ctx.cancel):
                if kind == "progress":
                    progress.emit(*value)
                else:
                    result = value
        except McpTransportError as exc:
            self._report(str(exc))
            return ToolResult.error(self.name, f"MCP server '{self.server}': {exc}.")
        except MCPError as exc:
            return self._protocol_error(connection, exc.error.message, ctx)
        if result is None:
            return ToolResult.error(self.name, "Cancelled: the run was cancelled during the call.")
        self._report(None)
        mapped = tool_result(self.name, result, max_chars=self.max_chars)
        if mapped.message and result.is_error and _looks_missing(mapped.message):
            return self._protocol_error(connection, mapped.message, ctx)
        return mapped

    def _report(self, error: str | None) -> None:
        if self.on_outcome is not None:
            try:
                self.on_outcome(error)
            except Exception:  # recording health must not fail the call
                logger.warning("recording MCP server %s health failed", self.server, exc_info=True)

    async def _stream(
        self, connection: Connection, arguments: dict[str, Any]
    ) -> AsyncIterator[tuple[str, Any]]:
        """("progress", (progress, total, message))*, then ("result", CallToolResult)."""
        queue: asyncio.Queue[tuple[float, float | None, str | None]] = asyncio.Queue(PROGRESS_QUEUE)

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if not queue.full():  # a flood of notifications is dropped, not buffered
                queue.put_nowait((progress, total, message))

        call = asyncio.ensure_future(call_tool(connection, self.tool, arguments, on_progress))
        getter: asyncio.Future[Any] | None = None
        try:
            while not call.done():
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({call, getter}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield "progress", getter.result()
            yield "result", call.result()
        finally:
            call.cancel()
            if getter is not None:
                getter.cancel()

    def _protocol_error(
        self, connection: Connection, message: str, ctx: ToolCallContext
    ) -> ToolResult:
        """An error about the call itself: a removed tool is named as such."""
        if _looks_missing(message) and not ctx.cancel.is_cancelled():
            try:
                listed = aio.run(lambda: list_tools(connection), ctx.cancel) or []
            except (McpTransportError, MCPError):
                listed = None
            if listed is not None and self.tool not in {tool.name for tool in listed}:
                return ToolResult.error(
                    self.name,
                    f"MCP server '{self.server}' no longer has the tool '{self.tool}' this "
                    "agent version was published with (its tools changed); it cannot be "
                    "called. Check the server and publish a new version of the agent.",
                )
        return ToolResult.error(
            self.name, f"MCP server '{self.server}' refused the call: {message}"
        )


def _looks_missing(message: str) -> bool:
    lowered = message.lower()
    return any(hint in lowered for hint in _MISSING_HINTS)


class _ProgressEmitter:
    def __init__(self, ctx: ToolCallContext) -> None:
        self.ctx = ctx
        self.sent = 0
        self.last = 0.0

    def emit(self, value: float, total: float | None, message: str | None) -> None:
        now = time.monotonic()
        if self.sent >= MAX_PROGRESS_EVENTS or now - self.last < PROGRESS_EVERY:
            return
        self.sent += 1
        self.last = now
        ctx = self.ctx
        content: dict[str, Any] = {
            "node_id": f"tool_call:{ctx.call_id}",
            "call_id": ctx.call_id,
            "tool_name": ctx.tool_name,
            "status": "running",
            "loaded": value,
            "run_id": ctx.run_id,
            "thread_id": ctx.thread_id,
        }
        if total:
            content["total"] = total
            content["progress"] = max(0.0, min(1.0, value / total))
        if message:
            content["message"] = message[:500]
        ctx.emit(
            ev.activity_snapshot(f"tool_call:{ctx.call_id}", "tool-call-progress", content, True)
        )
