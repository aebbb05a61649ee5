"""Budgets with real processes (PostgreSQL, Redis, two `celery worker`s and `celery beat`,
see conftest.py; docs/budgets.md): 50 runs against a team budget that allows about 20
finish up to the limit, the rest wait with reason `budget` without calling the model;
the spend stays within one step per run in flight of the limit; raising the limit lets
them go; a new period lets them go; no run is lost and every log is gap-free."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest
from django.db.models import F, Sum

from common.audit import Actor
from runs.models import Run, RunEvent
from runs.operations.services.budget_changes import budget_create, budget_update
from runs.services.submission_flow import run_start
from tests.factories import call, scripted_agent
from tests.processes import wait_for

pytestmark = pytest.mark.slow

ADMIN = Actor(label="budget-admin", source="admin")
RUNS = 50
FITS = 20
IN_FLIGHT = 4
SCRIPT = [{"text": "", "tool_calls": [call("calculator", {"expression": "6*7"})]}, {"text": "42"}]


def gap_free(run_id: Any) -> bool:
    seqs = list(
        RunEvent.objects.filter(run_id=run_id).order_by("seq").values_list("seq", flat=True)
    )
    return (
        seqs == list(range(1, len(seqs) + 1))
        and seqs[-1] == Run.objects.get(pk=run_id).last_event_seq
    )


def settled(ids: list[Any]) -> bool:
    """Every run finished or waits for the budget, none running or due."""
    runs = Run.objects.filter(pk__in=ids)
    busy = runs.exclude(status="done").exclude(status="waiting", status_reason="budget", due=False)
    return not busy.exclude(lease_owner="", status="waiting").exists() and not busy.exists()


def spent(ids: list[Any]) -> int:
    total = Run.objects.filter(pk__in=ids).aggregate(t=Sum(F("input_tokens") + F("output_tokens")))
    return int(total["t"] or 0)


def test_a_team_budget_holds_runs_at_its_limit_and_lets_them_go(
    service_env: dict[str, str], processes: Any
) -> None:
    service_env["AWAKEN_RUNS_IN_FLIGHT"] = str(IN_FLIGHT)  # per worker process
    agent = scripted_agent(SCRIPT, tools=["calculator"])
    # what one run spends (its two steps), measured the same way the budget counts
    processes("worker", name="w1", concurrency=4)
    processes("worker", name="w2", concurrency=4)
    processes("beat")
    probe = run_start(agent=agent, messages="question 00")
    wait_for(lambda: Run.objects.filter(pk=probe.pk, status="done").exists(), 60, "probe run")
    per_run = spent([probe.pk])
    limit = per_run * (FITS + 1)  # the probe, then about FITS more
    budget = budget_create(actor=ADMIN, team=agent.team, period="day", token_limit=limit)
    time.sleep(1.5)  # every worker sees it (AWAKEN_BUDGET_CACHE_SECONDS)
    ids = [run_start(agent=agent, messages=f"question {i:02}").pk for i in range(RUNS)]
    wait_for(lambda: settled(ids), 180, "the runs to finish or wait for the budget")
    done = Run.objects.filter(pk__in=ids, status="done").count()
    held = Run.objects.filter(pk__in=ids, status="waiting", status_reason="budget").count()
    assert done + held == RUNS
    assert FITS // 2 <= done <= RUNS - 10, (done, held)
    # the gate reads committed spend: at most one step per run in flight beyond the limit
    # (IN_FLIGHT per worker, two workers), a step costing less than a run's tokens
    total = spent([probe.pk, *ids])
    assert total <= limit + 2 * IN_FLIGHT * per_run, (total, limit, per_run)
    # a held run called no model for the step it waits before
    never = Run.objects.filter(pk__in=ids, status="waiting", steps=0)
    assert not never.filter(input_tokens__gt=0).exists()

    # an admin raises the limit: every held run goes on and finishes
    budget_update(actor=ADMIN, budget=budget, token_limit=limit * 100)
    wait_for(
        lambda: Run.objects.filter(pk__in=ids, status="done").count() == RUNS,
        180,
        "the held runs to finish after the raise",
    )
    for run_id in ids:
        assert gap_free(run_id)
    assert set(Run.objects.filter(pk__in=ids).values_list("status_reason", flat=True)) == {
        "natural"
    }


def test_a_new_period_lets_held_runs_go(processes: Any) -> None:
    agent = scripted_agent(SCRIPT, tools=["calculator"])
    processes("worker", name="w1", concurrency=4)
    processes("beat")
    probe = run_start(agent=agent, messages="question 00")
    wait_for(lambda: Run.objects.filter(pk=probe.pk, status="done").exists(), 60, "probe run")
    budget_create(actor=ADMIN, team=agent.team, period="day", token_limit=1)  # spent
    time.sleep(1.5)  # every worker sees it (AWAKEN_BUDGET_CACHE_SECONDS)
    ids = [run_start(agent=agent, messages=f"question {i:02}").pk for i in range(5)]
    wait_for(
        lambda: Run.objects.filter(pk__in=ids, status_reason="budget", due=False).count() == 5,
        60,
        "the runs to wait for the budget",
    )
    # midnight for the spend: today's runs now belong to yesterday, today spent nothing;
    # the sweep (beat) lets them go by itself
    everything = [probe.pk, *ids]
    Run.objects.filter(pk__in=everything).update(created_at=F("created_at") - dt.timedelta(days=1))
    wait_for(
        lambda: Run.objects.filter(pk__in=ids, status="done").count() == 5,
        60,
        "the sweep to let them go in the new period",
    )
    for run_id in ids:
        assert gap_free(run_id)
