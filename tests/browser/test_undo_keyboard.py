"""Safer keys and clearer pages in a browser (docs/teamwork.md): the undo window of
keyboard decisions in the inbox — `a` (or `r`) on a ticket shows a countdown and sends
nothing until it ends; `u`, Escape or the Undo button take it back and the ticket keeps
waiting; once the window ends the decision is made; leaving the page sends a pending
decision at once — and the run page's timeline, which follows the newest event unless
the operator scrolled up."""

from __future__ import annotations

import re
import time
from typing import Any

from django.core.management import call_command
from playwright.sync_api import expect

from runs.models import Decision, Run, RunEvent, Ticket
from tests.browser.helpers import login, post, start_run, wait_db, wait_status
from tests.browser.test_operator_flows import pending_ticket
from tests.factories import APPROVAL, call, scripted_agent, user_with_role

WINDOW_S = 5  # the default undo window (AWAKEN_KEY_UNDO_SECONDS)
COUNTDOWN = re.compile(r"(Approving|Rejecting) in (\d+) s…")


def decision_posts(page: Any) -> list[float]:
    """When (time.monotonic()) the page POSTs to the inbox's decision endpoint from now on."""
    sent: list[float] = []

    def on_request(request: Any) -> None:
        if request.method == "POST" and request.url.endswith("/inbox/bulk"):
            sent.append(time.monotonic())

    page.on("request", on_request)
    return sent


def open_inbox(page: Any) -> None:
    page.goto("/inbox/")
    expect(page.locator("h1 .conn")).to_have_text("live")
    expect(page.locator("#inbox-list")).to_have_attribute("data-undo-seconds", str(WINDOW_S))


def seconds_left(note: Any) -> int:
    found = COUNTDOWN.search(note.inner_text())
    assert found, note.inner_text()
    return int(found.group(2))


def operator_with_tickets(new_page: Any, *topics: str) -> tuple[Any, list[Ticket]]:
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    tickets = [
        pending_ticket(start_run(page, "approver", f"please write a note about {topic}"))
        for topic in topics
    ]
    return page, tickets


def test_a_keyboard_approval_counts_down_and_undo_keeps_the_ticket_waiting(new_page):
    page, (ticket,) = operator_with_tickets(new_page, "lunch")
    sent = decision_posts(page)
    open_inbox(page)
    row = page.locator(f"#ticket-row-{ticket.pk}")
    note = row.locator(".undo-note")

    # a: the countdown shows, then goes down; nothing is sent
    row.focus()
    page.keyboard.press("a")
    expect(note).to_contain_text(COUNTDOWN)
    expect(note).to_contain_text("Approving in")
    expect(note.get_by_role("button", name="Undo")).to_be_visible()
    first = seconds_left(note)
    assert first in (WINDOW_S, WINDOW_S - 1)
    page.wait_for_timeout(1300)
    assert seconds_left(note) < first
    # u takes it back
    page.keyboard.press("u")
    expect(note).to_have_count(0)
    expect(page.locator("#inbox-undo-status")).to_have_text(
        "Undone: write_note was not approved; it still waits."
    )
    expect(row).to_be_focused()

    # so do Escape (a rejection this time) and the Undo button
    page.keyboard.press("r")
    expect(note).to_contain_text("Rejecting in")
    page.keyboard.press("Escape")
    expect(note).to_have_count(0)
    expect(page.locator("#inbox-undo-status")).to_contain_text("was not rejected")
    page.keyboard.press("a")
    note.get_by_role("button", name="Undo").click()
    expect(note).to_have_count(0)

    # past every window: nothing was sent, the ticket still waits
    page.wait_for_timeout((WINDOW_S + 1) * 1000)
    assert sent == []
    assert Ticket.objects.get(pk=ticket.pk).status == Ticket.Status.PENDING
    assert not Decision.objects.filter(ticket_id=ticket.pk).exists()
    expect(row).to_be_visible()
    assert page.dialogs == []


def test_a_keyboard_approval_is_made_when_its_window_ends_and_u_undoes_the_latest(new_page):
    page, (lunch, dinner) = operator_with_tickets(new_page, "lunch", "dinner")
    sent = decision_posts(page)
    open_inbox(page)
    lunch_row = page.locator(f"#ticket-row-{lunch.pk}")
    dinner_row = page.locator(f"#ticket-row-{dinner.pk}")

    lunch_row.focus()
    pressed = time.monotonic()
    page.keyboard.press("a")
    expect(lunch_row.locator(".undo-note")).to_contain_text("Approving in")
    expect(dinner_row).to_be_focused()  # on to the next ticket at once
    page.keyboard.press("a")
    expect(dinner_row.locator(".undo-note")).to_contain_text("Approving in")
    page.keyboard.press("u")  # the latest: dinner's
    expect(dinner_row.locator(".undo-note")).to_have_count(0)
    expect(lunch_row.locator(".undo-note")).to_contain_text("Approving in")

    # lunch's window ends: approved, reported, gone from the list
    expect(lunch_row).to_have_count(0, timeout=(WINDOW_S + 5) * 1000)
    expect(page.locator("#inbox-confirm")).to_contain_text("1 approved.")
    assert len(sent) == 1 and sent[0] - pressed >= WINDOW_S - 0.5, (sent, pressed)
    decision = Decision.objects.get(ticket_id=lunch.pk)
    assert (decision.action, decision.actor_label) == ("approve", "opa")
    assert Ticket.objects.get(pk=dinner.pk).status == Ticket.Status.PENDING
    expect(dinner_row).to_be_visible()
    expect(dinner_row.locator(".undo-note")).to_have_count(0)


def test_leaving_the_page_sends_a_pending_decision_at_once(new_page):
    page, (ticket,) = operator_with_tickets(new_page, "lunch")
    open_inbox(page)
    row = page.locator(f"#ticket-row-{ticket.pk}")
    row.focus()
    page.keyboard.press("r")
    expect(row.locator(".undo-note")).to_contain_text("Rejecting in")
    left = time.monotonic()
    page.goto("/runs/")  # long before the window ends
    wait_db(
        lambda: Ticket.objects.filter(pk=ticket.pk, status=Ticket.Status.DECIDED).exists(),
        "the rejection sent on leaving the page",
        timeout=WINDOW_S - 1,
    )
    assert time.monotonic() - left < WINDOW_S
    decision = Decision.objects.get(ticket_id=ticket.pk)
    assert (decision.action, decision.actor_label) == ("reject", "opa")


# --- the run page's timeline ----------------------------------------------------------------

PADDING = 60  # events added while the run waits: more than the timeline box shows

DISTANCE_TO_BOTTOM = "t => t.scrollHeight - t.scrollTop - t.clientHeight"


def approve(page: Any, ticket: Ticket) -> None:
    response = post(page, f"/tickets/{ticket.pk}/decide", {"action": "approve"})
    assert response.ok, response.status


def test_the_timeline_follows_new_events_unless_the_operator_scrolled_up(new_page):
    note = {"title": "t", "body": "b"}
    scripted_agent(
        [
            {"text": "first", "tool_calls": [call("write_note", note)]},
            {"text": "second", "tool_calls": [call("write_note", note)]},
            {"text": "Done."},
        ],
        slug="noter",
        permission=APPROVAL,
    )
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    run_id = start_run(page, "noter", "note it twice")
    first = pending_ticket(run_id)
    wait_status(run_id, "waiting")
    # while the run waits on its ticket no worker writes to it: lengthen its log
    run = Run.objects.get(pk=run_id)
    start = run.last_event_seq + 1
    RunEvent.objects.bulk_create(
        RunEvent(run=run, seq=seq, event_type="step_end", payload={"event_type": "step_end"})
        for seq in range(start, start + PADDING)
    )
    Run.objects.filter(pk=run_id).update(last_event_seq=start + PADDING - 1)

    page.goto(f"/runs/{run_id}/")
    expect(page.locator("#conn")).to_have_text("live")
    timeline = page.locator("#run-timeline")
    hint = page.locator("#timeline-new")
    assert timeline.evaluate("t => t.scrollHeight > t.clientHeight + 100")
    assert timeline.evaluate(DISTANCE_TO_BOTTOM) <= 1  # opens at the newest event

    # at the bottom: new events scroll into view
    approve(page, first)
    second = wait_db(
        lambda: Ticket.objects.filter(run_id=run_id, status="pending").first(),
        "the second ticket",
    )
    expect(page.locator(f"#ev-{Run.objects.get(pk=run_id).last_event_seq}")).to_have_count(1)
    assert timeline.evaluate(DISTANCE_TO_BOTTOM) <= 1
    expect(hint).to_be_hidden()

    # scrolled up to read: the view keeps still and the hint counts what arrives below
    timeline.evaluate("t => { t.scrollTop = 0; }")
    approve(page, second)
    wait_status(run_id, "done")
    last = Run.objects.get(pk=run_id).last_event_seq
    expect(page.locator(f"#ev-{last}")).to_have_count(1)
    expect(hint).to_be_visible()
    assert int(hint.locator("[data-count]").inner_text()) >= 3
    assert timeline.evaluate("t => t.scrollTop") == 0
    hint.click()
    expect(hint).to_be_hidden()
    assert timeline.evaluate(DISTANCE_TO_BOTTOM) <= 1
