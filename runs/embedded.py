"""The embedded default: a Celery worker on the in-memory broker and the periodic work
that `celery beat` sends in the distributed mode, all inside the current process
(`manage.py serve`, `run_agent`, `decide`).

Beside the worker run the parts the setting `AWAKEN_EMBEDDED_PARTS` declares (dotted
paths, each an `EmbeddedPart`): the core's sweep thread here, the schedules' one-second
tick and the notification senders in runs.operations.embedded. A part, given the
worker's stop event, is a context manager: entering starts its threads, leaving (once
the stop event is set) wakes them and waits for them. The core calls the parts by their
paths and imports none of the apps above it."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from celery import current_app
from celery.worker import WorkController
from django.conf import settings
from django.db import connection

from runs.services.declared import declared
from runs.services.execution import runs_sweep

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_running: EmbeddedWorker | None = None
JOIN_SECONDS = 10.0  # how long stopping waits for each thread of a part

EmbeddedPart = Callable[[threading.Event], AbstractContextManager[None]]


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


@contextlib.contextmanager
def ticking(
    name: str, seconds: float, work: Callable[[], object], stop: threading.Event
) -> Iterator[None]:
    """A part that calls `work` every `seconds` in a thread of its own until `stop`."""
    thread = threading.Thread(
        target=_every, args=(seconds, work, name, stop), daemon=True, name=f"embedded-{name}"
    )
    thread.start()
    try:
        yield
    finally:
        thread.join(JOIN_SECONDS)


def sweep_ticks(stop: threading.Event) -> AbstractContextManager[None]:
    """The sweep (runs_sweep) every AWAKEN_SWEEP_SECONDS (`celery beat`'s runs.sweep)."""
    return ticking("sweep", settings.AWAKEN_SWEEP_SECONDS, runs_sweep, stop)


class EmbeddedWorker:
    def __init__(self, concurrency: int) -> None:
        # The project's Celery app (awaken_site loads it with the settings): the current one.
        app = current_app._get_current_object()
        app.finalize()
        self._stop = threading.Event()
        self._parts = contextlib.ExitStack()
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
        self._thread = threading.Thread(
            target=self.worker.start, daemon=True, name="embedded-celery"
        )

    def start(self) -> None:
        part: EmbeddedPart
        try:
            for part in declared("AWAKEN_EMBEDDED_PARTS"):
                self._parts.enter_context(part(self._stop))
        except BaseException:  # the parts already started stop again
            self._stop.set()
            self._parts.close()
            raise
        self._thread.start()

    def stop(self, timeout: float = JOIN_SECONDS) -> None:
        self._stop.set()
        self.worker.stop()
        self._thread.join(timeout)
        self._parts.close()  # the parts, the last one first


def start_embedded_worker(concurrency: int | None = None) -> EmbeddedWorker:
    """Start the in-process worker and its parts (once per process): the same executor
    as a distributed worker, AWAKEN_RUNS_IN_FLIGHT runs at once unless told otherwise."""
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
