"""A run's trace: nested spans (activations, steps, inferences, tool calls, tickets, child
runs) built in one pass over its event log, with start, duration, tokens and cost.

Pure: it reads the events it is given (`TraceEvent`, built by `trace_load` from the
RunEvent rows) and nothing else. What the log says about time: an event's `created_at` is
the commit of the checkpoint that wrote it, so the events of one step share a time, the
step's end. A step starts at the commit before it (the previous step's end) or, when its
activation's `run_start` is in the same commit (a resumed activation), its work before
that end: the inference's `duration_ms` and the tool calls' measured durations. Inside a
step, the inference comes first and the tool calls follow it one after the other; a call
whose duration was not measured shares what is left of the step (marked estimated).
A ticket waits from the commit that suspended its call to the commit of its decision.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from agents.pricing import cost_usd
from runs.selectors.trace_spans import RunFacts, Span, Trace, TraceEvent
from runs.wording import DECISION_DONE, run_status_text, words

ACTIVATION_INTERRUPTED = "activation_interrupted"
DELEGATE_PREFIX = "delegate_run:"


def _add(total: int | None, value: int | None) -> int | None:
    if value is None:
        return total
    return (total or 0) + value


class _Builder:
    def __init__(
        self, facts: RunFacts, tool_ms: dict[str, int], now: dt.datetime, window: bool
    ) -> None:
        self.facts = facts
        self.window = window
        self.tool_ms = tool_ms
        self.now = now
        self.short = facts.run_id.replace("-", "")[-8:]
        self.root = Span(
            key=f"{self.short}-run",
            kind="run",
            name=facts.agent,
            start=facts.created_at,
            run_id=facts.run_id,
        )
        self.activation: Span | None = None
        self.step: Span | None = None
        self.step_shared = False  # the step's commit also holds earlier events
        self.step_floor: dt.datetime | None = None
        self.group_at: dt.datetime | None = None  # the current commit's time
        self.before_group: dt.datetime | None = None  # the commit before it
        self.group_events = 0  # events of the current commit before the current one
        self.calls: dict[str, Span] = {}
        self.tickets: dict[str, Span] = {}  # by tool call id, until decided
        self.trace = Trace(root=self.root, facts=facts)
        self.first_step = True

    def span(self, kind: str, name: str, event: TraceEvent, **kwargs: Any) -> Span:
        return Span(
            key=f"{self.short}-{event.seq}",
            kind=kind,
            name=name,
            start=event.at,
            run_id=self.facts.run_id,
            seqs=[event.seq],
            **kwargs,
        )

    def feed(self, event: TraceEvent) -> None:
        if event.at != self.group_at:
            self.before_group, self.group_at, self.group_events = self.group_at, event.at, 0
        handler = getattr(self, f"on_{event.type}", None)
        if handler is not None:
            handler(event)
        self.group_events += 1

    # --- activations -------------------------------------------------------------------

    def on_run_start(self, event: TraceEvent) -> None:
        self.close_activation(event.at, "interrupted", "Ended without a closing event")
        mode = (event.data.get("identity") or {}).get("run_mode")
        self.activation = self.span(
            "activation",
            "Resumed" if mode == "resume" else "Activation",
            event,
            status="running",
        )
        self.trace.activations = (self.trace.activations or 0) + 1
        self.root.children.append(self.activation)

    def current_activation(self, event: TraceEvent) -> Span:
        """The open activation (one the log began before the trace's first event, or
        without a `run_start`, is opened here)."""
        if self.activation is None:
            self.activation = self.span("activation", "Activation", event, status="running")
            self.trace.activations = (self.trace.activations or 0) + 1
            self.root.children.append(self.activation)
        return self.activation

    def on_run_finish(self, event: TraceEvent) -> None:
        result = event.data.get("result") or {}
        termination = event.data.get("termination") or {}
        status = str(result.get("status") or "")
        reason = str(result.get("status_reason") or "")
        kind = str(termination.get("type") or "")
        if kind == "error":
            outcome = "failed"
        elif status == "waiting":
            outcome = "paused"  # the activation ended; the run waits
        elif reason == "cancelled" or kind == "cancelled":
            outcome = "cancelled"
        elif status == "done" and reason and reason not in ("natural", "behavior_requested"):
            outcome = "failed"
        else:
            outcome = "ok"
        note = run_status_text(status, reason) if status else words(kind).capitalize()
        detail = termination.get("value")
        if outcome == "failed" and isinstance(detail, str) and detail:
            note = f"{note}: {detail}"
        self.close_activation(event.at, outcome, note, event.seq, f"{status} · {reason or kind}")

    def on_error(self, event: TraceEvent) -> None:
        code = str(event.data.get("code") or "")
        message = str(event.data.get("message") or "")
        if code == ACTIVATION_INTERRUPTED:
            outcome = "interrupted"
            note = "Interrupted: its worker stopped; the run went on from its last step"
        else:
            outcome, note = "failed", f"Failed: {message}" if message else "Failed"
        if self.activation is None and self.step is None:
            self.root.children.append(
                self.span("error", "Error", event, end=event.at, status="failed", note=note)
            )
            return
        self.close_activation(event.at, outcome, note, event.seq, code or "error")

    def close_activation(
        self,
        at: dt.datetime,
        outcome: str,
        note: str,
        seq: int | None = None,
        technical: str = "",
    ) -> None:
        if self.step is not None:
            self.close_step(at, failed=outcome in ("failed", "interrupted"))
        activation = self.activation
        if activation is None:
            return
        activation.end = max(at, activation.start)
        activation.status, activation.note, activation.technical = outcome, note, technical
        if seq is not None:
            activation.seqs.append(seq)
        self.activation = None

    # --- steps -------------------------------------------------------------------------

    def on_step_start(self, event: TraceEvent) -> None:
        activation = self.current_activation(event)
        if self.step is not None:
            self.close_step(event.at)
        self.trace.steps += 1
        self.step = self.span("step", f"Step {self.trace.steps}", event, status="running")
        self.step.seqs = []  # its start and end say nothing its spans do not
        self.step_shared = self.group_events > 0
        self.step_floor = self.before_group
        activation.children.append(self.step)

    def on_step_end(self, event: TraceEvent) -> None:
        if self.step is not None:
            self.close_step(event.at)

    def close_step(self, at: dt.datetime, *, failed: bool = False) -> None:
        """Place the step and what it holds in time: it ends at its commit `at`."""
        step = self.step
        assert step is not None
        self.step = None
        work = sum(child.work_ms or 0.0 for child in step.children) / 1000
        start = self.step_floor or self.facts.created_at
        if self.step_shared:
            start = max(start, at - dt.timedelta(seconds=work))
        if self.first_step and self.facts.started_at is not None:
            start = max(start, self.facts.started_at)
        self.first_step = False
        step.start, step.end = min(start, at), at
        step.status = "failed" if failed else "ok"
        self.place_children(step)

    def place_children(self, step: Span) -> None:
        """The inference first, then the tool calls one after the other; calls whose
        duration is unknown share what is left of the step."""
        assert step.end is not None
        # the stream shows the calls before the inference completes; they ran after it
        step.children.sort(key=lambda child: child.kind != "inference")
        mark = step.start
        unknown = [c for c in step.children if c.work_ms is None]
        known = sum((c.work_ms or 0.0) for c in step.children) / 1000
        spare = max((step.end - step.start).total_seconds() - known, 0.0)
        share = dt.timedelta(seconds=spare / len(unknown)) if unknown else dt.timedelta()
        for child in step.children:
            length = share if child.work_ms is None else dt.timedelta(milliseconds=child.work_ms)
            child.estimated = child.work_ms is None
            child.start = min(mark, step.end)
            child.end = min(child.start + length, step.end)
            mark = child.end
            step.input_tokens = _add(step.input_tokens, child.input_tokens)
            step.output_tokens = _add(step.output_tokens, child.output_tokens)
        step.cost = self.cost(step.input_tokens, step.output_tokens)

    # --- inference and tools -----------------------------------------------------------

    def cost(self, prompt: int | None, completion: int | None) -> Decimal | None:
        if prompt is None and completion is None:
            return None
        return cost_usd(
            input_tokens=prompt or 0,
            output_tokens=completion or 0,
            input_price=self.facts.input_price,
            output_price=self.facts.output_price,
        )

    def holder(self, event: TraceEvent) -> Span:
        return self.step or self.current_activation(event)

    def on_inference_complete(self, event: TraceEvent) -> None:
        usage = event.data.get("usage") or {}
        prompt = _int(usage.get("prompt_tokens")) if usage else None
        completion = _int(usage.get("completion_tokens")) if usage else None
        self.trace.input_tokens += prompt or 0
        self.trace.output_tokens += completion or 0
        span = self.span(
            "inference",
            str(event.data.get("model") or "model"),
            event,
            status="ok",
            input_tokens=prompt,
            output_tokens=completion,
            cost=self.cost(prompt, completion),
            work_ms=float(_int(event.data.get("duration_ms")) or 0),
        )
        self.holder(event).children.append(span)

    def on_tool_call_ready(self, event: TraceEvent) -> None:
        call_id = str(event.data.get("id") or "")
        span = self.span(
            "tool",
            str(event.data.get("name") or "tool"),
            event,
            status="running",
            work_ms=_float(self.tool_ms.get(call_id)),
        )
        self.calls[call_id] = span
        self.holder(event).children.append(span)

    def on_tool_call_done(self, event: TraceEvent) -> None:
        call_id = str(event.data.get("id") or "")
        result = event.data.get("result") or {}
        span = self.calls.get(call_id)
        if span is None:  # a call the log did not show ready (or the trace's first page)
            span = self.span(
                "tool",
                str(result.get("tool_name") or "tool"),
                event,
                work_ms=_float(self.tool_ms.get(call_id)),
            )
            span.seqs = []
            self.calls[call_id] = span
            self.holder(event).children.append(span)
        span.seqs.append(event.seq)
        outcome = str(event.data.get("outcome") or "")
        if outcome == "suspended":
            span.status = "waiting"
            self.suspend(span, call_id, result, event)
        elif outcome == "failed" or result.get("status") == "error":
            span.status = "failed"
            span.note = str(result.get("message") or "Failed")
            span.technical = outcome or "error"
        else:
            span.status = "ok"

    def suspend(self, call: Span, call_id: str, result: dict[str, Any], event: TraceEvent) -> None:
        suspension = (result.get("suspension") or {}).get("suspension") or {}
        ticket_id = str(suspension.get("id") or "")
        delegated = ticket_id.startswith(DELEGATE_PREFIX)
        ticket = self.span(
            "ticket",
            "Waiting for the child run" if delegated else "Waiting for a decision",
            event,
            status="waiting",
            technical=ticket_id,
        )
        ticket.key = f"{self.short}-{event.seq}-ticket"
        ticket.seqs = []
        call.children.append(ticket)
        self.tickets[call_id] = ticket

    def on_ticket_decided(self, event: TraceEvent) -> None:
        call_id = str(event.data.get("tool_call_id") or "")
        ticket = self.tickets.pop(call_id, None)
        if ticket is None:
            return
        decision = event.data.get("decision") or {}
        action = str(decision.get("action") or "")
        actor = str(decision.get("actor") or "")
        ticket.end = max(event.at, ticket.start)
        ticket.seqs.append(event.seq)
        ticket.status = "rejected" if action == "reject" else "ok"
        done = DECISION_DONE.get(action, words(action).capitalize())
        if ticket.name == "Waiting for the child run":
            ticket.note = "The child run answered"
        else:
            ticket.note = f"{done} by {actor}" if actor and actor != "system" else done
        ticket.technical = action
        call = self.calls.get(call_id)
        if call is not None and call.status == "waiting":
            call.status = "rejected" if action == "reject" else "ok"

    def on_tool_call_resumed(self, event: TraceEvent) -> None:
        call_id = str(event.data.get("target_id") or "")
        earlier = self.calls.get(call_id)
        name = earlier.name if earlier else "tool"
        span = self.span(
            "tool",
            f"{name} (after the decision)",
            event,
            status="ok",
            work_ms=_float(self.tool_ms.get(call_id)),
        )
        span.end = event.at
        self.holder(event).children.append(span)

    # --- the end -----------------------------------------------------------------------

    def finish(self) -> Trace:
        if self.step is not None:  # a step the log has not closed
            self.close_step(self.group_at or self.now)
        if self.window and self.activation is not None:  # it goes on past the window
            self.close_activation(self.group_at or self.now, "more", "Goes on past the steps shown")
        for activation in self.root.children:
            if activation.kind == "activation":
                _sum_children(activation, self.cost)
        self.trace.calls = self.calls
        for ticket in self.tickets.values():
            ticket.note = "Not decided yet"
        root = self.root
        if root.children:
            root.start = min(root.start, *(child.start for child in root.children))
        set_totals(self.trace, self.trace.input_tokens, self.trace.output_tokens)
        root.status = {"done": "ok", "waiting": "waiting"}.get(self.facts.status, "running")
        if self.facts.status == "done" and self.facts.status_reason not in (
            "natural",
            "behavior_requested",
        ):
            root.status = "cancelled" if self.facts.status_reason == "cancelled" else "failed"
        root.note = run_status_text(self.facts.status, self.facts.status_reason)
        root.technical = f"{self.facts.status} · {self.facts.status_reason}".strip(" ·")
        ends = [child.end for child in root.children if child.end is not None]
        open_ = root.status in ("running", "waiting") or len(ends) < len(root.children)
        root.end = None if open_ else max(ends, default=root.start)
        return self.trace


def set_totals(trace: Trace, prompt: int, completion: int) -> None:
    """The run's tokens and cost (at its prices), on the trace and its root span; and the
    run row's own figures when they differ."""
    facts = trace.facts
    assert facts is not None
    trace.input_tokens = trace.root.input_tokens = prompt
    trace.output_tokens = trace.root.output_tokens = completion
    trace.cost = trace.root.cost = cost_usd(
        input_tokens=prompt,
        output_tokens=completion,
        input_price=facts.input_price,
        output_price=facts.output_price,
    )
    recorded = (facts.input_tokens, facts.output_tokens)
    trace.recorded = recorded if recorded != (prompt, completion) else None


def _sum_children(span: Span, cost: Any) -> None:
    """An activation's tokens and cost (its steps'), and its start: its first step's when
    that was placed earlier than its `run_start` commit (a resumed activation)."""
    steps = [child.start for child in span.children if child.kind == "step"]
    span.start = min(span.start, *steps) if steps else span.start
    for child in span.children:
        if child.kind in ("inference", "step"):
            span.input_tokens = _add(span.input_tokens, child.input_tokens)
            span.output_tokens = _add(span.output_tokens, child.output_tokens)
        elif child.kind == "tool":  # a call replayed after its decision: at the start
            child.start = child.end = span.start
            child.estimated = True
    span.cost = cost(span.input_tokens, span.output_tokens)


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def build_trace(
    facts: RunFacts,
    events: Iterable[TraceEvent],
    *,
    tool_ms: dict[str, int] | None = None,
    now: dt.datetime,
    window: bool = False,
) -> Trace:
    """The run's spans from its events in seq order (one pass). `tool_ms`: the measured
    durations of its tool calls by call id; `now`: where open spans end; `window`: the
    events are the log's first part only (an activation still open there goes on)."""
    builder = _Builder(facts, tool_ms or {}, now, window)
    for event in events:
        builder.feed(event)
    return builder.finish()


def attach_child(parent: Trace, child: Trace, call_id: str) -> None:
    """Nest a child run's trace under the parent's tool call `call_id` that started it, or
    at the end of the parent's run when that call is not in the trace. The call's span
    then covers the child's first activation (the child ran inline, inside the call)."""
    call = parent.calls.get(call_id)
    if call is None:
        parent.root.children.append(child.root)
        return
    call.children.insert(0, child.root)  # before the ticket that waited for it
    if call.end is None:
        return
    first = next((c for c in child.root.children if c.kind == "activation"), None)
    call.start = min(call.start, child.root.start)
    if first is not None and first.end is not None:
        call.end = max(call.end, first.end)
