"""Terminal rendering of a run's durable event log, shared by the management commands."""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

from runs.models import DELEGATE_TICKET_PREFIX, Run, RunEvent, Ticket


class Writer(Protocol):
    def write(self, text: str) -> Any: ...

    def flush(self) -> Any: ...


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_event(event: dict[str, Any]) -> str:
    kind = event["event_type"]
    seq = event.get("seq", "")
    body = ""
    if kind in ("text_delta", "reasoning_delta"):
        body = _short(event["delta"], 400)
    elif kind == "tool_call_ready":
        body = f"{event['name']}({_short(event['arguments'])})"
    elif kind == "tool_call_done":
        result = event["result"]
        body = f"{event['id']} {event['outcome']}: {_short(result.get('message') or result.get('data'))}"
    elif kind == "tool_call_resumed":
        body = f"{event['target_id']}: {_short(event['result'])}"
    elif kind == "inference_complete":
        body = f"{event['model']} {event.get('duration_ms', 0)} ms {_short(event.get('usage', {}))}"
    elif kind == "run_finish":
        body = f"{_short(event['termination'])} {_short(event.get('result', {}))}"
    elif kind == "ticket_decided":
        decision = event["decision"]
        body = f"{event['ticket_id']} {decision['action']} by {decision['actor']}"
    elif kind == "error":
        body = event["message"]
    elif kind == "run_start":
        body = f"run {event['run_id']}"
    return f"[{seq:>4}] {kind:<18} {body}".rstrip()


def follow_run(run_id: Any, out: Writer, *, after_seq: int = 0, timeout: float = 600.0) -> Run:
    """Print persisted events as they commit until the run is done or waits for a human."""
    deadline = time.monotonic() + timeout
    last = after_seq
    while True:
        for row in RunEvent.objects.filter(run_id=run_id, seq__gt=last).order_by("seq"):
            out.write(format_event(row.as_frame()) + "\n")
            out.flush()
            last = row.seq
        run = Run.objects.get(pk=run_id)
        settled = run.status == Run.Status.DONE or (
            run.status == Run.Status.WAITING and not run.due
        )
        if settled and run.last_event_seq <= last:
            return run
        if time.monotonic() > deadline:
            out.write(f"timed out after {timeout:g}s; run is {run.status}\n")
            return run
        time.sleep(0.1)


def event_marks(run: Run) -> dict[Any, int]:
    """The last event seq of the run and of each of its ancestors, to follow them from."""
    marks: dict[Any, int] = {}
    current: Run | None = run
    while current is not None and current.pk not in marks:
        marks[current.pk] = current.last_event_seq
        current = current.parent_run
    return marks


def follow_parents(run: Run, out: Writer, marks: dict[Any, int], *, timeout: float) -> Run:
    """A finished child answers its parent's wait: follow each parent it resumes."""
    while run.status == Run.Status.DONE and run.parent_run_id is not None:
        parent_id = run.parent_run_id
        if parent_id not in marks:
            break
        wait = Ticket.objects.filter(
            run_id=parent_id,
            ticket_id=f"{DELEGATE_TICKET_PREFIX}{run.pk}",
            status=Ticket.Status.PENDING,
        )
        deadline = time.monotonic() + timeout
        while wait.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        out.write(f"\nparent run {parent_id} resumes with the answer of child run {run.pk}\n")
        run = follow_run(parent_id, out, after_seq=marks[parent_id], timeout=timeout)
        describe_outcome(run, out)
    return run


def describe_outcome(run: Run, out: Writer) -> None:
    out.write(f"\nrun {run.pk}: {run.status} ({run.status_reason or '-'})\n")
    if run.status == Run.Status.DONE and run.final_output:
        out.write(f"answer: {run.final_output}\n")
    if run.error_payload:
        out.write(f"error: {run.error_payload.get('message')}\n")
    describe_tickets(run, out)


def describe_tickets(run: Run, out: Writer, indent: str = "") -> None:
    """The run's open tickets with the command deciding each; a wait on a child run is
    answered by the child, so the child's tickets are listed under it instead."""
    for ticket in Ticket.objects.filter(run=run, status=Ticket.Status.PENDING):
        child = Run.objects.filter(pk=ticket.child_run_id).first() if ticket.child_run_id else None
        if child is not None:
            out.write(
                f"{indent}waiting for child run {child.pk} ({child.agent.slug}, {child.status})\n"
            )
            describe_tickets(child, out, indent + "  ")
            continue
        what = ticket.message or _short(ticket.arguments)
        out.write(f"{indent}ticket {ticket.pk}  {ticket.tool_name}  {what}\n")
        verbs = (
            "respond --payload JSON | reject"
            if ticket.resume_mode == "use_decision_as_tool_result"
            else "approve | reject | edit --args JSON"
        )
        out.write(f"{indent}  decide with: python manage.py decide {ticket.pk} {verbs}\n")
