"""The configuration pages in a real browser (1280 and 390 px wide): a team admin creates a
schedule (an invalid cron expression is refused with the message on the field, what was
typed kept), pauses it and runs it now; and routes an agent's failed runs to a channel.
Names stay text, the phone never scrolls sideways, no page breaks the CSP."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from common.models import AuditEntry
from runs.models import Run, Schedule
from runs.operations.models.notifications import NotificationChannel, NotificationRule
from tests.browser.helpers import login, wait_status
from tests.browser.test_mobile_layout import assert_fits
from tests.factories import AgentFactory, ModelFactory, team, team_member

NAME = "morning <img src=x onerror=alert(1)> report"
WIDTHS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}


def open_as_team_admin(new_page: Any, size: dict[str, int]) -> Any:
    team_member("admin", "red", username="ada")
    page = new_page()
    page.set_viewport_size(size)
    login(page, "ada")
    return page


@pytest.mark.parametrize("size", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_team_admin_creates_pauses_and_runs_a_schedule(new_page, size):
    agent = AgentFactory(
        slug="reporter",
        name="Reporter",
        team=team("red"),
        model=ModelFactory(script=[{"text": "report ready"}]),
    )
    page = open_as_team_admin(new_page, size)
    page.goto("/")
    page.locator("header.topbar nav").get_by_role("link", name="Schedules").click()
    expect(page).to_have_url(re.compile(r"/schedules/$"))
    expect(page.locator("#schedules")).to_contain_text("No schedules")
    page.get_by_role("link", name="New schedule").click()

    page.get_by_label("Name").fill(NAME)
    page.get_by_label("Agent").select_option(str(agent.pk))
    page.get_by_label("Message").fill("report on the night")
    expect(page.get_by_label("Every (seconds)")).to_be_hidden()  # cron is chosen
    page.get_by_label("Cron expression").fill("0 25 * * *")
    page.get_by_label("Time zone").fill("Europe/Berlin")
    page.get_by_role("button", name="Create schedule").click()
    expect(page.locator("#field-cron .field-error")).to_contain_text("Invalid cron expression")
    expect(page.get_by_label("Name")).to_have_value(NAME)  # what was typed is kept
    assert not Schedule.objects.exists()
    if size["width"] < 700:
        assert_fits(page, "the schedule form with an error")

    page.get_by_label("Starts").select_option("interval")
    expect(page.get_by_label("Cron expression")).to_be_hidden()
    page.get_by_label("Every (seconds)").fill("3600")
    page.get_by_role("button", name="Create schedule").click()
    expect(page.locator("main h1")).to_have_text(f"Schedule {NAME}")
    expect(page.locator("[data-next]")).to_have_text(re.compile(r"^\d{4}-\d{2}-\d{2} .* CES?T$"))
    schedule = Schedule.objects.get(name=NAME)
    assert schedule.next_run_at is not None and schedule.kind == "interval"

    page.locator("#schedule-actions").get_by_role("button", name="Pause").click()
    expect(page.locator(".flashes")).to_contain_text("Paused")
    expect(page.locator("[data-next]")).to_have_text("paused")
    schedule.refresh_from_db()
    assert (schedule.enabled, schedule.next_run_at) == (False, None)
    if size["width"] < 700:
        assert_fits(page, "a schedule's page")

    page.locator("#schedule-actions").get_by_role("button", name="Run now").click()
    expect(page.locator(".flashes")).to_contain_text("started a run")
    run = Run.objects.get(schedule=schedule)
    link = page.locator("#schedule-run-list a")
    expect(link).to_have_count(1)
    link.click()
    expect(page).to_have_url(re.compile(rf"/runs/{run.pk}/$"))
    assert wait_status(str(run.pk), "done").final_output == "report ready"

    page.goto("/schedules/")
    row = page.locator(f"#schedules tr[data-schedule='{schedule.pk}']")
    expect(row.locator("td").first).to_contain_text(NAME)  # text, not markup
    expect(row.get_by_role("button", name="Resume")).to_be_visible()
    if size["width"] < 700:
        assert_fits(page, "the schedules list")
    assert page.locator("img[src='x']").count() == 0
    actions = set(
        AuditEntry.objects.filter(target_type="schedule").values_list("action", flat=True)
    )
    assert actions == {"schedule.create", "schedule.pause", "schedule.run_now"}


@pytest.mark.parametrize("size", WIDTHS.values(), ids=WIDTHS.keys())
def test_a_team_admin_routes_failed_runs_to_a_channel(new_page, size):
    agent = AgentFactory(slug="reporter", name="Reporter", team=team("red"))
    channel = NotificationChannel.objects.create(
        name="ops <b>mailbox</b>", kind="email", email_to="ops@example.com"
    )
    page = open_as_team_admin(new_page, size)
    page.goto("/notifications/")
    page.locator("#routes-link").click()
    expect(page.locator("main h1")).to_have_text("Notification routes")
    expect(page.locator("#channels")).to_contain_text("ops <b>mailbox</b>")
    page.get_by_role("link", name="New route").click()

    page.get_by_label("Channel").select_option(str(channel.pk))
    page.get_by_label("a run fails", exact=True).check()
    page.get_by_label("Agent").select_option(str(agent.pk))
    page.get_by_label("Tool").fill("send_*")
    page.get_by_role("button", name="Create route").click()
    expect(page.locator("#field-tool .field-error")).to_contain_text("ticket events only")
    assert not NotificationRule.objects.exists()
    if size["width"] < 700:
        assert_fits(page, "the route form with an error")

    page.get_by_label("Tool").fill("")
    page.get_by_role("button", name="Create route").click()
    expect(page.locator(".flashes")).to_contain_text("Saved the route")
    rule = NotificationRule.objects.get()
    assert (rule.agent_id, rule.events, rule.channel_id) == (agent.pk, ["run.failed"], channel.pk)
    row = page.locator(f"#routes tr[data-route='{rule.pk}']")
    expect(row).to_contain_text("a run fails")
    expect(row).to_contain_text("Reporter")
    if size["width"] < 700:
        assert_fits(page, "the routes list")
    assert page.locator("b", has_text="mailbox").count() == 0
    assert AuditEntry.objects.filter(action="notificationrule.create").count() == 1
