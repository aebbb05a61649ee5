"""The dashboard's counters: kept by the transactions that change runs and tickets, equal
to a recount from the rows, and read by the dashboard instead of scans."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from common.audit import Actor
from runs.models import HourlyStat, Run, Ticket
from runs.operations.selectors.dashboard import dashboard
from runs.services import stats
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import call, scripted_agent
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db


def counters() -> dict[tuple[Any, int, str], int]:
    return {
        (row.hour, row.agent_id, row.metric): row.count
        for row in HourlyStat.objects.exclude(count=0)
    }


def asking_agent():
    script = [{"text": "", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]}]
    return scripted_agent([*script, {"text": "ok"}], permission={"default_behavior": "ask"})


def test_a_run_counts_open_then_under_its_outcome_and_in_the_all_time_total():
    agent = scripted_agent([{"text": "hello"}])
    run = run_start(agent=agent, messages="hi")
    hour = stats.hour_of(run.created_at)
    assert counters() == {
        (hour, agent.pk, "run:open"): 1,
        (stats.ALL_TIME, agent.pk, "run:open"): 1,
    }
    drive(run)
    assert counters() == {
        (hour, agent.pk, "run:completed"): 1,
        (stats.ALL_TIME, agent.pk, "run:completed"): 1,
    }
    dash = dashboard()
    assert dash.by_status["done"] == 1
    assert sum(h["total"] for h in dash.hourly) == 1


def test_tickets_keep_the_runs_open_ticket_count_and_closed_ones_count_their_wait():
    agent = asking_agent()
    run = drive(run_start(agent=agent, messages="please"))
    run.refresh_from_db()
    assert run.status == Run.Status.WAITING and run.open_tickets == 1
    ticket = Ticket.objects.get(run=run)
    assert ticket.agent_id == agent.pk
    decision_submit(ticket=ticket, action="approve", actor=Actor(label="bob"))
    run.refresh_from_db()
    assert run.open_tickets == 0
    assert HourlyStat.objects.get(metric="wait:0").count == 1  # decided within a minute
    dash = dashboard()
    assert dash.wait_buckets[0]["count"] == 1 and dash.pending_tickets == 0


def test_cancelling_closes_tickets_and_counts_the_run_cancelled():
    agent = asking_agent()
    run = drive(run_start(agent=agent, messages="please"))
    run_cancel(run=Run.objects.get(pk=run.pk))
    run.refresh_from_db()
    assert run.open_tickets == 0
    found = counters()
    assert found[(stats.ALL_TIME, agent.pk, "run:cancelled")] == 1
    assert (stats.ALL_TIME, agent.pk, "run:open") not in found
    assert HourlyStat.objects.get(metric="wait:0").count == 1


def test_rebuild_recounts_what_the_transactions_kept():
    asking = asking_agent()
    plain = scripted_agent([{"text": "hello"}])
    waiting = drive(run_start(agent=asking, messages="one"))
    decided = drive(run_start(agent=asking, messages="two"))
    decision_submit(ticket=Ticket.objects.get(run=decided), action="reject")
    drive(Run.objects.get(pk=decided.pk))
    drive(run_start(agent=plain, messages="three"))
    run_start(agent=plain, messages="four")
    kept = counters()
    Run.objects.update(open_tickets=7)
    HourlyStat.objects.all().delete()
    stats.rebuild()
    assert counters() == kept
    assert Run.objects.get(pk=waiting.pk).open_tickets == 1
    assert Run.objects.filter(open_tickets=0).count() == 3


def test_removing_runs_takes_them_out_of_the_counters():
    agent = scripted_agent([{"text": "hello"}])
    runs = [drive(run_start(agent=agent, messages=f"m{i}")) for i in range(3)]
    stats.apply(stats.removal([runs[0].pk, runs[1].pk]))
    assert counters()[(stats.ALL_TIME, agent.pk, "run:completed")] == 1


def test_open_dashboards_share_one_computation(viewer_client, settings):
    settings.AWAKEN_DASHBOARD_CACHE_SECONDS = 60
    url = reverse("runs:dashboard-stats")
    viewer_client.get(url)
    with CaptureQueriesContext(connection) as queries:
        assert viewer_client.get(url).status_code == 200
    figures = [q["sql"] for q in queries.captured_queries if "runs_" in q["sql"]]
    assert figures == []  # only the session and user lookups
