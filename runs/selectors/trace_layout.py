"""Where a trace's spans sit on the page: the rows shown (the first `steps` steps of the
tree, in order; a long run shows more on request), each with its depth and its bar on the
time axis as percentages of the trace's length (the server computes them; the page draws
them as SVG attributes, so no inline style is needed under the strict CSP)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field

from runs.selectors.trace_spans import Span, Trace

STEPS_SHOWN = 50  # a trace first shows this many steps, then this many more per request
STEPS_SHOWN_MAX = 2000
MIN_BAR = 0.4  # percent: a span too short to see still shows a sliver
OPEN_KINDS = frozenset({"run", "child", "activation", "step"})


@dataclass
class Row:
    span: Span
    depth: int
    offset: float  # seconds from the trace's start
    seconds: float | None  # its duration; None while it runs
    left: float  # percent of the axis
    width: float
    open: bool
    running: bool = False


@dataclass
class Layout:
    rows: list[Row]
    seconds: float  # the axis' length
    ticks: list[tuple[float, float]] = field(default_factory=list)  # (percent, seconds)
    steps_shown: int = 0
    steps_total: int = 0

    @property
    def steps_hidden(self) -> int:
        return self.steps_total - self.steps_shown


def _walk(span: Span, depth: int = 0) -> Iterator[tuple[Span, int]]:
    yield span, depth
    for child in span.children:
        yield from _walk(child, depth + 1)


def _ends(span: Span, now: dt.datetime) -> dt.datetime:
    return span.end if span.end is not None else max(now, span.start)


def clamp_steps(value: int | None) -> int:
    if value is None or value <= 0:
        return STEPS_SHOWN
    return min(value, STEPS_SHOWN_MAX)


def layout(trace: Trace, *, steps: int, now: dt.datetime) -> Layout:
    """The rows of the first `steps` steps (and everything before the next step), in the
    order of the tree."""
    origin = trace.root.start
    chosen: list[tuple[Span, int]] = []
    shown = total = 0
    stopped = False
    horizon = _ends(trace.root, now)
    for span, depth in _walk(trace.root):
        horizon = max(horizon, _ends(span, now))
        if span.kind == "step":
            total += 1
            if shown >= steps:
                stopped = True
            else:
                shown += 1
        if not stopped:
            chosen.append((span, depth))
    length = max((horizon - origin).total_seconds(), 0.001)
    rows = []
    for span, depth in chosen:
        offset = max((span.start - origin).total_seconds(), 0.0)
        seconds = span.seconds
        drawn = seconds if seconds is not None else max((now - span.start).total_seconds(), 0.0)
        left = min(100 * offset / length, 100.0)
        width = min(max(100 * drawn / length, MIN_BAR), max(100.0 - left, MIN_BAR))
        rows.append(
            Row(
                span=span,
                depth=depth,
                offset=offset,
                seconds=seconds,
                left=round(min(left, 100 - MIN_BAR), 3),
                width=round(width, 3),
                open=span.kind in OPEN_KINDS
                or (span.kind == "tool" and any(c.kind == "child" for c in span.children)),
                running=span.end is None,
            )
        )
    ticks = [(pct, length * pct / 100) for pct in (0.0, 25.0, 50.0, 75.0, 100.0)]
    total += trace.steps_beyond  # a long log's steps past the window read
    return Layout(rows=rows, seconds=length, ticks=ticks, steps_shown=shown, steps_total=total)
