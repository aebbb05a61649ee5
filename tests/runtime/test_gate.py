"""The step gate: how many of a process's runs compute at once, in the order they came."""

from __future__ import annotations

import threading
import time

from runs.runtime.gate import StepGate


def _wait_until(predicate, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def _queued(gate: StepGate) -> int:
    return len(gate._waiters)


def test_slots_are_handed_over_in_arrival_order() -> None:
    gate = StepGate(1)
    order: list[int] = []
    hold = threading.Event()

    def first() -> None:
        with gate.held():
            hold.wait(5)

    def later(n: int) -> None:
        with gate.held():
            order.append(n)

    holder = threading.Thread(target=first)
    holder.start()
    _wait_until(lambda: gate._free == 0)
    waiters = []
    for n in range(5):
        thread = threading.Thread(target=later, args=(n,))
        thread.start()
        waiters.append(thread)
        _wait_until(lambda n=n: _queued(gate) == n + 1)  # type: ignore[misc]
    hold.set()
    for thread in [holder, *waiters]:
        thread.join(5)
    assert order == [0, 1, 2, 3, 4]
    assert gate._free == 1 and not gate._waiters


def test_a_waiting_run_gives_its_slot_up_and_a_tool_call_comes_back_first() -> None:
    gate = StepGate(1)
    order: list[str] = []
    waiting, back = threading.Event(), threading.Event()

    def run_on_a_tool() -> None:
        with gate.held():
            with gate.released(first=True):
                waiting.set()
                back.wait(5)
            order.append("tool caller")

    def other(name: str) -> None:
        with gate.held():
            order.append(name)
            time.sleep(0.05)

    runner = threading.Thread(target=run_on_a_tool)
    runner.start()
    waiting.wait(5)
    # while it waits, another run computes (the slot was given up)
    blocker = threading.Thread(target=other, args=("other",))
    blocker.start()
    _wait_until(lambda: order == ["other"])
    queued = threading.Thread(target=other, args=("queued",))
    queued.start()
    _wait_until(lambda: _queued(gate) == 1)
    back.set()
    _wait_until(lambda: _queued(gate) == 2)  # the tool caller, ahead of "queued"
    for thread in (runner, blocker, queued):
        thread.join(5)
    assert order == ["other", "tool caller", "queued"]


def test_reentrant_and_released_outside_a_slot_is_a_no_op() -> None:
    gate = StepGate(1)
    with gate.released():  # holds none: nothing to give up
        assert gate._free == 1
    with gate.held():
        with gate.held():  # a nested segment uses its parent's slot
            assert gate._free == 0
        assert gate._free == 0
        with gate.released():
            assert gate._free == 1
            with gate.released():  # already given up
                assert gate._free == 1
        assert gate._free == 0
    assert gate._free == 1


def test_an_exception_gives_the_slot_back() -> None:
    gate = StepGate(2)
    try:
        with gate.held():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gate._free == 2


def test_configure_changes_the_slots() -> None:
    gate = StepGate(4)
    gate.configure(2)
    assert gate._free == 2
    gate.configure(0)  # at least one
    assert gate._free == 1
