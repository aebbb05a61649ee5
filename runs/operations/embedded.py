"""Operations' parts of the embedded default (runs.embedded, setting
AWAKEN_EMBEDDED_PARTS): the schedules' one-second tick and the notification senders,
what `celery beat` and the `notifications` queue's workers do in the distributed mode.

Notifications are sent by threads of their own (NOTIFY_SENDERS), never by the worker's
run threads: a receiver that hangs holds one sender, not a run's slot. They drain when an
event queues something (`kick_drain` rings their doorbell here instead of the
`notifications` queue, which no embedded worker consumes) and every NOTIFY_TICK_SECONDS
for the retries."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager

from django.db import connection

from runs.embedded import JOIN_SECONDS, ticking
from runs.operations.services.notifications import doorbell
from runs.operations.services.notify_drain import notifications_drain
from runs.operations.services.schedules import TICK_SECONDS, schedules_fire_due

logger = logging.getLogger(__name__)
NOTIFY_TICK_SECONDS = 2.0  # as `celery beat` sends it in the distributed mode
NOTIFY_SENDERS = 2  # threads sending notifications, each to another destination


def schedules_ticks(stop: threading.Event) -> AbstractContextManager[None]:
    """The schedules' tick (`celery beat`'s runs.fire_schedules)."""
    return ticking("schedules", TICK_SECONDS, schedules_fire_due, stop)


def _send_notifications(bell: threading.Event, stop: threading.Event) -> None:
    """Drain the notifications when the doorbell rings, and every tick."""
    try:
        while not stop.is_set():
            bell.wait(NOTIFY_TICK_SECONDS)
            if stop.is_set():
                break
            bell.clear()
            try:
                notifications_drain()
            except Exception:
                logger.warning("sending notifications failed", exc_info=True)
    finally:
        connection.close()


@contextlib.contextmanager
def notification_senders(stop: threading.Event) -> Iterator[None]:
    """The senders, and the process's doorbell ringing them while they run."""
    bell = threading.Event()
    senders = [
        threading.Thread(
            target=_send_notifications,
            args=(bell, stop),
            daemon=True,
            name=f"embedded-notifications-{n}",
        )
        for n in range(NOTIFY_SENDERS)
    ]
    doorbell.local = bell
    for sender in senders:
        sender.start()
    try:
        yield
    finally:
        bell.set()  # wakes them to see `stop`
        if doorbell.local is bell:
            doorbell.local = None
        for sender in senders:
            sender.join(JOIN_SECONDS)
