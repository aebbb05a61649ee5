"""The schedules admin in a real browser against a real server (see conftest.py): an admin
creates a schedule, sees its next run, pauses it, runs it now and follows the link to the
run it started; names stay text, and no page breaks the Content-Security-Policy."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from runs.models import Run, Schedule
from tests.browser.helpers import login, wait_status
from tests.factories import AgentFactory, ModelFactory, user_with_role

NAME = "morning <img src=x onerror=alert(1)> report"
WHEN = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} (CET|CEST)$")


def test_an_admin_creates_pauses_and_runs_a_schedule_now(new_page):
    agent = AgentFactory(slug="reporter", model=ModelFactory(script=[{"text": "report ready"}]))
    admin = user_with_role("admin", "ada")
    admin.is_staff = True
    admin.save(update_fields=["is_staff"])
    page = new_page()
    login(page, "ada", admin=True)

    page.goto("/admin/runs/schedule/add/")
    page.get_by_label("Name").fill(NAME)
    page.get_by_label("Agent").select_option(str(agent.pk))
    page.get_by_label("Message").fill("report on the night")
    page.get_by_label("Kind").select_option("interval")
    page.get_by_label("Interval seconds").fill("3600")
    page.get_by_label("Timezone").fill("Europe/Atlantis")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".errornote")).to_be_visible()  # refused, with the field to fix
    expect(page.locator(".field-timezone .errorlist")).to_contain_text("Unknown time zone")
    page.get_by_label("Timezone").fill("Europe/Berlin")
    page.get_by_role("button", name="Save", exact=True).click()

    expect(page).to_have_url(re.compile(r"/admin/runs/schedule/$"))
    row = page.locator("#result_list tbody tr").first
    expect(row.locator(".field-name")).to_have_text(NAME)  # shown as text, not markup
    expect(row.locator(".field-timing")).to_have_text("every 1 h")
    expect(row.locator(".field-next_run")).to_have_text(WHEN)
    schedule = Schedule.objects.get(name=NAME)
    assert schedule.next_run_at is not None

    row.locator("input.action-select").check()
    page.locator("select[name=action]").select_option("pause")
    page.get_by_role("button", name="Go").click()
    expect(page.locator(".messagelist")).to_contain_text("Paused 1 schedule(s).")
    expect(page.locator("#result_list .field-next_run").first).to_have_text("paused")
    schedule.refresh_from_db()
    assert (schedule.enabled, schedule.next_run_at) == (False, None)

    page.locator("#result_list .field-name a").first.click()
    page.get_by_role("button", name="Run now").click()
    expect(page.locator(".messagelist")).to_contain_text("started run")
    run = Run.objects.get(schedule=schedule)
    assert run.run_mode == "scheduled"
    link = page.locator(".field-last_run_link a")
    expect(link).to_have_text(str(run.pk))
    expect(page.locator(".field-recent_runs a")).to_have_text(str(run.pk))
    link.click()
    expect(page).to_have_url(re.compile(rf"/runs/{run.pk}/$"))
    expect(page.locator("h1").first).to_contain_text("Run")
    assert wait_status(str(run.pk), "done").final_output == "report ready"
    assert page.locator("img[src='x']").count() == 0
    schedule.refresh_from_db()
    assert (schedule.enabled, schedule.next_run_at) == (False, None)  # run now left it paused
