"""The stdio transport: the server as a child process, JSON-RPC messages one per line.

The SDK's `stdio_client` joins a line's chunks by repeated string concatenation, which
for one huge line (a hostile tool result of 50 MB) costs quadratic time on the event loop
every call in flight shares. This transport reads bytes into a buffer and refuses a line
longer than `max_line` bytes: the session fails with that reason and the process is
stopped. The child gets the SDK's minimal environment (PATH, HOME, …), not the worker's."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

STOP_GRACE = 2.0


class LineTooLong(Exception):
    pass


def _stderr() -> int:
    """The process's own standard error (a Celery worker replaces `sys.stderr` with a
    logging proxy that has no file descriptor): where the server's logs go."""
    try:
        return (sys.__stderr__ or sys.stderr).fileno()
    except (AttributeError, ValueError, OSError):
        return subprocess.DEVNULL


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


@asynccontextmanager
async def bounded_stdio(argv: tuple[str, ...], max_line: int) -> AsyncIterator[tuple[Any, Any]]:
    process = await anyio.open_process(
        list(argv), env=get_default_environment(), stderr=_stderr(), start_new_session=True
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        assert process.stdout is not None
        buffer = bytearray()
        async with read_writer:
            async for chunk in process.stdout:
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    buffer += chunk[start:end]
                    start = end + 1
                    if buffer.strip():
                        await read_writer.send(_parse(bytes(buffer)))
                    buffer.clear()
                buffer += chunk[start:]
                if len(buffer) > max_line:
                    raise LineTooLong(
                        f"the server sent a message of more than {max_line // (1024 * 1024)} MB"
                    )

    async def writer() -> None:
        assert process.stdin is not None
        async with write_reader:
            async for message in write_reader:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send((data + "\n").encode())

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(reader)
            group.start_soon(writer)
            try:
                yield read_stream, write_stream
            finally:
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)


async def _stop(process: Any) -> None:
    with contextlib.suppress(Exception):
        await process.stdin.aclose()
    with anyio.move_on_after(STOP_GRACE):
        await process.wait()
        return
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    with anyio.move_on_after(STOP_GRACE):
        await process.wait()
