"""GET /api/v1/runs/compare (docs/compare.md): the compare page's JSON, its schema, its
errors and its permission."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from common.audit import Actor
from runs.models import Run, Ticket
from runs.replays.selectors.compare import run_compare, runs_for_compare
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.api.helpers import assert_error
from tests.api.schema_check import conforms
from tests.factories import bearer, call, scripted_agent, token_for, waiting_run
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

PATH = "/api/v1/runs/compare"
UNKNOWN = "00000000-0000-0000-0000-000000000000"


def calculator_run(expression: str, answer: str) -> Run:
    agent = scripted_agent(
        [
            {"text": "computing", "tool_calls": [call("calculator", {"expression": expression})]},
            {"text": answer},
        ]
    )
    return drive(run_start(agent=agent, messages="compute it"))


def get(api: Any, a: Any, b: Any) -> Any:
    return api.get(PATH, {"a": str(a), "b": str(b)})


def test_compare_is_the_page_json_and_conforms_to_the_schema(viewer_api):
    a, b = calculator_run("2+2", "it is 4"), calculator_run("2*3", "it is 6")
    response = conforms(get(viewer_api, a.pk, b.pk), "GET", PATH)
    assert response.status_code == 200
    body = response.json()
    runs = runs_for_compare([a.pk, b.pk])
    assert body == run_compare(runs[a.pk], runs[b.pk])
    assert body["different_steps"] == [0, 1]
    assert body["steps"][2]["text_diff"] == [
        {"op": "equal", "text": "it is "},
        {"op": "delete", "text": "4"},
        {"op": "insert", "text": "6"},
    ]


def test_tickets_and_nulls_conform_too(viewer_api, operator_user):
    approved, rejected = waiting_run(), waiting_run()
    decision_submit(
        ticket=Ticket.objects.get(run=approved), action="approve", actor=Actor(user=operator_user)
    )
    approved = drive(approved)
    # rejected still waits: its ticket pending, no decision, no duration
    response = conforms(get(viewer_api, approved.pk, rejected.pk), "GET", PATH)
    body = response.json()
    [row] = body["tickets"]
    assert row["a"]["action"] == "approve" and row["b"]["status"] == "pending"
    assert row["b"]["action"] is None and row["different"] is True
    rows = {r["key"]: r for r in body["summary"]}
    assert rows["duration_seconds"]["b"] is None
    assert rows["outcome"]["b"] == "waiting (suspended)"
    assert body["steps"][-1]["b"] is None  # the waiting run did not take step 1


def test_the_same_run_twice(viewer_api):
    run = calculator_run("2+2", "4")
    body = conforms(get(viewer_api, run.pk, run.pk), "GET", PATH).json()
    assert body["same_run"] is True and body["different_steps"] == []


def test_missing_or_invalid_ids_are_400(viewer_api):
    run = calculator_run("2+2", "4")
    error = assert_error(viewer_api.get(PATH), 400, "invalid")
    assert set(error["details"]) == {"a", "b"}
    conforms(viewer_api.get(PATH), "GET", PATH)
    error = assert_error(viewer_api.get(PATH, {"a": str(run.pk), "b": "nope"}), 400, "invalid")
    assert set(error["details"]) == {"b"}


def test_an_unknown_run_is_404(viewer_api):
    run = calculator_run("2+2", "4")
    response = get(viewer_api, run.pk, UNKNOWN)
    error = assert_error(response, 404, "not_found")
    assert error["details"] == {"run_id": UNKNOWN}
    conforms(response, "GET", PATH)


def test_anonymous_and_no_permission_are_refused(anonymous_api):
    run = calculator_run("2+2", "4")
    assert_error(get(anonymous_api, run.pk, run.pk), 401, "not_authenticated")
    nobody = bearer(token_for(User.objects.create_user("nobody", password="pw"), "none"))
    assert get(nobody, run.pk, run.pk).status_code == 403


def test_the_route_is_not_taken_for_a_run_id(viewer_api):
    # runs/<run_id> comes after it: "compare" is never looked up as a run
    response = viewer_api.get(PATH)
    assert response.json()["error"]["code"] == "invalid"
