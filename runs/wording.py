"""How the pages say things: the one table of plain words for every status, reason, kind
and action a person reads (pages, notifications), so no page shows a raw enum value and a
new value cannot be worded by gluing a "d" on its verb. The technical value stays in the
API and on hover (runs/templatetags/wording_tags.py puts it in a title attribute)."""

from __future__ import annotations

import re
from typing import Any

from runs.runtime.tool_batch import PERMISSION_ACTION
from runs.runtime.types import ToolCallResumeMode

# Decision.Action value -> what the page says once it is done
DECISION_DONE = {
    "approve": "Approved",
    "edit": "Edited and approved",
    "reject": "Rejected",
    "respond": "Answered",
}


def decision_done(action: str, tool_name: str) -> str:
    """The outcome line of a decision, e.g. "Rejected write_note."."""
    return f"{DECISION_DONE.get(action, action)} {tool_name}."


# What a ticket's deadline does when nobody decides (Ticket.default_action).
DEFAULT_ACTION = {
    "approve": "approved automatically",
    "reject": "rejected automatically",
    "respond": "answered automatically",
    "edit": "edited automatically",
}

# --- runs ----------------------------------------------------------------------------------------

RUN_STATUS = {
    "created": "Queued",
    "running": "Running",
    "waiting": "Waiting",
    "done": "Finished",
}

# Waiting reasons (runs.runtime.status.WaitingReason, and the status reasons behind some)
# as an operator reads them.
WAITING_LABELS = {
    "tool_permission": "Waiting for a decision on a tool call",
    "suspended": "Waiting for a decision",
    "auth_required": "Waiting for an authorization",
    "user_input": "Waiting for user input",
    "input_required": "Waiting for user input",
    "user_input_required": "Waiting for user input",
    "background_tasks": "Waiting for background tasks",
    "awaiting_tasks": "Waiting for background tasks",
    "rate_limit": "Waiting: rate limited",
    "manual_pause": "Paused by an operator",
    "budget": "Waiting: budget reached",
    "external_event": "Waiting for an external event",
}

# A finished run's status reason (TerminationReason.to_run_status and the services).
DONE_REASONS = {
    "natural": "Finished",
    "behavior_requested": "Finished — ended by a plugin",
    "cancelled": "Cancelled",
    "error": "Failed",
    "timeout": "Failed — timed out",
}

# stopped:<code> (runs.runtime.stop.KNOWN_TYPES)
STOP_CODES = {
    "max_rounds": "step limit reached",
    "timeout": "time limit reached",
    "token_budget": "token budget used up",
    "consecutive_errors": "too many errors in a row",
}

REJECTED_SUFFIX = " — action rejected"


def words(value: Any) -> str:
    """A technical value nobody worded, readable: "rate_limit" -> "rate limit"."""
    return re.sub(r"[_:]+", " ", str(value or "")).strip()


def _done_text(reason: str) -> str:
    if reason in DONE_REASONS:
        return DONE_REASONS[reason]
    head, _, tail = reason.partition(":")
    if head == "stopped":
        return f"Stopped — {STOP_CODES.get(tail, words(tail))}"
    if head == "blocked":
        return f"Blocked — {tail}" if tail else "Blocked"
    if head == "error":
        return f"Failed — {tail}" if tail else "Failed"
    return f"Finished — {words(reason)}" if reason else "Finished"


def run_status_text(status: Any, reason: Any = "", *, rejected: bool = False) -> str:
    """A run's status and status reason in plain words: "Waiting for a decision",
    "Finished", "Finished — action rejected" (`rejected`: a ticket of the run was
    rejected and it then ended on its own), "Stopped — step limit reached"."""
    status, reason = str(status or ""), str(reason or "")
    if status == "done":
        text = _done_text(reason)
        return text + REJECTED_SUFFIX if rejected and reason == "natural" else text
    if status == "waiting":
        return WAITING_LABELS.get(reason, "Waiting")
    return RUN_STATUS.get(status, words(status).capitalize())


def run_status_technical(status: Any, reason: Any = "") -> str:
    """The technical value behind run_status_text, for the tooltip: "done · natural"."""
    return f"{status} · {reason}" if reason else str(status or "")


def waiting_label(value: Any) -> str:
    text = str(value or "")
    return WAITING_LABELS.get(text, words(text).capitalize())


# --- tickets -------------------------------------------------------------------------------------

RESPOND_ONLY = ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT.value
DELEGATE_ACTIONS = ("agent_run", "delegate")

TICKET_STATUS = {"pending": "Waiting", "decided": "Decided", "cancelled": "Withdrawn"}


def ticket_kind(ticket: Any) -> str:
    """What a ticket asks for: "Approval", "Question", "Child run" or "Decision" (its
    technical reason, e.g. tool:PermissionConfirm, on hover)."""
    if getattr(ticket, "child_run_id", None) or str(getattr(ticket, "ticket_id", "")).startswith(
        "delegate_"
    ):
        return "Child run"
    if getattr(ticket, "resume_mode", "") == RESPOND_ONLY:
        return "Question"
    if getattr(ticket, "reason", "") == PERMISSION_ACTION:
        return "Approval"
    return "Decision"


def ticket_outcome(ticket: Any) -> str:
    """A decided or withdrawn ticket's outcome: "Rejected", "Answered", "Withdrawn"."""
    decision = getattr(ticket, "decision", None) if ticket.status == "decided" else None
    if decision is not None:
        return DECISION_DONE.get(decision.action, words(decision.action).capitalize())
    return TICKET_STATUS.get(ticket.status, words(ticket.status).capitalize())


# --- everything else a page names by its value ---------------------------------------------------

# Per kind: value -> plain words. `say(value, kind)` reads here; what a kind lacks is
# shown with its underscores as spaces.
TABLES: dict[str, dict[str, str]] = {
    "decision": DECISION_DONE,
    "default_action": DEFAULT_ACTION,
    "ticket": TICKET_STATUS,
    "run": RUN_STATUS,
    "waiting": WAITING_LABELS,
    # background tasks (BackgroundTask.Status), replays, deliveries and other jobs
    "task": {
        "pending": "Waiting",
        "running": "Running",
        "completed": "Finished",
        "failed": "Failed",
        "cancelled": "Cancelled",
        "done": "Finished",
        "skipped": "Skipped",
        "delivered": "Delivered",
        "retracted": "Retracted",
        "dead": "Given up",
        "sending": "Sending",
        "succeeded": "Succeeded",
    },
    # ToolCall.Status
    "tool_call": {
        "new": "Not started",
        "running": "Running",
        "suspended": "Waiting for a decision",
        "resuming": "Resuming",
        "succeeded": "Succeeded",
        "failed": "Failed",
        "cancelled": "Cancelled",
    },
    # PendingInput.Mode
    "input_mode": {
        "queue": "Queued",
        "steer": "Steer",
        "interrupt_then_queue": "Interrupt, then queue",
        "resume_open_run": "Resume the waiting run",
    },
    # PendingInput.Boundary: where the input went into a run
    "boundary": {
        "next_step": "at its next step",
        "new_run": "as a new run",
        "resume_input": "when it resumed",
    },
    # messages.Role
    "role": {"system": "System", "user": "User", "assistant": "Agent", "tool": "Tool result"},
    # the event log (runs.runtime.events)
    "event": {
        "run_start": "Run started",
        "run_finish": "Run finished",
        "step_start": "Step started",
        "step_end": "Step ended",
        "text_delta": "Text",
        "reasoning_delta": "Reasoning",
        "tool_call_start": "Tool call started",
        "tool_call_delta": "Tool call arguments",
        "tool_call_ready": "Tool call ready",
        "tool_call_done": "Tool call finished",
        "tool_call_resumed": "Tool call resumed",
        "inference_complete": "Model answered",
        "state_snapshot": "State saved",
        "activity_snapshot": "Activity",
        "error": "Error",
        "input_delivered": "Input delivered",
        "background_task_started": "Background task started",
        "background_task_delivered": "Background task delivered",
        "ticket_decided": "Ticket decided",
    },
    # a tool call's outcome in tool_call_done events
    "outcome": {
        "succeeded": "succeeded",
        "success": "succeeded",
        "failed": "failed",
        "error": "failed",
        "pending": "waiting for a decision",
        "suspended": "waiting for a decision",
        "cancelled": "cancelled",
    },
    # run_finish termination types (TerminationReason)
    "termination": {
        "natural_end": "Finished",
        "behavior_requested": "Ended by a plugin",
        "stopped": "Stopped",
        "cancelled": "Cancelled",
        "blocked": "Blocked",
        "suspended": "Waiting for a decision",
        "error": "Failed",
    },
    # notification events (NotificationEvent)
    "notification": {
        "ticket.opened": "Ticket opened",
        "ticket.deadline_near": "Ticket deadline near",
        "run.failed": "Run failed",
        "run.given_up": "Run given up",
        "failure_group.new": "New failure group",
        "ticket.closed": "Ticket closed (Slack message updated)",
        "budget.warning": "Budget warning",
    },
}


def say(value: Any, kind: str) -> str:
    """`value` of `kind` (a TABLES key) in plain words."""
    text = str(value if value is not None else "")
    return TABLES.get(kind, {}).get(text) or words(text).capitalize()


# The placeholder a suspended tool call leaves in the transcript until it is decided
# (runs.runtime.tool_batch.suspended_placeholder).
PLACEHOLDER = re.compile(r"^Tool '(?P<tool>[^']*)' suspended: awaiting decision$")


def transcript_text(text: str) -> str:
    """A message's text as the transcript shows it: the placeholder of a suspended tool
    call said plainly, anything else as it is."""
    found = PLACEHOLDER.match(text or "")
    if found is None:
        return text
    return f"{found.group('tool')} is waiting for a decision before it runs."
