"""How many of a process's runs compute at once.

A worker holds hundreds of runs, each on a thread, and Python runs one thread at a time.
When many runs become ready together (64 model answers arriving in the same
millisecond), letting all of them compute at once shares the CPU evenly: every run's
checkpoint ends near the end of the burst, so they all send their next model call at the
same time, and the next burst is just as crowded. Letting a few compute at a time, in the
order they became ready, ends the first runs' steps early: their next calls leave
staggered, the bursts spread out, and each run waits for the CPU about half as long.

A run takes a slot for its whole segment and gives it up while it waits on something
outside the process (an awaited model or remote call, a tool). Slots are handed over in
arrival order; a thread that comes back from a tool goes first (its turn was not over).
Re-entrant per thread: a nested segment (a child run executed inline) uses its parent's slot.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager


class StepGate:
    def __init__(self, slots: int = 4) -> None:
        self._lock = threading.Lock()
        self._slots = slots
        self._free = slots
        self._waiters: deque[threading.Lock] = deque()
        self._local = threading.local()

    def configure(self, slots: int) -> None:
        """Set the number of slots (before any run takes one: at start-up)."""
        with self._lock:
            self._free += max(1, slots) - self._slots
            self._slots = max(1, slots)

    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    def _acquire(self, first: bool = False) -> None:
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            turn = threading.Lock()
            turn.acquire()
            if first:
                self._waiters.appendleft(turn)
            else:
                self._waiters.append(turn)
        turn.acquire()  # released by the holder that hands its slot over

    def _release(self) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().release()  # the slot goes straight to the next
            else:
                self._free += 1

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold a slot while the block runs (a no-op inside a block that holds one)."""
        depth = self._depth()
        if depth == 0:
            self._acquire()
        self._local.depth = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth
            if depth == 0:
                self._release()

    @contextmanager
    def released(self, *, first: bool = False) -> Iterator[None]:
        """Give the slot up while the block waits (a no-op on a thread holding none); on
        leaving, take one again, ahead of the others when `first`."""
        depth = self._depth()
        if depth == 0:
            yield
            return
        self._local.depth = 0
        self._release()
        try:
            yield
        finally:
            self._acquire(first)
            self._local.depth = depth


step_gate = StepGate()
