"""The dashboard's "cost, tokens and latency" section in a real browser: the fixed data set
of tests/runs/operations/test_stats_glance.py (agents alpha and beta, five finished runs, four tool
calls) drawn as labelled SVG charts and tables, then refetched on the page's clock (every
data-refresh-seconds, in the window picked) without a reload."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from runs.models import Run
from runs.services import stats
from tests.browser.helpers import login
from tests.factories import user_with_role
from tests.runs.operations.test_stats_glance import build_dataset


@pytest.fixture
def glance_data(transactional_db: None) -> dict[str, Any]:
    """Built before the server starts (requested before `new_page`): every run is done
    already, so its worker has nothing to pick up."""
    return build_dataset()


def test_the_glance_charts_show_the_data_set_and_refresh_on_their_own(
    glance_data: dict[str, Any], new_page: Any, tmp_path: Path
):
    user_with_role("viewer", "watcher")
    page = new_page()
    login(page, "watcher")
    page.clock.install()  # the refresh timer, fast-forwarded below instead of waited for
    glance_path = reverse("runs:dashboard-glance")
    fetched: list[str] = []
    page.on(
        "request",
        lambda request: (
            fetched.append(request.url) if urlsplit(request.url).path == glance_path else None
        ),
    )
    page.goto("/")
    section = page.locator("#dashboard-glance #glance")
    expect(section.get_by_role("heading", name="Cost, tokens and latency")).to_be_visible()
    expect(section.locator("[aria-current=true]")).to_have_text("last 7d")

    cost = section.locator("svg.glance-cost")
    expect(cost).to_be_visible()
    expect(cost.locator("text.axis-title")).to_have_text(
        ["day the runs finished (UTC)", "USD per day"]
    )
    expect(cost.locator("rect.series-0")).not_to_have_count(0)  # alpha's cost, day by day
    durations = section.locator("svg.glance-durations")
    expect(durations).to_be_visible()
    expect(durations.locator("text.axis-title")).to_have_text(
        ["agent", "seconds (first start to finish)"]
    )
    expect(durations.locator("text.tick", has_text="alpha")).to_have_count(1)
    expect(durations.locator("text.tick", has_text="beta")).to_have_count(1)
    expect(section.locator(".legend").first).to_contain_text("alpha")

    per_agent = section.locator("section.card", has=page.get_by_role("heading", name="Per agent"))
    alpha = per_agent.locator("tbody tr", has_text="alpha")
    # alpha: 3 runs, 2 completed; 3000 input tokens; $0.012
    cells = alpha.locator("td")
    expect(cells.nth(0)).to_have_text("alpha")
    expect(cells.nth(1)).to_have_text("3")
    expect(cells.nth(2)).to_have_text("67 %")
    expect(cells.nth(5)).to_have_text("3000")
    expect(cells.nth(7)).to_have_text("$0.0120")
    beta = per_agent.locator("tbody tr", has_text="beta").locator("td")
    expect(beta.nth(1)).to_have_text("2")
    expect(beta.nth(2)).to_have_text("50 %")
    per_tool = section.locator("section.card", has=page.get_by_role("heading", name="Per tool"))
    expect(per_tool.locator("tbody tr", has_text="search").locator("td").nth(3)).to_have_text(
        "33 %"
    )

    shot = tmp_path / "glance.png"
    section.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000, "an empty screenshot"

    # alpha's failed run now finished 20 days ago: out of the 7-day window at the next refresh
    Run.objects.filter(pk=glance_data["runs"][2].pk).update(
        finished_at=timezone.now() - dt.timedelta(days=20)
    )
    stats.rebuild()
    page.evaluate("window.__notReloaded = true")
    assert fetched == []  # nothing before the interval
    page.clock.fast_forward(61_000)
    expect(cells.nth(1)).to_have_text("2")
    expect(cells.nth(2)).to_have_text("100 %")
    assert page.evaluate("window.__notReloaded") is True  # swapped in place, no reload
    assert [parse_qs(urlsplit(url).query) for url in fetched] == [{"window": ["7d"]}]
    expect(page.locator("#dashboard-glance #glance")).to_have_count(1)  # replaced, not nested

    # the window picked is the one refetched
    section.get_by_role("link", name="last 30d").click()
    expect(section.locator("[aria-current=true]")).to_have_text("last 30d")
    expect(cells.nth(1)).to_have_text("3")  # 20 days ago is in the last 30 days
    page.clock.fast_forward(61_000)
    for _ in range(100):
        if len(fetched) > 1:
            break
        page.wait_for_timeout(50)
    assert [parse_qs(urlsplit(url).query) for url in fetched[1:]] == [{"window": ["30d"]}]
    expect(cells.nth(1)).to_have_text("3")
    assert page.dialogs == []
