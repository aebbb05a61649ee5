"""Approvals inbox: query counts that do not grow with the rows, filters, permissions on
the server, the bulk confirmation step, partial failures and escaping."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agents.models import Agent
from common.audit import Actor
from common.models import AuditEntry
from runs.decisions.views.inbox import INBOX_PAGE
from runs.models import Decision, Run, Ticket
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from runs.templatetags.runs_extras import short_id
from tests.factories import call, scripted_agent
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

ASK = {"default_behavior": "ask"}
HX = {"HTTP_HX_REQUEST": "true"}
SCRIPT_TAG = "<script>alert(1)</script>"
IMG_TAG = "<img src=x onerror=alert(1)>"


def asking_agent(tool: str = "write_note", args: dict[str, Any] | None = None, **kwargs) -> Agent:
    args = args if args is not None else {"title": "t", "body": "b"}
    script = [{"text": "", "tool_calls": [call(tool, args)]}, {"text": "ok"}]
    return scripted_agent(script, permission=ASK, **kwargs)


def waiting_tickets(n: int, agent: Agent | None = None) -> list[Ticket]:
    """n runs of one agent, each driven to its ticket."""
    agent = agent or asking_agent()
    runs = []
    for index in range(n):
        run = drive(run_start(agent=agent, messages=f"please {index}"))
        assert run.status == Run.Status.WAITING, run.status_reason
        runs.append(run)
    return list(
        Ticket.objects.filter(run__in=runs, status=Ticket.Status.PENDING).order_by("created_at")
    )


def count_queries(client, url: str) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(queries), response.content.decode()


def bulk(client, tickets: list[Ticket], action: str, htmx: bool = True, **extra: str):
    data: dict[str, Any] = {"ticket": [str(t.pk) for t in tickets], "action": action, **extra}
    return client.post(reverse("runs:inbox-bulk"), data, **(HX if htmx else {}))


# --- reads ---------------------------------------------------------------------------------------


def test_inbox_needs_login(client):
    for name in ["runs:inbox", "runs:inbox-list"]:
        response = client.get(reverse(name))
        assert response.status_code == 302 and "/login/" in response["Location"]
    response = client.post(reverse("runs:inbox-bulk"), {"action": "approve"})
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_page_and_list_query_counts_do_not_grow_with_tickets(operator_client):
    agent = asking_agent()
    waiting_tickets(10, agent)
    page_small, html = count_queries(operator_client, reverse("runs:inbox"))
    list_small, _ = count_queries(operator_client, reverse("runs:inbox-list"))
    assert html.count('id="ticket-row-') == 10
    waiting_tickets(190, agent)
    page_large, html = count_queries(operator_client, reverse("runs:inbox"))
    list_large, fragment = count_queries(operator_client, reverse("runs:inbox-list"))
    assert html.count('id="ticket-row-') == fragment.count('id="ticket-row-') == INBOX_PAGE
    assert "200 waiting" in html
    assert (page_large, list_large) == (page_small, list_small)


def test_the_inbox_pages_through_every_pending_ticket(operator_client):
    agent = asking_agent()
    created = waiting_tickets(INBOX_PAGE + 5, agent)
    seen: list[str] = []
    url = reverse("runs:inbox")
    while url:
        html = operator_client.get(url).content.decode()
        seen += re.findall(r'id="ticket-row-([0-9a-f-]+)"', html)
        found = re.search(r'href="([^"]*cursor=[^"]+)">Newer tickets', html)
        url = found.group(1).replace("&amp;", "&") if found else ""
    assert seen == [str(t.pk) for t in created]


def test_page_lists_pending_tickets_oldest_first_with_their_details(operator_client):
    first, second = waiting_tickets(2)
    decided = waiting_tickets(1)[0]
    decision_submit(ticket=decided, action="reject", actor=Actor(label="bob"))
    response = operator_client.get(reverse("runs:inbox"))
    html = response.content.decode()
    assert response.context["nav"] == "inbox"
    assert "data-live" in html and 'class="conn"' in html
    assert f'data-refresh-url="{reverse("runs:inbox-list")}"' in html
    assert html.index(f'id="ticket-row-{first.pk}"') < html.index(f'id="ticket-row-{second.pk}"')
    assert f'id="ticket-row-{decided.pk}"' not in html
    run_url = reverse("runs:run-detail", args=[first.run_id])
    assert f'data-run-url="{run_url}"' in html and f'href="{run_url}#ticket-{first.pk}"' in html
    assert f'data-ticket-id="{first.pk}"' in html and 'tabindex="0"' in html
    assert first.run.agent.slug in html and "write_note" in html
    # preview (PostgreSQL's jsonb may order the keys differently)
    assert "&quot;title&quot;: &quot;t&quot;" in html and "&quot;body&quot;: &quot;b&quot;" in html
    assert "<details>" in html and "&quot;body&quot;: &quot;b&quot;" in html  # full JSON
    assert '<span class="kbd">j</span>' in html


def test_empty_state(operator_client):
    html = operator_client.get(reverse("runs:inbox")).content.decode()
    assert "Nothing is waiting for a decision" in html
    fragment = operator_client.get(reverse("runs:inbox-list")).content.decode()
    assert "Nothing is waiting for a decision" in fragment and "<html" not in fragment


def test_filters_by_agent_and_tool(operator_client):
    notes = asking_agent(slug="noter")
    maths = asking_agent("calculator", {"expression": "6*7"}, slug="mathy")
    note_tickets = waiting_tickets(2, notes)
    calc_tickets = waiting_tickets(1, maths)

    html = operator_client.get(reverse("runs:inbox")).content.decode()
    for t in [*note_tickets, *calc_tickets]:
        assert f'id="ticket-row-{t.pk}"' in html
    assert '<option value="noter"' in html and '<option value="mathy"' in html
    assert '<option value="write_note"' in html and '<option value="calculator"' in html

    html = operator_client.get(reverse("runs:inbox"), {"agent": "mathy"}).content.decode()
    assert f'id="ticket-row-{calc_tickets[0].pk}"' in html
    assert all(f'id="ticket-row-{t.pk}"' not in html for t in note_tickets)
    assert '<option value="mathy" selected>' in html
    assert f'data-refresh-url="{reverse("runs:inbox-list")}?agent=mathy"' in html

    fragment = operator_client.get(
        reverse("runs:inbox-list"), {"tool": "write_note"}
    ).content.decode()
    assert all(f'id="ticket-row-{t.pk}"' in fragment for t in note_tickets)
    assert f'id="ticket-row-{calc_tickets[0].pk}"' not in fragment

    html = operator_client.get(
        reverse("runs:inbox"), {"agent": "noter", "tool": "calculator"}
    ).content.decode()
    assert "Nothing is waiting for a decision with these filters" in html
    assert 'data-refresh-url="/inbox/list?agent=noter&amp;tool=calculator"' in html


def test_a_question_and_a_deadline_are_shown(operator_client):
    agent = scripted_agent(
        [
            {"text": "", "tool_calls": [call("ask_human", {"question": "Which colour?"})]},
            {"text": "ok"},
        ],
        permission={"default_behavior": "allow"},
        tools=["ask_human"],
    )
    ticket = waiting_tickets(1, agent)[0]
    Ticket.objects.filter(pk=ticket.pk).update(
        deadline_at=timezone.now() + dt.timedelta(hours=2, minutes=1), default_action="reject"
    )
    html = operator_client.get(reverse("runs:inbox")).content.decode()
    assert "Which colour?" in html and "needs an answer" in html
    assert "then reject" in html and "in 2\xa0hours" in html


# --- permissions ---------------------------------------------------------------------------------


def test_a_viewer_sees_tickets_but_no_controls_and_a_forged_bulk_post_is_refused(viewer_client):
    tickets = waiting_tickets(2)
    html = viewer_client.get(reverse("runs:inbox")).content.decode()
    assert all(f'id="ticket-row-{t.pk}"' in html for t in tickets)
    assert 'type="checkbox"' not in html and "<button" not in html.split('id="inbox-list"')[1]
    assert "Approve selected" not in html and "Reject selected" not in html
    assert "inbox-bulk-form" not in html
    fragment = viewer_client.get(reverse("runs:inbox-list")).content.decode()
    assert 'type="checkbox"' not in fragment and "<button" not in fragment

    for confirm in ["", "1"]:
        response = bulk(viewer_client, tickets, "approve", confirm=confirm)
        assert response.status_code == 403
    assert bulk(viewer_client, tickets, "reject", htmx=False, confirm="1").status_code == 403
    assert not Decision.objects.exists()
    assert Ticket.objects.filter(status=Ticket.Status.PENDING).count() == 2
    assert not Run.objects.filter(due=True).exists()


def test_an_operator_sees_checkboxes_and_bulk_buttons(operator_client):
    ticket = waiting_tickets(1)[0]
    html = operator_client.get(reverse("runs:inbox")).content.decode()
    assert f'name="ticket" value="{ticket.pk}"' in html
    assert 'value="approve"' in html and 'value="reject"' in html
    assert f'action="{reverse("runs:inbox-bulk")}"' in html and "csrfmiddlewaretoken" in html


def test_bulk_only_accepts_post(operator_client):
    assert operator_client.get(reverse("runs:inbox-bulk")).status_code == 405


# --- bulk decisions -------------------------------------------------------------------------------


def test_bulk_approve_confirms_first_then_decides_every_ticket_and_makes_the_runs_due(
    operator_client,
):
    tickets = waiting_tickets(3)
    confirmation = bulk(operator_client, tickets, "approve")
    assert confirmation.status_code == 200
    html = confirmation.content.decode()
    assert "Confirm approve 3 tickets" in html
    assert html.count('name="ticket" value=') == 3 and 'name="confirm" value="1"' in html
    assert (
        "write_note" in html and tickets[0].run.agent.slug in html and "&quot;title&quot;" in html
    )
    assert 'name="comment"' in html and "csrfmiddlewaretoken" in html
    assert not Decision.objects.exists()
    assert Ticket.objects.filter(status=Ticket.Status.PENDING).count() == 3
    assert not Run.objects.filter(due=True).exists()

    response = bulk(operator_client, tickets, "approve", confirm="1")
    assert response.status_code == 200
    html = response.content.decode()
    assert "3 approved." in html and "failed" not in html
    assert 'hx-swap-oob="innerHTML"' in html  # the summary lands outside the live list
    assert "Nothing is waiting for a decision" in html
    for ticket in tickets:
        ticket.refresh_from_db()
        assert ticket.status == Ticket.Status.DECIDED
        assert (ticket.decision.action, ticket.decision.actor_label) == ("approve", "alice")
        assert Run.objects.get(pk=ticket.run_id).due
    assert AuditEntry.objects.filter(action="ticket.approve", actor_label="alice").count() == 3


def test_bulk_reject_records_the_reason(operator_client):
    tickets = waiting_tickets(2)
    html = bulk(operator_client, tickets, "reject").content.decode()
    assert "Confirm reject 2 tickets" in html
    html = bulk(
        operator_client, tickets, "reject", confirm="1", comment="not today"
    ).content.decode()
    assert "2 rejected." in html
    decisions = Decision.objects.order_by("created_at")
    assert [(d.action, d.comment) for d in decisions] == [("reject", "not today")] * 2
    assert all(Run.objects.get(pk=t.run_id).due for t in tickets)


def test_a_ticket_decided_meanwhile_is_reported_and_the_others_still_go_through(operator_client):
    tickets = waiting_tickets(3)
    confirmation = bulk(operator_client, tickets, "approve").content.decode()
    assert "Confirm approve 3 tickets" in confirmation
    decision_submit(ticket=tickets[1], action="reject", actor=Actor(label="bob"))

    html = bulk(operator_client, tickets, "approve", confirm="1").content.decode()
    assert "2 approved; 1 failed:" in html
    assert "already decided by bob at" in html and short_id(tickets[1].pk) in html
    actions = {t.pk: Decision.objects.get(ticket=t) for t in tickets}
    assert actions[tickets[0].pk].action == actions[tickets[2].pk].action == "approve"
    assert (actions[tickets[1].pk].action, actions[tickets[1].pk].actor_label) == ("reject", "bob")
    assert all(Run.objects.get(pk=t.run_id).due for t in tickets)


def test_approving_a_respond_only_ticket_fails_with_the_service_message(operator_client):
    asker = scripted_agent(
        [
            {"text": "", "tool_calls": [call("ask_human", {"question": "Which colour?"})]},
            {"text": "ok"},
        ],
        permission={"default_behavior": "allow"},
        tools=["ask_human"],
    )
    question = waiting_tickets(1, asker)[0]
    note = waiting_tickets(1)[0]
    confirmation = bulk(operator_client, [question, note], "approve").content.decode()
    assert "approving it will fail" in confirmation
    html = bulk(operator_client, [question, note], "approve", confirm="1").content.decode()
    assert "1 approved; 1 failed:" in html and "waits for an answer" in html
    question.refresh_from_db()
    note.refresh_from_db()
    assert (question.status, note.status) == (Ticket.Status.PENDING, Ticket.Status.DECIDED)


def test_the_confirmation_leaves_out_tickets_no_longer_waiting(operator_client):
    tickets = waiting_tickets(2)
    decision_submit(ticket=tickets[0], action="approve", actor=Actor(label="bob"))
    html = bulk(operator_client, tickets, "approve").content.decode()
    assert "Confirm approve 1 ticket<" in html and "left out" in html
    assert f'name="ticket" value="{tickets[0].pk}"' not in html
    html = bulk(operator_client, tickets[:1], "approve").content.decode()
    assert "None of the selected tickets is still waiting" in html and "Confirm" not in html


def test_bulk_refuses_a_missing_selection_or_an_unknown_action(operator_client):
    tickets = waiting_tickets(1)
    response = operator_client.post(reverse("runs:inbox-bulk"), {"action": "approve"}, **HX)
    assert response.status_code == 400 and "Select at least one ticket" in response.content.decode()
    response = operator_client.post(
        reverse("runs:inbox-bulk"), {"action": "approve", "ticket": ["nope", "1; drop"]}, **HX
    )
    assert response.status_code == 400
    for action in ["edit", "respond", ""]:
        response = bulk(operator_client, tickets, action, confirm="1")
        assert response.status_code == 400 and "approve or reject" in response.content.decode()
    assert not Decision.objects.exists()


def test_bulk_without_javascript_confirms_on_the_page_then_redirects_with_messages(operator_client):
    tickets = waiting_tickets(2)
    page = bulk(operator_client, tickets, "approve", htmx=False, agent=tickets[0].run.agent.slug)
    assert page.status_code == 200
    html = page.content.decode()
    assert "<html" in html and "Confirm approve 2 tickets" in html
    assert f'id="ticket-row-{tickets[0].pk}"' in html  # the list is still there below
    assert not Decision.objects.exists()

    slug = tickets[0].run.agent.slug
    response = bulk(operator_client, tickets, "approve", htmx=False, confirm="1", agent=slug)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('runs:inbox')}?agent={slug}"
    assert Decision.objects.count() == 2
    html = operator_client.get(response["Location"]).content.decode()
    assert "2 approved." in html

    again = bulk(operator_client, tickets, "approve", htmx=False, confirm="1")
    assert again.status_code == 302
    html = operator_client.get(again["Location"]).content.decode()
    assert "0 approved; 2 failed:" in html and "already decided by alice" in html


# --- escaping ------------------------------------------------------------------------------------


def test_arguments_and_questions_are_escaped_everywhere(operator_client):
    hostile = {"title": SCRIPT_TAG, "body": IMG_TAG}
    ticket = waiting_tickets(1, asking_agent(args=hostile, slug="hostile"))[0]
    asker = scripted_agent(
        [{"text": "", "tool_calls": [call("ask_human", {"question": SCRIPT_TAG + IMG_TAG})]}],
        permission={"default_behavior": "allow"},
        tools=["ask_human"],
    )
    question = waiting_tickets(1, asker)[0]
    pages = [
        operator_client.get(reverse("runs:inbox")).content.decode(),
        operator_client.get(reverse("runs:inbox-list")).content.decode(),
        bulk(operator_client, [ticket, question], "reject").content.decode(),
        bulk(operator_client, [ticket, question], "reject", htmx=False).content.decode(),
    ]
    for html in pages:
        assert SCRIPT_TAG not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        assert "&lt;img src=x onerror=alert(1)&gt;" in html
