"""Operator pages: a message to a thread whose run waits for approval rejects its open
tickets only once the sender confirmed exactly those; the favicon; the admin's plural of
audit entries; the retry links of the run header."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from common.models import AuditEntry
from runs.models import Decision, Message, Run, Ticket
from runs.services.runs import run_retry
from runs.services.submission_flow import run_start
from tests.factories import APPROVAL, call, scripted_agent
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r'name="supersede" value="([0-9a-f]+)" required')


def two_tickets_waiting() -> Run:
    agent = scripted_agent(
        [
            {
                "text": "noting",
                "tool_calls": [
                    call("write_note", {"title": "lunch", "body": "b"}),
                    call("write_note", {"title": "dinner", "body": "<b>bold</b>"}),
                ],
            },
            {"text": "done"},
        ],
        permission=APPROVAL,
        slug="noter",
    )
    run = drive(run_start(agent=agent, messages="write them down"))
    assert run.status == "waiting"
    assert Ticket.objects.filter(run=run, status="pending").count() == 2
    return run


def send(client, run: Run, **extra: str):
    # resume_open_run: the mode that continues the waiting run (the default, queue, waits)
    return client.post(
        reverse("runs:thread-send", args=[run.thread_id]),
        {
            "agent": "noter",
            "message": "never mind, write nothing",
            "mode": "resume_open_run",
            **extra,
        },
    )


def assert_nothing_sent(run: Run, messages_before: int) -> None:
    assert Ticket.objects.filter(run=run, status="pending").count() == 2
    assert not Decision.objects.exists()
    assert Message.objects.filter(thread_id=run.thread_id).count() == messages_before
    assert not AuditEntry.objects.filter(action__in=["run.continue", "ticket.reject"]).exists()


def test_the_thread_page_lists_the_tickets_a_message_would_reject(operator_client):
    run = two_tickets_waiting()
    html = operator_client.get(reverse("runs:thread-detail", args=[run.thread_id])).content
    page = html.decode()
    assert "Sending rejects 2 open tickets" in page
    assert page.count("<li><b>write_note</b>") == 2
    assert "&quot;title&quot;: &quot;dinner&quot;" in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page
    assert TOKEN.search(page), "a required checkbox confirms the rejection"
    assert "Reject these 2 tickets and send" in page


def test_a_message_without_confirmation_rejects_nothing_and_shows_the_tickets(operator_client):
    run = two_tickets_waiting()
    messages_before = Message.objects.filter(thread_id=run.thread_id).count()

    response = send(operator_client, run)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Nothing was sent" in page
    assert "Sending rejects 2 open tickets" in page and page.count("<li><b>write_note</b>") == 2
    assert ">never mind, write nothing</textarea>" in page  # the message is kept
    assert_nothing_sent(run, messages_before)

    # a confirmation for another set of tickets (the page was older) is no confirmation
    response = send(operator_client, run, supersede="0123456789abcdef0123456789abcdef")
    assert response.status_code == 200 and "Nothing was sent" in response.content.decode()
    assert_nothing_sent(run, messages_before)

    # confirmed: both tickets are rejected as superseded and the run continues
    token = TOKEN.search(page)
    assert token is not None
    response = send(operator_client, run, supersede=token[1])
    assert response.status_code == 302
    assert response["Location"].endswith(f"/runs/{run.pk}/")
    decisions = Decision.objects.filter(ticket__run=run)
    assert (
        sorted((d.action, d.comment) for d in decisions)
        == [("reject", "superseded by a new user message")] * 2
    )
    assert not Ticket.objects.filter(run=run, status="pending").exists()
    assert Message.objects.filter(thread_id=run.thread_id).count() == messages_before + 1
    assert AuditEntry.objects.filter(action="run.continue", actor_label="alice").exists()
    assert Run.objects.get(pk=run.pk).due


def test_a_message_to_a_thread_without_open_tickets_needs_no_confirmation(operator_client):
    run = drive(run_start(agent=scripted_agent([{"text": "hi"}], slug="noter"), messages="hi"))
    assert run.status == "done"
    page = operator_client.get(reverse("runs:thread-detail", args=[run.thread_id])).content
    assert b'name="supersede"' not in page
    response = send(operator_client, run)
    assert response.status_code == 302
    assert Run.objects.filter(thread_id=run.thread_id).count() == 2


def test_favicon_is_linked_and_served_to_anyone(client, operator_client):
    anonymous = client.__class__()
    response = anonymous.get("/favicon.ico")
    assert response.status_code == 302
    assert response["Location"].endswith("favicon.svg")
    icon = anonymous.get(response["Location"])
    assert icon.status_code == 200
    assert b"<svg" in b"".join(icon.streaming_content if icon.streaming else [icon.content])
    page = operator_client.get(reverse("runs:dashboard")).content.decode()
    assert re.search(r'<link rel="icon" href="[^"]*favicon\.svg"', page)


def test_the_admin_says_audit_entries():
    assert AuditEntry._meta.verbose_name_plural == "audit entries"
    admin = User.objects.create_superuser("root", password="pw")
    from django.test import Client

    client = Client()
    client.force_login(admin)
    page = client.get(reverse("admin:index")).content.decode()
    assert "Audit entries" in page and "Audit entrys" not in page


def test_retry_links_do_not_break_across_lines(operator_client):
    failed = drive(run_start(agent=scripted_agent([{"error": "boom"}]), messages="x"))
    retry = run_retry(run=failed)
    page = operator_client.get(reverse("runs:run-detail", args=[failed.pk])).content.decode()
    assert re.search(
        r'<span class="nowrap">retried as <a [^>]*>[^<]+</a> \(<a [^>]*>compare with this '
        r"retry</a>\)</span>",
        page,
    )
    page = operator_client.get(reverse("runs:run-detail", args=[retry.pk])).content.decode()
    assert re.search(
        r'<span class="nowrap">retry of <a [^>]*>[^<]+</a> \(<a [^>]*>compare with the run '
        r"it retried</a>\)</span>",
        page,
    )
