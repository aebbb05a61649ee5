"""The shapes of a run's trace (runs/selectors/trace.py builds it): the events it reads
(`TraceEvent`), what it needs of the run row (`RunFacts`), its nested spans (`Span`) and
the whole (`Trace`) with its totals."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any


@dataclass(frozen=True)
class TraceEvent:
    """One event as the trace reads it: `data` holds the payload's fields it needs (the
    whole payload will do)."""

    seq: int
    type: str
    at: dt.datetime
    data: dict[str, Any]


@dataclass
class RunFacts:
    """What the trace needs of the run row."""

    run_id: str
    agent: str
    status: str
    status_reason: str
    created_at: dt.datetime
    started_at: dt.datetime | None
    input_price: Decimal | None
    output_price: Decimal | None
    input_tokens: int = 0
    output_tokens: int = 0
    parent_tool_call_id: str = ""


@dataclass
class Span:
    key: str  # the anchor: span-<key>
    kind: str  # run, activation, step, inference, tool, ticket, error
    name: str
    start: dt.datetime
    end: dt.datetime | None = None  # None: still open
    status: str = ""  # ok, failed, waiting, paused, running, interrupted, cancelled, rejected
    note: str = ""
    technical: str = ""  # the raw value behind `note`, shown on hover
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: Decimal | None = None
    estimated: bool = False
    run_id: str = ""
    seqs: list[int] = field(default_factory=list)  # the events whose payloads it shows
    children: list[Span] = field(default_factory=list)
    work_ms: float | None = None  # inference / tool: its measured duration
    link: str = ""  # a child run: its page

    @property
    def seconds(self) -> float | None:
        return None if self.end is None else max((self.end - self.start).total_seconds(), 0.0)


@dataclass
class Trace:
    root: Span
    steps: int = 0
    activations: int | None = 0  # None: not counted (a long log read up to a window)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal | None = None
    # the run row's own figures, when the log accounts for other numbers (a remote run)
    recorded: tuple[int, int] | None = None
    calls: dict[str, Span] = field(default_factory=dict)  # tool call spans by call id
    steps_beyond: int = 0  # steps of a long log past the window read (trace_load)
    facts: RunFacts | None = None
    more_children: int = 0  # child runs past those nested (trace_load.CHILD_RUNS_NESTED)
