"""Decide by policy in a real browser (see conftest.py): preview what a policy matches,
someone else decides one of the previewed tickets, then approve all: the summary names
the conflict and who decided it."""

from __future__ import annotations

from django.core.management import call_command
from playwright.sync_api import expect

from common.audit import Actor
from common.models import AuditEntry
from runs.models import Decision, Ticket
from runs.services.tickets import decision_submit
from tests.browser.helpers import login, start_run, wait_db
from tests.factories import user_with_role


def test_preview_by_policy_then_approve_all_reports_a_conflict(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    topics = ["lunch with ann", "lunch with bo", "lunch with cy", "dinner"]
    run_ids = [start_run(page, "approver", f"please write a note about {t}") for t in topics]
    wait_db(
        lambda: Ticket.objects.for_operators().filter(run_id__in=run_ids).count() == 4,
        "four waiting tickets",
    )

    page.goto("/inbox/")
    expect(page.locator("h1 .conn")).to_have_text("live")
    panel = page.locator("#inbox-policy")
    panel.locator("summary").click()
    panel.locator("select[name=tool]").select_option("write_note")
    panel.get_by_label("Argument pattern").fill('title ~ "lunch*"')
    panel.get_by_role("button", name="Preview").click()

    out = page.locator("#inbox-policy-out")
    expect(out.get_by_role("heading")).to_have_text("3 tickets match")
    rows = out.locator("tbody tr")
    expect(rows).to_have_count(3)
    for topic in topics[:3]:
        expect(out).to_contain_text(f'"title": "{topic}"')
    expect(out).not_to_contain_text("dinner")

    # between preview and confirm, someone else decides one of the previewed tickets
    taken = Ticket.objects.get(run_id=run_ids[1], status="pending")
    decision_submit(ticket=taken, action="reject", actor=Actor(label="bob"), dispatch=False)

    out.get_by_label("Reason (optional, recorded with each decision)").fill("lunch is fine")
    out.get_by_role("button", name="Approve all 3").click()

    result = page.locator("#inbox-policy-out .policy-result")
    expect(result).to_contain_text("2 approved; 1 conflict.")
    expect(result).to_contain_text("already decided by bob at")
    expect(result.locator("li")).to_have_count(1)

    labels = {
        str(d.ticket.run_id): d.actor_label for d in Decision.objects.select_related("ticket")
    }
    assert labels == {run_ids[0]: "opa", run_ids[1]: "bob", run_ids[2]: "opa"}
    assert Ticket.objects.get(run_id=run_ids[3]).status == "pending"  # dinner: not matched
    row = AuditEntry.objects.get(action="tickets.bulk_decide")
    assert (row.after["decided"], row.after["conflicts"]) == (2, 1)
    assert row.after["policy"]["arguments_pattern"] == 'title ~ "lunch*"'
    assert page.dialogs == []
