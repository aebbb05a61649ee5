"""What an operator does in a browser, and bounded waits on the database the server shares."""

from __future__ import annotations

import re
import time
from typing import Any

from playwright.sync_api import expect

from runs.models import Run
from tests.processes import wait_for

RUN_URL = re.compile(r"/runs/(?P<id>[0-9a-f-]{36})/$")
NOTE_AND_EMAIL_APPROVAL = {
    "default_behavior": "allow",
    "rules": [
        {"tool": "write_note", "behavior": "ask"},
        {"tool": "send_email", "behavior": "ask"},
    ],
}


def login(page: Any, username: str, password: str = "pw", *, admin: bool = False) -> None:
    """Log in through a login form: the site's (/login/), or the admin's (/admin/login/)
    with `admin`. Returns once the page shows the user logged in."""
    page.goto("/admin/login/" if admin else "/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    if admin:
        page.locator("#user-tools").wait_for()
    else:
        page.locator(".whoami").wait_for()
        expect(page.locator(".whoami")).to_contain_text(username)


def route_sockets(page: Any, path: str) -> list[Any]:
    """Route the page's websockets whose URL contains `path` through Playwright, on to the
    server with every frame unchanged. Returns the page-side routes, newest last, for the
    test to drop one (`route.close()` closes the page's socket and the server's)."""
    routes: list[Any] = []

    def handle(route: Any) -> None:
        route.connect_to_server()
        routes.append(route)

    page.route_web_socket(re.compile(re.escape(path)), handle)
    return routes


def wait_new_socket(page: Any, routes: list[Any], count: int, timeout: float = 20) -> Any:
    """Wait until the page opened more than `count` routed sockets; returns the newest."""
    deadline = time.monotonic() + timeout
    while len(routes) <= count:  # the routes arrive while Playwright is called
        assert time.monotonic() < deadline, f"no new socket after {count} within {timeout}s"
        page.wait_for_timeout(50)
    return routes[-1]


def csrf_token(page: Any) -> str:
    for cookie in page.context.cookies():
        if cookie["name"] == "csrftoken":
            return str(cookie["value"])
    raise AssertionError("no csrftoken cookie: open a page first")


def post(page: Any, path: str, form: dict[str, str]) -> Any:
    """POST a form as the page's user (its cookies and CSRF token), like a script would."""
    return page.request.post(path, form=form, headers={"X-CSRFToken": csrf_token(page)})


def start_run(page: Any, agent: str, message: str) -> str:
    """Start a run on a new thread through the new-thread endpoint; returns the run id."""
    response = post(page, "/threads/new", {"agent": agent, "message": message})
    assert response.ok, response.status
    found = RUN_URL.search(response.url)
    assert found, f"not redirected to a run page: {response.url}"
    return found["id"]


def run_id_of(page: Any) -> str:
    found = RUN_URL.search(page.url)
    assert found, page.url
    return found["id"]


def wait_db(predicate: Any, what: str, timeout: float = 20) -> Any:
    """Poll the database (shared with the server) until predicate() is true."""
    return wait_for(predicate, timeout, what, interval=0.1)


def wait_status(run_id: str, status: str, timeout: float = 20) -> Run:
    wait_db(
        lambda: Run.objects.filter(pk=run_id, status=status).exists(),
        f"run {run_id} to be {status}",
        timeout,
    )
    return Run.objects.get(pk=run_id)


def timeline_seqs(page: Any) -> list[int]:
    return [
        int(s)
        for s in page.locator("#run-timeline .ev").evaluate_all(
            "rows => rows.map(r => r.dataset.seq)"
        )
    ]


def mark_page(page: Any) -> None:
    """Tag the document: `still_same_page` is false once the page was reloaded."""
    page.evaluate("window.__noReload = true")


def still_same_page(page: Any) -> bool:
    return bool(page.evaluate("window.__noReload === true"))
