"""Replays in a real browser against a real server (see conftest.py): an admin replays an
agent's past runs on its draft from the form, sees how many runs match before starting,
and watches the table fill in, one outcome marked changed; no page breaks the CSP."""

from __future__ import annotations

from playwright.sync_api import expect

from runs.models import Run, Ticket
from runs.replays.models.replays import ReplaySet
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.browser.helpers import login
from tests.factories import scripted_agent, user_with_role
from tests.processes import wait_for

ASK_MAIL = {"default_behavior": "allow", "rules": [{"tool": "send_email", "behavior": "ask"}]}
DENY_MAIL = {"default_behavior": "allow", "rules": [{"tool": "send_email", "behavior": "deny"}]}


def test_an_admin_replays_runs_on_a_draft_and_sees_what_changed(new_page):
    agent = scripted_agent(
        [], slug="mailer", tools=["send_email", "write_note"], permission=ASK_MAIL
    )  # the demo policy: it emails when asked to, notes when asked to
    page = new_page()  # the server (and its worker) runs from here on
    user_with_role("admin", "ada")
    runs = [
        run_start(agent=agent, messages="email bob@example.com the invoice"),
        run_start(agent=agent, messages="note the lunch order"),
    ]
    wait_for(
        lambda: Ticket.objects.filter(run=runs[0], status="pending").exists(), 30, "the ticket"
    )
    decision_submit(ticket=Ticket.objects.get(run=runs[0]), action="approve")
    wait_for(
        lambda: Run.objects.filter(pk__in=[r.pk for r in runs], status="done").count() == 2,
        30,
        "the original runs",
    )
    agent.permission = DENY_MAIL  # the draft: no more email
    agent.save()

    login(page, "ada")
    page.get_by_role("link", name="Replays").click()
    form = page.locator("#replay-form")
    form.get_by_label("Agent").select_option("mailer")
    form.get_by_label("Version").fill("draft")
    expect(page.locator("#replay-preview")).to_contain_text("2 runs match")
    form.get_by_role("button", name="Start replay").click()

    expect(page.locator("h1")).to_contain_text("Replay of mailer on its draft")
    expect(page.locator("#replay-progress")).to_have_attribute(
        "data-status", "done", timeout=30_000
    )
    expect(page.locator("#replay-progress")).to_contain_text("2 of 2 replayed")
    expect(page.locator("#replay-changed")).to_have_text("1 changed")
    email_row = page.locator("#replay-item-1")
    expect(email_row).to_have_attribute("data-changed", "yes")
    expect(email_row.locator("a", has_text="compare")).to_have_attribute(
        "href",
        f"/runs/compare/?a={runs[0].pk}&b={ReplaySet.objects.get().items.get(position=1).replay_run_id}",
    )
    expect(page.locator("#replay-item-2")).to_have_attribute("data-changed", "no")
    assert Ticket.objects.filter(run__run_mode="replay").count() == 0
