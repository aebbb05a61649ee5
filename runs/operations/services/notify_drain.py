"""The notification outbox's drain (docs/notifications.md): `notifications_drain`, the
`runs.deliver_notifications` task's body, sends the due deliveries outside any
transaction, one destination at a time under its lease and circuit breaker
(`runs.operations.services.notify_circuit`), each delivery under a lease of its own, and
records each attempt with a guarded update: delivered, retried with exponential backoff,
or failed. How one delivery is sent: `runs.operations.services.notify_send`. The rows are
written by `runs.operations.services.notifications`, in the transaction of their event.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationCircuit,
    NotificationDelivery,
)
from runs.operations.services.notify_circuit import (
    CLAIM_BATCH,
    destination_filter,
    due_deliveries,
    lease_seconds,
    record_outcome,
    release_destination,
    take_destination,
)
from runs.operations.services.notify_send import SendOutcome, send_delivery

logger = logging.getLogger(__name__)


def _claim(batch: int, key: str) -> list[NotificationDelivery]:
    """Take up to `batch` due rows of destination `key` (a `sending` row whose lease
    lapsed is due again): mark them `sending` under a lease and count the attempt, in one
    short transaction, and extend the destination's lease to match."""
    now = timezone.now()
    due = due_deliveries(now).filter(**destination_filter(key))
    with transaction.atomic():
        rows = list(due.select_for_update(skip_locked=True).order_by("next_attempt_at")[:batch])
        if not rows:
            return []
        _with_destinations(rows)
        lease = now + dt.timedelta(seconds=lease_seconds(len(rows)))
        for row in rows:
            row.status = NotificationDelivery.Status.SENDING
            row.attempts += 1
            row.next_attempt_at = lease
            row.last_attempt_at = now
        NotificationDelivery.objects.bulk_update(
            rows, ["status", "attempts", "next_attempt_at", "last_attempt_at"]
        )
        NotificationCircuit.objects.filter(destination=key).update(busy_until=lease)
    return rows


def _with_destinations(rows: list[NotificationDelivery]) -> None:
    """Read the rows' channels and users (one query each; a deleted one stays None,
    while the row keeps its id: it then fails as deleted)."""
    channel_field = NotificationDelivery._meta.get_field("channel")
    user_field = NotificationDelivery._meta.get_field("user")
    channel_ids = {row.channel_id for row in rows if row.channel_id is not None}
    user_ids = {row.user_id for row in rows if row.user_id is not None}
    channels = NotificationChannel.objects.in_bulk(channel_ids) if channel_ids else {}
    users = get_user_model().objects.in_bulk(user_ids) if user_ids else {}
    for row in rows:
        channel_field.set_cached_value(row, channels.get(row.channel_id))
        user_field.set_cached_value(row, users.get(row.user_id))


def _unclaim(rows: list[NotificationDelivery]) -> None:
    """Give back rows taken but not attempted (their destination's circuit opened):
    pending again, due when it closes, the attempt not counted."""
    Status = NotificationDelivery.Status
    for row in rows:
        NotificationDelivery.objects.filter(
            pk=row.pk, status=Status.SENDING, attempts=row.attempts
        ).update(status=Status.PENDING, attempts=row.attempts - 1, next_attempt_at=timezone.now())


def retry_delay(attempts: int) -> float:
    """Seconds before the next attempt after `attempts` failed ones: exponential, capped,
    with jitter (half to all of it) so that a receiver coming back is not hit at once."""
    base = float(settings.AWAKEN_NOTIFY_RETRY_BASE_SECONDS)
    cap = float(settings.AWAKEN_NOTIFY_RETRY_MAX_SECONDS)
    delay = min(cap, base * 2 ** max(attempts - 1, 0))
    return delay * random.uniform(0.5, 1.0)


def _finish(row: NotificationDelivery, outcome: SendOutcome) -> str:
    """Record one attempt's outcome, if this drainer still holds the row (a guarded
    update: a drainer whose lease lapsed writes nothing). Returns what became of it."""
    now = timezone.now()
    fields: dict[str, Any] = {
        "response_code": outcome.response_code,
        "last_error": outcome.error[:2000],
    }
    Status = NotificationDelivery.Status
    if outcome.ok:
        fields.update(status=Status.DELIVERED, delivered_at=now)
    elif outcome.permanent or row.attempts >= settings.AWAKEN_NOTIFY_MAX_ATTEMPTS:
        fields.update(status=Status.FAILED)
    else:
        fields.update(
            status=Status.PENDING,
            next_attempt_at=now + dt.timedelta(seconds=retry_delay(row.attempts)),
        )
    held = NotificationDelivery.objects.filter(
        pk=row.pk, status=Status.SENDING, attempts=row.attempts
    )
    if not held.update(**fields):
        return "lost"
    return {Status.DELIVERED: "delivered", Status.FAILED: "failed"}.get(
        fields["status"], "retrying"
    )


def _send(row: NotificationDelivery) -> SendOutcome:
    try:
        return send_delivery(row)
    except Exception as exc:  # a bug must not leave the row leased for good
        logger.exception("notification %s: sending failed", row.pk)
        return SendOutcome(error=f"internal error: {type(exc).__name__}: {exc}")


def _drain_destination(key: str, limit: int, counts: dict[str, int]) -> int:
    """Send up to `limit` due deliveries of one leased destination, oldest first, until
    none is due or its circuit opens; returns how many were taken."""
    taken = 0
    while taken < limit:
        rows = _claim(min(CLAIM_BATCH, limit - taken), key)
        if not rows:
            break
        taken += len(rows)
        for index, row in enumerate(rows):
            outcome = _send(row)
            counts[_finish(row, outcome)] += 1
            if record_outcome(key, outcome):
                _unclaim(rows[index + 1 :])
                return taken
    return taken


def notifications_drain(limit: int = 200) -> dict[str, int]:
    """Send up to `limit` due deliveries, one destination after another; each delivery
    is taken under a lease, sent outside any transaction, then marked delivered,
    rescheduled or failed. Safe to run concurrently: each destination is sent to by one
    drainer at a time, each delivery by one."""
    counts = {"delivered": 0, "retrying": 0, "failed": 0, "lost": 0}
    taken = 0
    done: set[str] = set()
    while taken < limit:
        key = take_destination(done)
        if key is None:
            break
        done.add(key)
        try:
            taken += _drain_destination(key, limit - taken, counts)
        finally:
            release_destination(key)
    return counts
