"""Replays' part of what follows a run's end and a checkpoint's new tickets
(runs.services.run_end), in the transaction that ended the run (or opened the tickets).
Their place in the order is the settings' `AWAKEN_RUN_END_EFFECTS` and
`AWAKEN_TICKET_OPENED_EFFECTS`."""

from __future__ import annotations

from typing import Any

from runs.replays.services.replay_flow import replay_run_ended, replay_tickets_decide
from runs.services.run_end import RunEnded, TicketsOpened


def effect_replay_ended(ctx: RunEnded) -> None:
    """A replay's item is done and its set's next replays start."""
    if ctx.replay:
        replay_run_ended(ctx.run.pk)


def effect_replay_decide(ctx: TicketsOpened) -> Any:
    """Nobody sees a replay's tickets: its set's policy decides them."""
    return replay_tickets_decide(ctx.run) if ctx.replay else 0
