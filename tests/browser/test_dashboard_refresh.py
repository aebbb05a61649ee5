"""The dashboard's live refresh in a real browser: however many changes its websocket
reports, a tab refetches its figures at most once per PANEL_REFRESH_MS, and once more
after the last change so that change is shown (the socket is played by the test)."""

from __future__ import annotations

import itertools
import json
import re
import time
from typing import Any

from playwright.sync_api import expect

from tests.browser.helpers import login
from tests.factories import user_with_role

EVERY = 2.5  # PANEL_REFRESH_MS in static/js/run_stream.js


def test_a_dashboard_refetches_its_figures_every_few_seconds_and_after_the_last_change(
    new_page,
):
    user_with_role("viewer", "watcher")
    page = new_page()
    login(page, "watcher")
    sockets: list[Any] = []

    def serve(socket: Any) -> None:
        sockets.append(socket)
        socket.send(json.dumps({"type": "ready"}))

    page.route_web_socket(re.compile(r"/ws/dashboard/"), serve)
    fetched: list[float] = []
    page.on(
        "request",
        lambda request: (
            fetched.append(time.monotonic()) if request.url.endswith("/dashboard/stats") else None
        ),
    )
    page.goto("/")
    expect(page.locator("h1 .conn")).to_have_text("live")
    for index in range(40):  # a run changes every 100 ms for 4 s
        sockets[0].send(json.dumps({"type": "run", "run": {"id": f"r{index}"}}))
        page.wait_for_timeout(100)
    last_change = time.monotonic()
    page.wait_for_timeout(4000)
    # first within 0.4-1.4 s of the first change, the next 2.5 s later (changes still
    # coming), the last 2.5 s after that: after the last change
    assert len(fetched) == 3, fetched
    assert all(later - earlier > EVERY - 0.2 for earlier, later in itertools.pairwise(fetched))
    assert fetched[-1] > last_change
    expect(page.locator("#dashboard-stats")).not_to_be_empty()
