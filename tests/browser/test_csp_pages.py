"""The pages the other browser tests do not visit, under the site's Content-Security-Policy
(no inline script or style): each renders and works, and none reports a violation (the
`new_page` fixture fails the test on any)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.management import call_command
from playwright.sync_api import expect

from agents.models import Agent, RemoteEndpoint
from tests.browser.helpers import login, start_run
from tests.factories import user_with_role


def test_the_api_docs_run_swagger_ui_from_static_files(new_page):
    user_with_role("operator", "opa")
    page = new_page()
    login(page, "opa")
    page.goto("/api/v1/docs/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Awaken Ops API")
    operation = page.locator(".opblock").first
    expect(operation).to_be_visible()
    operation.locator(".opblock-summary").click()  # expands: parameters and responses
    expect(operation.locator(".opblock-body")).to_be_visible()


def test_the_operator_pages_without_live_updates(new_page):
    call_command("seed_demo", verbosity=0)
    user_with_role("operator", "opa")
    page = new_page()
    page.goto("/login/")
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    login(page, "opa")
    run_id = start_run(page, "approver", "please write a note about lunch")
    for path, heading in (
        ("/threads/", "Threads"),
        ("/audit/", "Audit log"),
        ("/tokens/", "API tokens"),
        (f"/runs/{run_id}/", "Run"),
    ):
        page.goto(path)
        expect(page.locator("h1").first).to_contain_text(heading)
    page.goto("/tokens/")
    page.get_by_label("Name").fill("laptop")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#new-token")).to_be_visible()
    page.get_by_role("button", name="Revoke").click()  # data-confirm: the dialog is dismissed
    assert page.dialogs == ["confirm: Revoke laptop? Clients using it stop working."]


def test_the_agent_admin_pages(new_page):
    call_command("seed_demo", verbosity=0)
    User.objects.create_superuser("root", password="pw")
    agent = Agent.objects.get(slug="approver")
    RemoteEndpoint.objects.create(
        slug="elsewhere", name="Elsewhere", base_url="https://agents.example.com/", health="failing"
    )
    page = new_page()
    login(page, "root", admin=True)
    base = f"/admin/agents/agent/{agent.pk}/"
    for path in (
        "/admin/",
        "/admin/agents/agent/",
        base + "change/",
        base + "validate/",
        base + "versions/",
        base + "permissions/?tool=send_email&arguments=%7B%7D",
        "/admin/agents/modelprovider/",
        "/admin/agents/remoteendpoint/",
        "/admin/agents/remoteendpoint/add/",
    ):
        page.goto(path)
        expect(page.locator("#content")).to_be_visible()
    page.goto("/admin/agents/remoteendpoint/")
    badge = page.locator(".health-badge").first
    expect(badge).to_have_text("Failing")
    assert badge.evaluate("span => getComputedStyle(span).color") == "rgb(198, 40, 40)"
    page.goto(base + "validate/")
    expect(page.locator(".agent-nav")).to_be_visible()
    assert page.locator(".agent-nav").evaluate("nav => getComputedStyle(nav).display") == "flex"
