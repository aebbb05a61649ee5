"""The runs list in Chromium (1280 and 390 px): bulk cancel of 20 runs where one is
refused by its team's freeze, the list saying which and why; the sort by duration from
its column header; the time switch in the header, remembered across reloads, with
"local" shown in the browser's own time zone."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from common.audit import Actor
from common.models import AuditEntry
from common.teams import team_freeze
from runs.models import Run
from runs.services.submission_flow import run_start
from tests.browser.helpers import login, wait_status
from tests.factories import call, scripted_agent, team, user_with_role
from tests.runs.helpers import drive

PHONE = {"width": 390, "height": 844}
ASK = {"default_behavior": "ask"}


def waiting_runs(team_slug: str, count: int) -> list[Run]:
    """`count` runs of one agent of `team_slug`, each waiting for a decision."""
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("calculator", {"expression": "1+1"})]}, {"text": "ok"}],
        slug=f"asker-{team_slug}",
        permission=ASK,
        tools=["calculator"],
        team=team(team_slug),
    )
    runs = [run_start(agent=agent, messages=f"go {i}") for i in range(count)]
    for run in runs:
        drive(run)
    return [wait_status(run.pk, "waiting") for run in runs]


def timed_runs(seconds: list[int]) -> list[Run]:
    agent = scripted_agent([{"text": "ok"}], slug="timed")
    made = []
    start = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    for i, length in enumerate(seconds):
        run = run_start(agent=agent, messages=f"hello {i}")
        drive(run)
        wait_status(run.pk, "done")
        began = start + dt.timedelta(minutes=i)
        Run.objects.filter(pk=run.pk).update(
            created_at=began, started_at=began, finished_at=began + dt.timedelta(seconds=length)
        )
        made.append(run)
    return made


@pytest.mark.parametrize("viewport", [None, PHONE], ids=["1280px", "390px"])
def test_bulk_cancel_of_20_runs_with_one_refused_by_its_teams_freeze(new_page, viewport: Any):
    red = waiting_runs("red", 19)
    (blue,) = waiting_runs("blue", 1)
    team_freeze(team=team("blue"), actor=Actor(label="ops", source="ui"), reason="incident 42")
    user_with_role("operator", "bulkop")
    page = new_page()
    if viewport:
        page.set_viewport_size(viewport)
    login(page, "bulkop")
    page.goto("/runs/?status=waiting")
    boxes = page.locator("input[data-bulk-pick]")
    expect(boxes).to_have_count(20)
    for index in range(20):
        boxes.nth(index).check()
    page.get_by_role("textbox", name="Reason", exact=True).fill("stuck after the outage")
    page.get_by_role("button", name="Cancel selected").click()

    # 20 runs: more than the teams' threshold (10), so the list asks first
    confirm = page.locator("[data-run-bulk-confirm]")
    expect(confirm.get_by_role("heading")).to_have_text("Cancel 20 runs? Confirm")
    assert not Run.objects.filter(status=Run.Status.DONE).exists()
    confirm.get_by_role("button", name="Confirm: cancel 20 runs").click()

    result = page.locator("[data-bulk-result]")
    expect(result).to_contain_text("19 cancelled, 1 refused")
    refused = result.locator("[data-bulk-refused] li")
    expect(refused).to_have_count(1)
    expect(refused).to_contain_text(f"run {str(blue.pk)[-8:]}")
    expect(refused).to_contain_text('team "blue" is frozen: incident 42')
    expect(result.locator("[data-bulk-done] li")).to_have_count(19)
    expect(result).to_be_in_viewport()
    assert Run.objects.filter(pk__in=[r.pk for r in red], status_reason="cancelled").count() == 19
    assert Run.objects.get(pk=blue.pk).status == Run.Status.WAITING
    assert AuditEntry.objects.filter(action="run.cancel").count() == 19
    (bulk,) = AuditEntry.objects.filter(action="runs.bulk_cancel")
    assert bulk.comment == "stuck after the outage"
    width = page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
    assert width[0] <= width[1], f"the page scrolls sideways: {width}"


def test_sort_by_duration_and_the_time_switch_kept_across_reloads(
    new_page, browser, live_server_url
):
    runs = timed_runs([30, 600, 5])
    user_with_role("operator", "clock")
    page = new_page()
    login(page, "clock")
    page.goto("/runs/")
    page.get_by_role("link", name="duration").click()
    expect(page).to_have_url(re.compile(r"sort=longest"))
    ids = page.locator("tr[id^=run-row-]").evaluate_all("rows => rows.map((r) => r.id.slice(8))")
    assert ids == [str(runs[1].pk), str(runs[0].pk), str(runs[2].pk)]
    expect(page.locator(f"#run-row-{runs[1].pk} .run-duration")).to_have_text("10 min 0 s")

    first = runs[0]
    moment = Run.objects.get(pk=first.pk).created_at
    expect(page.locator(f"#run-row-{first.pk} td:last-child time")).to_contain_text("ago")
    page.locator(".time-switch").get_by_role("button", name="UTC").click()
    expect(page).to_have_url(re.compile(r"sort=longest"))  # back on the same page
    utc = moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    expect(page.locator(f"#run-row-{first.pk} td:last-child time")).to_have_text(utc)
    page.reload()
    expect(page.locator(f"#run-row-{first.pk} td:last-child time")).to_have_text(utc)
    expect(page.locator(".time-switch button[aria-pressed=true]")).to_have_text("UTC")

    page.locator(".time-switch").get_by_role("button", name="local").click()
    # the browser's own zone: a second browser in Kolkata (UTC+05:30) logged in as the same user
    context = browser.new_context(base_url=live_server_url, timezone_id="Asia/Kolkata")
    try:
        other = context.new_page()
        login(other, "clock")
        other.goto("/runs/")
        local = moment.astimezone(ZoneInfo("Asia/Kolkata")).strftime("%Y-%m-%d %H:%M:%S")
        expect(other.locator(f"#run-row-{first.pk} td:last-child time")).to_contain_text(local)
        expect(other.locator(".time-switch button[aria-pressed=true]")).to_have_text("local")
    finally:
        context.close()
    page.reload()
    expect(page.locator(".time-switch button[aria-pressed=true]")).to_have_text("local")
