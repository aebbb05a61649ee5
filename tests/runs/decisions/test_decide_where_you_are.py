"""Decisions where the operator is (issue 29, item 2): an inbox row's own Approve, Reject
(its reason inline when the team requires one) and Answer, through the decide service
with the inbox's guards; the "who" cell saying "nobody" once; the thread page's ticket
card and its composer offering an agent only when no run is open; and the notification
texts in plain words."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from common.audit import Actor
from common.teams import team_freeze
from runs.models import Decision, Run, Ticket
from runs.operations.services.notify_send import slack_body, summary
from runs.services.tickets import decision_submit
from tests.factories import team, user_with_role, waiting_run
from tests.runs.helpers import drive
from tests.runs.test_pages_clarity import asking_human

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def ticket_of(run: Run) -> Ticket:
    return Ticket.objects.for_operators().get(run=run)


def row_of(page: str, ticket: Ticket) -> str:
    found = re.search(rf'<tr id="ticket-row-{ticket.pk}".*?</tr>', page, re.S)
    assert found, "no row"
    return found.group(0)


def decide_url(ticket: Ticket, query: str = "") -> str:
    return reverse("runs:inbox-decide", args=[ticket.pk]) + query


# --- the inbox rows -------------------------------------------------------------------------------


def test_each_row_has_its_own_buttons_and_says_nobody_once(operator_client):
    team("default", reason_required=True)
    approval = ticket_of(waiting_run())
    question = ticket_of(asking_human("Which room?"))
    page = operator_client.get(reverse("runs:inbox")).content.decode()
    row = row_of(page, approval)
    assert f'form="approve-{approval.pk}"' in row and f'form="reject-{approval.pk}"' in row
    assert 'placeholder="Reason (required)"' in row and "required by team Default" in row
    assert f'<form id="approve-{approval.pk}"' in page  # outside the bulk form: no nesting
    assert page.index(f'<form id="approve-{approval.pk}"') > page.index("</table>")
    row = row_of(page, question)
    assert f'form="answer-{question.pk}"' in row and f'form="approve-{question.pk}"' not in row
    # "nobody" once: the assign select's, not a cell beside it
    assert '<span class="muted small">nobody</span>' not in page
    assert page.count('<option value="">nobody</option>') == 2
    viewer_client = Client()
    viewer_client.force_login(user_with_role("viewer", "vic"))
    viewer = viewer_client.get(reverse("runs:inbox")).content.decode()
    assert viewer.count('<span class="muted small">nobody</span>') == 2
    assert "inbox-row-actions" not in viewer


def test_approve_from_a_row_returns_the_list_with_the_outcome(operator_client):
    ticket = ticket_of(waiting_run())
    other = ticket_of(waiting_run("dinner"))
    response = operator_client.post(decide_url(ticket, "?sort=newest"), {"action": "approve"}, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "1 approved." in html and 'hx-swap-oob="innerHTML"' in html
    assert f'id="ticket-row-{other.pk}"' in html and f'id="ticket-row-{ticket.pk}"' not in html
    assert "newest first" in html  # the list keeps its filters
    decision = Decision.objects.get(ticket=ticket)
    assert (decision.action, decision.actor_label) == ("approve", "alice")


def test_a_reject_without_the_teams_reason_is_refused_inside_its_row(operator_client):
    team("default", reason_required=True)
    ticket = ticket_of(waiting_run())
    response = operator_client.post(decide_url(ticket), {"action": "reject"}, **HX)
    assert response.status_code == 400
    assert response["HX-Retarget"] == "#inbox-list"
    row = row_of(response.content.decode(), ticket)
    assert "form-error" in row and "reason" in row.lower()
    assert Ticket.objects.get(pk=ticket.pk).status == Ticket.Status.PENDING
    response = operator_client.post(decide_url(ticket), {"action": "reject", "comment": "no"})
    assert response.status_code == 302 and response["Location"] == reverse("runs:inbox")
    decision = Decision.objects.get(ticket=ticket)
    assert (decision.action, decision.comment) == ("reject", "no")


def test_answer_a_question_from_its_row(operator_client):
    run = asking_human("Which room?")
    ticket = ticket_of(run)
    response = operator_client.post(decide_url(ticket), {"action": "respond", "answer": " "}, **HX)
    assert response.status_code == 400 and "write an answer" in response.content.decode()
    response = operator_client.post(
        decide_url(ticket), {"action": "respond", "answer": "the blue room"}, **HX
    )
    assert response.status_code == 200 and "1 answered." in response.content.decode()
    assert Decision.objects.get(ticket=ticket).payload == "the blue room"
    assert drive(Run.objects.get(pk=run.pk)).status == Run.Status.DONE


def test_a_frozen_teams_row_is_refused_and_its_buttons_disabled(operator_client):
    ticket = ticket_of(waiting_run())
    team_freeze(team=team("default"), actor=Actor(label="ops", source="ui"), reason="incident")
    page = operator_client.get(reverse("runs:inbox")).content.decode()
    row = row_of(page, ticket)
    assert re.search(r'form="approve-[^"]*" data-row-action="approve"[^>]* disabled', row)
    assert f'<form id="approve-{ticket.pk}"' not in page
    response = operator_client.post(decide_url(ticket), {"action": "approve"}, **HX)
    assert response.status_code == 409
    assert Ticket.objects.get(pk=ticket.pk).status == Ticket.Status.PENDING


def test_a_viewer_may_not_decide_from_a_row(viewer_client):
    ticket = ticket_of(waiting_run())
    response = viewer_client.post(decide_url(ticket), {"action": "approve"})
    assert response.status_code == 403
    assert not Decision.objects.exists()


# --- the thread page ------------------------------------------------------------------------------


def test_the_thread_page_shows_the_open_tickets_card_and_no_agent_choice(operator_client):
    run = waiting_run()
    ticket = ticket_of(run)
    url = reverse("runs:thread-detail", args=[run.thread_id])
    page = operator_client.get(url).content.decode()
    assert 'id="thread-tickets"' in page and f'id="ticket-{ticket.pk}"' in page
    assert reverse("runs:ticket-decide", args=[ticket.pk]) in page
    assert 'select name="agent"' not in page
    assert f'<input type="hidden" name="agent" value="{run.agent.slug}">' in page
    decision_submit(ticket=ticket, action="approve", actor=Actor(label="olga", source="ui"))
    drive(Run.objects.get(pk=run.pk))
    page = operator_client.get(url).content.decode()
    assert 'id="thread-tickets"' not in page and 'select name="agent"' in page


def test_a_message_sent_while_a_run_is_open_goes_to_its_agent(operator_client):
    run = waiting_run()
    url = reverse("runs:thread-send", args=[run.thread_id])
    response = operator_client.post(url, {"agent": run.agent.slug, "message": "and then"})
    assert response.status_code == 302
    assert run.thread.inputs.get().agent_id == run.agent_id


# --- notifications ----------------------------------------------------------------------------------


def test_notification_texts_say_it_plainly():
    payload = {
        "event": "run.failed",
        "run": {"id": "r1", "status": "done", "status_reason": "stopped:max_rounds"},
    }
    _, lines = summary(payload)
    assert "Status: Stopped — step limit reached" in lines
    ticket = {"tool": "write_note", "deadline_at": "2026-11-27T10:00:00Z"}
    payload = {
        "event": "ticket.opened",
        "run": {"id": "r1", "status": "waiting", "status_reason": "suspended"},
        "ticket": {**ticket, "default_action": "reject"},
    }
    _, lines = summary(payload)
    assert "(then rejected automatically)" in " ".join(lines)
    assert "Status: Waiting for a decision" in lines
    context = slack_body({**payload, "url": "https://x"})["blocks"][1]["elements"][0]["text"]
    assert "ticket.opened" not in context and "Ticket opened" in context
