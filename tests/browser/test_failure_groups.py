"""Failure groups in a real browser (Chromium, desktop and phone widths): two runs failing
the same way show as one group with its count; the operator follows it to its runs, then
resolves it, and finds it under "Resolved" with a Reopen button; the page fits a phone;
no page breaks the CSP."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from common.models import AuditEntry
from runs.models import Run
from runs.operations.models.failures import FailureGroup
from runs.services.submission_flow import run_start
from tests.browser.helpers import login
from tests.browser.test_mobile_layout import PHONE, assert_fits
from tests.factories import scripted_agent, user_with_role
from tests.processes import wait_for


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 900}, PHONE], ids=["1280", "390"])
def test_an_operator_resolves_a_failure_group(new_page, viewport):
    agents = [
        scripted_agent([{"error": f"provider error 50{n}: upstream 'req_{n}a7' failed"}])
        for n in (2, 3)
    ]
    page = new_page()  # the server (and its worker) runs from here on
    page.set_viewport_size(viewport)
    user_with_role("operator", "olga")
    runs = [run_start(agent=agent, messages="fetch the report") for agent in agents]
    wait_for(
        lambda: FailureGroup.objects.filter(count=2).exists(), 30, "two failures grouped as one"
    )
    group = FailureGroup.objects.get()

    login(page, "olga")
    page.goto("/failures/")
    expect(page.locator("main h1")).to_have_text("Failures")
    row = page.locator(f"#failure-{group.pk}")
    expect(row).to_contain_text("provider error <…>: upstream <…> failed")
    expect(row).to_contain_text("2 runs")
    for agent in agents:
        expect(row).to_contain_text(agent.slug)
    if viewport == PHONE:
        assert_fits(page, "failures page")

    row.get_by_role("link", name="2 runs").click()
    expect(page.locator("[data-run-rows] tr")).to_have_count(2)
    for run in runs:
        expect(page.locator(f"#run-row-{run.pk}")).to_be_visible()
    assert Run.objects.filter(pk__in=[r.pk for r in runs], status_reason="error").count() == 2

    page.goto("/failures/")
    page.locator(f"#failure-{group.pk}").get_by_role("button", name="Resolve").click()
    expect(page.locator(".flash").first).to_contain_text("Resolved")
    expect(page.locator(f"#failure-{group.pk}")).to_have_count(0)
    expect(page.locator("#failure-groups")).to_contain_text("No open failures.")

    page.get_by_role("link", name="Resolved").click()
    resolved = page.locator(f"#failure-{group.pk}")
    expect(resolved).to_contain_text("resolved")
    expect(resolved).to_contain_text("by olga")
    expect(resolved.get_by_role("button", name="Reopen")).to_be_visible()
    if viewport == PHONE:
        assert_fits(page, "resolved failures")
    group.refresh_from_db()
    assert group.state == "resolved"
    assert AuditEntry.objects.filter(action="failure_group.resolve", actor_label="olga").exists()
