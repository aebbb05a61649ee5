"""Celery tasks: ids only, explicit names, safe to run twice."""

from __future__ import annotations

from celery import shared_task

from runs.services.execution import run_advance, runs_sweep


@shared_task(name="runs.advance_run", acks_late=True, ignore_result=True)
def advance_run(run_id: str) -> str:
    return run_advance(run_id=run_id)


@shared_task(name="runs.sweep", ignore_result=True)
def sweep() -> dict[str, int]:
    return runs_sweep()
