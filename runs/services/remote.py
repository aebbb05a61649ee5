"""Cancel means done, remote task included: when a run of a remote (A2A) agent ends
outside a worker (cancelled while waiting, failed by the sweep), its remote task is
cancelled too, by a worker once that commits (the request that cancelled does not wait
for the remote server)."""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app
from django.db import transaction

from agents.services.endpoints import endpoint_backend_for_spec
from runs.models import Run
from runs.runtime.backends.a2a import REMOTE_STATE_KEY, describe_error
from runs.runtime.types import PersistedState

logger = logging.getLogger(__name__)


def run_abort_remote(*, run_id: Any) -> str | None:
    """Cancel the remote task of a finished run if it is still open; failures only logged."""
    run = Run.objects.select_related("agent_version").filter(pk=run_id).first()
    if run is None or run.agent_version is None:
        return None
    backend = endpoint_backend_for_spec(run.agent_version.spec or {})
    if backend is None or backend.config is None:
        return None
    try:
        return backend.abort(PersistedState.from_json(run.state))
    except Exception as exc:
        logger.warning(
            "run %s: cancelling its remote task failed: %s",
            run_id,
            describe_error(backend.config, exc),
        )
        return None


def abort_remote_on_commit(run: Any) -> None:
    """Once the transaction that ended `run` commits, have a worker cancel its remote task.
    Runs without remote state cost nothing."""
    extensions = (run.state or {}).get("extensions") or {}
    if not extensions.get(REMOTE_STATE_KEY):
        return
    run_id = str(run.pk)
    transaction.on_commit(lambda: _enqueue_abort(run_id), robust=True)


def _enqueue_abort(run_id: str) -> None:
    # The task by its name: runs.tasks imports the services, not the other way round.
    try:
        current_app.tasks["runs.abort_remote"].delay(run_id)
    except Exception:  # broker down: do it here rather than leave the remote task running
        logger.warning("could not enqueue the remote abort of run %s; aborting inline", run_id)
        run_abort_remote(run_id=run_id)
