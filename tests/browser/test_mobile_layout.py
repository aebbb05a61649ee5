"""The operator pages on a phone (390 px wide): the page never scrolls sideways (wide
tables scroll in their own box), every navigation link stays on the dark bar, and the
inbox's arguments column keeps a readable width."""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from playwright.sync_api import expect

from runs.models import Run
from tests.browser.helpers import login, start_run, wait_db
from tests.browser.test_operator_flows import pending_ticket
from tests.factories import user_with_role

PHONE = {"width": 390, "height": 844}

PAGE_WIDTH = """() => ({
  scroll: document.documentElement.scrollWidth,
  client: document.documentElement.clientWidth,
})"""

# every link of the bar, and the log-out button, with whether its box lies within the bar's
NAV_BOXES = """() => {
  const bar = document.querySelector("header.topbar").getBoundingClientRect();
  const items = document.querySelectorAll("header.topbar nav a, header.topbar .whoami button");
  return Array.from(items).map((item) => {
    const r = item.getBoundingClientRect();
    return {
      text: item.textContent.trim(),
      inside: r.width > 0 && r.height > 0 && r.left >= bar.left && r.right <= bar.right
        && r.top >= bar.top && r.bottom <= bar.bottom,
    };
  });
}"""


def assert_fits(page: Any, where: str) -> None:
    width = page.evaluate(PAGE_WIDTH)
    assert width["scroll"] <= width["client"], f"{where} scrolls sideways: {width}"
    links = page.evaluate(NAV_BOXES)
    assert len(links) >= 8, links  # Dashboard … Admin, and Log out
    outside = [link["text"] for link in links if not link["inside"]]
    assert not outside, f"{where}: outside the navigation bar: {outside}"


def test_every_page_fits_a_phone(new_page):
    call_command("seed_demo", verbosity=0)
    user = user_with_role("operator", "operator-on-the-go")
    user.is_staff = True  # the longest bar: with the Admin link
    user.save()
    page = new_page()
    page.set_viewport_size(PHONE)
    login(page, "operator-on-the-go")
    topics = ["the quarterly planning lunch with the whole team", "dinner"]
    run_ids = [start_run(page, "approver", f"please write a note about {t}") for t in topics]
    for run_id in run_ids:
        pending_ticket(run_id)
    wait_db(
        lambda: Run.objects.filter(pk__in=run_ids, status="waiting").count() == 2,
        "two waiting runs",
    )
    run = Run.objects.get(pk=run_ids[0])

    pages = {
        "dashboard": "/",
        "runs list": "/runs/",
        "run page": f"/runs/{run.pk}/",
        "inbox": "/inbox/",
        "threads": "/threads/",
        "thread page": f"/threads/{run.thread_id}/",
        "audit log": "/audit/",
        "API tokens": "/tokens/",
    }
    for where, url in pages.items():
        page.goto(url)
        expect(page.locator("main h1").first).to_be_visible()
        assert_fits(page, where)

    # the inbox: its table scrolls in its box; the arguments stay readable, and open
    page.goto("/inbox/")
    rows = page.locator("#inbox-list tr[data-ticket-id]")
    expect(rows).to_have_count(2)
    args = rows.first.locator("td.inbox-args")
    assert args.bounding_box()["width"] >= 150, args.bounding_box()
    args.locator("summary").click()
    expect(args.locator("pre.args")).to_contain_text('"title"')
    assert_fits(page, "inbox with the arguments open")
    assert not page.dialogs
