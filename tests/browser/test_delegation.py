"""Delegation end to end in a real browser: a parent run calls a child agent whose tool
needs approval; the operator approves the child's ticket from the approvals inbox and the
parent finishes with the child's answer."""

from __future__ import annotations

from django.core.management import call_command
from playwright.sync_api import expect

from agents.models import Note
from runs.models import Run, Ticket
from tests.browser.helpers import login, start_run, wait_db, wait_status
from tests.factories import user_with_role


def test_a_childs_ticket_approved_from_the_inbox_finishes_the_parent(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")

    parent_id = start_run(page, "coordinator", "delegate: please write a note about lunch")
    child = wait_db(
        lambda: Run.objects.filter(parent_run_id=parent_id).first(), "the child run", timeout=20
    )
    wait_db(
        lambda: Ticket.objects.filter(run=child, status="pending").exists(),
        "the child's ticket",
    )
    wait_status(parent_id, "waiting")
    assert child.agent.slug == "approver"

    # the parent's page shows the child in its tree, and its wait cannot be decided by hand
    page.goto(f"/runs/{parent_id}/")
    expect(page.locator("#run-header .tree").first).to_contain_text("approver")
    parent_ticket = page.locator("#run-tickets .ticket")
    expect(parent_ticket).to_contain_text("Waiting for child run")
    expect(parent_ticket.get_by_role("button")).to_have_count(0)

    # the inbox holds only the child's ticket
    page.get_by_role("link", name="Approvals").click()
    expect(page.locator("h1 .conn")).to_have_text("live")
    rows = page.locator("#inbox-list tr[data-ticket-id]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("write_note")
    expect(rows.first).to_contain_text("approver")
    rows.first.get_by_role("checkbox").check()
    page.get_by_role("button", name="Approve selected…").click()
    page.locator("#inbox-confirm").get_by_role("button", name="Confirm approve 1 ticket").click()
    expect(page.locator("#inbox-confirm")).to_contain_text("1 approved.")

    parent = wait_status(parent_id, "done", timeout=30)
    child.refresh_from_db()
    assert (child.status, child.status_reason) == ("done", "natural")
    assert (parent.status, parent.status_reason) == ("done", "natural")
    assert child.final_output and child.final_output in parent.final_output
    assert list(Note.objects.filter(run=child).values_list("title", flat=True)) == ["lunch"]

    # the parent's page shows the finished run with the child's answer in its transcript
    page.goto(f"/runs/{parent_id}/")
    expect(page.locator("#run-status .badge")).to_have_attribute("title", "done · natural")
    expect(page.locator("#run-transcript")).to_contain_text(child.final_output)
