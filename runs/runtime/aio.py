"""One event loop per process for the calls a run waits on (model streams, remote agents).

A run executes on a thread of its worker; what it waits on is awaited here, on the
process's one loop, so hundreds of calls in flight cost sockets and coroutines, not a
thread each. The run's thread reads what the call yields from a queue. Cancelling the
run's token cancels the awaited task at once, which closes its connection (a provider
stops generating, and billing, when the client goes away).
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from .ports import CancellationToken

T = TypeVar("T")

_ITEM, _ERROR, _DONE = range(3)


class _ProcessLoop:
    """The loop and its thread, started on first use in each process (a forked child
    starts its own: a loop thread does not survive a fork)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                threading.Thread(target=serve, name="awaited-calls", daemon=True).start()
                started.wait()
                self._loop, self._pid = loop, os.getpid()
            return self._loop


process_loop = _ProcessLoop()


def iterate(make: Callable[[], AsyncIterator[T]], cancel: CancellationToken) -> Iterator[T]:
    """Iterate, on the calling thread, what `make()` yields on the process's loop.

    Cancelling `cancel` cancels the awaited iteration right away (the iterator ends
    without error); so does leaving the iteration early. Exceptions of the async
    iterator are raised here."""
    loop = process_loop.get()
    items: queue.SimpleQueue[tuple[int, Any]] = queue.SimpleQueue()

    async def pump() -> None:
        try:
            async for item in make():
                items.put((_ITEM, item))
        except Exception as exc:  # handed to the run's thread
            items.put((_ERROR, exc))

    future = asyncio.run_coroutine_threadsafe(pump(), loop)
    # after everything the pump put, however it ended (cancelled before it started, too)
    future.add_done_callback(lambda _: items.put((_DONE, None)))
    forget = cancel.on_cancel(future.cancel)  # cancels the task on its loop
    try:
        while True:
            kind, value = items.get()
            if kind == _ITEM:
                yield value
            elif kind == _ERROR:
                raise value
            else:
                return
    finally:
        forget()
        future.cancel()  # left early: the call stops (a no-op once it is done)


def run(coro_factory: Callable[[], Any], cancel: CancellationToken) -> Any:
    """Await `coro_factory()` on the process's loop from the calling thread; None when
    cancelled first (the awaited call is cancelled with the token)."""

    async def once() -> AsyncIterator[Any]:
        yield await coro_factory()

    for result in iterate(once, cancel):
        return result
    return None
