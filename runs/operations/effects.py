"""Operations' part of what follows a run's end and a checkpoint's new tickets
(runs.services.run_end): notifications queued as outbox rows and failure groups, each a
function of its context alone, in the transaction that ended the run (or opened the
tickets). Their place in the order is the settings' `AWAKEN_RUN_END_EFFECTS` and
`AWAKEN_TICKET_OPENED_EFFECTS`; the Slack messages of closed tickets are updated by
`AWAKEN_TICKET_CLOSED_EFFECTS`."""

from __future__ import annotations

from typing import Any

from runs.operations.models.notifications import NotificationEvent
from runs.operations.services.failures import failure_record
from runs.operations.services.notifications import (
    notify_run,
    notify_run_finished,
    notify_tickets,
    outbox_insert,
)
from runs.operations.services.notify_slack import tickets_closed_queue
from runs.services.run_end import FAILED, FINISHED, RunEnded, TicketsClosed, TicketsOpened


def effect_notify_ended(ctx: RunEnded) -> Any:
    """run.failed (or run.given_up) for a run that failed; replays notify nobody, nor
    does a cancel."""
    if not ctx.first or ctx.replay:
        return 0
    if ctx.how == FINISHED:
        return notify_run_finished(ctx.run, ctx.error_payload)
    if ctx.how == FAILED:
        event = NotificationEvent.RUN_GIVEN_UP if ctx.given_up else NotificationEvent.RUN_FAILED
        return notify_run(ctx.run, event)
    return 0


def effect_failure_record(ctx: RunEnded) -> Any:
    """A failed run counts in its failure group (not a replay)."""
    if not ctx.first or ctx.replay:
        return None
    return failure_record(ctx.run, ctx.error_payload, now=ctx.now)


def effect_notify_tickets(ctx: TicketsOpened) -> Any:
    """ticket.opened to the routes that want it (not for a replay's tickets)."""
    if ctx.replay or not ctx.tickets:
        return 0
    return notify_tickets(ctx.tickets, NotificationEvent.TICKET_OPENED)


def effect_slack_tickets_closed(ctx: TicketsClosed) -> Any:
    """The tickets' Slack messages (of Slack app channels) are rewritten to say who
    decided what and when: queued as `ticket.closed` outbox rows, sent after commit."""
    return outbox_insert(tickets_closed_queue(list(ctx.ticket_ids), ctx.now))
