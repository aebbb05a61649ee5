"""A long run in a real browser: the run page shows the newest events and messages, "show
earlier" loads the older pages above them, and the live stream keeps appending after the
last event while the transcript's live refresh keeps the earlier messages loaded."""

from __future__ import annotations

from playwright.sync_api import expect

from runs import selectors
from runs.models import Message, Run, RunEvent, Thread, Ticket
from tests.browser.helpers import (
    NOTE_AND_EMAIL_APPROVAL,
    login,
    mark_page,
    post,
    still_same_page,
    timeline_seqs,
    wait_db,
    wait_status,
)
from tests.factories import call, scripted_agent, user_with_role

OLD_MESSAGES = 150  # the thread's history before the run: more than a transcript page
PADDING = 2 * selectors.TIMELINE_PAGE + 50  # events added while the run waits


def message_seqs(page) -> list[int]:
    return [
        int(s)
        for s in page.locator(".transcript .msg").evaluate_all(
            "rows => rows.map(r => r.id.replace('msg-', ''))"
        )
    ]


def test_earlier_pages_load_above_and_the_live_stream_appends_below(new_page):
    scripted_agent(
        [
            {"text": "noting", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]},
            {"text": "Done."},
        ],
        slug="noter",
        permission=NOTE_AND_EMAIL_APPROVAL,
    )
    user_with_role("operator", "opa")
    thread = Thread.objects.create(title="a long conversation", message_count=OLD_MESSAGES)
    Message.objects.bulk_create(
        Message(
            thread=thread,
            seq=seq,
            role="user" if seq % 2 else "assistant",
            content=[{"type": "text", "text": f"old message {seq}"}],
        )
        for seq in range(1, OLD_MESSAGES + 1)
    )
    page = new_page()
    login(page, "opa")
    page.goto(f"/threads/{thread.pk}/")
    response = post(page, f"/threads/{thread.pk}/send", {"agent": "noter", "message": "note it"})
    assert response.ok, response.status
    run = wait_status(Run.objects.get(thread=thread).pk, "waiting")
    wait_db(lambda: Ticket.objects.filter(run=run, status="pending").exists(), "the ticket")
    # while the run waits on its ticket no worker writes to it: lengthen its log
    run.refresh_from_db()
    first_padding = run.last_event_seq + 1
    RunEvent.objects.bulk_create(
        RunEvent(run=run, seq=seq, event_type="step_end", payload={"event_type": "step_end"})
        for seq in range(first_padding, first_padding + PADDING)
    )
    last = first_padding + PADDING - 1
    Run.objects.filter(pk=run.pk).update(last_event_seq=last)

    page.goto(f"/runs/{run.pk}/")
    mark_page(page)
    expect(page.locator("#conn")).to_have_text("live")
    rows = page.locator("#run-timeline .ev")
    expect(rows).to_have_count(selectors.TIMELINE_PAGE)
    assert timeline_seqs(page) == list(range(last - selectors.TIMELINE_PAGE + 1, last + 1))
    messages_before = Thread.objects.get(pk=thread.pk).message_count
    expect(page.locator("#run-transcript .msg")).to_have_count(selectors.TRANSCRIPT_PAGE)

    # earlier events, page by page, land above the rows shown
    earlier_events = page.get_by_role("link", name="Show earlier events")
    earlier_events.click()
    expect(rows).to_have_count(2 * selectors.TIMELINE_PAGE)
    earlier_events.click()
    expect(rows).to_have_count(last)
    expect(earlier_events).to_have_count(0)
    assert timeline_seqs(page) == list(range(1, last + 1))

    # earlier messages land above the live panel
    page.get_by_role("link", name="Show earlier messages").click()
    expect(page.locator(".transcript .msg")).to_have_count(messages_before)
    assert message_seqs(page) == list(range(1, messages_before + 1))

    # approve: the run's new events stream in after the last one, its new messages are
    # refreshed into the panel, and the pages loaded earlier stay
    page.locator("#run-tickets .ticket").get_by_role("button", name="Approve").click()
    expect(page.locator("#run-status .badge")).to_have_attribute("title", "done · natural")
    run = wait_status(run.pk, "done")
    expect(rows.last).to_have_attribute("data-seq", str(run.last_event_seq))
    assert timeline_seqs(page) == list(range(1, run.last_event_seq + 1))
    expect(page.locator("#run-transcript")).to_contain_text("Done.")
    messages_after = Thread.objects.get(pk=thread.pk).message_count
    expect(page.locator(".transcript .msg")).to_have_count(messages_after)
    assert message_seqs(page) == list(range(1, messages_after + 1))
    assert still_same_page(page)
