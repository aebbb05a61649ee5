"""Ticket deadlines (the sweep's): an overdue ticket gets its default action as a
decision by the system; one whose warning time came is warned once."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.db import transaction

from common.errors import InvalidInput, ServiceError
from runs.models import Ticket
from runs.operations.models.notifications import NotificationEvent
from runs.operations.services.notifications import notify_ticket
from runs.runtime import types as rt
from runs.services.tickets import decision_submit

logger = logging.getLogger(__name__)


def deadlines_sweep(now: dt.datetime) -> dict[str, int]:
    """The sweep's step for ticket deadlines (settings AWAKEN_SWEEP_STEPS): overdue
    tickets expire, then the tickets whose warning time came are warned (after expiry:
    no warning for an overdue ticket)."""
    expired = tickets_expire(now=now)
    return {"expired_tickets": expired, "warned_tickets": tickets_warn(now=now)}


def tickets_expire(*, now: dt.datetime) -> int:
    """Apply each overdue ticket's default action as a decision by the system."""
    expired = 0
    overdue = Ticket.objects.filter(status=Ticket.Status.PENDING, deadline_at__lt=now)
    for ticket in overdue.select_related("tool_call")[:500]:
        action, payload, why_not = expiry_decision(ticket)
        comment = f"no decision by the deadline ({ticket.deadline_at:%Y-%m-%d %H:%M:%S %Z})"
        try:
            try:
                decision_submit(
                    ticket=ticket,
                    action=action,
                    payload=payload,
                    comment=f"{comment}; {why_not}" if why_not else comment,
                )
            except InvalidInput as exc:  # the configured answer cannot be given
                if action != "respond":
                    raise
                decision_submit(
                    ticket=ticket,
                    action="reject",
                    comment=f"{comment}; the default answer could not be given ({exc.message}), "
                    "so it is rejected",
                )
            expired += 1
        except ServiceError:
            logger.info("ticket %s was decided just before its deadline", ticket.pk)
    return expired


def tickets_warn(*, now: dt.datetime) -> int:
    """Warn (notification ticket.deadline_near) about each pending ticket whose warning
    time came and whose deadline has not passed; returns how many were warned."""
    due = Ticket.objects.filter(
        status=Ticket.Status.PENDING, warned_at__isnull=True, warn_at__lte=now, deadline_at__gt=now
    ).order_by("warn_at")
    return sum(ticket_warn(ticket, now) for ticket in due.select_related("run")[:500])


@transaction.atomic
def ticket_warn(ticket: Ticket, now: dt.datetime) -> bool:
    """Mark one ticket warned with a guarded update and queue its warning in the same
    transaction: of two sweeps that read it at once, only the one whose update wins
    queues it, and a ticket decided meanwhile gets none. False: nothing to do."""
    won = Ticket.objects.filter(
        pk=ticket.pk, status=Ticket.Status.PENDING, warned_at__isnull=True
    ).update(warned_at=now)
    if not won:
        return False
    ticket.warned_at = now
    notify_ticket(ticket, NotificationEvent.TICKET_DEADLINE_NEAR)
    return True


def expiry_decision(ticket: Ticket) -> tuple[str, Any, str]:
    """(action, payload, why the default action was not taken) for an overdue ticket: its
    default action, or reject when that action does not fit what the ticket waits for."""
    action = ticket.default_action
    waits_for_answer = ticket.resume_mode == rt.ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT
    if action == "approve" and waits_for_answer:
        return "reject", None, "the call waits for an answer, so it is rejected, not approved"
    if action != "respond":
        return action, None, ""
    if ticket.default_payload is None:
        return "reject", None, "no default answer is configured, so it is rejected"
    if ticket.child_run_id:
        return (
            "reject",
            None,
            f"it waits for child run {ticket.child_run_id}, whose answer the default answer "
            "must not replace, so it is rejected",
        )
    if ticket.resume_mode == rt.ToolCallResumeMode.PASS_DECISION_TO_TOOL:
        return (
            "reject",
            None,
            "the tool takes an approval or a rejection, not an answer, so it is rejected",
        )
    return "respond", ticket.default_payload, "the default answer is given"
