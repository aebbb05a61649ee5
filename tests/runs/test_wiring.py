"""What the run core calls without importing the apps above it (runs.services.declared):
the sweep's steps, the wrappers of a run's tools, the embedded worker's parts and the
database gauges are the settings' lists, called in their order; the apps' Celery tasks
are known by the names beat and the routes send."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from celery import current_app
from django.conf import settings as django_settings
from django.utils import timezone

from runs import metrics
from runs.embedded import EmbeddedWorker
from runs.models import Run
from runs.services.execution import run_tool_wrapper, runs_sweep

HERE = "tests.runs.test_wiring"
CALLS: list[Any] = []


@pytest.fixture(autouse=True)
def _calls() -> Iterator[None]:
    CALLS.clear()
    yield
    CALLS.clear()


# --- the sweep --------------------------------------------------------------------------------


def step_a(now: dt.datetime) -> dict[str, int]:
    CALLS.append(("a", now))
    return {"a": 1}


def step_b(now: dt.datetime) -> dict[str, int]:
    CALLS.append(("b", now))
    return {"b": 2}


def test_the_sweep_runs_its_declared_steps_in_order_with_one_time(settings):
    now = timezone.now()
    settings.AWAKEN_SWEEP_STEPS = [f"{HERE}.step_b", f"{HERE}.step_a"]
    assert runs_sweep(now=now) == {"b": 2, "a": 1}
    assert [("b", now), ("a", now)] == CALLS


@pytest.mark.django_db
def test_the_declared_sweep_counts_every_apps_work():
    counts = runs_sweep()
    assert set(counts) >= {
        "expired_tickets",  # decisions
        "warned_tickets",
        "recovered",  # the core
        "given_up",
        "redispatched",
        "inputs_started",
        "replays_repaired",  # replays
        "background_redispatched",
    }
    assert set(counts.values()) == {0}


# --- a run's tools ----------------------------------------------------------------------------


def wrap_a(run: Run) -> Any:
    return lambda tool: ("a", tool)


def wrap_b(run: Run) -> Any:
    return lambda tool: ("b", tool)


def wrap_nothing(run: Run) -> Any:
    return None


def test_a_runs_tools_get_the_declared_wrappers_in_order(settings):
    run = Run(run_mode="foreground")
    settings.AWAKEN_RUN_TOOL_WRAPPERS = [f"{HERE}.wrap_a", f"{HERE}.wrap_nothing", f"{HERE}.wrap_b"]
    wrapper = run_tool_wrapper(run)
    assert wrapper is not None and wrapper("t") == ("b", ("a", "t"))
    settings.AWAKEN_RUN_TOOL_WRAPPERS = [f"{HERE}.wrap_nothing"]
    assert run_tool_wrapper(run) is None


def test_by_default_only_a_replay_wraps_its_tools():
    assert run_tool_wrapper(Run(run_mode="foreground")) is None
    assert django_settings.AWAKEN_RUN_TOOL_WRAPPERS == [
        "runs.replays.services.replay_tools.replay_tool_wrapper"
    ]


# --- the embedded worker's parts --------------------------------------------------------------


@contextmanager
def part_one(stop: threading.Event) -> Iterator[None]:
    CALLS.append("one started")
    yield
    CALLS.append(("one stopped", stop.is_set()))


@contextmanager
def part_two(stop: threading.Event) -> Iterator[None]:
    CALLS.append("two started")
    yield
    CALLS.append(("two stopped", stop.is_set()))


def part_broken(stop: threading.Event) -> Any:
    raise RuntimeError("cannot start")


def test_a_part_that_cannot_start_stops_the_ones_started(settings):
    settings.AWAKEN_EMBEDDED_PARTS = [f"{HERE}.part_one", f"{HERE}.part_broken", f"{HERE}.part_two"]
    worker = EmbeddedWorker(1)
    with pytest.raises(RuntimeError, match="cannot start"):
        worker.start()
    assert CALLS == ["one started", ("one stopped", True)]


@pytest.mark.slow  # starts a Celery worker in this process
@pytest.mark.usefixtures("empty_broker")
def test_the_parts_start_in_order_and_stop_after_the_worker_in_reverse(settings):
    settings.AWAKEN_EMBEDDED_PARTS = [f"{HERE}.part_one", f"{HERE}.part_two"]
    worker = EmbeddedWorker(1)
    worker.start()
    assert CALLS == ["one started", "two started"]
    worker.stop()
    assert CALLS[2:] == [("two stopped", True), ("one stopped", True)]


# --- the database gauges ----------------------------------------------------------------------


@pytest.mark.django_db
def test_the_database_gauges_are_the_declared_ones(settings):
    settings.AWAKEN_METRICS_CACHE_SECONDS = 0
    names = [family.name for family in metrics.database_gauges.collect()]
    assert names == [
        "awaken_tickets_open",
        "awaken_runs_due_unclaimed",
        "awaken_notifications_retrying",  # runs.operations.metrics
        "awaken_notification_circuits_open",
        "awaken_budget_spend_tokens",  # runs.operations.metrics.budget_gauges
        "awaken_budget_spend_usd",
        "awaken_budget_used_ratio",
        "awaken_runs_waiting_budget",
    ]
    settings.AWAKEN_METRICS_DATABASE_GAUGES = ["runs.metrics.run_gauges"]
    names = [family.name for family in metrics.database_gauges.collect()]
    assert names == ["awaken_tickets_open", "awaken_runs_due_unclaimed"]


# --- the tasks --------------------------------------------------------------------------------


def test_every_task_beat_sends_or_a_route_names_is_registered():
    names = {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}
    names |= set(django_settings.CELERY_TASK_ROUTES)
    assert "runs.deliver_notifications" in names and "runs.prune_old_runs" in names
    assert names <= set(current_app.tasks)
    for name in ("runs.deliver_notifications", "runs.fire_schedules", "runs.prune_old_runs"):
        assert current_app.tasks[name].__module__ == "runs.operations.tasks"
