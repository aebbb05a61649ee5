"""The thread page's pending-input panel follows input queued and retracted elsewhere: in
a terminal (`manage.py send_input`, `manage.py inputs --retract`: another process) and
through the API, without a reload."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import expect

from runs.models import PendingInput, Run
from tests.browser.helpers import login, mark_page, start_run, still_same_page, wait_status
from tests.browser.test_terminal_commands import terminal
from tests.factories import call, scripted_agent, token_for, user_with_role

# "within a few seconds": the page throttles its refetches (up to 1.4 s after a change);
# the rest is margin for a busy two-core machine
SHOWN_WITHIN_MS = 6000
QUEUED_LINE = re.compile(r"queued as input #\d+ \((?P<id>[0-9a-f-]{36})\)")


def test_input_queued_and_retracted_elsewhere_shows_on_the_open_thread_page(
    new_page, live_server_url, tmp_path
):
    scripted_agent(
        [
            {"text": "", "tool_calls": [call("ask_human", {"question": "Which city?"})]},
            {"text": "thanks"},
        ],
        slug="asker",
        tools=["ask_human"],
    )
    operator = user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    # the server runs it until it waits for an answer: new input queues behind it
    run: Run = wait_status(start_run(page, "asker", "go"), "waiting")
    page.goto(f"/threads/{run.thread_id}/")
    mark_page(page)
    expect(page.locator(".conn")).to_have_text("live")
    panel = page.locator("#thread-inputs")
    expect(panel).to_contain_text("No pending input.")

    # a terminal queues, then retracts
    said = terminal(tmp_path, "send_input", str(run.thread_id), "queued in a terminal")
    found = QUEUED_LINE.search(said)
    assert found, said
    expect(panel).to_contain_text("queued in a terminal", timeout=SHOWN_WITHIN_MS)
    expect(page.locator("#pending-count")).to_have_text("1")
    terminal(tmp_path, "inputs", "--retract", found["id"])
    expect(panel).not_to_contain_text("queued in a terminal", timeout=SHOWN_WITHIN_MS)
    expect(panel).to_contain_text("No pending input.")

    # the API queues, then retracts
    api = httpx.Client(
        base_url=f"{live_server_url}/api/v1",
        headers={"Authorization": f"Bearer {token_for(operator)}"},
        timeout=30,
    )
    sent = api.post(
        f"/threads/{run.thread_id}/messages",
        json={"messages": [{"role": "user", "content": "queued through the API"}]},
    )
    assert sent.status_code == 202, sent.text
    expect(panel).to_contain_text("queued through the API", timeout=SHOWN_WITHIN_MS)
    assert api.delete(f"/inputs/{sent.json()['id']}").status_code == 200
    expect(panel).to_contain_text("No pending input.", timeout=SHOWN_WITHIN_MS)
    assert not PendingInput.objects.filter(status=PendingInput.Status.PENDING).exists()
    assert still_same_page(page)
