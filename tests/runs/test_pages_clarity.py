"""Clearer pages (docs/teamwork.md, "Safer keys and clearer pages"): the inbox shows the
user request behind each ticket and a child run's parent; the runs list says what a
waiting run waits on and links parents and children; the run header names the real
waiting reason; every time shows its absolute value on hover; the dashboard's failures
show their (escaped) error text and its charts have axes; the inbox exposes the undo
window of keyboard decisions."""

from __future__ import annotations

import datetime as dt
import html
import re
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agents.models import Agent
from runs.models import Run, Thread, Ticket
from runs.services.submission_flow import run_start
from runs.templatetags.runs_extras import short_age, short_id
from tests.factories import call, done_run, publish, scripted_agent, waiting_run
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

SCRIPT_TAG = "<script>alert(1)</script>"
HX = {"HTTP_HX_REQUEST": "true"}
ABSOLUTE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z+\-0-9]+"  # the title of a <time>


def delegating_runs() -> tuple[Run, Run]:
    """A parent run waiting on its child, which waits for approval of a note."""
    child_agent = scripted_agent(
        [{"text": "", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]}],
        slug="scribe",
        permission={"default_behavior": "ask"},
    )
    parent_agent = scripted_agent(
        [{"text": "", "tool_calls": [call("agent_run_scribe", {"prompt": "note the boss"})]}],
        tools=[],
    )
    parent_agent.delegates.add(child_agent)
    publish(parent_agent)
    parent = drive(run_start(agent=parent_agent, messages="go delegate"))
    child = Run.objects.get(parent_run=parent)
    assert (parent.status, child.status) == ("waiting", "waiting")
    return parent, child


def asking_human(question: str) -> Run:
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("ask_human", {"question": question})]}, {"text": "ok"}],
        tools=["ask_human"],
    )
    run = drive(run_start(agent=agent, messages="plan the offsite"))
    assert run.status == Run.Status.WAITING
    return run


def row_of(page: str, marker: str) -> str:
    """The <tr> of a table that contains `marker`."""
    found = re.search(r"<tr\b(?:(?!</tr>).)*?" + re.escape(marker) + r".*?</tr>", page, re.S)
    assert found, f"no row with {marker}"
    return found.group(0)


# --- the inbox ------------------------------------------------------------------------------


def test_the_inbox_shows_the_request_behind_each_ticket_escaped(operator_client):
    run = waiting_run()  # its user message: "write it down"
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("write_note", {"title": "x", "body": "y"})]}],
        permission={"default_behavior": "ask"},
    )
    thread = Thread.objects.create(title="continued")
    drive(
        run_start(agent=scripted_agent([{"text": "hi"}]), messages="the first ask", thread=thread)
    )
    later = drive(run_start(agent=agent, messages=f"the second ask {SCRIPT_TAG}", thread=thread))
    assert later.status == Run.Status.WAITING

    page = operator_client.get(reverse("runs:inbox")).content.decode()
    first = row_of(page, f'data-ticket-id="{Ticket.objects.get(run=run).pk}"')
    assert "request:" in first and "write it down" in first
    second = row_of(page, f'data-ticket-id="{Ticket.objects.get(run=later).pk}"')
    assert "the second ask &lt;script&gt;alert(1)&lt;/script&gt;" in second
    assert "the first ask" not in second  # the last user message before the ticket
    assert SCRIPT_TAG not in page


def test_the_requests_cost_one_query_for_the_page(operator_client):
    for index in range(2):
        waiting_run(f"n{index}")
    url = reverse("runs:inbox-list")
    operator_client.get(url)

    def message_reads() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as queries:
            operator_client.get(url)
        reads = [q["sql"] for q in queries.captured_queries if "runs_message" in q["sql"]]
        return len(reads), len(queries)

    few = message_reads()
    for index in range(2, 12):
        waiting_run(f"n{index}")
    assert message_reads() == few
    assert few[0] == 1


def test_a_child_runs_ticket_links_its_parent(operator_client):
    parent, child = delegating_runs()
    page = operator_client.get(reverse("runs:inbox")).content.decode()
    row = row_of(page, f'data-ticket-id="{Ticket.objects.get(run=child).pk}"')
    parent_url = reverse("runs:run-detail", args=[parent.pk])
    assert f'child of <a class="mono" href="{parent_url}"' in row
    assert short_id(parent.pk) in row
    assert "note the boss" in row  # the child's request: what its parent asked it


def test_a_root_runs_ticket_names_no_parent(operator_client):
    waiting_run()
    page = operator_client.get(reverse("runs:inbox")).content.decode()
    assert "child of" not in page


def test_the_inbox_exposes_the_undo_window_of_keyboard_decisions(operator_client, settings):
    waiting_run()
    page = operator_client.get(reverse("runs:inbox")).content.decode()
    assert 'data-undo-seconds="5"' in page and "u</span> or <span" in page
    assert 'id="inbox-undo-status"' in page and 'data-tool="write_note"' in page
    settings.AWAKEN_KEY_UNDO_SECONDS = 2.5
    assert 'data-undo-seconds="2.5"' in operator_client.get(reverse("runs:inbox")).content.decode()
    settings.AWAKEN_KEY_UNDO_SECONDS = 0  # decisions are sent at once: no undo offered
    page = operator_client.get(reverse("runs:inbox")).content.decode()
    assert 'data-undo-seconds="0"' in page and "undoes it" not in page


# --- the runs list --------------------------------------------------------------------------


def test_a_waiting_run_says_what_it_waits_on_and_since_when(operator_client):
    run = waiting_run()
    Ticket.objects.filter(run=run).update(created_at=timezone.now() - dt.timedelta(minutes=3))
    done = done_run()

    page = operator_client.get(reverse("runs:run-list")).content.decode()
    waiting = row_of(page, f'id="run-row-{run.pk}"')
    assert re.search(
        r"waits: <b>write_note</b>, <time [^>]*title=\"" + ABSOLUTE + r"\">3 min</time>", waiting
    )
    assert "waits:" not in row_of(page, f'id="run-row-{done.pk}"')

    # the row a live update refetches says the same
    fragment = operator_client.get(reverse("runs:run-row", args=[run.pk])).content.decode()
    assert "waits: <b>write_note</b>" in fragment and ">3 min</time>" in fragment


def test_the_runs_list_links_parents_and_children(operator_client):
    parent, child = delegating_runs()
    page = operator_client.get(reverse("runs:run-list")).content.decode()
    parent_row = row_of(page, f'id="run-row-{parent.pk}"')
    assert "1 child run<" in parent_row and "child of" not in parent_row
    assert "waits: <b>agent_run_scribe</b>" in parent_row
    child_row = row_of(page, f'id="run-row-{child.pk}"')
    parent_url = reverse("runs:run-detail", args=[parent.pk])
    assert f'child of <a class="mono" href="{parent_url}"' in child_row
    assert "waits: <b>write_note</b>" in child_row and "child run<" not in child_row


def test_the_rows_extras_cost_one_query_for_the_page(operator_client):
    for index in range(2):
        waiting_run(f"n{index}")
    url = reverse("runs:run-list")
    operator_client.get(url)

    def ticket_reads() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as queries:
            page = operator_client.get(url).content.decode()
        assert page.count("waits: <b>write_note</b>") == Run.objects.count()
        reads = [q["sql"] for q in queries.captured_queries if "runs_ticket" in q["sql"]]
        return len(reads), len(queries)

    few = ticket_reads()
    for index in range(2, 12):
        waiting_run(f"n{index}")
    assert ticket_reads() == few
    assert few[0] == 1


# --- the run header -------------------------------------------------------------------------


def header(client: Any, run: Run) -> str:
    return client.get(reverse("runs:run-header", args=[run.pk])).content.decode()


def test_the_header_says_a_question_waits_for_an_answer(operator_client):
    run = asking_human(f"Which room, {SCRIPT_TAG}?")
    page = header(operator_client, run)
    reason = re.search(r'<p class="waiting-reason".*?</p>', page, re.S)
    assert reason, page
    text = reason.group(0)
    assert "Waiting for an answer: Which room, &lt;script&gt;alert(1)&lt;/script&gt;?" in text
    assert "answer it below" in text
    assert ">tool_permission<" not in page and SCRIPT_TAG not in page
    # the full page has it too
    full = operator_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert "Waiting for an answer: Which room" in full


def test_the_header_says_a_permission_waits_for_approval(operator_client):
    run = waiting_run()
    page = header(operator_client, run)
    assert "Waiting for approval: write_note" in page and "decide it below" in page


def test_the_header_of_a_parent_names_the_child_it_waits_for(operator_client):
    parent, child = delegating_runs()
    page = header(operator_client, parent)
    assert f"Waiting for a child run: agent_run_scribe ({short_id(child.pk)})" in page
    assert f'href="{reverse("runs:run-detail", args=[child.pk])}">open the child run' in page


def test_a_finished_run_has_no_waiting_reason(operator_client):
    assert 'class="waiting-reason"' not in header(operator_client, done_run())


# --- times ----------------------------------------------------------------------------------


def test_every_time_on_the_pages_has_its_absolute_value_on_hover(operator_client):
    run = waiting_run()
    pages = [
        reverse("runs:inbox"),
        reverse("runs:run-list"),
        reverse("runs:run-detail", args=[run.pk]),
        reverse("runs:thread-list"),
        reverse("runs:thread-detail", args=[run.thread_id]),
        reverse("runs:dashboard"),
    ]
    for url in pages:
        page = operator_client.get(url).content.decode()
        times = re.findall(r"<time[^>]*>", page)
        assert times, url
        for tag in times:
            assert re.search(r'datetime="\d{4}-\d\d-\d\dT[^"]+" title="' + ABSOLUTE + '"', tag), (
                url,
                tag,
            )


TEMPLATES = Path(settings.BASE_DIR) / "templates" / "runs"
# Rendered by hand instead of through `{% when %}`: a relative time, a raw datetime or a
# <time> element written in the template.
BY_HAND = re.compile(r"\|timesince|\|timeuntil|\{\{[^}]*_at\b[^}]*\}\}|<time\b")


def test_the_templates_render_times_only_through_the_when_tag():
    offenders = []
    for path in sorted(TEMPLATES.rglob("*.html")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if BY_HAND.search(line):
                offenders.append(f"{path.relative_to(TEMPLATES)}:{number}")
    assert offenders == []


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (59, "59 s"),
        (180, "3 min"),
        (3600, "1 h"),
        (3900, "1 h 5 min"),
        (90000, "1 d 1 h"),
    ],
)
def test_short_ages(seconds, text):
    assert short_age(dt.timedelta(seconds=seconds)) == text


# --- the dashboard --------------------------------------------------------------------------


def test_recent_failures_show_their_error_text_escaped(operator_client):
    agent: Agent = scripted_agent([{"error": f"upstream said {SCRIPT_TAG} no"}])
    run = drive(run_start(agent=agent, messages="fail please"))
    assert run.is_failed, run.status_reason
    message = run.error_payload["message"]
    assert SCRIPT_TAG in message

    page = operator_client.get(reverse("runs:dashboard")).content.decode()
    failures = re.search(r"<h2>Recent failures</h2>.*?</section>", page, re.S)
    assert failures
    assert 'class="failure-text"' in failures.group(0)
    assert html.escape(message, quote=True)[:60] in failures.group(0)
    assert SCRIPT_TAG not in page


def test_the_charts_have_axes_with_labels_and_units(operator_client):
    done_run()
    page = operator_client.get(reverse("runs:dashboard-stats")).content.decode()
    hourly = re.search(r'<svg class="chart hourly".*?</svg>', page, re.S)
    waits = re.search(r'<svg class="chart waits".*?</svg>', page, re.S)
    assert hourly and waits
    assert "runs per hour</text>" in hourly.group(0)
    assert "hour the runs were created (UTC)</text>" in hourly.group(0)
    assert hourly.group(0).count('class="axis"') >= 2
    assert re.search(r'class="tick"[^>]*>1</text>', hourly.group(0))  # the busiest hour: 1 run
    assert len(re.findall(r'text-anchor="middle">\d\d:\d\d</text>', hourly.group(0))) == 5
    assert "time waited</text>" in waits.group(0) and "tickets</text>" in waits.group(0)
    assert "&lt; 1 min</text>" in waits.group(0)
