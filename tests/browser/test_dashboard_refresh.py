"""The dashboard's live figures in a real browser: the page asks its websocket for them
(`ws/dashboard/?figures=1`), the server pushes them (`{"type": "figures", "html"}`,
rendered once per process for every tab) and the page puts them in place as they come;
it never refetches them, however many runs change (the socket is played by the test)."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from django.urls import reverse
from playwright.sync_api import expect

from tests.browser.helpers import login
from tests.factories import user_with_role

QUIET_MS = 3000  # longer than the old refetch throttle took to fire (0.4-1.4 s, then 2.5 s)


def test_a_dashboard_shows_the_pushed_figures_and_never_refetches_them(new_page):
    user_with_role("viewer", "watcher")
    page = new_page()
    login(page, "watcher")
    sockets: list[Any] = []

    def serve(socket: Any) -> None:
        sockets.append(socket)
        socket.send(json.dumps({"type": "ready"}))

    page.route_web_socket(re.compile(r"/ws/dashboard/"), serve)
    stats_path = reverse("runs:dashboard-stats")
    fetched: list[str] = []
    page.on(
        "request",
        lambda request: (
            fetched.append(request.url) if urlsplit(request.url).path == stats_path else None
        ),
    )
    page.goto("/")
    expect(page.locator("h1 .conn")).to_have_text("live")
    assert [urlsplit(socket.url)[2:4] for socket in sockets] == [("/ws/dashboard/", "figures=1")]
    stats = page.locator("#dashboard-stats")
    expect(stats).to_contain_text("open tickets")  # rendered with the page

    def runs_change(count: int) -> None:
        for index in range(count):
            sockets[0].send(json.dumps({"type": "run", "run": {"id": f"r{index}"}}))
            page.wait_for_timeout(50)

    runs_change(40)
    page.wait_for_timeout(QUIET_MS)
    assert fetched == []
    expect(stats).to_contain_text("open tickets")  # a `run` message leaves the figures be

    figures = '<section class="card stats"><b id="pushed">pushed figures 7</b></section>'
    sockets[0].send(json.dumps({"type": "figures", "html": figures}))
    expect(stats.locator("#pushed")).to_have_text("pushed figures 7")
    expect(stats).not_to_contain_text("open tickets")  # replaced, not appended

    # The server escapes what it renders; the page inserts its HTML as it is.
    escaped = '<p id="escaped">&lt;img src=x onerror=alert(1)&gt;</p>'
    sockets[0].send(json.dumps({"type": "figures", "html": escaped}))
    expect(stats.locator("#escaped")).to_have_text("<img src=x onerror=alert(1)>")
    assert stats.inner_html() == escaped
    expect(stats.locator("img")).to_have_count(0)
    expect(stats.locator("#pushed")).to_have_count(0)

    runs_change(20)
    page.wait_for_timeout(QUIET_MS)
    assert fetched == []
    assert stats.inner_html() == escaped
    assert page.dialogs == []
