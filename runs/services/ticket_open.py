"""Opening tickets for the tool calls a checkpoint suspended (the checkpoint's transaction,
runs.store): one per call that has none pending, with its deadline and default action from
the rule that made it wait or the agent's version."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import F

from agents.selectors import agent_version_by_id
from agents.services.permissions import ticket_escalation
from common.jsonsafe import without_nul
from runs.models import Run, Ticket, ToolCall
from runs.runtime import types as rt
from runs.runtime.events import Event
from runs.runtime.tool_batch import PERMISSION_ACTION


def tickets_open(
    run: Run,
    suspended: list[rt.ToolCallState],
    rows: dict[str, ToolCall],
    events: list[Event],
    now: dt.datetime,
) -> list[Ticket]:
    """A ticket for each newly suspended call of a checkpoint (`rows`: its saved tool
    calls, by call id), with the message its suspension gave, its deadline and default
    action; the run's count of open tickets raised with them."""
    already = set(
        Ticket.objects.filter(
            run=run,
            status=Ticket.Status.PENDING,
            ticket_id__in=[s.ticket_id for s in suspended],
        ).values_list("ticket_id", flat=True)
    )
    messages = _suspension_messages(events)
    opened = Ticket.objects.bulk_create(
        [
            Ticket(
                run=run,
                agent_id=run.agent_id,
                tool_call=rows[state.call_id],
                ticket_id=state.ticket_id,
                tool_name=state.tool_name,
                arguments=without_nul(state.arguments),
                resume_mode=state.resume_mode.value,
                reason=state.suspension_reason or "",
                message=messages.get(state.call_id) or _question(state.arguments),
                created_at=now,
                **ticket_deadline(run, state, now),
            )
            for state in suspended
            if state.ticket_id not in already
        ]
    )
    if opened:
        Run.objects.filter(pk=run.pk).update(open_tickets=F("open_tickets") + len(opened))
    return opened


def ticket_deadline(run: Run, state: rt.ToolCallState, now: dt.datetime) -> dict[str, Any]:
    """The deadline, default action (and its answer) and warning time of the ticket `state`
    opens: from the ask rule that made the call wait when that rule has its own, else from
    the agent's version (cached), else none."""
    spec = agent_version_by_id(run.agent_version_id).spec if run.agent_version_id else {}
    escalation = ticket_escalation(
        spec,
        state.tool_name,
        state.arguments,
        permission_ticket=state.suspension_reason == PERMISSION_ACTION,
    )
    if escalation is None:
        return {}
    deadline = now + dt.timedelta(seconds=escalation.deadline_seconds)
    respond = escalation.default_action == "respond"
    fields: dict[str, Any] = {
        "deadline_at": deadline,
        "default_action": escalation.default_action,
        "default_payload": without_nul(escalation.default_response) if respond else None,
    }
    if escalation.warning_seconds:
        fields["warn_at"] = deadline - dt.timedelta(seconds=escalation.warning_seconds)
    return fields


def _question(arguments: Any) -> str:
    """A suspended call's own question (a remote agent's input request), if it has one."""
    question = arguments.get("question") if isinstance(arguments, dict) else None
    return str(question) if question else ""


def _suspension_messages(events: list[Event]) -> dict[str, str]:
    found = {}
    for event in events:
        if event["event_type"] != "tool_call_done":
            continue
        suspension = (event.get("result") or {}).get("suspension")
        if suspension:
            found[event["id"]] = suspension.get("suspension", {}).get("message", "")
    return found
