"""A team's bulk confirmation in a real browser (see conftest.py): deciding more tickets
by policy than the team's threshold first shows "This acts on N tickets (more than T).
Confirm"; nothing is decided until the button sends it again, confirmed."""

from __future__ import annotations

from django.core.management import call_command
from playwright.sync_api import expect

from runs.models import Decision, Ticket
from tests.browser.helpers import login, start_run, wait_db
from tests.factories import team, user_with_role


def test_a_bulk_decision_above_the_threshold_is_confirmed_first(new_page):
    call_command("seed_demo", verbosity=0)
    team("default", bulk_confirm_above=2)
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    topics = ["lunch with ann", "lunch with bo", "lunch with cy"]
    run_ids = [start_run(page, "approver", f"please write a note about {t}") for t in topics]
    wait_db(
        lambda: Ticket.objects.for_operators().filter(run_id__in=run_ids).count() == 3,
        "three waiting tickets",
    )

    page.goto("/inbox/")
    expect(page.locator("h1 .conn")).to_have_text("live")
    panel = page.locator("#inbox-policy")
    panel.locator("summary").click()
    panel.locator("select[name=tool]").select_option("write_note")
    panel.get_by_label("Argument pattern").fill('title ~ "lunch*"')
    panel.get_by_role("button", name="Preview").click()
    out = page.locator("#inbox-policy-out")
    expect(out.get_by_role("heading")).to_have_text("3 tickets match", timeout=15_000)

    out.get_by_role("button", name="Approve all 3").click()
    confirm = out.locator("[data-bulk-confirm]")
    expect(confirm.get_by_role("heading")).to_have_text(
        "This acts on 3 tickets (more than 2). Confirm", timeout=15_000
    )
    assert not Decision.objects.filter(ticket__run_id__in=run_ids).exists()

    confirm.get_by_role("button", name="Confirm: approve 3 tickets").click()
    result = page.locator("#inbox-policy-out .policy-result")
    expect(result).to_contain_text("3 approved.", timeout=15_000)
    assert Decision.objects.filter(ticket__run_id__in=run_ids, action="approve").count() == 3
