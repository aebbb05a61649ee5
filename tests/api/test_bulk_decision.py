"""POST /api/v1/tickets/bulk-decision: a dry run lists what a filter matches, a filter or
a list of ids decides, conflicts name who decided first, and roles are checked."""

from __future__ import annotations

from typing import Any

import pytest

from common.audit import Actor
from common.models import AuditEntry
from runs.models import Decision, Ticket
from runs.services.tickets import decision_submit
from tests.api.helpers import assert_error
from tests.runs.bulk_helpers import age, calc, note, waiting_on

pytestmark = pytest.mark.django_db

URL = "/api/v1/tickets/bulk-decision"


@pytest.fixture
def tickets() -> dict[str, Ticket]:
    lunch, dinner, sum_ = waiting_on("noter", note("lunch"), note("dinner"), calc("1+1"))
    (box,) = waiting_on("other", note("lunchbox"))
    ages = {"lunch": 30, "dinner": 20, "sum": 10, "box": 40}
    found = {"lunch": lunch, "dinner": dinner, "sum": sum_, "box": box}
    return {name: age(ticket, ages[name]) for name, ticket in found.items()}


def send(api: Any, body: dict[str, Any]) -> Any:
    return api.post(URL, body, format="json")


def ticket_ids(body: dict[str, Any]) -> list[str]:
    return [result["ticket_id"] for result in body["results"]]


def test_a_dry_run_lists_the_matched_tickets_and_decides_nothing(operator_api, tickets):
    body = {
        "filter": {"tool": "write_note", "arguments_pattern": 'title ~ "lunch*"'},
        "action": "approve",
        "dry_run": True,
    }
    response = send(operator_api, body)
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["matched"] == 2 and data["more"] is False
    assert ticket_ids(data) == [str(tickets["box"].pk), str(tickets["lunch"].pk)]
    assert {r["outcome"] for r in data["results"]} == {"matched"}
    first = data["results"][0]["ticket"]
    assert first["tool_name"] == "write_note" and first["agent_id"] == "other"
    assert first["arguments"]["title"] == "lunchbox"
    assert not Decision.objects.exists()
    assert not AuditEntry.objects.filter(action="tickets.bulk_decide").exists()


def test_a_filter_decides_what_it_matches(operator_api, tickets):
    body = {
        "filter": {"agent_id": "noter", "waiting_longer_than_minutes": 15},
        "action": "reject",
        "comment": "stale",
    }
    data = send(operator_api, body).json()
    assert data["matched"] == 2
    assert ticket_ids(data) == [str(tickets["lunch"].pk), str(tickets["dinner"].pk)]
    for result in data["results"]:
        assert result["outcome"] == "decided"
        assert result["decision"]["action"] == "reject"
        assert result["decision"]["actor"] == "olga (token ops)"
        assert result["decision"]["comment"] == "stale"
    assert Ticket.objects.for_operators().count() == 2
    row = AuditEntry.objects.get(action="tickets.bulk_decide")
    assert row.source == "api" and row.after["policy"]["agent"] == "noter"
    assert row.after["policy"]["waiting_longer_than_minutes"] == 15
    assert AuditEntry.objects.filter(action="ticket.reject").count() == 2


def test_the_ids_of_a_dry_run_decide_exactly_those_and_report_conflicts(operator_api, tickets):
    preview = send(
        operator_api, {"filter": {"agent_id": "noter"}, "action": "approve", "dry_run": True}
    ).json()
    ids = ticket_ids(preview)
    assert len(ids) == 3
    decision_submit(ticket=tickets["dinner"], action="reject", actor=Actor(label="bob"))
    waiting_on("noter-2", note("later"))  # matches nothing named

    data = send(operator_api, {"ticket_ids": ids, "action": "approve"}).json()
    assert data["matched"] == 3 and ticket_ids(data) == ids
    outcomes = {r["ticket_id"]: r for r in data["results"]}
    conflict = outcomes[str(tickets["dinner"].pk)]
    assert conflict["outcome"] == "conflict"
    assert conflict["decision"]["actor"] == "bob" and conflict["decision"]["action"] == "reject"
    assert "already decided by bob" in conflict["message"]
    assert [outcomes[str(tickets[n].pk)]["outcome"] for n in ["lunch", "sum"]] == ["decided"] * 2
    assert Decision.objects.count() == 3
    row = AuditEntry.objects.get(action="tickets.bulk_decide")
    assert row.after["policy"] is None and row.after["conflicts"] == 1

    again = send(operator_api, {"ticket_ids": ids, "action": "approve"}).json()
    assert [r["outcome"] for r in again["results"]] == ["conflict"] * 3
    assert Decision.objects.count() == 3


def test_a_dry_run_of_ids_lists_those_still_waiting(operator_api, tickets):
    decision_submit(ticket=tickets["lunch"], action="approve", actor=Actor(label="bob"))
    ids = [str(tickets[n].pk) for n in ["sum", "lunch", "box"]]
    data = send(operator_api, {"ticket_ids": ids, "action": "approve", "dry_run": True}).json()
    assert ticket_ids(data) == [str(tickets["sum"].pk), str(tickets["box"].pk)]


def test_unknown_ids_are_errors(operator_api, tickets):
    unknown = "01970000-0000-7000-8000-000000000000"
    body = {"ticket_ids": [unknown, str(tickets["box"].pk)], "action": "approve"}
    data = send(operator_api, body).json()
    assert [r["outcome"] for r in data["results"]] == ["error", "decided"]
    assert data["results"][0]["message"] == "no such ticket"


@pytest.mark.parametrize(
    "body",
    [
        {"action": "approve"},  # neither filter nor ids
        {"filter": {"tool": "x"}, "ticket_ids": ["01970000-0000-7000-8000-000000000000"]},
        {"filter": {}, "action": "approve"},  # a filter naming nothing
        {"filter": {"arguments_pattern": 'title =~ "("'}, "action": "approve"},
        {"filter": {"waiting_longer_than_minutes": -5}, "action": "approve"},
        {"filter": {"tool": "write_note"}, "action": "edit"},
        {"ticket_ids": [], "action": "approve"},
        {"ticket_ids": ["not-a-uuid"], "action": "approve"},
    ],
)
def test_invalid_requests(operator_api, tickets, body):
    body.setdefault("action", "approve")
    assert_error(send(operator_api, body), 400, "invalid")
    assert not Decision.objects.exists()


def test_a_viewer_is_refused_and_an_anonymous_caller_must_authenticate(
    viewer_api, anonymous_api, tickets
):
    body = {"filter": {"tool": "write_note"}, "action": "approve"}
    assert_error(send(viewer_api, body), 403, "permission_denied")
    assert_error(send(viewer_api, {**body, "dry_run": True}), 403, "permission_denied")
    assert_error(send(anonymous_api, body), 401, "not_authenticated")
    assert not Decision.objects.exists()


def test_bulk_decision_is_not_a_ticket_id(operator_api):
    response = operator_api.get(URL)
    assert_error(response, 405, "method_not_allowed")
