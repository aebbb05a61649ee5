"""Decision outcomes on the run page stay until dismissed: the live refresh of the tickets
panel, which follows every decision, must not take the winner's confirmation or the
loser's "already decided by …" away with it."""

from __future__ import annotations

import re
from typing import Any

from django.core.management import call_command
from playwright.sync_api import expect

from tests.browser.helpers import login, start_run, wait_status
from tests.browser.test_operator_flows import decide_url, pending_ticket
from tests.factories import user_with_role


def tickets_refresh(response: Any) -> bool:
    return response.request.method == "GET" and response.url.endswith("/tickets")


class HeldFrames:
    """Proxies a page's run socket to the server. While `held`, the server's frames wait
    here, so the page keeps showing a ticket someone else already decided (the loser of
    the race); `release` hands them over in order, and the page refreshes its panels."""

    def __init__(self) -> None:
        self.held = False
        self.queue: list[tuple[Any, Any]] = []

    def route(self, ws: Any) -> None:
        server = ws.connect_to_server()

        def from_server(message: Any) -> None:
            if self.held:
                self.queue.append((ws, message))
            else:
                ws.send(message)

        server.on_message(from_server)  # the page's own frames still go to the server

    def release(self) -> None:
        while self.queue:  # frames arriving meanwhile queue behind these, in order
            ws, message = self.queue.pop(0)
            ws.send(message)
        self.held = False


def test_the_winner_and_the_loser_keep_their_outcome_until_they_dismiss_it(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    user_with_role("operator", "opb")
    a = new_page()
    login(a, "opa")
    run_id = start_run(a, "approver", "please write a note about lunch")
    pending_ticket(run_id)

    b = new_page()
    login(b, "opb")
    frames = HeldFrames()
    b.route_web_socket(re.compile(r"/ws/runs/"), frames.route)
    b.goto(f"/runs/{run_id}/")
    expect(b.locator("#conn")).to_have_text("live")
    a.goto(f"/runs/{run_id}/")
    expect(a.locator("#conn")).to_have_text("live")
    frames.held = True  # B hears nothing more: its Approve button stays

    # A wins; the events of the decision and of the finished run refresh A's panel
    with a.expect_response(tickets_refresh):
        with a.expect_response(decide_url) as answer:
            a.get_by_role("button", name="Approve").click()
        assert answer.value.status == 200
    won = a.locator("#run-outcomes .outcome")
    expect(won).to_have_count(1)
    expect(won).to_contain_text("Approved write_note.")
    wait_status(run_id, "done")
    expect(a.locator("#run-status .badge")).to_have_attribute("title", "done · natural")
    expect(a.locator("#run-tickets")).to_contain_text("No open tickets.")
    expect(won).to_contain_text("Approved write_note.")

    # B loses, then its live refresh catches up: the refusal stays
    with b.expect_response(decide_url) as answer:
        b.get_by_role("button", name="Approve").click()
    assert answer.value.status == 409
    lost = b.locator("#run-outcomes .outcome")
    expect(lost).to_contain_text(re.compile(r"already decided by opa at \d{4}-\d\d-\d\dT"))
    with b.expect_response(tickets_refresh):
        frames.release()
    expect(b.locator("#run-status .badge")).to_have_attribute("title", "done · natural")
    expect(b.locator("#run-tickets")).to_contain_text("No open tickets.")
    expect(lost).to_have_count(1)
    expect(lost).to_contain_text("already decided by opa")
    expect(lost).to_have_class(re.compile(r"\berror\b"))

    # until each of them dismisses it
    lost.get_by_role("button", name="Dismiss").click()
    expect(b.locator("#run-outcomes .outcome")).to_have_count(0)
    won.get_by_role("button", name="Dismiss").click()
    expect(a.locator("#run-outcomes .outcome")).to_have_count(0)
    assert not a.dialogs and not b.dialogs
