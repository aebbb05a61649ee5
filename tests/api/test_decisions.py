"""Decisions over the API: approve, edit, reject, respond, upstream's body,
first decision wins (409 naming the winner), decision_id idempotency; the tickets inbox."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from agents.models import Note
from common.models import AuditEntry
from runs.models import Decision, Run, Ticket
from runs.services.submission_flow import run_start
from tests.api.helpers import assert_error
from tests.api.schema_check import conforms
from tests.factories import (
    APPROVAL,
    bearer,
    call,
    scripted_agent,
    token_for,
    user_with_role,
    waiting_run,
)
from tests.runs.helpers import drive, events

pytestmark = pytest.mark.django_db

TICKET_DECISION = "/api/v1/tickets/{ticket_id}/decision"
RUN_DECISIONS = "/api/v1/runs/{run_id}/decisions"


def pending(run: Run) -> Ticket:
    return Ticket.objects.get(run=run, status=Ticket.Status.PENDING)


def decide(operator_api, ticket: Ticket, body: dict):
    response = operator_api.post(TICKET_DECISION.format(ticket_id=ticket.pk), body, format="json")
    return conforms(response, "POST", TICKET_DECISION)


def test_approve_by_ticket_resumes_the_run(operator_api, operator_user):
    run = waiting_run()
    ticket = pending(run)
    response = decide(operator_api, ticket, {"action": "approve", "comment": "fine"})
    assert response.status_code == 201
    body = response.json()
    assert body["action"] == "approve" and body["actor"] == "olga (token ops)"
    assert body["ticket"] == str(ticket.pk) and body["ticket_id"] == ticket.ticket_id
    assert body["run_id"] == str(run.pk) and body["comment"] == "fine"
    decision = Decision.objects.get()
    assert decision.actor == operator_user
    assert AuditEntry.objects.get(action="ticket.approve").source == "api"
    run = drive(run)
    assert run.status_reason == "natural"
    assert Note.objects.get().title == "lunch"


def test_run_decisions_names_the_ticket_by_upstream_id_call_id_or_global_id(operator_api):
    for key in ("ticket_id", "tool_call_id", "global"):
        run = waiting_run()
        ticket = pending(run)
        target = {
            "ticket_id": ticket.ticket_id,
            "tool_call_id": ticket.tool_call.call_id,
            "global": str(ticket.pk),
        }[key]
        body = {"action": "reject", "ticket_id": target, "comment": "no"}
        response = operator_api.post(RUN_DECISIONS.format(run_id=run.pk), body, format="json")
        conforms(response, "POST", RUN_DECISIONS)
        assert response.status_code == 201, response.content
        assert response.json()["action"] == "reject"
        assert drive(run).status_reason == "natural"
    assert not Note.objects.exists()


def test_upstream_body_resume_and_cancel(operator_api):
    run = waiting_run()
    ticket = pending(run)
    body = {
        "toolCallId": ticket.tool_call.call_id,
        "action": "resume",
        "payload": {"approved": True},
    }
    response = operator_api.post(RUN_DECISIONS.format(run_id=run.pk), body, format="json")
    assert response.status_code == 201 and response.json()["action"] == "approve"
    run = waiting_run("second")
    ticket = pending(run)
    body = {"toolCallId": ticket.ticket_id, "action": "cancel", "reason": "too late"}
    response = operator_api.post(RUN_DECISIONS.format(run_id=run.pk), body, format="json")
    assert response.status_code == 201
    assert response.json()["action"] == "reject" and response.json()["comment"] == "too late"


def test_edit_runs_with_edited_arguments_and_invalid_edits_are_400(operator_api):
    run = waiting_run()
    ticket = pending(run)
    bad = decide(operator_api, ticket, {"action": "edit", "arguments": {"title": 5}})
    error = assert_error(bad, 400, "invalid")
    assert "schema" in error["message"]
    assert_error(decide(operator_api, ticket, {"action": "edit"}), 400, "invalid")
    response = decide(
        operator_api, ticket, {"action": "edit", "arguments": {"title": "dinner", "body": "soup"}}
    )
    assert response.status_code == 201
    body = response.json()
    assert body["arguments_before"] == {"title": "lunch", "body": "b"}
    assert body["arguments_after"] == {"title": "dinner", "body": "soup"}
    drive(run)
    assert Note.objects.get().title == "dinner"


def test_respond_answers_ask_human(operator_api):
    agent = scripted_agent(
        [
            {"text": "", "tool_calls": [call("ask_human", {"question": "Which color?"})]},
            {"text": "blue it is"},
        ],
        permission={"default_behavior": "allow"},
        tools=["ask_human"],
    )
    run = drive(run_start(agent=agent, messages="paint"))
    ticket = pending(run)
    record = operator_api.get(f"/api/v1/runs/{run.pk}").json()
    assert record["waiting"]["tickets"][0]["message"] == "Which color?"
    assert_error(decide(operator_api, ticket, {"action": "approve"}), 400, "invalid")
    assert_error(decide(operator_api, ticket, {"action": "respond"}), 400, "invalid")
    response = decide(operator_api, ticket, {"action": "respond", "payload": {"answer": "blue"}})
    assert response.status_code == 201 and response.json()["payload"] == {"answer": "blue"}
    run = drive(run)
    assert events(run, "tool_call_resumed")[0]["result"] == {"answer": "blue"}


def test_second_decision_gets_409_naming_the_winner(operator_api, operator_user):
    run = waiting_run()
    ticket = pending(run)
    other = bearer(token_for(user_with_role("operator", "paula"), "laptop"))
    first = decide(other, ticket, {"action": "reject", "comment": "mine"})
    assert first.status_code == 201
    late = decide(operator_api, ticket, {"action": "approve"})
    error = assert_error(late, 409, "already_decided")
    assert "paula (token laptop)" in error["message"]
    winner = error["details"]["decision"]
    assert winner["actor"] == "paula (token laptop)" and winner["action"] == "reject"
    assert winner["id"] == first.json()["id"] and winner["created_at"]
    assert Decision.objects.count() == 1


def test_repeating_a_decision_id_returns_the_first_result_with_200(operator_api):
    run = waiting_run()
    ticket = pending(run)
    body = {"action": "approve", "decision_id": "client-key-1"}
    first = decide(operator_api, ticket, body)
    again = decide(operator_api, ticket, body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json() == again.json()
    assert Decision.objects.count() == 1


def test_decision_on_a_cancelled_run_is_409(operator_api):
    run = waiting_run()
    ticket = pending(run)
    operator_api.post(f"/api/v1/runs/{run.pk}/cancel")
    error = assert_error(
        decide(operator_api, ticket, {"action": "approve"}), 409, "already_decided"
    )
    assert error["details"]["ticket_status"] == "cancelled"


def test_bad_decision_bodies(operator_api):
    run = waiting_run()
    ticket = pending(run)
    error = assert_error(decide(operator_api, ticket, {"action": "maybe"}), 400, "invalid")
    assert "action" in error["details"]
    assert_error(decide(operator_api, ticket, {}), 400, "invalid")
    path = RUN_DECISIONS.format(run_id=run.pk)
    missing = assert_error(
        operator_api.post(path, {"action": "approve"}, format="json"), 400, "invalid"
    )
    assert "toolCallId" in missing["message"]
    unknown = {"action": "approve", "ticket_id": "perm_nope"}
    assert_error(operator_api.post(path, unknown, format="json"), 404, "not_found")
    assert_error(
        operator_api.post(
            TICKET_DECISION.format(ticket_id="0190e7a0-0000-7000-8000-000000000000"),
            {"action": "approve"},
            format="json",
        ),
        404,
        "not_found",
    )
    assert pending(run).status == "pending"


def test_tickets_inbox_filters_and_statuses(operator_api):
    first = waiting_run("one")
    second = waiting_run("two")
    ask = scripted_agent(
        [{"text": "", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]}],
        permission=APPROVAL,
    )
    third = drive(run_start(agent=ask, messages="x"))
    path = "/api/v1/tickets"
    inbox = conforms(operator_api.get(path), "GET", path).json()["items"]
    assert [t["run_id"] for t in inbox] == [str(first.pk), str(second.pk), str(third.pk)]
    assert {t["status"] for t in inbox} == {"pending"}
    by_agent = operator_api.get(path, {"agent_id": second.agent.slug}).json()["items"]
    assert [t["run_id"] for t in by_agent] == [str(second.pk)]
    assert operator_api.get(path, {"tool": "send_email"}).json()["items"] == []
    two = operator_api.get(path, {"tool": "write_note", "limit": 2}).json()
    assert [t["run_id"] for t in two["items"]] == [str(first.pk), str(second.pk)]
    rest = operator_api.get(path, {"tool": "write_note", "limit": 2, "cursor": two["next_cursor"]})
    assert [t["run_id"] for t in rest.json()["items"]] == [str(third.pk)]
    assert rest.json()["next_cursor"] is None
    decide(operator_api, pending(first), {"action": "approve"})
    decided = conforms(operator_api.get(path, {"status": "decided"}), "GET", path).json()["items"]
    assert [t["run_id"] for t in decided] == [str(first.pk)]
    assert decided[0]["decision"]["action"] == "approve"
    assert_error(operator_api.get(path, {"status": "open"}), 400, "invalid")
    one = operator_api.get(f"{path}/{decided[0]['id']}")
    assert (
        conforms(one, "GET", path + "/{ticket_id}").json()["decision"]["actor"]
        == "olga (token ops)"
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_repeats_of_one_decision_id_all_get_the_first_result():
    # a client retrying before its first request answered: the repeats lose the race for
    # the ticket, but they are the same decision, so 200 with it, not 409
    run = waiting_run()
    ticket = pending(run)
    raw = token_for(user_with_role("operator", "olga"), "ops")
    clients = 8
    barrier = threading.Barrier(clients)
    responses: list[tuple[int, dict]] = []
    lock = threading.Lock()

    def post() -> None:
        try:
            barrier.wait()
            response = bearer(raw).post(
                TICKET_DECISION.format(ticket_id=ticket.pk),
                {"action": "approve", "decision_id": "retry-1"},
                format="json",
            )
            with lock:
                responses.append((response.status_code, response.json()))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(status for status, _ in responses) == [200] * (clients - 1) + [201], responses
    assert len({body["id"] for _, body in responses}) == 1
    assert Decision.objects.count() == 1
    assert len(events(run, "ticket_decided")) == 1
