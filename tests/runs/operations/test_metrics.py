"""Prometheus metrics (runs.metrics, docs/metrics.md): series move as runs finish and
tickets are decided, /metrics wants its token, database gauges cost a bounded number of
queries. Works in both modes: one registry (embedded) or the multiprocess directory."""

from __future__ import annotations

import os
import urllib.request
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from asgiref.sync import async_to_sync
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test.utils import CaptureQueriesContext

from common.audit import Actor
from runs import metrics
from runs.models import Run, Ticket
from runs.services.execution import run_fail
from runs.services.leases import run_claim
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import (
    APPROVAL,
    AgentFactory,
    ModelFactory,
    call,
    note_call,
    view_only_user,
)
from tests.runs.helpers import drive, events, expire_lease

pytestmark = pytest.mark.django_db

TOKEN = "scrape-me-" + "x" * 20


@pytest.fixture(autouse=True)
def _fresh_metric_caches(settings):
    settings.AWAKEN_METRICS_TOKEN = TOKEN
    settings.AWAKEN_METRICS_PUBLIC = False
    metrics.agent_slug.cache_clear()
    metrics.database_gauges.forget()


def value(name: str, **labels: str) -> float:
    """The current value of one sample, as a scrape would sum it (0 when absent)."""
    found = metrics.process_registry().get_sample_value(name, labels)
    return found or 0.0


def unique_agent(script, **kwargs):
    """An agent and a model no other test (or process sharing the multiprocess
    directory) has used: its series start at zero."""
    tag = uuid.uuid4().hex[:10]
    model = ModelFactory(slug=f"metrics-model-{tag}", script=script)
    return AgentFactory(model=model, slug=f"metrics-{tag}", **kwargs)


def finish(run: Run, capture) -> Run:
    with capture(execute=True):
        return drive(run)


def test_a_finished_run_moves_runs_steps_inference_and_tool_series(
    django_capture_on_commit_callbacks,
):
    agent = unique_agent(
        [{"text": "", "tool_calls": [call("calculator", {"expression": "6*7"})]}, {"text": "42"}]
    )
    slug = agent.slug
    run = run_start(agent=agent, messages="what is six times seven")
    before_tool = value("awaken_tool_calls_total", tool="calculator", outcome="succeeded")
    before_tool_time = value("awaken_tool_call_duration_seconds_count", tool="calculator")
    run = finish(run, django_capture_on_commit_callbacks)
    assert (run.status, run.status_reason) == ("done", "natural")
    model = events(run, "inference_complete")[0]["model"]
    assert value("awaken_runs_started_total", agent=slug) == 1
    assert value("awaken_runs_finished_total", agent=slug, outcome="completed") == 1
    assert value("awaken_run_duration_seconds_count", agent=slug, outcome="completed") == 1
    assert value("awaken_step_duration_seconds_count", agent=slug) == 2
    assert value("awaken_inference_duration_seconds_count", model=model) == 2
    assert value("awaken_inference_tokens_total", model=model, kind="input") > 0
    assert value("awaken_inference_tokens_total", model=model, kind="output") > 0
    assert (
        value("awaken_tool_calls_total", tool="calculator", outcome="succeeded") == before_tool + 1
    )
    assert (
        value("awaken_tool_call_duration_seconds_count", tool="calculator") == before_tool_time + 1
    )


def test_a_failing_tool_call_counts_as_a_failure_of_that_tool(django_capture_on_commit_callbacks):
    tool = f"no_such_tool_{uuid.uuid4().hex[:6]}"
    agent = unique_agent([{"text": "", "tool_calls": [call(tool, {})]}, {"text": "sorry"}])
    finish(run_start(agent=agent, messages="go"), django_capture_on_commit_callbacks)
    assert value("awaken_tool_calls_total", tool=tool, outcome="failed") == 1
    assert value("awaken_tool_call_failures_total", tool=tool) == 1


def test_deciding_a_ticket_observes_its_wait_and_the_run_then_finishes(
    django_capture_on_commit_callbacks,
):
    agent = unique_agent(
        [{"text": "noting", "tool_calls": [note_call("lunch")]}, {"text": "all done"}],
        permission=APPROVAL,
    )
    run = finish(
        run_start(agent=agent, messages="write it down"), django_capture_on_commit_callbacks
    )
    assert run.status == Run.Status.WAITING
    assert value("awaken_tool_calls_total", tool="write_note", outcome="suspended") >= 1
    assert value("awaken_runs_finished_total", agent=agent.slug, outcome="completed") == 0
    wait = {"agent": agent.slug, "tool": "write_note", "action": "approve"}
    assert value("awaken_ticket_wait_seconds_count", **wait) == 0
    ticket = Ticket.objects.get(run=run, status=Ticket.Status.PENDING)
    with django_capture_on_commit_callbacks(execute=True):
        decision_submit(ticket=ticket, action="approve", actor=Actor(label="tester"))
    assert value("awaken_ticket_wait_seconds_count", **wait) == 1
    assert value("awaken_ticket_wait_seconds_sum", **wait) >= 0
    run = finish(run, django_capture_on_commit_callbacks)
    assert run.status_reason == "natural"
    assert value("awaken_runs_finished_total", agent=agent.slug, outcome="completed") == 1
    assert value("awaken_runs_started_total", agent=agent.slug) == 1  # resuming is no start


def test_a_run_failed_by_the_worker_counts_as_failed(django_capture_on_commit_callbacks):
    agent = unique_agent([{"text": "never"}])
    run = run_start(agent=agent, messages="go")
    with django_capture_on_commit_callbacks(execute=True):
        assert run_fail(run_id=run.pk, attempt=None, message="boom")
    assert value("awaken_runs_finished_total", agent=agent.slug, outcome="failed") == 1


def test_cancelling_a_run_nobody_executes_counts_as_cancelled(
    django_capture_on_commit_callbacks,
):
    agent = unique_agent([{"text": "never"}])
    run = run_start(agent=agent, messages="go")
    with django_capture_on_commit_callbacks(execute=True):
        run = run_cancel(run=run, actor=Actor(label="tester"))
    assert (run.status, run.status_reason) == (Run.Status.DONE, "cancelled")
    assert value("awaken_runs_finished_total", agent=agent.slug, outcome="cancelled") == 1
    assert value("awaken_run_duration_seconds_count", agent=agent.slug, outcome="cancelled") == 1
    assert value("awaken_runs_finished_total", agent=agent.slug, outcome="failed") == 0


def test_work_rolled_back_is_not_counted(django_capture_on_commit_callbacks):
    agent = unique_agent([{"text": "hi"}])
    run = drive(run_start(agent=agent, messages="go"))  # on-commit callbacks dropped
    assert run.status == Run.Status.DONE
    assert value("awaken_runs_finished_total", agent=agent.slug, outcome="completed") == 0


# --- /metrics --------------------------------------------------------------------------------


def test_metrics_want_the_token(client):
    assert client.get("/metrics").status_code == 401
    wrong = client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401 and wrong["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]
    body = response.content.decode()
    for name in ("awaken_runs_due_unclaimed", "awaken_notifications_retrying"):
        assert f"\n{name} " in body or body.startswith(f"{name} ")
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


def test_without_a_token_metrics_are_off_unless_public(client, settings):
    settings.AWAKEN_METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer anything").status_code == 404
    settings.AWAKEN_METRICS_PUBLIC = True
    assert client.get("/metrics").status_code == 200


def test_a_scrape_shows_the_series_of_a_finished_run(client, django_capture_on_commit_callbacks):
    agent = unique_agent([{"text": "hi"}])
    finish(run_start(agent=agent, messages="go"), django_capture_on_commit_callbacks)
    body = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    assert f'awaken_runs_finished_total{{agent="{agent.slug}",outcome="completed"}} 1.0' in body
    assert f'awaken_runs_started_total{{agent="{agent.slug}"}} 1.0' in body


# --- database gauges ----------------------------------------------------------------------------


def test_database_gauges_cost_four_queries_and_are_cached(settings):
    settings.AWAKEN_METRICS_CACHE_SECONDS = 60
    first = unique_agent(
        [{"text": "noting", "tool_calls": [note_call("a")]}, {"text": "done"}],
        permission=APPROVAL,
    )
    second = unique_agent(
        [
            {"text": "noting", "tool_calls": [note_call("b"), note_call("c")]},
            {"text": "done"},
        ],
        permission=APPROVAL,
    )
    drive(run_start(agent=first, messages="go"))
    drive(run_start(agent=second, messages="go"))
    due = Run.objects.filter(agent=first).count()
    run_start(agent=unique_agent([{"text": "later"}]), messages="queued")  # due, unclaimed
    for _ in range(20):  # more open tickets do not mean more queries
        Ticket.objects.filter(status=Ticket.Status.PENDING).count()
    with CaptureQueriesContext(connection) as queries:
        scraped = value("awaken_tickets_open", agent=second.slug, tool="write_note")
        opened = _gauges()
    # 4, and the budgets' read (none: no spend nor held-runs query; docs/budgets.md)
    assert len(queries.captured_queries) == 5, [q["sql"] for q in queries.captured_queries]
    assert scraped == 0  # the process registry has no database gauges
    assert opened[("awaken_tickets_open", (first.slug, "write_note"))] == 1
    assert opened[("awaken_tickets_open", (second.slug, "write_note"))] == 2
    assert opened[("awaken_runs_due_unclaimed", ())] >= due
    with CaptureQueriesContext(connection) as again:
        assert _gauges() == opened
    assert again.captured_queries == []  # cached for AWAKEN_METRICS_CACHE_SECONDS


def _gauges() -> dict[tuple[str, tuple[str, ...]], float]:
    found = {}
    for family in metrics.database_gauges.collect():
        for sample in family.samples:
            found[(sample.name, tuple(sample.labels.values()))] = sample.value
    return found


# --- notifications, websockets, dead processes ----------------------------------------------------


def test_notification_attempts_are_counted_by_result():
    kind = f"kind{uuid.uuid4().hex[:6]}"
    row = SimpleNamespace(channel_id=1, channel=SimpleNamespace(kind=kind))
    outcomes = iter(
        [
            SimpleNamespace(ok=True, permanent=False),
            SimpleNamespace(ok=False, permanent=False),
            SimpleNamespace(ok=False, permanent=True),
        ]
    )
    send = metrics.counts_attempts(lambda _row: next(outcomes))
    for _ in range(3):
        send(row)
    with pytest.raises(StopIteration):
        send(row)
    assert value("awaken_notification_attempts_total", kind=kind, result="delivered") == 1
    assert value("awaken_notification_attempts_total", kind=kind, result="failed") == 2
    assert value("awaken_notification_attempts_total", kind=kind, result="failed_permanently") == 1
    assert value("awaken_notification_failures_total", kind=kind) == 3


@pytest.mark.django_db(transaction=True)
def test_websocket_clients_are_counted_while_connected():
    from runs.routing import websocket_urlpatterns

    user = view_only_user()
    start = value("awaken_websocket_clients", kind="dashboard")

    async def scenario():
        communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/dashboard/")
        communicator.scope["user"] = user
        connected, _ = await communicator.connect()
        assert connected
        assert (await communicator.receive_json_from(timeout=2))["type"] == "ready"
        assert value("awaken_websocket_clients", kind="dashboard") == start + 1
        await communicator.disconnect()

    async_to_sync(scenario)()
    assert value("awaken_websocket_clients", kind="dashboard") == start


def test_live_gauges_of_dead_processes_are_dropped_and_their_counters_kept(tmp_path: Path):
    dead_pid = 4_194_999  # above Linux's largest pid
    live = tmp_path / f"gauge_livesum_{dead_pid}.db"
    counter = tmp_path / f"counter_{dead_pid}.db"
    mine = tmp_path / f"gauge_livesum_{os.getpid()}.db"
    for path in (live, counter, mine):
        path.write_bytes(b"")
    assert metrics.forget_dead_processes(str(tmp_path)) == 1
    assert not live.exists() and counter.exists() and mine.exists()


def test_the_worker_listener_serves_the_process_series_without_database_gauges():
    from tests.processes import free_port

    kind = f"kind{uuid.uuid4().hex[:6]}"
    metrics.NOTIFICATION_FAILURES.labels(kind).inc()
    port = free_port()
    server = metrics.serve_worker_metrics(f"127.0.0.1:{port}")
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            body = response.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert f'awaken_notification_failures_total{{kind="{kind}"}} 1.0' in body
    assert "awaken_runs_due_unclaimed" not in body
    with pytest.raises(ImproperlyConfigured):
        metrics.serve_worker_metrics("no-port")


def test_a_redelivered_task_taking_a_dead_workers_run_counts_as_a_recovery(
    django_capture_on_commit_callbacks,
):
    run = run_start(agent=unique_agent([{"text": "hi"}]), messages="go")
    before = value("awaken_lease_recoveries_total", reason="redelivered")
    assert run_claim(run_id=run.pk, worker="dead") is not None
    expire_lease(run)
    with django_capture_on_commit_callbacks(execute=True):  # counted once it commits
        taken = run_claim(run_id=run.pk, worker="alive")
    assert taken is not None and taken.recoveries == 1
    assert value("awaken_lease_recoveries_total", reason="redelivered") == before + 1
