"""The run core's effects of a run's end (runs.services.run_end), each a function of its
context alone; the apps above the core keep their own (runs.operations.effects:
notifications, failure groups; runs.replays.effects). Their order is the setting
`AWAKEN_RUN_END_EFFECTS`, not this file's.

Each runs in the transaction that ended the run: what it writes commits or rolls back
with the end; metrics and the remote abort act on commit only."""

from __future__ import annotations

from typing import Any

from runs import metrics
from runs.services import stats
from runs.services.checkpoint_input import background_cancel
from runs.services.delivery import thread_deliver_next
from runs.services.remote import abort_remote_on_commit
from runs.services.run_end import FINISHED, RunEnded


def effect_count_finished(ctx: RunEnded) -> None:
    """The dashboard's counters: the run leaves `open` for its outcome, its usage (and
    that of the tool calls its last checkpoint finished) is added."""
    if ctx.first:
        stats.run_finished(ctx.run, ctx.tool_usage, ctx.batch)


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


def effect_abort_remote(ctx: RunEnded) -> None:
    """A remote (A2A) agent's task is cancelled once a run ended outside its worker (a
    run its worker finished ended its remote task itself)."""
    if ctx.how != FINISHED:
        abort_remote_on_commit(ctx.run)
