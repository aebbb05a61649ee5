""" "Make this a rule" on the run page (runs/decisions/views/rules.py): offered to admins only, for
decided permission tickets; the page's proposal, preview and "Save to draft"; escaping."""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from agents.models import Agent, AgentVersion
from agents.services.rules_from_decisions import AUDIT_ACTION
from common.audit import Actor
from common.models import AuditEntry
from runs.models import Ticket
from runs.services.tickets import decision_submit
from tests.factories import APPROVAL, bearer, call, token_for, user_with_role, waiting_run

pytestmark = pytest.mark.django_db

XSS = "<img src=x onerror=alert(1)><script>alert(2)</script>"


def decided(title: str = "lunch", action: str = "approve") -> Ticket:
    run = waiting_run(title)
    ticket = Ticket.objects.get(run=run)
    decision_submit(ticket=ticket, action=action, actor=Actor(label="bob"))
    return Ticket.objects.get(pk=ticket.pk)


def rule_url(ticket: Ticket, **query: str) -> str:
    url = reverse("runs:ticket-rule", args=[ticket.pk])
    return f"{url}?{urlencode(query)}" if query else url


@pytest.fixture
def admin_client(client: Any) -> Any:
    client.force_login(user_with_role("admin", "ada"))
    return client


def run_page(client: Any, ticket: Ticket) -> str:
    return client.get(reverse("runs:run-detail", args=[ticket.run_id])).content.decode()


def test_admins_see_the_rule_buttons_on_decided_tickets_operators_do_not(admin_client, client):
    ticket = decided()
    page = run_page(admin_client, ticket)
    assert "Make this a rule" in page
    for behavior in ("allow", "ask", "deny"):
        assert html.escape(rule_url(ticket, behavior=behavior)) in page
    tickets_panel = admin_client.get(reverse("runs:run-tickets", args=[ticket.run_id]))
    assert "always allow" in tickets_panel.content.decode()
    client.force_login(user_with_role("operator", "olga"))
    assert "Make this a rule" not in run_page(client, ticket)


def test_pending_tickets_offer_no_rule_and_the_page_refuses_them(admin_client):
    run = waiting_run()
    ticket = Ticket.objects.get(run=run)
    assert "Make this a rule" not in run_page(admin_client, ticket)
    response = admin_client.get(rule_url(ticket, behavior="allow"))
    assert response.status_code == 409
    assert "decided permission ticket" in response.content.decode()


def test_operators_and_viewers_get_403_and_change_nothing(client):
    ticket = decided()
    for role in ("operator", "viewer"):
        client.force_login(user_with_role(role, f"{role}-x"))
        assert client.get(rule_url(ticket, behavior="allow")).status_code == 403
        response = client.post(rule_url(ticket), {"behavior": "allow", "pattern": "write_note"})
        assert response.status_code == 403
    assert Agent.objects.get(pk=ticket.run.agent_id).permission == APPROVAL
    assert not AuditEntry.objects.filter(action=AUDIT_ACTION).exists()


def test_the_page_proposes_the_pattern_and_previews_the_draft_with_it(admin_client):
    ticket = decided()
    page = admin_client.get(rule_url(ticket, behavior="allow")).content.decode()
    assert 'value="write_note(title ~ &quot;lunch&quot;)"' in page
    assert "any call of write_note" in page
    assert "The new rule decides this call. Runs" in page
    assert 'id="rule-save-form"' in page
    # an edited pattern is previewed as typed
    page = admin_client.get(
        rule_url(ticket, behavior="allow", pattern='write_note(title ~ "din*")')
    ).content.decode()
    assert "The new rule does not match this call." in page
    page = admin_client.get(
        rule_url(ticket, behavior="ask", pattern="write_note(")
    ).content.decode()
    assert "Not a valid rule" in page and 'id="rule-save-form"' not in page
    assert admin_client.get(rule_url(ticket, behavior="often")).status_code == 400


def test_save_to_draft_adds_the_rule_audits_and_links_to_publish(admin_client):
    ticket = decided()
    agent = ticket.run.agent
    pattern = 'write_note(title ~ "lunch")'
    response = admin_client.post(rule_url(ticket), {"behavior": "allow", "pattern": pattern})
    assert response.status_code == 302
    assert response["Location"] == rule_url(ticket, behavior="allow", pattern=pattern)
    agent.refresh_from_db()
    assert agent.permission["rules"][-1] == {"tool": pattern, "behavior": "allow"}
    assert AgentVersion.objects.get(agent=agent).spec["permission"] == APPROVAL
    entry = AuditEntry.objects.get(action=AUDIT_ACTION)
    assert entry.actor_label == "ada" and entry.source == "ui" and str(ticket.pk) in entry.comment
    page = admin_client.get(response["Location"]).content.decode()
    assert "Saved rule 2" in page and "Draft has unpublished changes" in page
    assert reverse("admin:agents_agent_publish", args=[agent.pk]) in page
    assert "already" in page and 'id="rule-save-form"' not in page


def test_an_invalid_pattern_is_not_saved(admin_client):
    ticket = decided()
    response = admin_client.post(rule_url(ticket), {"behavior": "deny", "pattern": "write_note("})
    assert response.status_code == 400
    assert "Not saved:" in response.content.decode()
    assert Agent.objects.get(pk=ticket.run.agent_id).permission == APPROVAL


def test_arguments_with_markup_are_escaped_on_the_page_and_in_the_pattern(admin_client):
    run = waiting_run(
        script=[
            {"tool_calls": [call("write_note", {"title": XSS, "body": 'say "hi"'})]},
            {"text": "done"},
        ]
    )
    ticket = Ticket.objects.get(run=run)
    decision_submit(ticket=ticket, action="reject", actor=Actor(label="bob"))
    for page in (
        run_page(admin_client, ticket),
        admin_client.get(rule_url(ticket, behavior="deny")).content.decode(),
    ):
        assert "<script>alert(2)" not in page and "<img src=x" not in page
    page = admin_client.get(rule_url(ticket, behavior="deny")).content.decode()
    assert "&lt;script&gt;alert(2)" in page
    assert "The new rule decides this call. Blocked" in page
    assert html.escape(f'write_note(title ~ "{XSS}")') in page
    # the proposed (escaped) pattern saves and blocks exactly this call
    response = admin_client.post(
        rule_url(ticket), {"behavior": "deny", "pattern": f'write_note(title ~ "{XSS}")'}
    )
    assert response.status_code == 302
    rules = Agent.objects.get(pk=run.agent_id).permission["rules"]
    assert rules[-1] == {"tool": f'write_note(title ~ "{XSS}")', "behavior": "deny"}


# -- the API: POST /api/v1/tickets/{id}/rule-proposal ----------------------------------------


def api_url(ticket: Ticket) -> str:
    return f"/api/v1/tickets/{ticket.pk}/rule-proposal"


def test_api_proposes_previews_and_saves_for_admins_only():
    ticket = decided()
    agent = ticket.run.agent
    admin = bearer(token_for(user_with_role("admin", "ada"), "rules"))
    operator = bearer(token_for(user_with_role("operator", "olga"), "ops"))
    refused = operator.post(api_url(ticket), {"behavior": "allow"}, format="json")
    assert refused.status_code == 403

    body = admin.post(api_url(ticket), {"behavior": "allow"}, format="json").json()
    assert body["rule"] == {"tool": 'write_note(title ~ "lunch")', "behavior": "allow"}
    assert [o["pattern"] for o in body["options"]][-1] == "write_note"
    preview = body["preview"]
    assert preview["decides"] and preview["outcome"] == "runs" and preview["position"] == 2
    assert preview["current"]["outcome"] == "asks"
    assert [c["tool"] for c in preview["checks"]] == ["write_note", 'write_note(title ~ "lunch")']
    assert body["saved"] is None
    agent.refresh_from_db()
    assert agent.permission == APPROVAL

    bad = admin.post(
        api_url(ticket), {"behavior": "deny", "pattern": "x(", "save": True}, format="json"
    )
    assert bad.status_code == 400
    assert admin.post(api_url(ticket), {"behavior": "often"}, format="json").status_code == 400

    saved = admin.post(
        api_url(ticket), {"behavior": "deny", "pattern": "write_note", "save": True}, format="json"
    ).json()
    assert saved["saved"]["added"] and saved["saved"]["draft_status"] == "changed"
    assert saved["preview"]["already"] and saved["preview"]["outcome"] == "blocked"
    agent.refresh_from_db()
    assert agent.permission["rules"][-1] == {"tool": "write_note", "behavior": "deny"}
    assert AuditEntry.objects.get(action=AUDIT_ACTION).source == "api"


def test_api_refuses_a_pending_ticket_and_an_unknown_one():
    ticket = Ticket.objects.get(run=waiting_run())
    admin = bearer(token_for(user_with_role("admin", "ada"), "rules"))
    response = admin.post(api_url(ticket), {"behavior": "allow"}, format="json")
    assert response.status_code == 409
    missing = admin.post(
        "/api/v1/tickets/00000000-0000-0000-0000-000000000000/rule-proposal",
        {"behavior": "allow"},
        format="json",
    )
    assert missing.status_code == 404
