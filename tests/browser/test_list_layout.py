"""Lists in Chromium: the runs list pages back ("Newer runs", "First page") as well as
forward; a search too long for the box is a 400 page saying so through the real server
(not a dropped connection); a long saved-view name fits a phone (390 px); the agent
admin's permission rules editor fits 1280 px, long patterns and all."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from playwright.sync_api import expect

from agents.models import Agent
from runs.accounts.models.saved_views import SavedView
from runs.models import Run
from runs.selectors import PAGE_SIZE
from runs.selectors.filters import SEARCH_MAX_CHARS
from runs.services.submission_flow import run_start
from tests.browser.helpers import login, wait_status
from tests.factories import AgentFactory, scripted_agent, user_with_role
from tests.runs.helpers import drive

PHONE = {"width": 390, "height": 844}

PAGE_WIDTH = """() => ({
  scroll: document.documentElement.scrollWidth,
  client: document.documentElement.clientWidth,
})"""


def assert_fits(page: Any, where: str) -> None:
    width = page.evaluate(PAGE_WIDTH)
    assert width["scroll"] <= width["client"], f"{where} scrolls sideways: {width}"


def done_run(text: str) -> Run:
    """A finished run that answered `text`: driven here, or by the server's worker when
    it takes the run first (the distributed mode), waited for either way."""
    run = run_start(agent=scripted_agent([{"text": text}]), messages="hello")
    drive(run)
    return wait_status(run.pk, "done")


def row_ids(page: Any) -> list[str]:
    return page.locator("tr[id^=run-row-]").evaluate_all(
        "rows => rows.map((row) => row.id.slice('run-row-'.length))"
    )


def test_the_runs_list_pages_newer_and_back_to_the_first(new_page):
    runs = [done_run(f"run {i}") for i in range(PAGE_SIZE + 3)]
    newest_first = [str(run.pk) for run in reversed(runs)]
    user_with_role("operator", "pager")
    page = new_page()
    login(page, "pager")
    page.goto("/runs/?status=done")
    assert row_ids(page) == newest_first[:PAGE_SIZE]
    pager = page.get_by_role("navigation", name="Pages of runs")
    expect(pager.get_by_role("link", name="Newer runs")).to_have_count(0)
    expect(pager.get_by_role("link", name="First page")).to_have_count(0)

    pager.get_by_role("link", name="Older runs").click()
    expect(page.locator("tr[id^=run-row-]")).to_have_count(3)
    assert row_ids(page) == newest_first[PAGE_SIZE:]
    expect(pager.get_by_role("link", name="Older runs")).to_have_count(0)

    done_run("started while paging")  # newer than every row shown so far
    pager.get_by_role("link", name="Newer runs").click()
    expect(page.locator("tr[id^=run-row-]")).to_have_count(PAGE_SIZE)
    assert row_ids(page) == newest_first[:PAGE_SIZE]  # the page before, as it was
    pager.get_by_role("link", name="Newer runs").click()  # the new run is newer still
    expect(page.locator("tr[id^=run-row-]")).to_have_count(PAGE_SIZE)
    shown = row_ids(page)
    # the head is in reach: the first page as it is now, the new run on top, no gap
    assert shown[1:] == newest_first[: PAGE_SIZE - 1]
    assert (
        Run.objects.get(pk=shown[0])
        .thread.messages.filter(content__icontains="started while paging")
        .exists()
    )
    expect(pager.get_by_role("link", name="Newer runs")).to_have_count(0)
    expect(pager.get_by_role("link", name="First page")).to_have_count(0)

    pager.get_by_role("link", name="Older runs").click()
    expect(page.locator("tr[id^=run-row-]")).to_have_count(4)  # nothing skipped
    pager.get_by_role("link", name="First page").click()
    expect(page).to_have_url(page.url.split("?")[0] + "?status=done")
    expect(page.locator("tr[id^=run-row-]")).to_have_count(PAGE_SIZE)


def test_a_long_search_is_a_400_page_through_the_server(new_page):
    user_with_role("operator", "searcher")
    page = new_page()
    login(page, "searcher")
    response = page.goto("/runs/?q=" + "a" * 20_000)
    assert response is not None and response.status == 400
    expect(page.locator(".filter-errors")).to_contain_text(
        f"Search (q): at most {SEARCH_MAX_CHARS} characters, not 20000"
    )
    expect(page.locator("form.filters.card")).to_be_visible()  # the list page, not an error page
    # longer than the server takes at all: a 400 that says so, never a dropped connection
    response = page.goto("/runs/?q=" + "a" * 100_000)
    assert response is not None and response.status == 400
    expect(page.locator("body")).to_contain_text("longer than 65536 bytes")


def test_a_long_saved_view_name_fits_a_phone(new_page):
    user = user_with_role("operator", "phone-user")
    for name in ("W" * 100, "a view with a rather long name " * 3):
        SavedView.objects.create(user=user, page="runs", name=name[:100], query="status=done")
        SavedView.objects.create(user=user, page="inbox", name=name[:100], query="")
    page = new_page()
    page.set_viewport_size(PHONE)
    login(page, "phone-user")
    for url in ("/runs/", "/inbox/"):
        page.goto(url)
        expect(page.locator(".saved-view a").first).to_be_visible()
        assert_fits(page, url)
        link = page.locator(".saved-view a").first
        assert link.get_attribute("title") == "W" * 100  # the whole name, on hover
        box = link.bounding_box()
        assert box is not None and box["x"] + box["width"] <= PHONE["width"], box


LONG_PATTERN = (
    'http_get(url =~ "^https://(' + "|".join(f"host{i}\\.example\\.com" for i in range(40)) + ')/")'
)


def test_the_permission_rules_editor_fits_1280(new_page):
    User.objects.create_superuser("root", password="pw")
    agent: Agent = AgentFactory(
        slug="wide",
        tools=["http_get", "send_email"],
        permission={
            "default_behavior": "ask",
            "rules": [
                {"tool": LONG_PATTERN, "behavior": "allow"},
                {
                    "tool": "send_email",
                    "behavior": "ask",
                    "deadline_seconds": 600,
                    "default_action": "respond",
                    "default_response": {"sent": False, "why": "nobody answered in time"},
                    "warning_seconds": 120,
                },
            ],
        },
    )
    page = new_page()
    login(page, "root", admin=True)
    base = f"/admin/agents/agent/{agent.pk}/permissions/"
    page.goto(base + "?tool=http_get&arguments=%7B%22url%22%3A%22https%3A%2F%2Fx%22%7D")
    expect(page.locator("#rules")).to_be_visible()
    expect(page.locator(".preview").first).to_be_visible()
    assert_fits(page, "the permission rules editor")
    table = page.locator("#rules").bounding_box()
    assert table is not None and table["x"] + table["width"] <= 1280, table
