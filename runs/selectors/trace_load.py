"""Reading a run's trace from the database: its events and its child runs' (the columns
the spans need, extracted from the payloads by the database, never the payloads
themselves), the measured durations of their tool calls, then `trace.build_trace` for
each run and the children nested under the calls that started them. The payloads a page
shows come from `span_payloads`, for the spans it shows only."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import F, Q, Window
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, RowNumber
from django.urls import reverse
from django.utils import timezone

from runs.models import Run, RunEvent, ToolCall
from runs.selectors.trace import attach_child, build_trace, set_totals
from runs.selectors.trace_layout import STEPS_SHOWN
from runs.selectors.trace_spans import RunFacts, Trace, TraceEvent

# the events a trace reads (deltas and state snapshots, most of a log, it does not)
TRACE_EVENT_TYPES = (
    "run_start",
    "run_finish",
    "error",
    "step_start",
    "step_end",
    "inference_complete",
    "tool_call_ready",
    "tool_call_done",
    "tool_call_resumed",
    "ticket_decided",
)
# child runs nested in a trace, over all levels; deeper or more are linked, not nested
CHILD_RUNS_NESTED = 20
CHILD_DEPTH = 3

# one column per role, each the first of the payload fields that fill it for some type
COLUMNS: dict[str, Any] = {
    "ref": Coalesce(KT("payload__id"), KT("payload__target_id"), KT("payload__tool_call_id")),
    "label": Coalesce(KT("payload__name"), KT("payload__model"), KT("payload__result__tool_name")),
    "state": Coalesce(
        KT("payload__outcome"),
        KT("payload__code"),
        KT("payload__decision__action"),
        KT("payload__result__status"),
        KT("payload__identity__run_mode"),
    ),
    "text": Coalesce(
        KT("payload__result__message"), KT("payload__message"), KT("payload__termination__value")
    ),
    "extra": Coalesce(
        KT("payload__result__status_reason"),
        KT("payload__result__suspension__suspension__id"),
        KT("payload__decision__actor"),
    ),
    "ending": KT("payload__termination__type"),
    "prompt": KT("payload__usage__prompt_tokens"),
    "completion": KT("payload__usage__completion_tokens"),
    "ms": KT("payload__duration_ms"),
}
ROW = ("run_id", "seq", "event_type", "created_at", *COLUMNS)

FACT_FIELDS = (
    "id",
    "agent__slug",
    "status",
    "status_reason",
    "created_at",
    "started_at",
    "input_price_per_million_usd",
    "output_price_per_million_usd",
    "input_tokens",
    "output_tokens",
    "parent_tool_call_id",
    "parent_run_id",
    "last_event_seq",
    "finished_at",
    "updated_at",
    "steps",
)


def _data(kind: str, row: tuple[Any, ...]) -> dict[str, Any]:
    """The payload fields of one event, back from the extracted columns."""
    ref, label, state, text, extra, ending, prompt, completion, ms = row[4:]
    if kind == "inference_complete":
        usage = None
        if prompt is not None or completion is not None:
            usage = {"prompt_tokens": prompt, "completion_tokens": completion}
        return {"model": label, "usage": usage, "duration_ms": ms}
    if kind == "tool_call_ready":
        return {"id": ref, "name": label}
    if kind == "tool_call_done":
        result = {"tool_name": label, "message": text, "status": None}
        if state == "suspended":
            result["suspension"] = {"suspension": {"id": extra}}
        return {"id": ref, "outcome": state, "result": result}
    if kind == "tool_call_resumed":
        return {"target_id": ref}
    if kind == "ticket_decided":
        return {"tool_call_id": ref, "decision": {"action": state, "actor": extra}}
    if kind == "run_start":
        return {"identity": {"run_mode": state}}
    if kind == "run_finish":
        return {
            "result": {"status": state, "status_reason": extra},
            "termination": {"type": ending, "value": text},
        }
    if kind == "error":
        return {"code": state, "message": text}
    return {}


def _facts(row: dict[str, Any]) -> RunFacts:
    return RunFacts(
        run_id=str(row["id"]),
        agent=row["agent__slug"],
        status=row["status"],
        status_reason=row["status_reason"] or "",
        created_at=row["created_at"],
        started_at=row["started_at"],
        input_price=row["input_price_per_million_usd"],
        output_price=row["output_price_per_million_usd"],
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        parent_tool_call_id=row["parent_tool_call_id"] or "",
    )


def _descendants(run_id: Any) -> tuple[list[dict[str, Any]], int]:
    """The child runs nested in the trace, level by level (one query per level), and how
    many more there were."""
    found: list[dict[str, Any]] = []
    level = [run_id]
    more = 0
    for _ in range(CHILD_DEPTH):
        room = CHILD_RUNS_NESTED - len(found)
        if not level or room <= 0:
            break
        rows = list(
            Run.objects.filter(parent_run_id__in=level)
            .order_by("created_at")
            .values(*FACT_FIELDS)[: room + 1]
        )
        more += max(len(rows) - room, 0)
        found += rows[:room]
        level = [row["id"] for row in rows[:room]]
    return found, more


def _window_ends(runs: list[dict[str, Any]], steps: int) -> dict[Any, int]:
    """For each run whose log is longer than `steps` steps, the seq of its step after the
    first `steps` (the trace reads its log up to there). One query for all the runs,
    made whatever their length, so a trace costs the same queries short or long."""
    numbered = RunEvent.objects.filter(
        run_id__in=[row["id"] for row in runs], event_type="step_start"
    ).annotate(number=Window(RowNumber(), partition_by=F("run_id"), order_by=F("seq").asc()))
    return dict(numbered.filter(number=steps + 1).values_list("run_id", "seq"))


def _read_events(ids: list[Any], ends: dict[Any, int]) -> dict[Any, list[TraceEvent]]:
    """The trace's events of these runs (each up to its window's end), in seq order."""
    events: dict[Any, list[TraceEvent]] = {pk: [] for pk in ids}
    where = Q()
    for pk in ids:
        where |= Q(run_id=pk, seq__lt=ends[pk]) if pk in ends else Q(run_id=pk)
    rows = (
        RunEvent.objects.filter(where, event_type__in=TRACE_EVENT_TYPES)
        .annotate(**COLUMNS)
        .order_by("run_id", "seq")  # one run: the (run, seq) index in order, no sort
        .values_list(*ROW)
    )
    for row in rows:
        events[row[0]].append(TraceEvent(row[1], row[2], row[3], _data(row[2], row)))
    return events


def _whole_log(trace: Trace, row: dict[str, Any]) -> None:
    """A run read up to a window: its totals are its row's, kept in the transaction of
    each checkpoint with the events that add to them (what the whole log sums to)."""
    trace.steps_beyond = max(row["steps"] - trace.steps, 0)
    trace.steps = max(row["steps"], trace.steps)
    trace.activations = None
    set_totals(trace, row["input_tokens"], row["output_tokens"])
    if trace.root.status not in ("running", "waiting"):
        trace.root.end = row["finished_at"] or row["updated_at"]


def trace_root(run_id: Any) -> dict[str, Any] | None:
    """The run's row as the trace reads it, with its team (for the caller's check)."""
    rows = Run.objects.filter(pk=run_id).values(*FACT_FIELDS, "agent__team_id").order_by()
    return next(iter(rows[:1]), None)


def run_trace(
    run_id: Any,
    *,
    steps: int = STEPS_SHOWN,
    now: dt.datetime | None = None,
    root: dict[str, Any] | None = None,
) -> Trace | None:
    """The run's trace with its child runs nested (None: no such run), each run's log read
    up to its first `steps` steps (the totals are the whole log's). A few queries and one
    per level of child runs: the runs, their events, their tool calls' durations.
    `root`: the run's `trace_root` row, when the caller read it already."""
    now = now or timezone.now()
    root = root or trace_root(run_id)
    if root is None:
        return None
    children, more = _descendants(root["id"])
    runs = [root, *children]
    ids = [row["id"] for row in runs]
    ends = _window_ends(runs, steps)
    events = _read_events(ids, ends)
    durations: dict[Any, dict[str, int]] = {pk: {} for pk in ids}
    timed = ToolCall.objects.filter(run_id__in=ids, duration_ms__isnull=False).order_by()
    for pk, call_id, ms in timed.values_list("run_id", "call_id", "duration_ms"):
        durations[pk][call_id] = int(ms or 0)  # timed: not null
    traces = {}
    for row in runs:
        pk = row["id"]
        traces[pk] = build_trace(
            _facts(row), events[pk], tool_ms=durations[pk], now=now, window=pk in ends
        )
        if pk in ends:
            _whole_log(traces[pk], row)
    for row in children:  # spans are shared: a child nested first takes its own along
        child = traces[row["id"]]
        child.root.kind = "child"
        child.root.link = reverse("runs:run-detail", args=[row["id"]])
        parent = traces[row["parent_run_id"]]
        call_id = row["parent_tool_call_id"] or ""
        if call_id in parent.calls or row["parent_run_id"] not in ends:
            attach_child(parent, child, call_id)
        else:  # its call is past the parent's steps shown
            more += 1
    trace = traces[root["id"]]
    trace.more_children = more
    return trace


def span_events(run_id: Any, seqs: list[int]) -> list[tuple[int, dict[str, Any]]]:
    """The payloads of these events of the run, in seq order (a span's, when opened)."""
    return list(
        RunEvent.objects.filter(run_id=run_id, seq__in=seqs[:50])
        .order_by("seq")
        .values_list("seq", "payload")
    )
