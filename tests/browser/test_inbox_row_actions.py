"""Decisions where the operator is, in plain words (issue 29, items 1 and 2), in a real
browser at desktop (1280 px) and phone (390 px) widths: Approve and Reject on an inbox
row with the mouse (Reject asks for its reason inline on a team that requires one), the
ticket card of the thread page (and its composer offering no agent choice while a run is
open), and the run page saying its status, its ticket and its transcript plainly with the
technical values on hover."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from runs.models import Decision, Run, Ticket
from tests.browser.helpers import login, start_run, wait_db, wait_status
from tests.factories import call, scripted_agent, team, team_member

WIDTHS = [pytest.param(1280, id="desktop"), pytest.param(390, id="phone")]


def noting_agent(slug: str = "noter", team_slug: str = "red", **team_fields: Any) -> None:
    """An agent of team `team_slug` that asks before writing a note, then says "noted"."""
    scripted_agent(
        [
            {"text": "", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]},
            {"text": "noted"},
        ],
        slug=slug,
        permission={"default_behavior": "ask"},
        tools=["write_note"],
        team=team(team_slug, **team_fields),
    )


def operator_page(new_page: Any, width: int, team_slug: str = "red") -> Any:
    team_member("operator", team_slug, "opa")
    page = new_page()
    page.set_viewport_size({"width": width, "height": 900})
    login(page, "opa")
    return page


def pending(run_id: str) -> Ticket:
    wait_db(lambda: Ticket.objects.for_operators().filter(run_id=run_id).exists(), "the ticket")
    return Ticket.objects.for_operators().get(run_id=run_id)


@pytest.mark.parametrize("width", WIDTHS)
def test_approve_and_reject_from_inbox_rows_with_the_mouse(new_page, width):
    noting_agent(reason_required=True)
    page = operator_page(new_page, width)
    first = pending(start_run(page, "noter", "note the lunch"))
    second = pending(start_run(page, "noter", "note the dinner"))

    page.goto("/inbox/")
    expect(page.locator("h1 .conn")).to_have_text("live")
    row = page.locator(f"#ticket-row-{first.pk}")
    # the who cell says "nobody" once: in the assign select, not also beside it
    expect(row.locator(".inbox-who > span.muted")).to_have_count(0)
    approve = row.get_by_role("button", name="Approve", exact=True)
    approve.scroll_into_view_if_needed()
    approve.click()
    expect(page.locator("#inbox-confirm .inbox-result")).to_contain_text("1 approved.")
    expect(page.locator(f"#ticket-row-{first.pk}")).to_have_count(0)
    assert Decision.objects.get(ticket=first).action == Decision.Action.APPROVE

    row = page.locator(f"#ticket-row-{second.pk}")
    reason = row.get_by_placeholder("Reason (required)")
    expect(reason).to_be_visible()
    reject = row.get_by_role("button", name="Reject", exact=True)
    reject.scroll_into_view_if_needed()
    reject.click()  # no reason: the browser holds the form back
    page.wait_for_timeout(300)
    assert Ticket.objects.get(pk=second.pk).status == Ticket.Status.PENDING
    reason.fill("not this one")
    reject.click()
    expect(page.locator("#inbox-confirm .inbox-result")).to_contain_text("1 rejected.")
    expect(page.locator(f"#ticket-row-{second.pk}")).to_have_count(0)
    decision = Decision.objects.get(ticket=second)
    assert (decision.action, decision.comment) == ("reject", "not this one")
    expect(page.locator(".inbox-empty")).to_be_visible()
    assert page.dialogs == []


@pytest.mark.parametrize("width", WIDTHS)
def test_deciding_from_the_thread_pages_ticket_card(new_page, width):
    noting_agent()
    page = operator_page(new_page, width)
    run_id = start_run(page, "noter", "note the lunch")
    ticket = pending(run_id)
    thread_id = Run.objects.get(pk=run_id).thread_id

    page.goto(f"/threads/{thread_id}/")
    expect(page.locator("h1 .conn")).to_have_text("live")
    card = page.locator("#thread-tickets")
    expect(card).to_contain_text("Waiting for a decision")
    expect(card.locator(f"#ticket-{ticket.pk}")).to_contain_text("Approval")
    # a run is open: the composer sends to its agent, with no agent to choose
    expect(page.locator("#composer select[name=agent]")).to_have_count(0)
    expect(page.locator("#composer-agent")).to_contain_text("noter")

    approve = card.get_by_role("button", name="Approve", exact=True)
    approve.scroll_into_view_if_needed()
    approve.click()
    expect(card).to_contain_text("Approved write_note.")
    assert Decision.objects.get(ticket=ticket).action == Decision.Action.APPROVE
    assert wait_status(run_id, "done").status_reason == "natural"
    assert page.url.endswith(f"/threads/{thread_id}/")  # decided where the operator is
    page.reload()
    expect(page.locator("#thread-tickets")).to_have_count(0)
    expect(page.locator("#composer select[name=agent]")).to_have_count(1)  # no run open


@pytest.mark.parametrize("width", WIDTHS)
def test_the_run_page_says_it_plainly(new_page, width):
    noting_agent()
    page = operator_page(new_page, width)
    run_id = start_run(page, "noter", "note the lunch")
    ticket = pending(run_id)

    page.goto(f"/runs/{run_id}/")
    badge = page.locator("#run-status .badge")
    expect(badge).to_have_text("Waiting for a decision")
    expect(badge).to_have_attribute("title", "waiting · suspended")
    kind = page.locator(f"#ticket-{ticket.pk}").get_by_text("Approval", exact=True)
    expect(kind).to_have_attribute("title", f"tool:PermissionConfirm · {ticket.ticket_id}")
    transcript = page.locator("#run-transcript")
    expect(transcript).to_contain_text("write_note is waiting for a decision before it runs.")
    expect(transcript).not_to_contain_text("suspended: awaiting decision")

    card = page.locator(f"#ticket-{ticket.pk}")
    card.get_by_placeholder("Reason for rejecting").fill("not now")
    card.get_by_role("button", name="Reject", exact=True).click()
    assert wait_status(run_id, "done").status_reason == "natural"
    page.reload()
    expect(badge).to_have_text("Finished — action rejected")
    expect(badge).to_have_attribute("title", "done · natural")
    expect(page.locator("#run-tickets table")).to_contain_text("Rejected")
    page.locator("#run-timeline").get_by_text("Run finished").first.wait_for()
