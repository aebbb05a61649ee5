"""The run page's trace tab on runs the worker really played: a delegating run whose child
waited on a ticket (the child nested under the parent's call, the totals equal to the
run's usage), the steps shown and "show more", escaping, queries that do not grow with
the run, and who may see it."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agents.models import Model
from runs.models import Run, Ticket
from runs.selectors.trace_load import run_trace
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import call, publish, scripted_agent, team_member, user_with_role
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

XSS = "<img src=x onerror=alert(1)>"


def delegating_run() -> tuple[Run, Run]:
    child_agent = scripted_agent(
        [
            {"text": "", "tool_calls": [call("write_note", {"title": XSS, "body": "b"})]},
            {"text": "noted"},
        ],
        slug="scribe",
        permission={"default_behavior": "ask"},
    )
    parent_agent = scripted_agent(
        [
            {"text": "", "tool_calls": [call("agent_run_scribe", {"prompt": "note it"})]},
            {"text": "boss done"},
        ],
        tools=[],
    )
    Model.objects.update(input_price_per_million_usd=3, output_price_per_million_usd=15)
    parent_agent.delegates.add(child_agent)
    publish(parent_agent)
    publish(child_agent)
    parent = drive(run_start(agent=parent_agent, messages="go"))
    child = Run.objects.get(parent_run=parent)
    decision_submit(ticket=Ticket.objects.get(run=child), action="approve")
    drive(child)
    return drive(parent), Run.objects.get(pk=child.pk)


def test_the_trace_nests_the_child_run_and_its_totals_equal_the_runs_usage():
    parent, child = delegating_run()
    assert parent.status_reason == "natural" and parent.input_tokens > 0
    trace = run_trace(parent.pk)
    assert trace is not None
    assert (trace.input_tokens, trace.output_tokens) == (parent.input_tokens, parent.output_tokens)
    assert trace.recorded is None
    call_span = trace.calls[child.parent_tool_call_id]
    nested = [span for span in call_span.children if span.kind == "child"]
    assert len(nested) == 1 and nested[0].run_id == str(child.pk)
    assert (nested[0].input_tokens, nested[0].output_tokens) == (
        child.input_tokens,
        child.output_tokens,
    )
    # the child's own ticket, decided by a person, waits inside the child's spans
    child_tool = nested[0].children[0].children[0].children[1]
    assert child_tool.name == "write_note"
    assert child_tool.children[0].kind == "ticket"
    assert child_tool.children[0].note.startswith("Approved")
    assert trace.steps == parent.steps and trace.activations == 2


def test_the_trace_partial_shows_spans_totals_and_escaped_payloads(client):
    parent, child = delegating_run()
    client.force_login(user_with_role("viewer"))
    page = client.get(reverse("runs:run-detail", args=[parent.pk])).content.decode()
    assert 'id="tab-trace"' in page and reverse("runs:run-trace", args=[parent.pk]) in page
    response = client.get(reverse("runs:run-trace", args=[parent.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert f'data-input-tokens="{parent.input_tokens}"' in html
    assert f'data-output-tokens="{parent.output_tokens}"' in html
    assert "Child run" in html and reverse("runs:run-detail", args=[child.pk]) in html
    assert "Waiting for the child run" in html and "Waiting for a decision" in html
    ids = re.findall(r'id="span-([^"]+)"', html)
    assert len(ids) == len(set(ids)) > 8
    assert all(f'href="#span-{key}"' in html for key in ids)
    assert " style=" not in html and "<script" not in html
    # a span's events load when opened: the child's call, its arguments escaped
    events_url = reverse("runs:run-trace-events", args=[child.pk])
    found = re.search(rf'data-events-url="({re.escape(events_url)}\?[^"]+)"', html)
    assert found, "no events link for the child's spans"
    urls = re.findall(rf'data-events-url="({re.escape(events_url)}\?[^"]+)"', html)
    bodies = [client.get(url.replace("&amp;", "&")).content.decode() for url in urls]
    shown = "".join(bodies)
    assert "tool_call_ready" in shown and "&quot;write_note&quot;" in shown
    assert XSS not in shown and "&lt;img src=x onerror=alert(1)&gt;" in shown


def test_a_long_run_shows_its_first_steps_and_more_on_request(client):
    script = [
        {"text": "", "tool_calls": [call("write_note", {"title": f"n{i}", "body": "b"})]}
        for i in range(7)
    ]
    agent = scripted_agent([*script, {"text": "done"}], tools=["write_note"], max_rounds=50)
    run = drive(run_start(agent=agent, messages="go"), limit=30)
    assert run.steps == 8
    client.force_login(user_with_role("viewer"))
    url = reverse("runs:run-trace", args=[run.pk])
    html = client.get(url, {"steps": "3"}).content.decode()
    assert html.count('class="span k-step') == 3
    assert "Showing the first 3 of 8 steps." in html
    assert f"{url}?steps=53" in html
    # a log longer than the steps shown is read up to them; its totals are the run's
    assert f'data-input-tokens="{run.input_tokens}"' in html
    with CaptureQueriesContext(connection) as few:
        client.get(url, {"steps": "2"})
    with CaptureQueriesContext(connection) as more:
        assert client.get(url, {"steps": "3"}).content.decode().count('class="span k-step') == 3
    with CaptureQueriesContext(connection) as all_steps:
        full = client.get(url, {"steps": "100"}).content.decode()
    assert full.count('class="span k-step') == 8 and "Showing the first" not in full
    assert f'data-input-tokens="{run.input_tokens}"' in full
    assert len(few) == len(more) == len(all_steps)  # short or long, the same queries


def test_another_teams_run_is_not_found(client):
    agent = scripted_agent([{"text": "hi"}])
    run = drive(run_start(agent=agent, messages="go"))
    client.force_login(team_member("operator", "elsewhere"))
    assert client.get(reverse("runs:run-trace", args=[run.pk])).status_code == 404
