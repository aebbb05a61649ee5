"""The effects of a run's end and of a checkpoint's new tickets (runs.services.run_end),
each a function of its context alone. Their order is the settings'
`AWAKEN_RUN_END_EFFECTS` and `AWAKEN_TICKET_OPENED_EFFECTS`, not this file's.

Each runs in the transaction that ended the run (or opened the tickets): what it writes
commits or rolls back with the end. Notifications are outbox rows in that transaction
(sent after it commits); metrics and the remote abort act on commit only."""

from __future__ import annotations

from typing import Any

from runs import metrics
from runs.operations.models.notifications import NotificationEvent
from runs.operations.services.failures import failure_record
from runs.operations.services.notifications import notify_run, notify_run_finished, notify_tickets
from runs.replays.services.replay_flow import replay_run_ended, replay_tickets_decide
from runs.services import stats
from runs.services.checkpoint_input import background_cancel
from runs.services.delivery import thread_deliver_next
from runs.services.remote import abort_remote_on_commit
from runs.services.run_end import FAILED, FINISHED, RunEnded, TicketsOpened

# --- a run's end ----------------------------------------------------------------------------


def effect_count_finished(ctx: RunEnded) -> None:
    """The dashboard's counters: the run leaves `open` for its outcome, its usage (and
    that of the tool calls its last checkpoint finished) is added."""
    if ctx.first:
        stats.run_finished(ctx.run, ctx.tool_usage)


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


def effect_metrics(ctx: RunEnded) -> None:
    """runs_finished and the run's duration, once the transaction commits."""
    if not ctx.first:
        return
    if ctx.agent:  # a checkpoint's: its record knows the agent and the start
        run = ctx.run
        started = ctx.started_at or run.created_at
        metrics.run_finished(ctx.agent, run.status, run.status_reason, started, ctx.now)
    else:
        metrics.run_ended(ctx.run)


def effect_background_cancel(ctx: RunEnded) -> int:
    """The run's unfinished background work ends with it."""
    return background_cancel(ctx.run, ctx.now) if ctx.background_work else 0


def effect_deliver_next(ctx: RunEnded) -> Any:
    """Steer input the run did not take is queued; the thread's oldest queued input
    starts the next run."""
    return thread_deliver_next(ctx.run, ctx.inputs_accepted)


def effect_replay_ended(ctx: RunEnded) -> None:
    """A replay's item is done and its set's next replays start."""
    if ctx.replay:
        replay_run_ended(ctx.run.pk)


def effect_abort_remote(ctx: RunEnded) -> None:
    """A remote (A2A) agent's task is cancelled once a run ended outside its worker (a
    run its worker finished ended its remote task itself)."""
    if ctx.how != FINISHED:
        abort_remote_on_commit(ctx.run)


# --- a checkpoint's new tickets -------------------------------------------------------------


def effect_replay_decide(ctx: TicketsOpened) -> Any:
    """Nobody sees a replay's tickets: its set's policy decides them."""
    return replay_tickets_decide(ctx.run) if ctx.replay else 0


def effect_notify_tickets(ctx: TicketsOpened) -> Any:
    """ticket.opened to the routes that want it (not for a replay's tickets)."""
    if ctx.replay or not ctx.tickets:
        return 0
    return notify_tickets(ctx.tickets, NotificationEvent.TICKET_OPENED)
