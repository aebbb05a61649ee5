"""The process's loop for awaited calls (runs.runtime.aio) and the token's callbacks."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from runs.runtime import aio
from runs.runtime.ports import CancellationToken


def test_iterate_yields_what_the_coroutine_yields_on_the_callers_thread() -> None:
    async def numbers():
        for n in range(3):
            await asyncio.sleep(0)
            yield n

    assert list(aio.iterate(numbers, CancellationToken())) == [0, 1, 2]


def test_an_error_of_the_awaited_call_is_raised_to_the_caller() -> None:
    async def failing():
        yield 1
        raise ValueError("broken stream")

    seen = []
    with pytest.raises(ValueError, match="broken stream"):
        for item in aio.iterate(failing, CancellationToken()):
            seen.append(item)
    assert seen == [1]


def test_cancelling_the_token_cancels_the_awaited_call_at_once() -> None:
    finished = threading.Event()
    cancelled = threading.Event()

    async def slow():
        try:
            await asyncio.sleep(30)
            yield "never"
        except asyncio.CancelledError:
            cancelled.set()
            raise
        finally:
            finished.set()

    token = CancellationToken()
    threading.Timer(0.1, token.cancel).start()
    started = time.monotonic()
    assert list(aio.iterate(slow, token)) == []
    assert time.monotonic() - started < 1
    assert cancelled.wait(1) and finished.wait(1)  # the coroutine was cancelled, not left


def test_leaving_the_iteration_early_cancels_the_call() -> None:
    cancelled = threading.Event()

    async def endless():
        try:
            while True:
                yield "tick"
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    for _ in aio.iterate(endless, CancellationToken()):
        break
    assert cancelled.wait(1)


def test_many_calls_in_flight_share_one_loop_thread() -> None:
    async def wait_then(value: int):
        await asyncio.sleep(0.3)
        yield value

    results: list[int] = []
    before = threading.active_count()
    callers = [
        threading.Thread(
            target=lambda n=n: results.extend(
                aio.iterate(lambda: wait_then(n), CancellationToken())
            )
        )
        for n in range(50)
    ]
    started = time.monotonic()
    for caller in callers:
        caller.start()
    during = threading.active_count()
    for caller in callers:
        caller.join(5)
    assert sorted(results) == list(range(50))
    assert time.monotonic() - started < 2  # concurrently, not one after the other
    assert during - before <= 50 + 1  # the callers and, at most, the loop's own thread


def test_run_answers_the_result_or_none_when_cancelled() -> None:
    async def answer():
        return 42

    assert aio.run(answer, CancellationToken()) == 42
    token = CancellationToken()
    token.cancel()
    assert aio.run(lambda: asyncio.sleep(5), token) is None


def test_on_cancel_calls_back_once_and_can_be_taken_back() -> None:
    token = CancellationToken()
    calls: list[str] = []
    token.on_cancel(lambda: calls.append("a"))
    forget = token.on_cancel(lambda: calls.append("b"))
    forget()
    token.cancel()
    token.cancel()
    assert calls == ["a"]
    token.on_cancel(lambda: calls.append("late"))  # already cancelled: called at once
    assert calls == ["a", "late"]
