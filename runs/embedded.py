"""The embedded default: a Celery worker on the in-memory broker and a sweep thread,
both inside the current process (`manage.py serve`, `run_agent`, `decide`)."""

from __future__ import annotations

import logging
import threading

from celery.worker import WorkController
from django.conf import settings
from django.db import close_old_connections

from awaken_site.celery import app

logger = logging.getLogger(__name__)
_started = threading.Event()
_lock = threading.Lock()


def _sweep_forever(stop: threading.Event) -> None:
    from runs.services.execution import runs_sweep

    while not stop.wait(settings.AWAKEN_SWEEP_SECONDS):
        try:
            runs_sweep()
        except Exception:
            logger.warning("sweep failed", exc_info=True)
        finally:
            close_old_connections()


def start_embedded_worker(concurrency: int = 4) -> threading.Event:
    """Start the in-process worker and sweep once; returns an event that stops the sweep."""
    stop = threading.Event()
    with _lock:
        if _started.is_set():
            return stop
        app.finalize()
        app.set_current()
        worker = WorkController(
            app=app,
            pool="threads",
            concurrency=concurrency,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            loglevel="WARNING",
            hostname=f"embedded@{threading.get_ident()}",
        )
        threading.Thread(target=worker.start, daemon=True, name="embedded-celery").start()
        threading.Thread(target=_sweep_forever, args=(stop,), daemon=True, name="embedded-sweep").start()
        _started.set()
        logger.info("embedded worker started (broker %s)", settings.CELERY_BROKER_URL)
    return stop
