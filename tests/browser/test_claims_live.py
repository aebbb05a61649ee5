"""Claims between two operators in their browsers: A claims a ticket in the inbox; B's
inbox shows "A is on this" without a reload, and B's keyboard approval (and B's Approve
button on the run page) asks first, naming A; B's run page follows A's release and new
claim live. Confirmed, B's decision goes through."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from playwright.sync_api import expect

from runs.models import Decision, Ticket
from tests.browser.helpers import login, start_run
from tests.browser.test_operator_flows import pending_ticket
from tests.factories import user_with_role

QUESTION = "confirm: opa is on this (5 min left) — decide anyway?"


def posts(page: Any) -> list[str]:
    """The paths of the POSTs the page sends from now on."""
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    return sent


def test_a_claim_shows_live_to_the_other_operator_who_confirms_before_deciding(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    user_with_role("operator", "opb")
    a = new_page()
    login(a, "opa")
    run_id = start_run(a, "approver", "please write a note about lunch")
    ticket = pending_ticket(run_id)

    b = new_page()
    login(b, "opb")
    b.goto("/inbox/")
    expect(b.locator("h1 .conn")).to_have_text("live")
    b_row = b.locator(f"#ticket-row-{ticket.pk}")
    expect(b_row).to_contain_text("nobody")

    # A claims it in the inbox
    a.goto("/inbox/")
    a_row = a.locator(f"#ticket-row-{ticket.pk}")
    a_row.get_by_role("button", name="Claim").click()
    expect(a_row).to_contain_text("you are on this, 5 min")
    assert Ticket.objects.get(pk=ticket.pk).claimed_by.username == "opa"

    # B sees it without reloading, and no Claim button for it
    expect(b_row).to_contain_text("opa is on this, 5 min")
    expect(b_row.get_by_role("button", name="Claim")).to_have_count(0)

    # B's keyboard approval asks first; dismissed, nothing is sent
    sent = posts(b)
    b_row.focus()
    with b.expect_event("dialog") as dialog:
        b.keyboard.press("a")
    assert f"{dialog.value.type}: {dialog.value.message}" == QUESTION
    b.wait_for_timeout(300)
    assert not [url for url in sent if url.endswith("/inbox/bulk")], sent
    assert Ticket.objects.get(pk=ticket.pk).status == Ticket.Status.PENDING

    # so does B's Approve button on the run page
    b.goto(f"/runs/{run_id}/")
    expect(b.locator("#run-tickets")).to_contain_text("opa is on this, 5 min")
    with b.expect_event("dialog") as dialog:
        b.locator("#run-tickets").get_by_role("button", name="Approve").click()
    assert f"{dialog.value.type}: {dialog.value.message}" == QUESTION
    b.wait_for_timeout(300)
    assert not [url for url in sent if url.endswith("/decide")], sent
    assert Ticket.objects.get(pk=ticket.pk).status == Ticket.Status.PENDING

    # A releases it and claims it again: B's run page follows without a reload
    expect(b.locator("#conn")).to_have_text("live")
    a_row.get_by_role("button", name="Release").click()
    expect(b.locator("#run-tickets")).not_to_contain_text("opa is on this")
    expect(b.locator("#run-tickets").get_by_role("button", name="Claim")).to_have_count(1)
    a_row.get_by_role("button", name="Claim").click()
    expect(b.locator("#run-tickets")).to_contain_text("opa is on this, 5 min")

    # confirmed (the fixture dismisses dialogs: answer yes instead), B decides it
    b.goto("/inbox/")
    expect(b.locator("h1 .conn")).to_have_text("live")
    b.evaluate("window.confirm = () => true")
    b_row.focus()
    b.keyboard.press("a")
    expect(b.locator(f"#ticket-row-{ticket.pk}")).to_have_count(0)
    decision = Decision.objects.get(ticket_id=ticket.pk)
    assert decision.action == "approve" and decision.actor_label == "opb"
    closed = Ticket.objects.get(pk=ticket.pk)
    assert closed.claimed_by is None and closed.claimed_until is None
    assert len(a.dialogs) == 0
