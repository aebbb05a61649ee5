"""Back-pressure for streamed HTTP responses under daphne (docs/exports.md).

ASGI has one way to slow an application down: `await send(...)` returns only once the
server can take more. Daphne's `send` never waits: it writes each body message into
Twisted's transport buffer at once, so a streamed response (an export, an event stream)
to a client that reads slowly or not at all would be read to its end into daphne's
memory. This middleware gives daphne's `send` that wait: for a response sent in several
body messages, it registers as a streaming producer on the request, which Twisted pauses
when the connection's write buffer fills (about 64 KB) and resumes when it drains, and
each body message waits while paused. A client that accepts nothing for
AWAKEN_STREAM_STALL_SECONDS loses its connection, which ends the response (and frees
its database cursor).

Other servers (uvicorn, hypercorn, the test clients) wait in `send` themselves: the
middleware passes their `send` through untouched.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Any, Any], Awaitable[None]]

STALL_SECONDS = 300.0  # AWAKEN_STREAM_STALL_SECONDS when the setting is absent
CUT_GRACE_SECONDS = 60.0  # how long a cut-off response waits to be cancelled


class WriteFlow:
    """A Twisted streaming producer (IPushProducer) registered on one daphne request:
    Twisted calls pause/resume from the event loop's thread (daphne runs Twisted on the
    asyncio reactor), and `wait` waits while the connection cannot take more."""

    def __init__(self, request: Any, stall_seconds: float) -> None:
        self._request = request
        self._stall_seconds = stall_seconds
        self._writable = asyncio.Event()
        self._registered = False
        self.stopped = False
        self.cut = False  # disconnected for stalling
        try:
            request.registerProducer(self, True)
        except Exception:  # a producer already there, a request already finished
            logger.debug("no flow control for this response", exc_info=True)
            self._writable.set()
            return
        self._registered = True
        channel = getattr(request, "channel", None)
        if not getattr(channel, "_waitingForTransport", False):  # not full already
            self._writable.set()

    # IPushProducer (Twisted's names), called by Twisted
    def pauseProducing(self) -> None:
        self._writable.clear()

    def resumeProducing(self) -> None:
        self._writable.set()

    def stopProducing(self) -> None:
        self.stopped = True
        self._writable.set()

    async def wait(self) -> None:
        """Until the connection can take more (or is gone); a client that accepts nothing
        for the stall time is disconnected."""
        if self.cut:
            await self._until_cancelled()
            return
        if self._writable.is_set() or self.stopped:
            return
        try:
            await asyncio.wait_for(self._writable.wait(), self._stall_seconds)
        except TimeoutError:
            logger.warning(
                "a client read nothing of a streamed response for %gs: disconnecting it",
                self._stall_seconds,
            )
            self.cut = True
            self.unregister()
            transport = getattr(getattr(self._request, "channel", None), "transport", None)
            if transport is not None:
                transport.abortConnection()
            await self._until_cancelled()

    async def _until_cancelled(self) -> None:
        """Hold the response while the aborted connection's loss reaches the application
        (Django then cancels it, which closes the iterator and its cursor): nothing more
        is made for a client that is gone. A server that never tells gets its `send`
        back after a while, and drops what it is sent for a lost connection."""
        await asyncio.sleep(CUT_GRACE_SECONDS)

    def unregister(self) -> None:
        if self._registered:
            self._registered = False
            try:
                self._request.unregisterProducer()
            except Exception:  # the request is already cleaned up
                logger.debug("unregistering the producer failed", exc_info=True)


def daphne_request(send: Send) -> Any | None:
    """The Twisted request behind daphne's `send` (a partial of its server's
    `handle_reply` over the request), or None under any other server."""
    if isinstance(send, functools.partial) and send.args:
        request = send.args[0]
        if hasattr(request, "registerProducer") and hasattr(request, "unregisterProducer"):
            return request
    return None


def with_flow_control(app: App, *, stall_seconds: float | None = None) -> App:
    """`app` (HTTP), its streamed responses paced by what the client reads; a client
    stalled for `stall_seconds` (default: AWAKEN_STREAM_STALL_SECONDS) is cut off."""

    async def flow_controlled(scope: Scope, receive: Receive, send: Send) -> None:
        request = daphne_request(send) if scope.get("type") == "http" else None
        if request is None:
            await app(scope, receive, send)
            return
        stall = stall_seconds
        if stall is None:
            stall = float(getattr(settings, "AWAKEN_STREAM_STALL_SECONDS", STALL_SECONDS))
        flow: WriteFlow | None = None

        async def paced_send(message: Message) -> None:
            nonlocal flow
            streaming = message.get("type") == "http.response.body" and message.get(
                "more_body", False
            )
            if not streaming:  # the start, or the last (or only) body message
                if flow is not None:
                    flow.unregister()  # before daphne finishes the request
                await send(message)
                return
            if flow is None:
                flow = WriteFlow(request, stall)
            await flow.wait()
            await send(message)

        try:
            await app(scope, receive, paced_send)
        finally:
            if flow is not None:
                flow.unregister()

    return flow_controlled
