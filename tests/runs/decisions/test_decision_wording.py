"""What the page says after a decision: the past tense of every decision kind, from one
table (runs/wording.py), never a verb with a "d" glued on."""

from __future__ import annotations

import pytest

from runs.models import Decision, Run, Ticket
from runs.services.submission_flow import run_start
from runs.wording import DECISION_DONE, decision_done
from tests.factories import call, scripted_agent, user_with_role
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

EXPECTED = {
    "approve": "Approved write_note.",
    "edit": "Edited and approved write_note.",
    "reject": "Rejected write_note.",
    "respond": "Answered ask_human.",
}


def test_every_decision_kind_has_its_past_tense():
    assert set(DECISION_DONE) == set(Decision.Action.values)
    assert decision_done("reject", "write_note") == "Rejected write_note."


def _waiting(tool: str) -> Ticket:
    arguments = {"question": "which city?"} if tool == "ask_human" else {"title": "t", "body": "b"}
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call(tool, arguments)]}, {"text": "ok"}],
        # ask_human opens its own ticket (answered); another tool asks permission
        permission={"default_behavior": "allow" if tool == "ask_human" else "ask"},
        tools=[tool],
    )
    run = drive(run_start(agent=agent, messages="go"))
    assert run.status == Run.Status.WAITING, run.status_reason
    return Ticket.objects.get(run=run, status=Ticket.Status.PENDING)


@pytest.mark.parametrize("action", sorted(EXPECTED))
def test_the_page_says_what_was_decided_in_the_past_tense(client, action):
    client.force_login(user_with_role("operator", "opa"))
    ticket = _waiting("ask_human" if action == "respond" else "write_note")
    form = {"action": action, "answer": "Paris", "arg_title": "t2", "arg_body": "b"}
    response = client.post(f"/tickets/{ticket.pk}/decide", form, HTTP_HX_REQUEST="true")
    assert response.status_code == 200, response.content[:500]
    html = response.content.decode()
    assert EXPECTED[action] in html
    assert "dd " not in html.replace("Added ", "")
