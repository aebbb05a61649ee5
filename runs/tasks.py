"""Celery tasks: ids only, explicit names, safe to run twice."""

from __future__ import annotations

from celery import shared_task

from agents.endpoints import run_abort_remote
from runs.services.execution import run_advance, runs_sweep


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
