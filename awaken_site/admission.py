"""Admission of HTTP requests into Django's views under an ASGI server.

Django runs each request's synchronous view on a thread of its own. A web process that
accepts 1,000 requests at once therefore runs 1,000 threads that contend for one
interpreter lock and for a connection pool of DB_POOL_MAX_SIZE: the few that hold a
connection get a thousandth of the CPU each, hold it for seconds, and the others give up
after DB_POOL_TIMEOUT with a 503 (measured: 790 of 1,000 concurrent submissions). Here at
most AWAKEN_WEB_CONCURRENT_VIEWS requests are between their arrival and their response's
start at once; the others wait their turn on the event loop, where waiting costs nothing.
A streamed response (an event stream, an export) gives its place up once its headers
are sent, so long streams never hold one.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

Scope = dict[str, Any]
Message = dict[str, Any]
App = Callable[[Scope, Any, Any], Awaitable[None]]


def with_admission(app: App) -> App:
    limit = int(getattr(settings, "AWAKEN_WEB_CONCURRENT_VIEWS", 0))
    if limit <= 0:
        return app
    semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
        weakref.WeakKeyDictionary()  # one per event loop
    )

    async def admitted(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        gate = semaphores.get(loop)
        if gate is None:
            gate = semaphores[loop] = asyncio.Semaphore(limit)
        await gate.acquire()
        held = True

        def leave() -> None:
            nonlocal held
            if held:
                held = False
                gate.release()

        async def send_and_leave(message: Message) -> None:
            if message["type"] == "http.response.start":
                leave()
            await send(message)

        try:
            await app(scope, receive, send_and_leave)
        finally:
            leave()

    return admitted
