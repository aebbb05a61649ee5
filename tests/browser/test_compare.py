"""Comparing two runs in a real browser (docs/compare.md): tick two rows of the runs list,
"Compare selected" opens the compare page with both runs side by side and the step whose
answer differs highlighted; the button is enabled only while exactly two are ticked."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.helpers import login, start_run, wait_status
from tests.factories import call, scripted_agent, user_with_role


def calculator_agent(slug: str, expression: str, answer: str) -> None:
    scripted_agent(
        [
            {
                "text": "let me compute",
                "tool_calls": [call("calculator", {"expression": expression})],
            },
            {"text": answer},
        ],
        slug=slug,
    )


def test_tick_two_runs_and_compare_them(new_page):
    calculator_agent("adder", "2+2", "the answer is 4")
    calculator_agent("multiplier", "2*3", "the answer is 6")
    user_with_role("operator", "opal")
    page = new_page()
    login(page, "opal")
    first = start_run(page, "adder", "compute it")
    second = start_run(page, "multiplier", "compute it")
    third = start_run(page, "adder", "compute it again")
    for run_id in (first, second, third):
        wait_status(run_id, "done")

    page.goto("/runs/")
    button = page.get_by_role("button", name="Compare selected")
    expect(button).to_be_disabled()
    page.locator(f"#run-row-{first} input[data-compare-pick]").check()
    expect(button).to_be_disabled()
    page.locator(f"#run-row-{second} input[data-compare-pick]").check()
    expect(button).to_be_enabled()
    page.locator(f"#run-row-{third} input[data-compare-pick]").check()
    expect(button).to_be_disabled()  # three ticked
    page.locator(f"#run-row-{third} input[data-compare-pick]").uncheck()
    expect(button).to_be_enabled()
    button.click()

    page.wait_for_url(f"**/runs/compare/?a={first}&b={second}")
    expect(page.get_by_role("heading", name="Compare runs")).to_be_visible()
    expect(page.locator("#compare-summary thead")).to_contain_text(first[-8:])
    expect(page.locator("#compare-summary thead")).to_contain_text(second[-8:])
    answer = page.locator('tr.compare-step[data-step="1"]')
    expect(answer).to_have_class("compare-step compare-differs")
    expect(answer.locator("del")).to_have_text("4")
    expect(answer.locator("ins")).to_have_text("6")
    expect(page.locator('tr.compare-step[data-step="input"]')).to_have_class("compare-step")
    expect(page.locator('tr.compare-step[data-step="0"]')).to_contain_text('{"expression": "2*3"}')
    expect(page.locator('#compare-summary tr[data-summary="agent"]')).to_have_class(
        "compare-differs"
    )
    # the highlight is visible: a differing row has its own background
    background = answer.locator("td").first.evaluate("e => getComputedStyle(e).backgroundColor")
    plain = page.locator('tr.compare-step[data-step="input"] td').first.evaluate(
        "e => getComputedStyle(e).backgroundColor"
    )
    assert background != plain
