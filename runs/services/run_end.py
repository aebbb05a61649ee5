"""What follows a run's end: a declared, ordered list of effects, run in the transaction
that ended the run.

Three places end a run: the worker's last checkpoint (`runs.store`), `run_fail` (a crash,
a run given up by the sweep) and a cancel of a run no worker holds (`run_cancel`). Each
writes the end itself (the run row, its events) and then calls `run_end_effects` once,
with a `RunEnded` describing that end. The effects are the setting
`AWAKEN_RUN_END_EFFECTS` (dotted paths, in order: counters, notifications, failure
groups, metrics, background work, the thread's next input, replays, a remote task), read
once; each is a function of the `RunEnded` alone, so it can be tested alone. The core's
own effects are in `runs.services.end_effects`; the apps above it keep theirs
(`runs.operations.effects`, `runs.replays.effects`).

Likewise a checkpoint that opens tickets (and every checkpoint of a replay, whose set's
policy decides them) calls `tickets_opened_effects` with a `TicketsOpened`, after its
events are appended: `AWAKEN_TICKET_OPENED_EFFECTS`; and whatever closes tickets (a
decision, a run ending with tickets open) calls `tickets_closed_effects` with a
`TicketsClosed`: `AWAKEN_TICKET_CLOSED_EFFECTS`.

An effect's exception rolls the whole transaction back, the end with it (effects that
must not, such as the metrics, do their work on commit). This module imports no service:
the effects are found by their paths (runs.services.declared), so the services below the
store stay below it and the apps above the core are not imported by it.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from common.writes import WriteBatch
from runs.models import Run, Ticket
from runs.services.declared import declared

# how a run ended: RunEnded.how
FINISHED = "finished"  # its worker's last checkpoint (the loop ended it)
FAILED = "failed"  # run_fail: its worker crashed, or the sweep gave it up
CANCELLED = "cancelled"  # cancelled while no worker held it

# Run.run_mode of a replay (runs.replays starts them): RunEnded.replay, TicketsOpened.replay
REPLAY_MODE = "replay"


def run_is_replay(run: Run) -> bool:
    return run.run_mode == REPLAY_MODE


@dataclass(frozen=True)
class RunEnded:
    """One run's end, as the transaction that ended it knows it.

    `first`: this transaction made the run done (a checkpoint that finishes a run already
    done counts nothing again). `inputs_accepted`: the thread's `input_seq` when the
    caller's thread update returned it (None: unknown). `background_work`: the run may
    have unfinished background work (a checkpoint knows from its state). `agent` and
    `started_at`: a checkpoint's own (its record's), else read from the row.
    `tool_usage`: the usage of the tool calls the same checkpoint finished, counted with
    the run's. `batch`: where an effect may queue writes nobody reads back (sent with the
    checkpoint's, common/writes.py); None outside a checkpoint."""

    run: Run
    how: str
    now: dt.datetime
    first: bool = True
    replay: bool = False
    error_payload: Any = None
    given_up: bool = False
    inputs_accepted: int | None = None
    background_work: bool = True
    agent: str = ""
    started_at: dt.datetime | None = None
    tool_usage: Counter[Any] = field(default_factory=Counter)
    batch: WriteBatch | None = None


@dataclass(frozen=True)
class TicketsOpened:
    """A checkpoint's new tickets (`tickets`, maybe none for a replay's checkpoint)."""

    run: Run
    tickets: Sequence[Ticket]
    now: dt.datetime
    replay: bool = False


@dataclass(frozen=True)
class TicketsClosed:
    """Tickets that this transaction closed: decided (by a person, a policy or their
    deadline's default action) or cancelled with their run. Their ids only: whatever an
    effect tells about them it reads when it acts, outside this transaction."""

    ticket_ids: Sequence[Any]
    now: dt.datetime


RunEndEffect = Callable[[RunEnded], Any]
TicketsOpenedEffect = Callable[[TicketsOpened], Any]
TicketsClosedEffect = Callable[[TicketsClosed], Any]


def run_end_effects_declared() -> tuple[RunEndEffect, ...]:
    return declared("AWAKEN_RUN_END_EFFECTS")


def tickets_opened_effects_declared() -> tuple[TicketsOpenedEffect, ...]:
    return declared("AWAKEN_TICKET_OPENED_EFFECTS")


def tickets_closed_effects_declared() -> tuple[TicketsClosedEffect, ...]:
    return declared("AWAKEN_TICKET_CLOSED_EFFECTS")


def run_end_effects(ctx: RunEnded) -> None:
    """Run the declared run-end effects in order, in the caller's transaction."""
    for effect in run_end_effects_declared():
        effect(ctx)


def tickets_opened_effects(ctx: TicketsOpened) -> None:
    """Run the declared ticket-opened effects in order, in the caller's transaction."""
    for effect in tickets_opened_effects_declared():
        effect(ctx)


def tickets_closed_effects(ctx: TicketsClosed) -> None:
    """Run the declared ticket-closed effects in order, in the caller's transaction."""
    if ctx.ticket_ids:
        for effect in tickets_closed_effects_declared():
            effect(ctx)
