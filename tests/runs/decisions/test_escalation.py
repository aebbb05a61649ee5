"""Escalation of undecided tickets: the deadline, default action (with its answer) and
warning a ticket gets when it opens — from the permission rule that made the call ask,
else from the agent — the warning the sweep sends once, and the default action applied at
the deadline, including `respond` with the configured answer."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from agents.models import Note
from runs.decisions.services import deadlines
from runs.decisions.services.deadlines import (
    expiry_decision,
    ticket_warn,
    tickets_expire,
    tickets_warn,
)
from runs.models import Decision, Message, Run, Ticket
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationDelivery,
    NotificationRule,
)
from runs.runtime import types as rt
from runs.services.execution import runs_sweep
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import call, note_call, scripted_agent
from tests.runs.helpers import assert_gap_free, drive, events

ASK_NOTE_WITH_RULE_ESCALATION: dict[str, Any] = {
    "default_behavior": "allow",
    "rules": [
        {
            "tool": "write_note",
            "behavior": "ask",
            "deadline_seconds": 300,
            "default_action": "respond",
            "default_response": {"written": False, "why": "nobody approved in time"},
            "warning_seconds": 60,
        }
    ],
}


def started(agent: Any, message: str = "go") -> Run:
    run = drive(run_start(agent=agent, messages=message))
    assert run.status == Run.Status.WAITING, run.status_reason
    return run


def the_ticket(run: Run) -> Ticket:
    return Ticket.objects.select_related("tool_call").get(run=run, status=Ticket.Status.PENDING)


def note_agent(**kwargs: Any) -> Any:
    return scripted_agent(
        [{"text": "noting", "tool_calls": [note_call("lunch")]}, {"text": "all done"}],
        **kwargs,
    )


def helpdesk_agent(**kwargs: Any) -> Any:
    return scripted_agent(
        [
            {"text": "", "tool_calls": [call("ask_human", {"question": "which colour?"})]},
            {"text": "thanks"},
        ],
        tools=["ask_human"],
        **kwargs,
    )


def warning_route() -> NotificationChannel:
    channel = NotificationChannel.objects.create(name="ops", kind=NotificationChannel.Kind.WEBHOOK)
    NotificationRule.objects.create(channel=channel, events=["ticket.deadline_near"])
    return channel


def warnings_queued() -> int:
    return NotificationDelivery.objects.filter(event="ticket.deadline_near").count()


# -- where a ticket's deadline comes from --------------------------------------------------


@pytest.mark.django_db
def test_the_asking_rules_escalation_beats_the_agents():
    agent = note_agent(
        permission=ASK_NOTE_WITH_RULE_ESCALATION,
        ticket_deadline_seconds=3600,
        ticket_default_action="approve",
        ticket_warning_seconds=600,
    )
    ticket = the_ticket(started(agent))
    assert ticket.reason == "tool:PermissionConfirm"
    assert ticket.deadline_at == ticket.created_at + dt.timedelta(seconds=300)
    assert ticket.warn_at == ticket.deadline_at - dt.timedelta(seconds=60)
    assert ticket.default_action == "respond"
    assert ticket.default_payload == {"written": False, "why": "nobody approved in time"}
    assert ticket.warned_at is None


@pytest.mark.django_db
def test_an_ask_rule_without_escalation_leaves_the_agents_deadline():
    agent = note_agent(
        permission={
            "default_behavior": "allow",
            "rules": [
                {"tool": "write_note", "behavior": "ask"},
                # asks too but does not decide this call (a less specific ask rule)
                {"tool": "write_*", "behavior": "ask", "deadline_seconds": 5},
            ],
        },
        ticket_deadline_seconds=3600,
        ticket_default_action="approve",
        ticket_warning_seconds=600,
    )
    ticket = the_ticket(started(agent))
    assert ticket.deadline_at == ticket.created_at + dt.timedelta(seconds=3600)
    assert ticket.warn_at == ticket.deadline_at - dt.timedelta(seconds=600)
    assert (ticket.default_action, ticket.default_payload) == ("approve", None)


@pytest.mark.django_db
def test_the_default_ask_behaviour_uses_the_agents_settings_and_none_means_no_deadline():
    with_deadline = note_agent(
        permission={"default_behavior": "ask"},
        ticket_deadline_seconds=120,
    )
    ticket = the_ticket(started(with_deadline))
    assert ticket.deadline_at == ticket.created_at + dt.timedelta(seconds=120)
    assert (ticket.default_action, ticket.warn_at) == ("reject", None)
    without = note_agent(permission={"default_behavior": "ask"})
    ticket = the_ticket(started(without))
    assert (ticket.deadline_at, ticket.warn_at, ticket.default_payload) == (None, None, None)


@pytest.mark.django_db
def test_a_tool_that_waits_for_an_answer_uses_the_agents_settings_not_a_rules():
    # the rule's escalation is for the permission ticket it opens; ask_human's own ticket
    # (reason tool:ask_human) is the agent's
    agent = helpdesk_agent(
        permission={
            "default_behavior": "allow",
            "rules": [{"tool": "ask_*", "behavior": "allow"}],
        },
        ticket_deadline_seconds=900,
        ticket_default_action="respond",
        ticket_default_response="blue",
        ticket_warning_seconds=300,
    )
    ticket = the_ticket(started(agent))
    assert ticket.reason == "tool:ask_human"
    assert ticket.deadline_at == ticket.created_at + dt.timedelta(seconds=900)
    assert (ticket.default_action, ticket.default_payload) == ("respond", "blue")


# -- the warning ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_warning_is_queued_once_when_its_time_comes(monkeypatch):
    warning_route()
    ticket = the_ticket(started(note_agent(permission=ASK_NOTE_WITH_RULE_ESCALATION)))
    assert ticket.warn_at is not None
    assert tickets_warn(now=ticket.warn_at - dt.timedelta(seconds=1)) == 0  # not yet
    assert warnings_queued() == 0
    counts = runs_sweep(now=ticket.warn_at + dt.timedelta(seconds=1))
    assert counts["warned_tickets"] == 1 and counts["expired_tickets"] == 0
    delivery = NotificationDelivery.objects.get(event="ticket.deadline_near")
    assert delivery.subject == f"ticket:{ticket.pk}"
    assert delivery.payload["ticket"]["deadline_at"] is not None
    ticket.refresh_from_db()
    assert ticket.warned_at == ticket.warn_at + dt.timedelta(seconds=1)
    assert ticket.status == Ticket.Status.PENDING  # a warning decides nothing
    assert tickets_warn(now=ticket.warn_at + dt.timedelta(seconds=30)) == 0  # once
    assert warnings_queued() == 1


@pytest.mark.django_db
def test_of_two_sweeps_that_read_the_ticket_only_the_first_update_warns(monkeypatch):
    warning_route()
    ticket = the_ticket(started(note_agent(permission=ASK_NOTE_WITH_RULE_ESCALATION)))
    calls: list[Any] = []
    real = deadlines.notify_ticket
    monkeypatch.setattr(deadlines, "notify_ticket", lambda t, e: calls.append(t) or real(t, e))
    now = ticket.warn_at + dt.timedelta(seconds=1)
    # both sweeps read the ticket before either marked it (the row as each one saw it)
    first_read, second_read = the_ticket(ticket.run), the_ticket(ticket.run)
    assert ticket_warn(first_read, now) is True
    assert ticket_warn(second_read, now) is False
    assert len(calls) == 1 and warnings_queued() == 1


@pytest.mark.django_db
def test_a_decided_ticket_and_an_overdue_one_get_no_warning(monkeypatch):
    warning_route()
    decided = the_ticket(started(note_agent(permission=ASK_NOTE_WITH_RULE_ESCALATION)))
    stale = the_ticket(decided.run)
    decision_submit(ticket=decided, action="approve")
    assert ticket_warn(stale, decided.warn_at + dt.timedelta(seconds=1)) is False
    assert tickets_warn(now=decided.warn_at + dt.timedelta(seconds=1)) == 0
    overdue = the_ticket(started(note_agent(permission=ASK_NOTE_WITH_RULE_ESCALATION)))
    assert tickets_warn(now=overdue.deadline_at + dt.timedelta(seconds=1)) == 0
    assert warnings_queued() == 0
    overdue.refresh_from_db()
    assert overdue.warned_at is None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_sweeps_queue_one_warning(monkeypatch):
    warning_route()
    ticket = the_ticket(started(note_agent(permission=ASK_NOTE_WITH_RULE_ESCALATION)))
    now = ticket.warn_at + dt.timedelta(seconds=1)
    sweeps = 6
    barrier = threading.Barrier(sweeps)
    results: list[int] = []
    lock = threading.Lock()

    def sweep() -> None:
        try:
            barrier.wait()
            warned = tickets_warn(now=now)
        finally:
            connection.close()
        with lock:
            results.append(warned)

    threads = [threading.Thread(target=sweep) for _ in range(sweeps)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results) == [0] * (sweeps - 1) + [1], results
    assert warnings_queued() == 1


# -- the default action at the deadline ----------------------------------------------------


@pytest.mark.django_db
def test_respond_answers_a_waiting_question_and_the_run_continues_with_the_answer():
    agent = helpdesk_agent(
        permission={"default_behavior": "allow"},
        ticket_deadline_seconds=60,
        ticket_default_action="respond",
        ticket_default_response={"colour": "blue"},
    )
    run = started(agent)
    ticket = the_ticket(run)
    assert tickets_expire(now=ticket.deadline_at + dt.timedelta(seconds=1)) == 1
    decision = Decision.objects.get(ticket=ticket)
    assert (decision.action, decision.actor_label) == ("respond", "system")
    assert decision.payload == {"colour": "blue"}
    assert "no decision by the deadline" in decision.comment
    run = drive(run)
    assert (run.status, run.status_reason, run.final_output) == ("done", "natural", "thanks")
    assert events(run, "tool_call_resumed")[0]["result"] == {"colour": "blue"}
    answers = Message.objects.filter(
        thread=run.thread, role="tool", tool_call_id=ticket.tool_call.call_id
    ).order_by("seq")
    assert "blue" in str(answers.last().content)  # after the "awaiting decision" placeholder
    assert_gap_free(run)


@pytest.mark.django_db
def test_a_rules_respond_answers_in_place_of_the_tool_it_asked_about():
    run = started(note_agent(permission=ASK_NOTE_WITH_RULE_ESCALATION))
    ticket = the_ticket(run)
    counts = runs_sweep(now=ticket.deadline_at + dt.timedelta(seconds=1))
    assert counts["expired_tickets"] == 1 and counts["warned_tickets"] == 0
    decision = Decision.objects.get(ticket=ticket)
    assert decision.action == "respond"
    assert decision.payload == {"written": False, "why": "nobody approved in time"}
    run = drive(run)
    assert (run.status, run.status_reason) == ("done", "natural")
    assert not Note.objects.exists()  # the tool was never run: the answer stood for it
    resumed = events(run, "tool_call_resumed")[0]["result"]
    assert resumed == {"written": False, "why": "nobody approved in time"}


@pytest.mark.django_db
def test_approve_on_a_call_that_waits_for_an_answer_is_rejected_and_says_why():
    agent = helpdesk_agent(
        permission={"default_behavior": "allow"},
        ticket_deadline_seconds=60,
        ticket_default_action="approve",
    )
    run = started(agent)
    ticket = the_ticket(run)
    tickets_expire(now=ticket.deadline_at + dt.timedelta(seconds=1))
    decision = Decision.objects.get(ticket=ticket)
    assert decision.action == "reject"
    assert "waits for an answer, so it is rejected, not approved" in decision.comment
    assert drive(run).status_reason == "natural"


@pytest.mark.django_db
def test_respond_without_a_usable_answer_falls_back_to_reject_with_the_reason():
    run = started(note_agent(permission=ASK_NOTE_WITH_RULE_ESCALATION))
    ticket = the_ticket(run)
    too_deep: Any = "x"
    for _ in range(150):
        too_deep = [too_deep]
    Ticket.objects.filter(pk=ticket.pk).update(default_payload=too_deep)
    tickets_expire(now=ticket.deadline_at + dt.timedelta(seconds=1))
    decision = Decision.objects.get(ticket=ticket)
    assert decision.action == "reject"
    assert "the default answer could not be given" in decision.comment
    assert "nested too deeply" in decision.comment
    run = drive(run)
    assert run.status_reason == "natural" and not Note.objects.exists()


def _ticket(**fields: Any) -> Ticket:
    values: dict[str, Any] = {
        "ticket_id": "perm_1",
        "tool_name": "write_note",
        "resume_mode": rt.ToolCallResumeMode.REPLAY_TOOL_CALL.value,
        "default_action": "respond",
        "default_payload": "later",
        **fields,
    }
    return Ticket(**values)


@pytest.mark.parametrize(
    ("fields", "decided", "why"),
    [
        ({}, ("respond", "later"), "the default answer is given"),
        ({"default_payload": None}, ("reject", None), "no default answer is configured"),
        (
            {"resume_mode": rt.ToolCallResumeMode.PASS_DECISION_TO_TOOL.value},
            ("reject", None),
            "the tool takes an approval or a rejection, not an answer",
        ),
        (
            {
                "ticket_id": "delegate_run:0190a0a0-0000-7000-8000-000000000001",
                "resume_mode": rt.ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT.value,
            },
            ("reject", None),
            "waits for child run 0190a0a0-0000-7000-8000-000000000001",
        ),
        (
            {"default_action": "approve"},
            ("approve", None),
            "",
        ),
        (
            {"default_action": "reject", "default_payload": "ignored"},
            ("reject", None),
            "",
        ),
    ],
    ids=["respond", "no_answer", "pass_decision", "child_run", "approve", "reject"],
)
def test_the_expiry_decision_falls_back_to_reject_when_respond_does_not_fit(fields, decided, why):
    action, payload, reason = expiry_decision(_ticket(**fields))
    assert (action, payload) == decided
    assert why in reason if why else reason == ""


# -- what operators see --------------------------------------------------------------------


@pytest.mark.django_db
def test_the_ticket_card_and_the_api_show_the_escalation(operator_client, operator_api):
    run = started(note_agent(permission=ASK_NOTE_WITH_RULE_ESCALATION))
    ticket = the_ticket(run)
    page = operator_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert 'title="default action: respond">answered automatically</span> with' in page
    assert "nobody approved in time" in page
    assert "warning at" in page and "warning sent at" not in page
    body = operator_api.get(f"/api/v1/tickets/{ticket.pk}").json()
    assert body["default_action"] == "respond"
    assert body["default_payload"] == {"written": False, "why": "nobody approved in time"}
    assert body["warn_at"] is not None and body["warned_at"] is None

    tickets_warn(now=ticket.warn_at + dt.timedelta(seconds=1))
    page = operator_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert "warning sent at" in page
    assert operator_api.get(f"/api/v1/tickets/{ticket.pk}").json()["warned_at"] is not None


@pytest.mark.django_db
def test_a_ticket_without_a_deadline_shows_none(operator_client):
    run = started(note_agent(permission={"default_behavior": "ask"}))
    page = operator_client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert "then:" not in page and "warning" not in page


@pytest.mark.django_db
def test_a_sweep_before_the_warning_time_changes_nothing():
    warning_route()
    ticket = the_ticket(started(note_agent(permission=ASK_NOTE_WITH_RULE_ESCALATION)))
    counts = runs_sweep(now=timezone.now())
    assert (counts["warned_tickets"], counts["expired_tickets"]) == (0, 0)
    ticket.refresh_from_db()
    assert ticket.warned_at is None and ticket.status == Ticket.Status.PENDING
