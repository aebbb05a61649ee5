"""The run core's Celery tasks: ids only, explicit names, safe to run twice. The apps
above the core keep theirs (runs.operations.tasks: retention, schedules, notifications)."""

from __future__ import annotations

from celery import shared_task

from runs.services.background import background_execute
from runs.services.execution import run_advance, runs_sweep
from runs.services.remote import run_abort_remote


@shared_task(name="runs.advance_run", acks_late=True, ignore_result=True)
def advance_run(run_id: str) -> str:
    return run_advance(run_id=run_id)


@shared_task(name="runs.sweep", ignore_result=True)
def sweep() -> dict[str, int]:
    return runs_sweep()


@shared_task(name="runs.abort_remote", ignore_result=True)
def abort_remote(run_id: str) -> str | None:
    """Cancel the remote (A2A) task of a run that ended outside a worker."""
    return run_abort_remote(run_id=run_id)


@shared_task(name="runs.run_background_task", acks_late=True, ignore_result=True)
def run_background_task(task_id: str) -> str:
    """Execute background work a tool started (safe to run twice: a repeat finds
    nothing to claim)."""
    return background_execute(task_id)
