"""An MCP tool call that asks first, in a real browser against a real server: the demo's
`toolsmith` calls `reverse_text` of the repository's MCP server (stdio, started by the
server's worker); the operator edits the argument in the form the tool's schema gives,
and the edited call is what reaches the MCP server."""

from __future__ import annotations

from django.core.management import call_command
from playwright.sync_api import expect

from runs.models import RunEvent, Ticket
from tests.browser.helpers import login, start_run, wait_db
from tests.factories import user_with_role


def test_an_operator_edits_an_mcp_call_and_the_edit_reaches_the_server(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    run_id = start_run(page, "toolsmith", "reverse this: abc")
    wait_db(
        lambda: Ticket.objects.filter(run_id=run_id, status="pending").exists(),
        "the reverse_text ticket",
    )
    page.goto(f"/runs/{run_id}/")
    expect(page.locator("#conn")).to_have_text("live")
    ticket = page.locator("#run-tickets .ticket")
    expect(ticket).to_contain_text("mcp__demo__reverse_text")
    ticket.locator("summary", has_text="Edit").click()
    form = ticket.locator("form.edit-form")
    text = form.locator("[name=arg_text]")
    expect(text).to_have_value("abc")
    text.fill("stressed")
    form.get_by_role("button", name="Run with these arguments").click()
    expect(page.locator("#run-status .badge")).to_have_attribute("title", "done · natural")
    wait_db(
        lambda: RunEvent.objects.filter(run_id=run_id, event_type="tool_call_resumed").exists(),
        "the edited call's result",
    )
    resumed = RunEvent.objects.get(run_id=run_id, event_type="tool_call_resumed").payload
    assert resumed["result"]["text"] == "desserts"
