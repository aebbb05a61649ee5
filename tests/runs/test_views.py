"""Operator pages and actions: permissions on the server, escaping, conflicts, and query
counts that do not grow with the number of rows."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agents.models import Note
from common.audit import Actor
from common.models import AuditEntry
from runs.models import Decision, Run, RunEvent, Ticket
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import (
    APPROVAL,
    call,
    scripted_agent,
    step_end_event,
    user_with_role,
    waiting_run,
)
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

XSS = "<img src=x onerror=alert(1)><script>alert(2)</script>"


def count_queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries)


def test_pages_need_login(client):
    for name in ["runs:dashboard", "runs:run-list", "runs:thread-list", "runs:inbox", "runs:audit"]:
        response = client.get(reverse(name))
        assert response.status_code == 302 and "/login/" in response["Location"]


def test_every_page_renders_for_an_operator(operator_client):
    run = waiting_run()
    urls = [
        reverse("runs:dashboard"),
        reverse("runs:run-list"),
        reverse("runs:run-list") + "?status=waiting&waiting_reason=tool_permission&q=write",
        reverse("runs:run-detail", args=[run.pk]),
        reverse("runs:thread-list"),
        reverse("runs:thread-detail", args=[run.thread_id]),
        reverse("runs:audit"),
    ]
    for url in urls:
        assert operator_client.get(url).status_code == 200, url


def test_run_detail_offers_ticket_actions_to_operators_only(operator_client, client):
    run = waiting_run()
    page = operator_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert 'name="approve"' in page and 'name="reject"' in page and "Cancel run" in page
    client.force_login(user_with_role("viewer"))
    page = client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert "write_note" in page
    assert 'name="approve"' not in page and 'name="reject"' not in page and "Cancel run" not in page


def test_a_forged_decision_or_cancel_from_a_viewer_is_refused(viewer_client):
    run = waiting_run()
    ticket = Ticket.objects.get(run=run)
    response = viewer_client.post(
        reverse("runs:ticket-decide", args=[ticket.pk]), {"action": "approve"}
    )
    assert response.status_code == 403
    assert viewer_client.post(reverse("runs:run-cancel", args=[run.pk])).status_code == 403
    assert not Decision.objects.exists()
    assert Run.objects.get(pk=run.pk).status == "waiting"


def test_approve_from_the_page_records_who_and_makes_the_run_due(operator_client):
    run = waiting_run()
    ticket = Ticket.objects.get(run=run)
    response = operator_client.post(
        reverse("runs:ticket-decide", args=[ticket.pk]),
        {"action": "approve"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert "No open tickets" in response.content.decode()
    decision = Decision.objects.get(ticket=ticket)
    assert (decision.action, decision.actor_label, decision.actor.username) == (
        "approve",
        "alice",
        "alice",
    )
    assert Run.objects.get(pk=run.pk).due
    assert AuditEntry.objects.filter(action="ticket.approve", actor_label="alice").exists()
    drive(run)
    assert Note.objects.count() == 1


def test_a_late_decision_says_who_decided_first_and_when(operator_client):
    run = waiting_run()
    ticket = Ticket.objects.get(run=run)
    decision_submit(ticket=ticket, action="approve", actor=Actor(label="bob"))
    response = operator_client.post(
        reverse("runs:ticket-decide", args=[ticket.pk]),
        {"action": "approve"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 409
    assert "already decided by bob at" in response.content.decode()
    assert Decision.objects.count() == 1


def test_edit_form_is_prefilled_validated_and_runs_the_edited_arguments(operator_client):
    run = waiting_run()
    ticket = Ticket.objects.get(run=run)
    page = operator_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert 'name="arg_title" value="lunch"' in page
    preview = operator_client.post(
        reverse("runs:ticket-edit-preview", args=[ticket.pk]),
        {"arg_title": "dinner", "arg_body": "b"},
    ).content.decode()
    assert "dinner" in preview and "lunch" in preview
    bad = operator_client.post(
        reverse("runs:ticket-decide", args=[ticket.pk]),
        {"action": "edit", "arg_title": "", "arg_body": "b"},
        HTTP_HX_REQUEST="true",
    )
    assert bad.status_code == 400 and "title" in bad.content.decode()
    operator_client.post(
        reverse("runs:ticket-decide", args=[ticket.pk]),
        {"action": "edit", "arg_title": "dinner", "arg_body": "b", "comment": "better"},
        HTTP_HX_REQUEST="true",
    )
    drive(run)
    assert list(Note.objects.values_list("title", flat=True)) == ["dinner"]
    entry = AuditEntry.objects.get(action="ticket.edit")
    assert entry.before == {"arguments": {"title": "lunch", "body": "b"}}
    assert entry.after == {"arguments": {"title": "dinner", "body": "b"}}


def test_model_and_tool_text_is_escaped_everywhere(operator_client):
    agent = scripted_agent(
        [{"text": XSS, "tool_calls": [call("write_note", {"title": XSS, "body": XSS})]}],
        permission=APPROVAL,
    )
    run = drive(run_start(agent=agent, messages=XSS))
    for url in [
        reverse("runs:run-detail", args=[run.pk]),
        reverse("runs:thread-detail", args=[run.thread_id]),
        reverse("runs:run-list"),
        reverse("runs:run-transcript", args=[run.pk]),
    ]:
        html = operator_client.get(url).content.decode()
        assert "<script>alert(2)" not in html and "<img src=x" not in html, url
    assert (
        "&lt;script&gt;alert(2)"
        in operator_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    )


def test_sending_a_message_from_a_thread_starts_or_continues_a_run(operator_client):
    agent = scripted_agent([{"text": "hi"}], slug="greeter")
    response = operator_client.post(
        reverse("runs:thread-new"), {"agent": "greeter", "message": "hello"}
    )
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"].endswith(f"/runs/{run.pk}/")
    assert run.agent == agent
    assert AuditEntry.objects.filter(action="run.start", actor_label="alice").exists()


def test_cancel_and_retry_from_the_page(operator_client):
    run = waiting_run()
    operator_client.post(reverse("runs:run-cancel", args=[run.pk]))
    assert Run.objects.get(pk=run.pk).status_reason == "cancelled"
    failed = drive(run_start(agent=scripted_agent([{"error": "boom"}]), messages="x"))
    response = operator_client.post(reverse("runs:run-retry", args=[failed.pk]))
    retry = Run.objects.get(retry_of=failed)
    assert response["Location"].endswith(f"/runs/{retry.pk}/")


def test_every_action_keeps_a_long_request_id_cut_to_its_column(operator_client):
    # each action's audit row records the X-Request-ID; one longer than the column failed
    # the action itself on PostgreSQL (a 500, the decision or cancel lost)
    long_id = {"HTTP_X_REQUEST_ID": "x" * 200}
    ticket = Ticket.objects.get(run=waiting_run())
    decided = operator_client.post(
        reverse("runs:ticket-decide", args=[ticket.pk]),
        {"action": "approve"},
        HTTP_HX_REQUEST="true",
        **long_id,
    )
    assert decided.status_code == 200
    cancelled = waiting_run("dinner")
    operator_client.post(reverse("runs:run-cancel", args=[cancelled.pk]), **long_id)
    failed = drive(run_start(agent=scripted_agent([{"error": "boom"}]), messages="x"))
    operator_client.post(reverse("runs:run-retry", args=[failed.pk]), **long_id)
    agent = scripted_agent([{"text": "hi"}])
    operator_client.post(
        reverse("runs:thread-new"), {"agent": agent.slug, "message": "hello"}, **long_id
    )
    operator_client.post(reverse("runs:tokens"), {"name": "cli", "expires_days": ""}, **long_id)

    assert Decision.objects.filter(ticket=ticket).exists()
    assert Run.objects.get(pk=cancelled.pk).status_reason == "cancelled"
    assert Run.objects.filter(retry_of=failed).exists()
    mine = AuditEntry.objects.filter(actor_label="alice")
    actions = {"ticket.approve", "run.cancel", "run.retry", "run.start", "token.create"}
    assert set(mine.values_list("action", flat=True)) >= actions
    assert set(mine.values_list("request_id", flat=True)) == {"x" * 64}


def test_a_json_answer_nested_too_deeply_is_refused_not_a_500(operator_client):
    ticket = Ticket.objects.get(run=waiting_run())
    response = operator_client.post(
        reverse("runs:ticket-decide", args=[ticket.pk]),
        {"action": "respond", "answer": "[" * 2000 + "]" * 2000},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 400
    assert "nested too deeply" in response.content.decode()
    assert Ticket.objects.get(pk=ticket.pk).status == Ticket.Status.PENDING


def _many_runs(n: int) -> None:
    agent = scripted_agent([{"text": "ok"}])
    for index in range(n):
        run_start(agent=agent, messages=f"q{index}")


def test_runs_list_query_count_does_not_grow_with_rows(operator_client):
    _many_runs(10)
    small = count_queries(operator_client, reverse("runs:run-list"))
    _many_runs(190)
    assert count_queries(operator_client, reverse("runs:run-list")) == small


def test_run_detail_query_count_does_not_grow_with_events(operator_client):
    run = waiting_run()
    small = count_queries(operator_client, reverse("runs:run-detail", args=[run.pk]))
    last = run.last_event_seq
    RunEvent.objects.bulk_create([step_end_event(run, last + i + 1) for i in range(200)])
    assert count_queries(operator_client, reverse("runs:run-detail", args=[run.pk])) == small


def test_dashboard_counts_and_audit_filter(operator_client):
    waiting_run()
    html = operator_client.get(reverse("runs:dashboard")).content.decode()
    assert "open tickets" in html and "tool_permission" in html
    decision_submit(
        ticket=Ticket.objects.get(), action="reject", comment="nope", actor=Actor(label="carol")
    )
    audit = operator_client.get(reverse("runs:audit") + "?action=ticket.").content.decode()
    assert "ticket.reject" in audit and "carol" in audit and "nope" in audit
