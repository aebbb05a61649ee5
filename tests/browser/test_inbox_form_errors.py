"""The inbox in a real browser (see conftest.py): its bulk form says what is wrong inside
itself (the list and the selection stay), and a frozen team's rows show the freeze before
any click: the checkbox and the claim buttons disabled, the a key saying why instead of
sending a decision."""

from __future__ import annotations

from playwright.sync_api import expect

from common.audit import Actor
from common.teams import team_freeze
from runs.models import Decision, Ticket
from tests.browser.helpers import login, start_run, wait_db
from tests.factories import call, scripted_agent, team, team_member


def test_the_bulk_form_says_what_is_wrong_and_a_frozen_teams_rows_show_the_freeze(new_page):
    scripted_agent(
        [{"text": "", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]}],
        slug="noter",
        permission={"default_behavior": "ask"},
        tools=["write_note"],
        team=team("red"),
    )
    team_member("operator", "red", "opa")
    page = new_page()
    login(page, "opa")
    run_id = start_run(page, "noter", "write it")
    wait_db(lambda: Ticket.objects.for_operators().filter(run_id=run_id).exists(), "the ticket")
    ticket = Ticket.objects.for_operators().get(run_id=run_id)

    page.goto("/inbox/")
    expect(page.locator("h1 .conn")).to_have_text("live")
    row = page.locator(f"#ticket-row-{ticket.pk}")
    expect(row).to_be_visible()
    with page.expect_response(lambda r: r.url.endswith("/inbox/bulk")) as answer:
        page.get_by_role("button", name="Approve selected…").click()
    assert answer.value.status == 400
    form = page.locator("#inbox-bulk-form")
    expect(form.locator(".form-error")).to_have_text("Select at least one ticket.")
    expect(form.locator(f"#ticket-row-{ticket.pk}")).to_be_visible()  # the list stays

    team_freeze(team=team("red"), actor=Actor(label="ops", source="ui"), reason="incident 42")
    page.goto("/inbox/")
    row = page.locator(f"#ticket-row-{ticket.pk}")
    expect(row.locator(".frozen-note")).to_contain_text("Team Red is frozen")
    expect(row.get_by_role("checkbox")).to_be_disabled()
    expect(row.get_by_role("button", name="Claim")).to_be_disabled()
    row.focus()
    page.keyboard.press("a")
    expect(page.locator("#inbox-undo-status")).to_contain_text("Team Red is frozen")
    page.wait_for_timeout(300)
    assert not Decision.objects.exists()
    assert Ticket.objects.get(pk=ticket.pk).status == Ticket.Status.PENDING
