"""Forking a run on its page in a real browser against a real server (conftest.py): pick
a step boundary, edit the tool result it copies (the textarea comes prefilled), land on
the new run, see where it was forked from and its different answer once it finishes."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from playwright.sync_api import expect

from tests.browser.helpers import login, run_id_of, start_run, wait_status
from tests.factories import call, scripted_agent, user_with_role

ORIGINAL = '{"expression": "5*7", "result": 35}'
EDITED = '{"expression": "5*7", "result": 36}'


def settled(page: Any, action: Callable[[], Any]) -> None:
    """Do `action`, then wait for the swap it causes to settle (htmx:afterSettle)."""
    page.evaluate(
        """() => { window.__settled = false; document.body.addEventListener(
            "htmx:afterSettle", () => { window.__settled = true; }, { once: true }); }"""
    )
    action()
    # a function, not an expression: the page's Content-Security-Policy forbids eval()
    page.wait_for_function("() => window.__settled === true", timeout=30_000)


def test_fork_from_a_step_with_an_edited_tool_result(new_page):
    scripted_agent(
        [
            {"text": "computing", "tool_calls": [call("calculator", {"expression": "2+3"})]},
            {"text": "again", "tool_calls": [call("calculator", {"expression": "5*7"})]},
            {"text": "The answer is {last_tool_result}."},
        ],
        tools=["calculator"],
        slug="counter",
    )
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    original = wait_status(start_run(page, "counter", "compute"), "done")
    page.goto(f"/runs/{original.pk}/")
    expect(page.locator("#run-header")).to_contain_text(f"The answer is {ORIGINAL}.")

    page.locator("#fork-panel summary").click()
    form = page.locator("#fork-form")
    # each choice re-renders the form (htmx); the next choice waits until htmx has settled
    # the new form (its controls are live only then: a change made in between is lost)
    settled(page, lambda: form.locator("input[name=step][value='2']").check())
    page.locator("#fork-form[data-step='2']").wait_for()
    settled(page, lambda: page.locator("#fork-form select[name=edit_seq]").select_option("5"))
    textarea = page.locator("#fork-form textarea[name=edit_text]")
    expect(textarea).to_have_value(ORIGINAL)  # prefilled with the tool result
    textarea.fill(EDITED)
    page.locator("#fork-form").get_by_role("button", name="Fork").click()

    expect(page).not_to_have_url(re.compile(str(original.pk)))
    fork_id = run_id_of(page)
    provenance = page.locator(".fork-provenance")
    expect(provenance).to_contain_text("forked from run")
    expect(provenance).to_contain_text("at step 2, edited message #5 (tool)")
    expect(provenance.get_by_role("link", name="compare with original")).to_have_attribute(
        "href", f"/runs/compare/?a={original.pk}&b={fork_id}"
    )
    # the fork runs on a worker; once the database has its answer the page shows it (read
    # again: this test is about forking, following a run live has tests of its own)
    fork = wait_status(fork_id, "done")
    assert fork.final_output == f"The answer is {EDITED}."
    page.reload()
    expect(page.locator("#run-header")).to_contain_text(f"The answer is {EDITED}.")

    page.goto(f"/runs/{original.pk}/")
    expect(page.locator("#fork-count")).to_have_text("1 fork of this run:")
    expect(page.locator("#run-header")).to_contain_text(f"The answer is {ORIGINAL}.")
