"""A transaction that PostgreSQL ends for a lock conflict runs again, whole
(runs.services.locks.retry_lock_conflicts). What the database does not roll back (the
Prometheus series, broadcasts, task sends) happens once the transaction commits, so a
retried cancel, decision or claim moves each series once, not once per attempt.

The first attempt is ended here by the error PostgreSQL's driver raises for a deadlock
(an OperationalError whose cause has SQLSTATE 40P01), raised after the side effect; both
lanes run it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import OperationalError, connection

from common.audit import Actor
from runs import metrics
from runs.models import Run, Ticket
from runs.services import end_effects, events, execution
from runs.services.execution import run_advance
from runs.services.leases import run_claim
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import APPROVAL, AgentFactory, ModelFactory, note_call
from tests.runs.helpers import drive, expire_lease

pytestmark = pytest.mark.django_db(transaction=True)  # the commits happen: on_commit runs


class _Deadlock(Exception):
    sqlstate = "40P01"


def deadlock() -> OperationalError:
    error = OperationalError("deadlock detected")
    error.__cause__ = _Deadlock("deadlock detected")
    return error


@pytest.fixture
def fail_once(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., list[int]]]:
    """Replace `module.name` by a call that raises a deadlock the first time, before the
    real one runs (or, `after`, once it has run: the commit failing); the real one alone
    from the second call. The list counts the calls."""

    def install(module: Any, name: str, *, after: bool = False) -> list[int]:
        real = getattr(module, name)
        calls: list[int] = []

        def first_one_deadlocks(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            if len(calls) > 1:
                return real(*args, **kwargs)
            if after:
                real(*args, **kwargs)
            raise deadlock()

        monkeypatch.setattr(module, name, first_one_deadlocks)
        return calls

    yield install


def value(name: str, **labels: str) -> float:
    return metrics.process_registry().get_sample_value(name, labels) or 0.0


def fresh_agent(name: str, script: list[dict[str, Any]], **kwargs: Any) -> Any:
    """An agent and a model no other test (or earlier session sharing the metrics
    directory) has used: their series start at zero."""
    metrics.agent_slug.cache_clear()
    tag = f"{name}-{uuid.uuid4().hex[:10]}"
    model = ModelFactory(slug=f"retried-model-{tag}", script=script)
    return AgentFactory(model=model, slug=f"retried-{tag}", **kwargs)


def test_a_retried_cancel_counts_the_run_once(
    fail_once: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = fresh_agent("cancel", [{"text": "hi"}])
    run = run_start(agent=agent, messages="go")  # nobody executes it: the cancel ends it
    # after the run ended in this attempt (its series moved, its events appended)
    calls = fail_once(end_effects, "thread_deliver_next")
    broadcast: list[list[str]] = []
    real_broadcast = events.broadcast_events

    def recorded(run_id: Any, frames: list[dict[str, Any]], summary: dict[str, Any]) -> None:
        broadcast.append([frame["event_type"] for frame in frames])
        real_broadcast(run_id, frames, summary)

    monkeypatch.setattr(events, "broadcast_events", recorded)
    run = run_cancel(run=run, actor=Actor(label="tester"))
    assert len(calls) == 2  # the first attempt was ended and ran again
    assert len(broadcast) == 1, broadcast  # its end events, sent once
    assert (run.status, run.status_reason) == (Run.Status.DONE, "cancelled")
    assert value("awaken_runs_finished_total", agent=agent.slug, outcome="cancelled") == 1
    assert value("awaken_run_duration_seconds_count", agent=agent.slug, outcome="cancelled") == 1


def test_a_retried_decision_observes_the_wait_once(fail_once: Any) -> None:
    agent = fresh_agent(
        "decide",
        [{"text": "", "tool_calls": [note_call("n")]}, {"text": "ok"}],
        permission=APPROVAL,
    )
    run = drive(run_start(agent=agent, messages="write it down"))
    ticket = Ticket.objects.get(run=run, status=Ticket.Status.PENDING)
    calls = fail_once(metrics, "ticket_decided", after=True)  # its last statement
    decision_submit(ticket=ticket, action="approve")
    assert len(calls) == 2
    labels = {"agent": agent.slug, "tool": ticket.tool_name, "action": "approve"}
    assert value("awaken_ticket_wait_seconds_count", **labels) == 1


def test_a_retried_claim_counts_the_recovery_once(fail_once: Any) -> None:
    """A redelivered task takes a dead worker's run (a recovery); its claim's transaction
    is ended after the claim and runs again: one recovery counted."""
    agent = fresh_agent("claim", [{"text": "hi"}])
    run = run_start(agent=agent, messages="go")
    assert run_claim(run_id=run.pk, worker="dead") is not None
    expire_lease(run)
    before = value("awaken_lease_recoveries_total", reason="redelivered")
    calls = fail_once(execution, "Segment")  # loading the claimed run's segment
    assert run_advance(run_id=run.pk, worker="alive") == "completed"
    assert len(calls) == 2
    assert Run.objects.get(pk=run.pk).recoveries == 1
    assert value("awaken_lease_recoveries_total", reason="redelivered") == before + 1


def test_a_recovery_is_counted_with_the_database_away(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that lost the database mid-segment counts the recovery outside any
    transaction: counting does not need the connection back."""
    before = value("awaken_lease_recoveries_total", reason="database_lost")
    connection.close()
    try:
        if connection.vendor == "postgresql":
            monkeypatch.setitem(connection.settings_dict, "PORT", "1")  # nobody listens
        else:
            monkeypatch.setitem(connection.settings_dict, "NAME", "/nonexistent/awaken/db")
        with pytest.raises(OperationalError):
            connection.ensure_connection()
        metrics.lease_recovered("database_lost")
    finally:  # the database back before the test's own teardown flushes it
        monkeypatch.undo()
        connection.close()
    assert value("awaken_lease_recoveries_total", reason="database_lost") == before + 1
