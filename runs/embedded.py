"""The embedded default: a Celery worker on the in-memory broker, a sweep thread, the
schedules' one-second tick and the notification senders, all inside the current process
(`manage.py serve`, `run_agent`, `decide`).

Notifications are sent by threads of their own (NOTIFY_SENDERS), never by the worker's
run threads: a receiver that hangs holds one sender, not a run's slot. They drain when an
event queues something (`kick_drain` rings their doorbell here instead of the
`notifications` queue, which no embedded worker consumes) and every NOTIFY_TICK_SECONDS
for the retries."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from celery import current_app
from celery.worker import WorkController
from django.conf import settings
from django.db import connection

from runs.operations.services.notifications import doorbell, notifications_drain
from runs.operations.services.schedules import TICK_SECONDS, schedules_fire_due
from runs.services.execution import runs_sweep

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_running: EmbeddedWorker | None = None
NOTIFY_TICK_SECONDS = 2.0  # as `celery beat` sends it in the distributed mode
NOTIFY_SENDERS = 2  # threads sending notifications, each to another destination


def _every(seconds: float, work: Callable[[], object], what: str, stop: threading.Event) -> None:
    """Call `work` every `seconds` until `stop`; a failure is logged and the next call
    comes as usual."""
    try:
        while not stop.wait(seconds):
            try:
                work()
            except Exception:
                logger.warning("%s failed", what, exc_info=True)
    finally:
        connection.close()


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


def _ticker(name: str, seconds: float, work: Callable[[], object], stop: threading.Event) -> Any:
    return threading.Thread(
        target=_every, args=(seconds, work, name, stop), daemon=True, name=f"embedded-{name}"
    )


class EmbeddedWorker:
    def __init__(self, concurrency: int) -> None:
        # The project's Celery app (awaken_site loads it with the settings): the current one.
        app = current_app._get_current_object()
        app.finalize()
        self._stop = threading.Event()
        self._bell = threading.Event()
        self.worker = WorkController(
            app=app,
            pool="threads",
            concurrency=concurrency,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            loglevel="WARNING",
            hostname=f"embedded@{threading.get_ident()}",
        )
        self._threads = [
            threading.Thread(target=self.worker.start, daemon=True, name="embedded-celery"),
            _ticker("sweep", settings.AWAKEN_SWEEP_SECONDS, runs_sweep, self._stop),
            # the schedules' tick (what `celery beat` sends in the distributed mode)
            _ticker("schedules", TICK_SECONDS, schedules_fire_due, self._stop),
            *(
                threading.Thread(
                    target=_send_notifications,
                    args=(self._bell, self._stop),
                    daemon=True,
                    name=f"embedded-notifications-{n}",
                )
                for n in range(NOTIFY_SENDERS)
            ),
        ]

    def start(self) -> None:
        doorbell.local = self._bell
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._bell.set()
        if doorbell.local is self._bell:
            doorbell.local = None
        self.worker.stop()
        for thread in self._threads:
            thread.join(timeout)


def start_embedded_worker(concurrency: int | None = None) -> EmbeddedWorker:
    """Start the in-process worker and sweep (once per process): the same executor as a
    distributed worker, AWAKEN_RUNS_IN_FLIGHT runs at once unless told otherwise."""
    global _running
    with _lock:
        if _running is None:
            _running = EmbeddedWorker(concurrency or settings.AWAKEN_RUNS_IN_FLIGHT)
            _running.start()
            logger.info("embedded worker started (broker %s)", settings.CELERY_BROKER_URL)
        return _running


def stop_embedded_worker() -> None:
    global _running
    with _lock:
        if _running is not None:
            _running.stop()
            _running = None
