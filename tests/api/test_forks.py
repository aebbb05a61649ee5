"""Forks over the API: POST /runs/{id}/fork and GET /runs/{id}/forks; each response
conforms to the OpenAPI schema."""

from __future__ import annotations

import pytest

from common.models import AuditEntry
from runs.models import Message, Run, Thread
from tests.api.helpers import assert_error
from tests.api.schema_check import conforms
from tests.runs.helpers import drive
from tests.runs.replays.test_forks import three_step_run

pytestmark = pytest.mark.django_db

RUNS = "/api/v1/runs"
FORK = RUNS + "/{run_id}/fork"
FORKS = RUNS + "/{run_id}/forks"


def counts():
    return (Run.objects.count(), Thread.objects.count(), Message.objects.count())


def test_fork_returns_201_and_the_new_run_record(operator_api):
    run = three_step_run()
    body = {"step": 2, "version": "original", "edit": {"seq": 5, "text": "36"}}
    response = conforms(
        operator_api.post(f"{RUNS}/{run.pk}/fork", body, format="json"), "POST", FORK
    )
    assert response.status_code == 201
    record = response.json()
    assert record["run_mode"] == "fork" and record["status"] == "created"
    assert record["thread_id"] != str(run.thread_id)
    assert record["input"]["range"] == {"from_seq": 1, "to_seq": 5}
    assert record["agent_version"] == run.agent_version.number
    fork = Run.objects.get(pk=record["run_id"])
    assert fork.forked_from_id == run.pk and fork.fork_step == 2
    assert fork.fork_edit == {
        "seq": 5,
        "role": "tool",
        "before": '{"expression": "5*7", "result": 35}',
        "after": "36",
    }
    assert drive(fork).final_output == "The answer is 36."
    assert AuditEntry.objects.filter(action="run.fork", target_id=str(run.pk)).count() == 1


def test_version_defaults_to_original_and_edit_is_optional(operator_api):
    run = three_step_run()
    response = operator_api.post(f"{RUNS}/{run.pk}/fork", {"step": 0}, format="json")
    assert conforms(response, "POST", FORK).status_code == 201
    fork = Run.objects.get(pk=response.json()["run_id"])
    assert fork.agent_version_id == run.agent_version_id and fork.fork_edit is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"step": 4}, "step"),
        ({"step": -1}, "step"),
        ({}, "step"),
        ({"step": 1, "version": "newest"}, "version"),
        ({"step": 1, "edit": {"seq": 2, "text": "x"}}, "edit.seq"),
        ({"step": 1, "edit": {"seq": 1}}, "edit"),
        ({"step": 1, "edit": {"seq": 3, "text": ""}}, "edit"),
    ],
)
def test_bad_input_is_400_and_creates_nothing(operator_api, body, field):
    run = three_step_run()
    before = counts()
    response = operator_api.post(f"{RUNS}/{run.pk}/fork", body, format="json")
    error = assert_error(conforms(response, "POST", FORK), 400, "invalid")
    assert field.split(".")[0] in error["message"] + str(error["details"])
    assert counts() == before
    assert not AuditEntry.objects.filter(action="run.fork").exists()


def test_an_invalid_draft_is_refused(operator_api):
    run = three_step_run()
    run.agent.tools = ["no_such_tool"]
    run.agent.save()
    before = counts()
    response = operator_api.post(
        f"{RUNS}/{run.pk}/fork", {"step": 1, "version": "draft"}, format="json"
    )
    error = assert_error(conforms(response, "POST", FORK), 400, "invalid_agent_config")
    assert "cannot run" in error["message"]
    assert counts() == before


def test_a_viewer_may_list_forks_but_not_fork(viewer_api, operator_api):
    run = three_step_run()
    before = counts()
    response = viewer_api.post(f"{RUNS}/{run.pk}/fork", {"step": 1}, format="json")
    assert_error(conforms(response, "POST", FORK), 403, "permission_denied")
    assert counts() == before
    made = operator_api.post(f"{RUNS}/{run.pk}/fork", {"step": 1}, format="json").json()
    listed = conforms(viewer_api.get(f"{RUNS}/{run.pk}/forks"), "GET", FORKS)
    assert listed.status_code == 200
    (item,) = listed.json()["items"]
    assert item["run_id"] == made["run_id"] and item["forked_from"] == str(run.pk)
    assert item["fork_step"] == 1 and item["fork_edit"] is None
    assert item["agent_version_draft"] is False


def test_unknown_run_is_404(operator_api):
    missing = "01900000-0000-7000-8000-000000000000"
    assert_error(
        operator_api.post(f"{RUNS}/{missing}/fork", {"step": 0}, format="json"), 404, "not_found"
    )
    assert_error(operator_api.get(f"{RUNS}/{missing}/forks"), 404, "not_found")
