"""Bulk cancel and bulk retry of runs (runs/services/run_bulk.py, the runs list's bulk
form, POST /api/v1/runs/bulk-action): per-run outcomes, idempotency, the teams' freeze,
reason and confirmation rules, per-run permission and the audit rows."""

from __future__ import annotations

import pytest

from common.audit import Actor
from common.errors import ConfirmationRequired, InvalidInput
from common.models import AuditEntry
from common.teams import team_freeze
from runs.models import Run
from runs.services.run_bulk import ALREADY, DONE, REFUSED, bulk_run_action
from runs.services.submission_flow import run_start
from tests.factories import (
    bearer,
    call,
    scripted_agent,
    team,
    team_member,
    token_for,
    user_with_role,
)
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

OPS = Actor(label="ops", source="ui")


def queued(team_slug: str = "red", count: int = 1, slug: str = "") -> list[Run]:
    """`count` runs of one agent of team `team_slug`, each on its own thread, waiting for
    a decision on a tool call (they stay so until cancelled)."""
    agent = scripted_agent(
        [{"text": "", "tool_calls": [call("calculator", {"expression": "1+1"})]}, {"text": "ok"}],
        slug=slug or f"a-{team_slug}",
        permission={"default_behavior": "ask"},
        tools=["calculator"],
        team=team(team_slug),
    )
    runs = [drive(run_start(agent=agent, messages=f"go {i}")) for i in range(count)]
    assert all(run.status == Run.Status.WAITING for run in runs)
    return runs


def failed(team_slug: str = "red", slug: str = "") -> Run:
    agent = scripted_agent([{"text": "ok"}], slug=slug or f"f-{team_slug}", team=team(team_slug))
    run = drive(run_start(agent=agent, messages="one"))
    Run.objects.filter(pk=run.pk).update(status_reason="error")
    return Run.objects.get(pk=run.pk)


def outcomes(result) -> dict[str, str]:
    return {item.run_id: item.outcome for item in result.items}


# --- the service -----------------------------------------------------------------------------


def test_bulk_cancel_cancels_each_run_and_audits_each_and_the_bulk():
    runs = queued(count=3)
    result = bulk_run_action([r.pk for r in runs], "cancel", "cleanup", OPS)
    assert [item.outcome for item in result.items] == [DONE] * 3
    for run in runs:
        run.refresh_from_db()
        assert (run.status, run.status_reason) == (Run.Status.DONE, "cancelled")
    per_run = AuditEntry.objects.filter(action="run.cancel")
    assert {entry.target_id for entry in per_run} == {str(r.pk) for r in runs}
    assert {entry.comment for entry in per_run} == {"cleanup"}
    (bulk,) = AuditEntry.objects.filter(action="runs.bulk_cancel")
    assert bulk.after["done"] == [str(r.pk) for r in runs]
    assert bulk.comment == "cleanup"
    assert result.summary == "3 cancelled."


def test_cancelling_again_is_no_error_and_changes_nothing():
    runs = queued(count=2)
    bulk_run_action([runs[0].pk], "cancel", actor=OPS)
    result = bulk_run_action([r.pk for r in runs], "cancel", actor=OPS)
    assert outcomes(result) == {str(runs[0].pk): ALREADY, str(runs[1].pk): DONE}
    assert result.already[0].message == "already cancelled"
    assert result.level == "success"
    assert AuditEntry.objects.filter(action="run.cancel").count() == 2  # once per run


def test_a_frozen_teams_run_is_refused_saying_why_and_the_others_go_through():
    runs = queued("red", count=3)
    (blue,) = queued("blue")
    team_freeze(team=team("blue"), actor=OPS, reason="incident 42")
    result = bulk_run_action([*[r.pk for r in runs], blue.pk], "cancel", actor=OPS)
    assert [item.outcome for item in result.items] == [DONE, DONE, DONE, REFUSED]
    assert 'team "blue" is frozen: incident 42' in result.refused[0].message
    assert Run.objects.get(pk=blue.pk).status == Run.Status.WAITING
    assert result.level == "warning"
    assert "1 refused: run " + str(blue.pk)[-8:] in result.summary
    (bulk,) = AuditEntry.objects.filter(action="runs.bulk_cancel")
    assert "is frozen" in bulk.after["refused"][str(blue.pk)]


def test_a_finished_run_and_an_unknown_id_are_refused():
    (run,) = queued()
    done = failed()
    result = bulk_run_action([run.pk, done.pk, "nope"], "cancel", actor=OPS)
    assert [item.outcome for item in result.items] == [DONE, REFUSED, REFUSED]
    assert result.items[1].message == "already finished (error)"
    assert result.items[2].message == "no such run"


def test_the_role_in_each_runs_team_decides_and_another_teams_run_is_unknown():
    (red,) = queued("red")
    (blue,) = queued("blue")
    (green,) = queued("green")
    viewer = team_member("viewer", "blue", "blue-viewer")
    from common.models import Membership

    Membership.objects.create(team=team("red"), user=viewer, role="operator")
    actor = Actor(user=viewer, label=viewer.username, source="ui")
    result = bulk_run_action([red.pk, blue.pk, green.pk], "cancel", actor=actor)
    assert [item.outcome for item in result.items] == [DONE, REFUSED, REFUSED]
    assert result.items[1].message == "you may not cancel runs in its team"
    assert result.items[2].message == "no such run"  # not even confirmed to exist
    assert Run.objects.get(pk=green.pk).status == Run.Status.WAITING


def test_a_team_that_requires_a_reason_refuses_a_blank_bulk_cancel_before_anything():
    team("red", reason_required=True)
    runs = queued(count=2)
    with pytest.raises(InvalidInput, match="requires a reason to cancel a run"):
        bulk_run_action([r.pk for r in runs], "cancel", "  ", OPS)
    assert not Run.objects.filter(status=Run.Status.DONE).exists()
    assert not AuditEntry.objects.filter(action__in=["run.cancel", "runs.bulk_cancel"]).exists()
    result = bulk_run_action([r.pk for r in runs], "cancel", "stuck", OPS)
    assert [item.outcome for item in result.items] == [DONE, DONE]


def test_above_the_teams_threshold_it_needs_confirming_and_nothing_changes_before():
    team("red", bulk_confirm_above=2)
    runs = queued(count=3)
    with pytest.raises(ConfirmationRequired) as caught:
        bulk_run_action([r.pk for r in runs], "cancel", actor=OPS)
    assert caught.value.details == {"count": 3, "threshold": 2}
    assert not Run.objects.filter(status=Run.Status.DONE).exists()
    result = bulk_run_action([r.pk for r in runs], "cancel", actor=OPS, confirm=True)
    assert len(result.done) == 3


def test_bulk_retry_retries_a_failed_run_once_and_refuses_one_that_did_not_fail():
    bad = failed()
    (queued_run,) = queued("red", slug="other")
    result = bulk_run_action([bad.pk, queued_run.pk], "retry", actor=OPS)
    assert [item.outcome for item in result.items] == [DONE, REFUSED]
    (retry,) = Run.objects.filter(retry_of=bad)
    assert result.items[0].new_run_id == str(retry.pk)
    assert "only failed runs" in result.items[1].message
    again = bulk_run_action([bad.pk], "retry", actor=OPS)
    assert again.items[0].outcome == ALREADY
    assert again.items[0].message == f"already retried as run {str(retry.pk)[-8:]}"
    assert Run.objects.filter(retry_of=bad).count() == 1
    # the retry finished too: still no second retry of the same run
    Run.objects.filter(pk=retry.pk).update(status=Run.Status.DONE, status_reason="error")
    assert bulk_run_action([bad.pk], "retry", actor=OPS).items[0].outcome == ALREADY
    assert Run.objects.filter(retry_of=bad).count() == 1
    assert AuditEntry.objects.filter(action="run.retry").count() == 1
    assert AuditEntry.objects.filter(action="runs.bulk_retry").count() == 3


def test_nothing_selected_or_a_bad_action_is_refused():
    with pytest.raises(InvalidInput, match="Select at least one run"):
        bulk_run_action([], "cancel", actor=OPS)
    with pytest.raises(InvalidInput, match="cancel or retry"):
        bulk_run_action(["x"], "delete", actor=OPS)


# --- the runs list's bulk form ---------------------------------------------------------------


def test_the_runs_list_offers_the_bulk_form_and_reports_each_run(client):
    runs = queued("red", count=2)
    (blue,) = queued("blue")
    team_freeze(team=team("blue"), actor=OPS, reason="incident <b>42</b>")
    client.force_login(user_with_role("operator"))
    page = client.get("/runs/").content.decode()
    assert 'id="run-bulk"' in page and 'name="run" form="run-bulk"' in page
    response = client.post(
        "/runs/bulk",
        {
            "run": [*[str(r.pk) for r in runs], str(blue.pk)],
            "action": "cancel",
            "query": "agent=a-red",
        },
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "2 cancelled, 1 refused" in page
    assert "incident &lt;b&gt;42&lt;/b&gt;" in page and "<b>42</b>" not in page
    assert 'value="agent=a-red"' in page  # the list's filters are kept
    assert Run.objects.filter(status_reason="cancelled").count() == 2


def test_the_bulk_form_asks_for_the_reason_a_team_requires_keeping_the_selection(client):
    team("red", reason_required=True)
    runs = queued(count=2)
    client.force_login(user_with_role("operator"))
    response = client.post("/runs/bulk", {"run": [str(r.pk) for r in runs], "action": "cancel"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "requires a reason to cancel a run" in page
    assert page.count(' checked aria-label="select run') == 2
    assert not Run.objects.filter(status=Run.Status.DONE).exists()


def test_the_bulk_form_confirms_above_the_threshold_then_acts(client):
    team("red", bulk_confirm_above=1)
    runs = queued(count=2)
    client.force_login(user_with_role("operator"))
    ids = [str(r.pk) for r in runs]
    page = client.post("/runs/bulk", {"run": ids, "action": "cancel", "reason": "x"})
    text = page.content.decode()
    assert page.status_code == 200 and "Confirm: cancel 2 runs" in text
    assert not Run.objects.filter(status=Run.Status.DONE).exists()
    done = client.post(
        "/runs/bulk", {"run": ids, "action": "cancel", "reason": "x", "confirm": "1"}
    )
    assert "2 cancelled." in done.content.decode()


def test_a_viewer_is_not_offered_the_bulk_form_and_is_refused(client):
    (run,) = queued()
    client.force_login(team_member("viewer", "red"))
    assert 'id="run-bulk"' not in client.get("/runs/").content.decode()
    response = client.post("/runs/bulk", {"run": [str(run.pk)], "action": "cancel"})
    assert response.status_code == 403
    assert Run.objects.get(pk=run.pk).status == Run.Status.WAITING


# --- the API ---------------------------------------------------------------------------------


def test_the_api_cancels_and_retries_in_bulk_with_per_run_results():
    runs = queued(count=2)
    bad = failed()
    api = bearer(token_for(user_with_role("operator")))
    url = "/api/v1/runs/bulk-action"
    body = {"action": "cancel", "run_ids": [str(runs[0].pk), str(runs[0].pk), str(runs[1].pk)]}
    response = api.post(url, body, format="json")
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [r["outcome"] for r in results] == ["done", "done"]
    again = api.post(url, body, format="json").json()["results"]
    assert [(r["outcome"], r["message"]) for r in again] == [("already", "already cancelled")] * 2
    response = api.post(url, {"action": "retry", "run_ids": [str(bad.pk)]}, format="json")
    (result,) = response.json()["results"]
    assert result["outcome"] == "done" and result["new_run_id"]
    team("red", bulk_confirm_above=0)
    response = api.post(url, {"action": "retry", "run_ids": [str(bad.pk)]}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "confirmation_required"


def test_the_api_refuses_a_viewer():
    (run,) = queued()
    api = bearer(token_for(team_member("viewer", "red")))
    body = {"action": "cancel", "run_ids": [str(run.pk)]}
    response = api.post("/api/v1/runs/bulk-action", body, format="json")
    assert response.status_code == 403
    assert Run.objects.get(pk=run.pk).status == Run.Status.WAITING
