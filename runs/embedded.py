"""The embedded default: a Celery worker on the in-memory broker, a sweep thread and the
schedules' one-second tick, all inside the current process (`manage.py serve`,
`run_agent`, `decide`)."""

from __future__ import annotations

import logging
import threading

from celery import current_app
from celery.worker import WorkController
from django.conf import settings
from django.db import connection

from runs.services.execution import runs_sweep
from runs.services.schedules import TICK_SECONDS, schedules_fire_due

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_running: EmbeddedWorker | None = None


def _sweep_forever(stop: threading.Event) -> None:
    try:
        while not stop.wait(settings.AWAKEN_SWEEP_SECONDS):
            try:
                runs_sweep()
            except Exception:
                logger.warning("sweep failed", exc_info=True)
    finally:
        connection.close()


def _fire_schedules_forever(stop: threading.Event) -> None:
    """The schedules' tick (what `celery beat` sends in the distributed mode)."""
    try:
        while not stop.wait(TICK_SECONDS):
            try:
                schedules_fire_due()
            except Exception:
                logger.warning("firing schedules failed", exc_info=True)
    finally:
        connection.close()


class EmbeddedWorker:
    def __init__(self, concurrency: int) -> None:
        # The project's Celery app (awaken_site loads it with the settings): the current one.
        app = current_app._get_current_object()
        app.finalize()
        self._stop = threading.Event()
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
            threading.Thread(
                target=_sweep_forever, args=(self._stop,), daemon=True, name="embedded-sweep"
            ),
            threading.Thread(
                target=_fire_schedules_forever,
                args=(self._stop,),
                daemon=True,
                name="embedded-schedules",
            ),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self.worker.stop()
        for thread in self._threads:
            thread.join(timeout)


def start_embedded_worker(concurrency: int = 4) -> EmbeddedWorker:
    """Start the in-process worker and sweep (once per process)."""
    global _running
    with _lock:
        if _running is None:
            _running = EmbeddedWorker(concurrency)
            _running.start()
            logger.info("embedded worker started (broker %s)", settings.CELERY_BROKER_URL)
        return _running


def stop_embedded_worker() -> None:
    global _running
    with _lock:
        if _running is not None:
            _running.stop()
            _running = None
