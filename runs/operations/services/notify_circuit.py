"""The destinations of notifications (docs/notifications.md, "Sending beside the runs"):
which one a drainer sends to next, each under a lease, and the circuit breaker of each.

A drain sends to one destination (a channel, or a subscriber's email) at a time, and
each destination is sent to by one drainer at a time (its circuit row's `busy_until`, a
lease): a receiver that hangs holds one sender, and the other drainers (the
notifications worker's threads) serve the other destinations meanwhile. After
AWAKEN_NOTIFY_CIRCUIT_FAILURES failed attempts in a row the destination's circuit opens:
for AWAKEN_NOTIFY_CIRCUIT_SECONDS its deliveries wait, pending and unattempted, then one
drainer tries again (one failure opens it again, one success closes it).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Min, Q
from django.utils import timezone

from runs.operations.models.notifications import NotificationCircuit, NotificationDelivery
from runs.operations.services.notify_send import SendOutcome

logger = logging.getLogger(__name__)

CLAIM_BATCH = 10  # rows taken under one lease
DESTINATION_CANDIDATES = 20  # destinations with due rows looked at per lease attempt
LEASE_MARGIN_SECONDS = 30.0


def destination_key(channel_id: int | None, user_id: int | None) -> str:
    return f"channel:{channel_id}" if channel_id is not None else f"user:{user_id}"


def due_deliveries(now: dt.datetime) -> Any:
    active = [NotificationDelivery.Status.PENDING, NotificationDelivery.Status.SENDING]
    return NotificationDelivery.objects.filter(status__in=active, next_attempt_at__lte=now)


def destination_filter(key: str) -> dict[str, Any]:
    kind, _, target = key.partition(":")
    return {"channel_id": int(target)} if kind == "channel" else {"user_id": int(target)}


def lease_seconds(rows: int) -> float:
    return float(settings.AWAKEN_NOTIFY_TIMEOUT) * max(rows, 1) + LEASE_MARGIN_SECONDS


def take_destination(skip: set[str]) -> str | None:
    """Lease the destination with the oldest due delivery whose circuit is closed and
    that no other drainer holds; None when there is none (besides `skip`)."""
    now = timezone.now()
    blocked = set(
        NotificationCircuit.objects.filter(
            Q(open_until__gt=now) | Q(busy_until__gt=now)
        ).values_list("destination", flat=True)
    )
    passed = blocked | skip
    candidates = (
        due_deliveries(now)
        .exclude(channel_id__in=_ids_of(passed, "channel"))
        .exclude(user_id__in=_ids_of(passed, "user"))
        .values("channel_id", "user_id")
        .annotate(first=Min("next_attempt_at"))
        .order_by("first")[:DESTINATION_CANDIDATES]
    )
    lease = now + dt.timedelta(seconds=lease_seconds(CLAIM_BATCH))
    free = Q(busy_until__isnull=True) | Q(busy_until__lte=now)
    closed = Q(open_until__isnull=True) | Q(open_until__lte=now)
    for candidate in candidates:
        key = destination_key(candidate["channel_id"], candidate["user_id"])
        NotificationCircuit.objects.bulk_create(
            [NotificationCircuit(destination=key)], ignore_conflicts=True
        )
        if NotificationCircuit.objects.filter(free, closed, destination=key).update(
            busy_until=lease
        ):
            return key
    return None


def _ids_of(keys: set[str], kind: str) -> list[int]:
    return [int(key.partition(":")[2]) for key in keys if key.startswith(f"{kind}:")]


def release_destination(key: str) -> None:
    NotificationCircuit.objects.filter(destination=key).update(busy_until=None)


def record_outcome(key: str, outcome: SendOutcome) -> bool:
    """Count one attempt on the destination's circuit: a success closes it, a failure
    the receiver may recover from (a timeout, a refused connection, an error answer)
    counts towards opening it; a failure of our own configuration counts neither way.
    Returns whether the circuit is now open."""
    now = timezone.now()
    circuit = NotificationCircuit.objects.filter(destination=key)
    if outcome.ok:
        circuit.update(failures=0, open_until=None, last_success_at=now)
        return False
    if outcome.permanent:
        return False
    threshold = int(settings.AWAKEN_NOTIFY_CIRCUIT_FAILURES)
    cooldown = dt.timedelta(seconds=float(settings.AWAKEN_NOTIFY_CIRCUIT_SECONDS))
    with transaction.atomic():
        state = circuit.select_for_update().first()
        if state is None:
            return False
        state.failures += 1
        state.last_error = outcome.error[:2000]
        state.last_failure_at = now
        opened = state.failures >= threshold
        if opened:
            state.open_until = now + cooldown
        state.save(update_fields=["failures", "last_error", "last_failure_at", "open_until"])
    if opened:
        logger.warning(
            "notifications to %s: %d failed attempts in a row, circuit open until %s (%s)",
            key,
            state.failures,
            state.open_until,
            state.last_error,
        )
    return opened
