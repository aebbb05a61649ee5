"""Errors inside the form that was sent, in a real browser (see conftest.py): a NUL in an
answer is refused inside the ticket's Respond form, the card keeps its Respond and Reject
and what was typed; a frozen team's card shows its buttons disabled with the reason, and
a click from a page opened before the freeze answers 409 inside the form, the card kept."""

from __future__ import annotations

from playwright.sync_api import expect

from common.audit import Actor
from common.teams import team_freeze
from runs.models import Ticket
from tests.browser.helpers import login, start_run, wait_db
from tests.factories import call, scripted_agent, team, team_member


def _asking_agent() -> None:
    scripted_agent(
        [
            {"text": "", "tool_calls": [call("ask_human", {"question": "Which city?"})]},
            {"text": "thanks"},
        ],
        slug="asker",
        tools=["ask_human"],
        team=team("red"),
    )


def _card(page, run_id: str):
    wait_db(
        lambda: Ticket.objects.filter(run_id=run_id, status="pending").exists(),
        "the ask_human ticket",
    )
    page.goto(f"/runs/{run_id}/")
    expect(page.locator("#conn")).to_have_text("live")
    card = page.locator("#run-tickets .ticket")
    expect(card).to_contain_text("Which city?")
    return card


def test_a_nul_in_an_answer_is_refused_inside_the_card_which_keeps_its_buttons(new_page):
    _asking_agent()
    team_member("operator", "red", "opa")
    page = new_page()
    login(page, "opa")
    run_id = start_run(page, "asker", "go")
    card = _card(page, run_id)

    card.get_by_label("Answer (text or JSON)").fill("Par\x00is")
    with page.expect_response(lambda r: r.url.endswith("/decide")) as answer:
        card.get_by_role("button", name="Respond").click()
    assert answer.value.status == 400
    respond = card.locator("form.respond-form")
    expect(respond.locator(".form-error")).to_contain_text("contains a NUL character")
    expect(respond.get_by_label("Answer (text or JSON)")).to_have_value("Par\ufffdis")
    expect(card.get_by_role("button", name="Reject")).to_be_enabled()
    assert Ticket.objects.get(run_id=run_id).status == "pending"

    # corrected, it goes through
    respond.get_by_label("Answer (text or JSON)").fill("Paris")
    respond.get_by_role("button", name="Respond").click()
    expect(page.locator("#run-outcomes .outcome")).to_contain_text("Answered ask_human.")
    wait_db(lambda: Ticket.objects.get(run_id=run_id).status == "decided", "the answer")


def test_a_frozen_teams_card_shows_the_freeze_and_a_stale_click_is_409_inside_it(new_page):
    _asking_agent()
    team_member("operator", "red", "opa")
    page = new_page()
    login(page, "opa")
    run_id = start_run(page, "asker", "go")
    card = _card(page, run_id)

    # the page was opened before the freeze: its Reject is still enabled
    team_freeze(team=team("red"), actor=Actor(label="ops", source="ui"), reason="incident 42")
    card.get_by_placeholder("Reason for rejecting").fill("wrong city")
    with page.expect_response(lambda r: r.url.endswith("/decide")) as answer:
        card.get_by_role("button", name="Reject").click()
    assert answer.value.status == 409
    reject = card.locator("form.reject-form")
    expect(reject.locator(".form-error")).to_contain_text('team "red" is frozen: incident 42')
    expect(reject.get_by_placeholder("Reason for rejecting")).to_have_value("wrong city")
    expect(card.get_by_role("button", name="Respond")).to_be_disabled()
    expect(card.locator("[data-frozen-note]")).to_contain_text("Team Red is frozen")
    assert Ticket.objects.get(run_id=run_id).status == "pending"

    # opened while frozen: the buttons are disabled and say why before any click
    page.reload()
    card = page.locator("#run-tickets .ticket")
    expect(card.locator("[data-frozen-note]")).to_contain_text("incident 42")
    expect(card.get_by_role("button", name="Respond")).to_be_disabled()
    expect(card.get_by_role("button", name="Reject")).to_be_disabled()
