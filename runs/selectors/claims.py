"""A ticket's live claim as the pages and the API show it: who is on it and for how long.
Claiming, releasing and assigning are runs.decisions.services.claims; the ticket's columns
(`claimed_by`, `claimed_until`) are the core's, and a decision ends the claim."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from runs.models import Ticket

CLAIM_MINUTES = 5  # a claim's length unless the claimant asks for another
MAX_CLAIM_MINUTES = 60


@dataclass(frozen=True)
class Claim:
    """A live claim as a page shows it to `viewer`."""

    by: str  # the claimant's username
    until: dt.datetime
    minutes_left: int
    mine: bool  # the viewer holds it

    @property
    def left(self) -> str:
        return f"{self.minutes_left} min"

    @property
    def confirm(self) -> str:
        return f"{self.by} is on this ({self.left} left) — decide anyway?"

    @property
    def ask(self) -> str:
        """The question to confirm before deciding: empty when the viewer holds it."""
        return "" if self.mine else self.confirm


def minutes_until(until: dt.datetime, now: dt.datetime) -> int:
    return max(1, math.ceil((until - now).total_seconds() / 60))


def live_claim(ticket: Ticket, viewer: Any = None, now: dt.datetime | None = None) -> Claim | None:
    """The ticket's claim if it has not lapsed (read its `claimed_by` with the ticket)."""
    until = ticket.claimed_until
    if ticket.claimed_by_id is None or until is None:
        return None
    now = now or timezone.now()
    if until <= now:
        return None
    claimant = ticket.claimed_by
    return Claim(
        by=claimant.get_username() if claimant is not None else "?",
        until=until,
        minutes_left=minutes_until(until, now),
        mine=viewer is not None and ticket.claimed_by_id == getattr(viewer, "pk", None),
    )
