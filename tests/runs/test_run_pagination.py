"""The run page and the thread page show the newest page of each log (a run's events, a
thread's messages) and load earlier pages on demand; every other list on them is bounded."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client
from django.urls import reverse

from runs import selectors
from runs.models import Decision, Message, Run, RunEvent, Thread, Ticket, ToolCall
from runs.services.submission_flow import run_start
from tests.factories import scripted_agent, step_end_event, user_with_role, waiting_run
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

XSS = "<img src=x onerror=alert(1)><script>alert(2)</script>"
EVENTS, MESSAGES = selectors.TIMELINE_PAGE, selectors.TRANSCRIPT_PAGE


def add_events(run: Run, n: int) -> int:
    """n more events at the end of the run's log; returns the last seq."""
    run.refresh_from_db()
    last = run.last_event_seq
    RunEvent.objects.bulk_create(step_end_event(run, seq) for seq in range(last + 1, last + n + 1))
    Run.objects.filter(pk=run.pk).update(last_event_seq=last + n)
    return last + n


def add_messages(thread_id: object, n: int, text: str = "message") -> int:
    """n more messages at the end of the thread's log; returns the last seq."""
    thread = Thread.objects.get(pk=thread_id)
    last = thread.message_count
    Message.objects.bulk_create(
        Message(
            thread=thread,
            seq=seq,
            role="assistant",
            content=[{"type": "text", "text": f"{text} {seq}"}],
        )
        for seq in range(last + 1, last + n + 1)
    )
    Thread.objects.filter(pk=thread.pk).update(message_count=last + n)
    return last + n


def event_seqs(page: str) -> list[int]:
    return [int(seq) for seq in re.findall(r'id="ev-(\d+)"', page)]


def message_seqs(page: str) -> list[int]:
    return [int(seq) for seq in re.findall(r'id="msg-(\d+)"', page)]


def earlier_links(page: str) -> list[str]:
    """The "show earlier" controls' URLs (hx-get, the same as href)."""
    found = re.findall(r'<p class="earlier small"><a href="([^"]+)" hx-get="([^"]+)"', page)
    for href, hx_get in found:
        assert href == hx_get
    return [html.unescape(href) for href, _ in found]


def get(client, url: str) -> str:
    response = client.get(url, HTTP_HX_REQUEST="true")
    assert response.status_code == 200, (url, response.status_code)
    return response.content.decode()


def walk_back(client, url: str, seqs_of) -> list[int]:
    """Follow "show earlier" from `url` to the start; the rows in page order."""
    rows: list[int] = []
    while True:
        page = get(client, url)
        rows = seqs_of(page) + rows
        links = earlier_links(page)
        assert len(links) <= 1
        if not links:
            return rows
        url = links[0]


def run_page_parts(page: str) -> tuple[str, str, str]:
    """(the earlier-messages control above the transcript panel, the transcript panel, the
    timeline) of a run page."""
    before_panel, rest = page.split('<div id="run-transcript">', 1)
    above = before_panel.rsplit('<div class="transcript">', 1)[1]
    panel, rest = rest.split('<div id="live-text"', 1)
    timeline = rest.split('<div id="run-timeline" class="timeline">', 1)[1].split("</section>")[0]
    return above, panel, timeline


# --- the run page's timeline ---------------------------------------------------------------------


def test_the_run_page_shows_the_newest_events_and_streams_on_after_the_last(operator_client):
    run = waiting_run()
    last = add_events(run, 450)
    page = get(operator_client, reverse("runs:run-detail", args=[run.pk]))
    _, _, timeline = run_page_parts(page)
    assert event_seqs(timeline) == list(range(last - EVENTS + 1, last + 1))
    assert f'data-after-seq="{last}"' in page  # the socket resumes after the last row
    timeline_url = reverse("runs:run-timeline", args=[run.pk])
    assert earlier_links(timeline) == [f"{timeline_url}?before_seq={last - EVENTS + 1}"]
    # the control comes first, so what it loads lands above the rows shown
    assert timeline.index('class="earlier') < timeline.index('id="ev-')


def test_show_earlier_events_walks_back_to_the_first_without_a_gap_or_a_repeat(
    operator_client,
):
    run = waiting_run()
    last = add_events(run, 2 * EVENTS + 37)
    url = reverse("runs:run-timeline", args=[run.pk])
    assert walk_back(operator_client, url, event_seqs) == list(range(1, last + 1))
    first_page = get(operator_client, url)
    assert event_seqs(first_page) == list(range(last - EVENTS + 1, last + 1))
    assert "No events yet" not in get(operator_client, f"{url}?before_seq=1")


def test_a_short_timeline_has_no_earlier_control(operator_client):
    run = waiting_run()
    page = get(operator_client, reverse("runs:run-detail", args=[run.pk]))
    _, _, timeline = run_page_parts(page)
    run.refresh_from_db()
    assert event_seqs(timeline) == list(range(1, run.last_event_seq + 1))
    assert earlier_links(timeline) == []


@pytest.mark.parametrize("bound", ["abc", "-5", "0", "1.5", "99999999999999999999999"])
def test_a_malformed_bound_is_no_bound(operator_client, bound):
    run = waiting_run()
    last = add_events(run, 300)
    page = get(
        operator_client, reverse("runs:run-timeline", args=[run.pk]) + f"?before_seq={bound}"
    )
    assert event_seqs(page)[-1] == last
    page = get(
        operator_client,
        reverse("runs:run-transcript", args=[run.pk]) + f"?before_seq={bound}&from_seq={bound}",
    )
    assert message_seqs(page)


# --- the run page's transcript -------------------------------------------------------------------


def test_the_run_transcript_shows_the_newest_messages_and_loads_earlier_ones(operator_client):
    run = waiting_run()
    last = add_messages(run.thread_id, 2 * MESSAGES + 10)
    page = get(operator_client, reverse("runs:run-detail", args=[run.pk]))
    above, panel, _ = run_page_parts(page)
    first = last - MESSAGES + 1
    assert message_seqs(panel) == list(range(first, last + 1))
    transcript_url = reverse("runs:run-transcript", args=[run.pk])
    # the control sits above the live panel, which refreshes from the page's first message on
    assert earlier_links(panel) == []
    assert earlier_links(above) == [f"{transcript_url}?before_seq={first}"]
    assert f'data-transcript-url="{transcript_url}?from_seq={first}"' in page
    assert walk_back(operator_client, earlier_links(above)[0], message_seqs) == list(
        range(1, first)
    )


def test_a_live_refresh_of_the_transcript_keeps_every_message_the_page_had(operator_client):
    run = waiting_run()
    last = add_messages(run.thread_id, MESSAGES + 20)
    first = last - MESSAGES + 1
    refresh = reverse("runs:run-transcript", args=[run.pk]) + f"?from_seq={first}"
    assert message_seqs(get(operator_client, refresh)) == list(range(first, last + 1))
    # messages arrive while the page is open: the refresh shows them after the page's
    newest = add_messages(run.thread_id, 30)
    refreshed = get(operator_client, refresh)
    assert message_seqs(refreshed) == list(range(first, newest + 1))
    assert earlier_links(refreshed) == []
    # more than a live refresh shows: the newest, and a control that loads exactly the
    # ones between them and the page's first
    live = selectors.TRANSCRIPT_LIVE
    newest = add_messages(run.thread_id, live)
    refreshed = get(operator_client, refresh)
    assert message_seqs(refreshed) == list(range(newest - live + 1, newest + 1))
    assert walk_back(operator_client, refresh, message_seqs) == list(range(first, newest + 1))


def test_earlier_pages_are_escaped(operator_client):
    run = waiting_run()
    thread = run.thread
    Message.objects.filter(thread=thread, seq=1).update(content=[{"type": "text", "text": XSS}])
    add_messages(thread.pk, MESSAGES + 5)
    for url in [
        reverse("runs:run-transcript", args=[run.pk]) + "?before_seq=50",
        reverse("runs:thread-messages", args=[thread.pk]) + "?before_seq=50",
    ]:
        page = get(operator_client, url)
        assert "<script>alert(2)" not in page and "<img src=x" not in page, url
        assert "&lt;script&gt;alert(2)" in page, url


# --- the rest of the run page --------------------------------------------------------------------


def test_children_retries_and_tickets_of_a_run_are_bounded(operator_client):
    run = waiting_run()
    extra = selectors.RELATED_PAGE + 5
    Run.objects.bulk_create(
        Run(thread=run.thread, agent=run.agent, agent_version=run.agent_version, **link)
        for link in [{"parent_run": run}] * extra + [{"retry_of": run}] * extra
    )
    calls = ToolCall.objects.bulk_create(
        ToolCall(run=run, call_id=f"bulk-{i}", tool_name="write_note", status="suspended")
        for i in range(2 * extra)
    )
    tickets = Ticket.objects.bulk_create(
        Ticket(
            run=run,
            tool_call=tool_call,
            ticket_id=tool_call.call_id,
            tool_name="write_note",
            resume_mode="replay_tool_call",
            status="pending" if i < extra else "decided",
        )
        for i, tool_call in enumerate(calls)
    )
    Decision.objects.bulk_create(
        Decision(ticket=t, action="approve", actor_label="bob", decision_id=f"d-{t.pk}")
        for t in tickets
        if t.status == "decided"
    )
    detail = selectors.run_detail(run.pk)
    assert detail is not None
    for rows in [detail.children, detail.retries, detail.decided_tickets, detail.open_tickets]:
        assert len(rows) == selectors.RELATED_PAGE and rows.more
    page = get(operator_client, reverse("runs:run-detail", args=[run.pk]))
    assert "only the latest 50 child runs are listed" in page
    assert f'href="/runs/?thread={run.thread_id}">more retries' in page
    assert "Decided tickets (the latest 50)" in page
    assert "More tickets of this run wait than are shown here" in page
    assert page.count('class="ticket"') == selectors.RELATED_PAGE


def test_each_partial_reads_only_its_panel(operator_client):
    run = waiting_run()
    for name, shows, hides in [
        ("runs:run-timeline", 'id="ev-', 'id="msg-'),
        ("runs:run-transcript", 'id="msg-', 'id="ev-'),
        ("runs:run-header", "this run", 'id="msg-'),
        ("runs:run-tickets", 'class="ticket"', 'id="ev-'),
    ]:
        page = get(operator_client, reverse(name, args=[run.pk]))
        assert shows in page and hides not in page, name


# --- the thread page -----------------------------------------------------------------------------


def test_the_thread_page_shows_the_newest_messages_and_runs(operator_client):
    agent = scripted_agent([{"text": "ok"}], slug="greeter")
    thread = None
    for index in range(selectors.RELATED_PAGE + 3):
        thread = drive(run_start(agent=agent, messages=f"hello {index}", thread=thread)).thread
    assert thread is not None
    last = add_messages(thread.pk, MESSAGES)
    page = get(operator_client, reverse("runs:thread-detail", args=[thread.pk]))
    assert message_seqs(page) == list(range(last - MESSAGES + 1, last + 1))
    messages_url = reverse("runs:thread-messages", args=[thread.pk])
    assert earlier_links(page) == [f"{messages_url}?before_seq={last - MESSAGES + 1}"]
    assert walk_back(operator_client, messages_url, message_seqs) == list(range(1, last + 1))
    newest = Run.objects.filter(thread=thread).order_by("-created_at")
    shown = re.findall(r'href="/runs/([0-9a-f-]+)/"', page)
    assert shown == [str(r.pk) for r in reversed(newest[: selectors.RELATED_PAGE])]
    assert f'href="/runs/?thread={thread.pk}">All runs of this thread' in page
    assert 'value="greeter" selected' in page  # the latest run's agent, as before


def test_the_thread_messages_partial_needs_a_thread_and_a_login(operator_client):
    run = waiting_run()
    url = reverse("runs:thread-messages", args=[run.thread_id])
    assert Client().get(url).status_code == 302
    missing = reverse("runs:thread-messages", args=["00000000-0000-0000-0000-000000000000"])
    assert operator_client.get(missing).status_code == 404
    viewer = Client()
    viewer.force_login(user_with_role("viewer", "vic"))
    count = Thread.objects.get(pk=run.thread_id).message_count
    assert message_seqs(get(viewer, url)) == list(range(1, count + 1))
