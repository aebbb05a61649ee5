"""The run page's trace tab in a real browser (1280 and 390 px): a delegating run's trace
shows the child run nested under the call that started it, with its own spans, and
totals equal to the run's usage; a deep link to a span opens and highlights it; the
trace of a waiting run follows the decision live."""

from __future__ import annotations

from django.core.management import call_command
from playwright.sync_api import expect

from runs.models import Run, Ticket
from tests.browser.helpers import login, post, start_run, wait_db, wait_status
from tests.browser.test_mobile_layout import PAGE_WIDTH, PHONE
from tests.factories import user_with_role


def approve(page, run_id: str) -> None:
    ticket = wait_db(
        lambda: Ticket.objects.filter(run_id=run_id, status="pending").first(),
        f"a pending ticket on run {run_id}",
    )
    assert post(page, f"/tickets/{ticket.pk}/decide", {"action": "approve"}).ok


def open_trace(page, url: str) -> None:
    page.goto(url)
    expect(page.locator("#tab-trace")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#run-trace-panel")).to_be_visible()
    expect(page.locator("#run-overview")).to_be_hidden()
    expect(page.locator("#trace-root")).to_be_attached()


def test_a_delegating_runs_trace_nests_its_child_and_deep_links_open_a_span(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    parent_id = start_run(page, "coordinator", "delegate: please write a note about lunch")
    child = wait_db(
        lambda: Run.objects.filter(parent_run_id=parent_id).first(), "the child run", timeout=20
    )
    approve(page, str(child.pk))
    parent = wait_status(parent_id, "done", timeout=30)
    child.refresh_from_db()

    # the tab: the overview first, the trace a click away
    page.goto(f"/runs/{parent_id}/")
    expect(page.locator("#run-overview")).to_be_visible()
    expect(page.locator("#run-trace-panel")).to_be_hidden()
    page.get_by_role("tab", name="Trace").click()
    expect(page.locator("#run-trace-panel")).to_be_visible()
    assert page.url.endswith("#trace")

    # totals: the run's own usage
    totals = page.locator("#trace-totals")
    expect(totals).to_have_attribute("data-input-tokens", str(parent.input_tokens))
    expect(totals).to_have_attribute("data-output-tokens", str(parent.output_tokens))
    expect(totals).to_contain_text(f"{parent.input_tokens} in · {parent.output_tokens} out")
    expect(page.locator("#trace-children-totals")).to_contain_text(
        f"{child.input_tokens} in · {child.output_tokens} out"
    )

    # the child run, under the parent's delegating call, with its own spans
    call_span = page.locator("details.span.k-tool", has_text="agent_run_approver").first
    nested = call_span.locator("details.span.k-child")
    expect(nested).to_have_count(1)
    expect(nested.locator("> summary")).to_contain_text("approver")
    expect(nested.locator("details.span.k-activation")).to_have_count(2)
    expect(nested.locator("details.span.k-step").first).to_be_visible()
    expect(nested.locator("details.span.k-inference").first).to_be_visible()
    ticket = nested.locator("details.span.k-ticket").first
    expect(ticket).to_contain_text("Approved by opa")

    # a span's events (its payloads) load when it opens
    tool = nested.locator("details.span.k-tool", has_text="write_note").first
    expect(tool).not_to_have_attribute("open", "")
    tool.locator("> summary .span-name").click()
    events = tool.locator("> .span-body > details.events")
    expect(events).to_have_attribute("open", "")
    expect(events.locator(".payload pre").first).to_contain_text('"arguments"')
    expect(events.locator(".payload")).to_have_count(2)  # ready, done

    # a deep link: reloading it opens the trace, the span and all around it
    key = ticket.get_attribute("id")
    assert key and key.startswith("span-")
    page.goto("/")
    open_trace(page, f"/runs/{parent_id}/#{key}")
    target = page.locator(f"#{key}")
    expect(target).to_have_class(__import__("re").compile(r"\bspan-hit\b"))
    expect(target.locator("> summary")).to_be_in_viewport()
    assert target.evaluate(
        "el => { for (let e = el; e; e = e.parentElement) {"
        " if (e.tagName === 'DETAILS' && !e.open) return false; } return true; }"
    )
    # and its link on the page moves the highlight there
    inference = nested.locator("details.span.k-inference").first
    inference.locator("> summary .span-link").click()
    expect(inference).to_have_class(__import__("re").compile(r"\bspan-hit\b"))
    expect(target).not_to_have_class(__import__("re").compile(r"\bspan-hit\b"))

    # on a phone: the trace fits the width, the child still nested and readable
    page.set_viewport_size(PHONE)
    open_trace(page, f"/runs/{parent_id}/#trace")
    expect(page.locator("details.span.k-child > summary")).to_be_visible()
    width = page.evaluate(PAGE_WIDTH)
    assert width["scroll"] <= width["client"], width


def test_a_waiting_runs_trace_follows_the_decision_live(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opb")
    page = new_page()
    login(page, "opb")
    run_id = start_run(page, "approver", "please write a note about the retro")
    wait_status(run_id, "waiting")
    open_trace(page, f"/runs/{run_id}/#trace")
    expect(page.locator("h1 .conn, #conn")).to_have_text("live")
    ticket = page.locator("details.span.k-ticket")
    expect(ticket).to_contain_text("Not decided yet")
    expect(page.locator("details.span.k-activation")).to_have_count(1)

    approve(page, run_id)
    wait_status(run_id, "done")
    expect(ticket).to_contain_text("Approved by opb", timeout=10_000)
    expect(page.locator("details.span.k-activation")).to_have_count(2)
    run = Run.objects.get(pk=run_id)
    expect(page.locator("#trace-totals")).to_have_attribute(
        "data-input-tokens", str(run.input_tokens)
    )
