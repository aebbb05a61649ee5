"""Rules from decisions in a real browser against a real server (see conftest.py): an admin
approves a `write_note` call, makes it an "always allow" rule from the run page, previews
it, saves it to the draft and publishes the draft in the admin; the next run of the agent
with the same request writes its note without asking."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from agents.models import Note
from runs.models import Run, Ticket
from tests.browser.helpers import login, start_run, wait_status
from tests.browser.test_operator_flows import pending_ticket
from tests.factories import APPROVAL, note_call, scripted_agent, user_with_role


def test_an_approved_note_becomes_an_allow_rule_and_the_next_run_does_not_ask(new_page):
    script = [{"text": "noting", "tool_calls": [note_call("lunch")]}, {"text": "all done"}]
    scripted_agent(script, slug="noter", permission=APPROVAL)
    admin = user_with_role("admin", "ada")
    admin.is_staff = True
    admin.save(update_fields=["is_staff"])
    page = new_page()
    login(page, "ada")

    # the run asks before writing the note; the admin approves it
    first = start_run(page, "noter", "write it down")
    pending_ticket(first)
    page.goto(f"/runs/{first}/")
    page.get_by_role("button", name="Approve").click()
    wait_status(first, "done")

    # "Make this a rule: always allow" on the decided ticket
    page.goto(f"/runs/{first}/")
    page.get_by_text("Decided tickets").click()
    page.get_by_role("link", name="always allow").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Make this a rule: always allow")
    expect(page.get_by_label("Tool pattern")).to_have_value('write_note(title ~ "lunch")')
    expect(page.locator("#rule-verdict")).to_contain_text("The new rule decides this call. Runs")
    expect(page.locator("#rule-checks tr[data-new-rule]")).to_contain_text("(decides)")

    page.get_by_role("button", name="Save to draft").click()
    expect(page.locator(".flashes")).to_contain_text("Saved rule 2")
    expect(page.locator("#rule-draft-status")).to_have_text("Draft has unpublished changes")

    # publish the draft with the admin's Publish page
    page.get_by_role("link", name="Publish the draft in the admin").click()
    expect(page).to_have_url(re.compile(r"/admin/agents/agent/\d+/publish/$"))
    page.get_by_label("Note (why):").fill("allow the lunch note")
    page.get_by_role("button", name="Publish").click()
    expect(page.locator(".messagelist")).to_contain_text("Published noter v2.")

    # the same request again: the note is written without a ticket
    second = start_run(page, "noter", "write it down")
    run = wait_status(second, "done")
    assert run.agent_version.number == 2
    assert not Ticket.objects.filter(run_id=second).exists()
    assert Note.objects.filter(run_id=second, title="lunch").exists()
    assert Run.objects.get(pk=first).agent_version.number == 1
    assert not page.dialogs
