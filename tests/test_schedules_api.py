"""/api/v1/schedules (runs/operations/api/views/schedules.py, docs/schedules.md "Over the
API"): every endpoint with a team's tokens, roles, team isolation, the admin's validation
messages, audit entries, idempotent pause / resume, run now through the submission
command, the responses as the OpenAPI document says, and concurrent changes."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from django.core.cache import caches
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils.html import escape
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from agents.models import Agent
from common.api.auth import THROTTLE_CACHE
from common.models import AuditEntry
from common.teams import team_freeze
from runs.models import Run, Schedule
from runs.operations.services.schedules import schedule_plan
from tests.api.helpers import assert_error
from tests.api.schema_check import conforms
from tests.api.test_schema_fuzz import CHECKS, keep_db_connection, schema  # noqa: F401 (fixture)
from tests.factories import (
    AgentFactory,
    bearer,
    scripted_agent,
    team,
    team_member,
    token_for,
    user_with_role,
)
from tests.runs.helpers import schedule_form

pytestmark = pytest.mark.django_db

BASE = "/api/v1/schedules"


@pytest.fixture(autouse=True)
def _fresh_throttle():
    caches[THROTTLE_CACHE].clear()
    yield
    caches[THROTTLE_CACHE].clear()


def agent_of(slug: str, **fields: Any) -> Any:
    return scripted_agent([{"text": "ok"}], slug=f"{slug}-agent", team=team(slug), **fields)


def make(slug: str = "red", name: str = "nightly", **fields: Any) -> Schedule:
    schedule = Schedule(
        name=name,
        agent=fields.pop("agent", None) or agent_of(slug),
        message="report",
        kind="interval",
        interval_seconds=600,
        timezone="UTC",
        **fields,
    )
    schedule_plan(schedule)
    schedule.save()
    return schedule


def api_of(role: str, slug: str = "red", username: str | None = None) -> Any:
    """An API client with the token of `role` in team `slug` (named after both)."""
    user = team_member(role, slug, username=username or f"{role}-{slug}")
    return bearer(token_for(user, f"{role}-token"))


def body(agent: Any, **fields: Any) -> dict[str, Any]:
    return {
        "name": "morning report",
        "agent_id": agent.slug,
        "message": "report on the night",
        "kind": "cron",
        "cron": "0 9 * * 1-5",
        "timezone": "Europe/Berlin",
        **fields,
    }


def actions(schedule_id: Any) -> list[str]:
    rows = AuditEntry.objects.filter(target_type="schedule", target_id=str(schedule_id))
    return list(rows.order_by("id").values_list("action", flat=True))


def changes() -> bool:
    """Whether anything but a token's creation was audited."""
    return AuditEntry.objects.exclude(action__startswith="token.").exists()


# --- the whole life of a schedule over the API ------------------------------------------------


def test_a_teams_admin_token_creates_pauses_resumes_runs_now_and_deletes_a_schedule():
    agent = agent_of("red")
    api = api_of("admin")
    created = api.post(BASE, body(agent), format="json")
    assert created.status_code == 201, created.content
    conforms(created, "post", BASE)
    data = created.json()
    assert (data["name"], data["agent_id"], data["team"], data["enabled"]) == (
        "morning report",
        "red-agent",
        "red",
        True,
    )
    assert (data["kind"], data["cron"], data["timezone"], data["priority"]) == (
        "cron",
        "0 9 * * 1-5",
        "Europe/Berlin",
        128,
    )
    assert data["next_run_at"] is not None and data["created_by"] == "admin-red"
    schedule_id = data["id"]
    entry = AuditEntry.objects.get(action="schedule.create")
    assert (entry.actor_label, entry.source, entry.team_id) == (
        "admin-red (token admin-token)",
        "api",
        agent.team_id,
    )
    assert entry.after["cron"] == "0 9 * * 1-5"
    url = f"{BASE}/{schedule_id}"

    paused = api.post(f"{url}/pause")
    conforms(paused, "post", f"{BASE}/{{schedule_id}}/pause")
    assert (paused.json()["enabled"], paused.json()["next_run_at"]) == (False, None)
    again = api.post(f"{url}/pause")  # idempotent: nothing changes, nothing is recorded
    assert again.status_code == 200 and again.json()["enabled"] is False
    assert actions(schedule_id) == ["schedule.create", "schedule.pause"]

    resumed = api.post(f"{url}/resume")
    assert resumed.status_code == 200 and resumed.json()["enabled"] is True
    next_run = resumed.json()["next_run_at"]
    assert next_run is not None
    assert api.post(f"{url}/resume").json()["next_run_at"] == next_run  # not moved
    assert actions(schedule_id)[-1] == "schedule.resume"
    assert actions(schedule_id).count("schedule.resume") == 1

    started = api.post(f"{url}/run-now")
    assert started.status_code == 201, started.content
    conforms(started, "post", f"{BASE}/{{schedule_id}}/run-now")
    run = Run.objects.get(pk=started.json()["run"]["run_id"])
    assert (str(run.schedule_id), run.run_mode, run.agent_id) == (
        schedule_id,
        "scheduled",
        agent.pk,
    )
    assert started.json()["schedule"]["last_run_id"] == str(run.pk)
    assert started.json()["schedule"]["next_run_at"] == next_run  # its slots stay
    start = AuditEntry.objects.get(action="run.start", run=run)
    assert start.actor_label == "admin-red (token admin-token)"

    runs = api.get(f"{url}/runs")
    conforms(runs, "get", f"{BASE}/{{schedule_id}}/runs")
    assert [item["run_id"] for item in runs.json()["items"]] == [str(run.pk)]

    assert api.delete(url).status_code == 204
    assert not Schedule.objects.filter(pk=schedule_id).exists()
    assert Run.objects.filter(pk=run.pk).exists()  # its runs stay
    assert_error(api.get(url), 404, "not_found")
    assert actions(schedule_id) == [
        "schedule.create",
        "schedule.pause",
        "schedule.resume",
        "schedule.run_now",
        "schedule.delete",
    ]


def test_a_schedule_created_paused_has_no_next_run_and_defaults_as_in_the_admin():
    agent = agent_of("red")
    api = api_of("admin")
    sent = {"name": "weekly", "agent_id": agent.slug, "message": "hi", "kind": "interval"}
    response = api.post(BASE, {**sent, "interval_seconds": 3600, "enabled": False}, format="json")
    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["enabled"], data["next_run_at"]) == (False, None)
    assert (data["timezone"], data["thread_policy"], data["catch_up"]) == ("UTC", "new", "skip")


def test_patch_changes_only_the_fields_sent_and_is_audited_with_before_and_after():
    schedule = make()
    schedule.last_outcome = "started run x"
    schedule.save(update_fields=["last_outcome"])
    api = api_of("admin")
    url = f"{BASE}/{schedule.pk}"
    response = api.patch(url, {"name": "renamed", "interval_seconds": 60}, format="json")
    assert response.status_code == 200, response.content
    conforms(response, "patch", f"{BASE}/{{schedule_id}}")
    changed = Schedule.objects.get(pk=schedule.pk)
    assert (changed.name, changed.interval_seconds, changed.message) == ("renamed", 60, "report")
    assert changed.last_outcome == "started run x"  # what a firing set is kept
    entry = AuditEntry.objects.get(action="schedule.update")
    assert (entry.before["name"], entry.after["name"]) == ("nightly", "renamed")
    assert (entry.before["interval_seconds"], entry.after["interval_seconds"]) == (600, 60)
    refused = api.patch(url, {"kind": "cron", "cron": "61 * * * *"}, format="json")
    error = assert_error(refused, 400, "invalid")
    assert "Invalid cron expression '61 * * * *'" in error["details"]["cron"][0]
    assert Schedule.objects.get(pk=schedule.pk).kind == "interval"  # nothing saved
    assert AuditEntry.objects.filter(action="schedule.update").count() == 1


def test_patch_moves_a_schedule_only_to_an_agent_of_a_team_where_the_user_manages_them():
    schedule = make()
    other = AgentFactory(slug="red-other", team=team("red"))
    api = api_of("admin")
    moved = api.patch(f"{BASE}/{schedule.pk}", {"agent_id": other.slug}, format="json")
    assert moved.status_code == 200 and moved.json()["agent_id"] == "red-other"
    blue = agent_of("blue")
    refused = api.patch(f"{BASE}/{schedule.pk}", {"agent_id": blue.slug}, format="json")
    error = assert_error(refused, 400, "invalid")
    assert error["details"] == {"agent_id": ["no agent 'blue-agent'"]}
    assert Schedule.objects.get(pk=schedule.pk).agent_id == other.pk


# --- lists -------------------------------------------------------------------------------------


def test_the_list_is_team_scoped_filtered_and_paginated():
    red_agent = agent_of("red")
    other = AgentFactory(slug="red-other", team=team("red"))
    first = make(name="a", agent=red_agent)
    second = make(name="b", agent=red_agent, enabled=False)
    third = make(name="c", agent=other)
    make("blue", name="blue's")
    api = api_of("viewer")  # reading is every member's

    def names(**query: Any) -> list[str]:
        response = api.get(BASE, query)
        assert response.status_code == 200, response.content
        return [item["name"] for item in response.json()["items"]]

    listed = api.get(BASE)
    conforms(listed, "get", BASE)
    assert names() == ["c", "b", "a"]  # newest first; blue's is not there
    assert names(agent_id="red-agent") == ["b", "a"]
    assert names(paused="true") == ["b"]
    assert names(paused="false") == ["c", "a"]
    assert names(agent_id="blue-agent") == []
    page = api.get(BASE, {"limit": 2}).json()
    assert [item["id"] for item in page["items"]] == [str(third.pk), str(second.pk)]
    rest = api.get(BASE, {"limit": 2, "cursor": page["next_cursor"]}).json()
    assert [item["id"] for item in rest["items"]] == [str(first.pk)]
    assert rest["next_cursor"] is None and rest["prev_cursor"] is not None
    assert_error(api.get(BASE, {"cursor": "nonsense"}), 400, "invalid")
    assert_error(api.get(BASE, {"paused": "maybe"}), 400, "invalid")


def test_a_schedules_runs_are_newest_first_and_paginated():
    schedule = make()
    api = api_of("admin")
    started = [api.post(f"{BASE}/{schedule.pk}/run-now").json()["run"]["run_id"] for _ in range(3)]
    reader = api_of("viewer")
    page = reader.get(f"{BASE}/{schedule.pk}/runs", {"limit": 2}).json()
    assert [item["run_id"] for item in page["items"]] == started[::-1][:2]
    rest = reader.get(f"{BASE}/{schedule.pk}/runs", {"cursor": page["next_cursor"]}).json()
    assert [item["run_id"] for item in rest["items"]] == started[:1]


# --- roles and teams ---------------------------------------------------------------------------


def _every_request(api: Any, schedule: Schedule, agent: Any) -> dict[str, Any]:
    url = f"{BASE}/{schedule.pk}"
    return {
        "create": api.post(BASE, body(agent), format="json"),
        "patch": api.patch(url, {"priority": 3}, format="json"),
        "pause": api.post(f"{url}/pause"),
        "resume": api.post(f"{url}/resume"),
        "run-now": api.post(f"{url}/run-now"),
        "delete": api.delete(url),
    }


def test_viewers_read_schedules_but_may_not_change_them():
    schedule = make()
    api = api_of("viewer")
    assert api.get(f"{BASE}/{schedule.pk}").status_code == 200
    assert api.get(f"{BASE}/{schedule.pk}/runs").status_code == 200
    for what, response in _every_request(api, schedule, schedule.agent).items():
        assert response.status_code == 403, (what, response.content)
        assert response.json()["error"]["code"] == "permission_denied", what
    fresh = Schedule.objects.get(pk=schedule.pk)
    assert (fresh.enabled, fresh.priority, Schedule.objects.count()) == (True, 128, 1)
    assert not changes()
    assert not Run.objects.exists()


@pytest.mark.parametrize("site_wide", [False, True], ids=["team-member", "role-group"])
def test_an_operator_token_creates_changes_pauses_resumes_and_runs_now_but_may_not_delete(
    site_wide,
):
    """Issue 31: an operator manages its team's schedules; deleting one is an admin's."""
    agent = agent_of("red")
    if site_wide:
        api = bearer(token_for(user_with_role("operator", "operator-red"), "operator-token"))
    else:
        api = api_of("operator")
    created = api.post(BASE, body(agent), format="json")
    assert created.status_code == 201, created.content
    conforms(created, "post", BASE)
    assert created.json()["created_by"] == "operator-red"
    schedule_id = created.json()["id"]
    url = f"{BASE}/{schedule_id}"
    changed = api.patch(url, {"priority": 3, "message": "changed"}, format="json")
    assert changed.status_code == 200, changed.content
    assert (changed.json()["priority"], changed.json()["message"]) == (3, "changed")
    paused = api.post(f"{url}/pause")
    assert paused.status_code == 200 and paused.json()["enabled"] is False
    resumed = api.post(f"{url}/resume")
    assert resumed.status_code == 200 and resumed.json()["next_run_at"] is not None
    started = api.post(f"{url}/run-now")
    assert started.status_code == 201, started.content
    run = Run.objects.get(pk=started.json()["run"]["run_id"])
    assert (str(run.schedule_id), run.run_mode) == (schedule_id, "scheduled")
    start = AuditEntry.objects.get(action="run.start", run=run)
    assert start.actor_label == "operator-red (token operator-token)"
    assert_error(api.delete(url), 403, "permission_denied")
    assert Schedule.objects.filter(pk=schedule_id).exists()
    assert actions(schedule_id) == [
        "schedule.create",
        "schedule.update",
        "schedule.pause",
        "schedule.resume",
        "schedule.run_now",
    ]
    entry = AuditEntry.objects.get(action="schedule.create")
    assert (entry.actor_label, entry.source) == ("operator-red (token operator-token)", "api")


@pytest.mark.parametrize("role", ["operator", "admin"])
def test_another_teams_schedule_is_a_404_on_every_endpoint_and_stays_as_it_was(role):
    blue = make("blue", name="blue nightly")
    api = api_of(role)  # red's
    url = f"{BASE}/{blue.pk}"
    responses = {
        "get": api.get(url),
        "runs": api.get(f"{url}/runs"),
        **{k: v for k, v in _every_request(api, blue, blue.agent).items() if k != "create"},
    }
    unknown = f"{BASE}/0190a0a0-0000-7000-8000-000000000001"
    if role == "operator":  # deleting is no operator's anywhere: refused before any lookup
        deleted = responses.pop("delete")
        assert_error(deleted, 403, "permission_denied")
        assert deleted.content == api.delete(unknown).content  # the same for an unknown id
    for what, response in responses.items():
        error = assert_error(response, 404, "not_found")
        assert error["message"] == f"schedule {blue.pk} not found", what
        assert "blue nightly" not in response.content.decode()
    fresh = Schedule.objects.get(pk=blue.pk)
    assert (fresh.enabled, fresh.priority, fresh.next_run_at) == (True, 128, blue.next_run_at)
    assert not Run.objects.exists() and not changes()
    # an unknown id and a malformed one answer the same way
    assert_error(api.get(unknown), 404, "not_found")
    assert_error(api.get(f"{BASE}/not-a-uuid"), 404, "not_found")


@pytest.mark.parametrize("role", ["operator", "admin"])
def test_another_teams_agent_is_refused_as_an_unknown_one(role):
    blue = agent_of("blue")
    api = api_of(role)
    theirs = assert_error(api.post(BASE, body(blue), format="json"), 400, "invalid")
    unknown = assert_error(
        api.post(BASE, body(blue, agent_id="zeta-agent"), format="json"), 400, "invalid"
    )
    assert theirs["details"] == {"agent_id": ["no agent 'blue-agent'"]}
    assert unknown["details"] == {"agent_id": ["no agent 'zeta-agent'"]}
    assert not Schedule.objects.exists() and not changes()


def test_an_admin_of_one_team_who_reads_another_may_not_change_its_schedules():
    blue = make("blue", name="blue nightly")
    user = team_member("admin", "red", username="ada")
    from common.models import Membership

    Membership.objects.create(team=team("blue"), user=user, role="viewer")
    api = bearer(token_for(user))
    assert api.get(f"{BASE}/{blue.pk}").status_code == 200
    assert_error(api.post(f"{BASE}/{blue.pk}/pause"), 403, "forbidden")
    assert_error(api.post(BASE, body(blue.agent), format="json"), 403, "forbidden")
    assert Schedule.objects.get(pk=blue.pk).enabled


def test_a_frozen_teams_schedule_is_refused_with_409_team_frozen():
    schedule = make()
    team_freeze(team=team("red"), actor=_ops(), reason="incident 7")
    api = bearer(token_for(user_with_role("admin", "site-admin")))
    for what, response in _every_request(api, schedule, schedule.agent).items():
        error = assert_error(response, 409, "team_frozen")
        assert "incident 7" in error["message"], what
    assert api.get(f"{BASE}/{schedule.pk}").status_code == 200
    assert Schedule.objects.get(pk=schedule.pk).enabled


def _ops() -> Any:
    from common.audit import Actor

    return Actor(label="ops", source="ui")


def test_without_credentials_it_is_a_401():
    schedule = make()
    client = bearer("awk_nope_nope")
    assert client.get(BASE).status_code == 401
    from rest_framework.test import APIClient

    assert_error(APIClient().post(f"{BASE}/{schedule.pk}/pause"), 401, "not_authenticated")


# --- validation: the admin's, with its messages -----------------------------------------------

INVALID = [
    ({"cron": "0 25 * * *"}, "cron"),
    ({"cron": "*/5 * * *"}, "cron"),
    ({"cron": ""}, "cron"),
    ({"cron": "0 0 31 2 *"}, "cron"),
    ({"timezone": "Europe/Atlantis"}, "timezone"),
    ({"kind": "interval", "cron": "", "interval_seconds": None}, "interval_seconds"),
    ({"kind": "interval", "cron": "", "interval_seconds": 0}, "interval_seconds"),
    ({"kind": "interval", "cron": "", "interval_seconds": -5}, "interval_seconds"),
    ({"message": "   "}, "message"),
    ({"name": "x" * 201}, "name"),
    ({"name": ""}, "name"),
    ({"name": "taken"}, "name"),
    ({"priority": 256}, "priority"),
    ({"priority": -1}, "priority"),
    ({"kind": "weekly"}, "kind"),
    ({"thread_policy": "sometimes"}, "thread_policy"),
    ({"catch_up": "always"}, "catch_up"),
    ({"agent": "draft"}, "agent_id"),
]


def _admin_errors(client: Client, form: dict[str, Any]) -> str:
    response = client.post(reverse("admin:runs_schedule_add"), form)
    assert response.status_code == 200  # the form again, with its errors
    return response.content.decode()


@pytest.mark.parametrize(("fields", "field"), INVALID)
def test_an_invalid_schedule_is_refused_with_the_admins_message_on_the_field(fields, field):
    agent = agent_of("red")
    make(name="taken", agent=agent)
    draft = AgentFactory(slug="red-draft", team=team("red"), published=False)
    fields = dict(fields)
    if fields.pop("agent", None):
        fields["agent_id"] = draft.slug
    sent = body(agent, **fields)
    response = api_of("admin").post(BASE, sent, format="json")
    error = assert_error(response, 400, "invalid")
    assert list(error["details"]) == [field], error
    (message,) = error["details"][field]
    assert message in error["message"]
    admin = team_member("admin", "red", username="staff-ada")
    admin.is_staff = True
    admin.save(update_fields=["is_staff"])
    client = Client()
    client.force_login(admin)
    form = schedule_form(draft if field == "agent_id" else agent, **fields)
    form.pop("agent_id", None)
    for name in ("interval_seconds",):
        form[name] = "" if form.get(name) is None else form[name]
    if not form.get("enabled", True):
        form.pop("enabled")
    page = _admin_errors(client, form)
    assert escape(message) in page
    assert "Schedule with this Name already exists" not in page  # one message for a name taken
    assert Schedule.objects.count() == 1 and not changes()


def test_wrong_json_types_are_a_400_naming_the_field():
    agent = agent_of("red")
    api = api_of("admin")
    for fields, field in [
        ({"priority": "high"}, "priority"),
        ({"enabled": "perhaps"}, "enabled"),
        ({"kind": ["cron"]}, "kind"),
        ({"interval_seconds": {"s": 1}}, "interval_seconds"),
    ]:
        error = assert_error(api.post(BASE, body(agent, **fields), format="json"), 400, "invalid")
        assert field in error["details"], (fields, error)
    error = assert_error(api.post(BASE, {"name": "x"}, format="json"), 400, "invalid")
    assert set(error["details"]) == {"agent_id", "message"}
    assert not Schedule.objects.exists()


def test_a_run_now_on_a_busy_thread_is_409_and_starts_nothing():
    schedule = make(thread_policy="same")
    api = api_of("admin")
    first = api.post(f"{BASE}/{schedule.pk}/run-now")
    assert first.status_code == 201
    # the scripted run is queued (no worker here): its thread's run is still open
    assert_error(api.post(f"{BASE}/{schedule.pk}/run-now"), 409, "conflict")
    assert Run.objects.filter(schedule=schedule).count() == 1


def test_the_openapi_document_describes_the_schedule_endpoints(client):
    schema = client.get("/api/v1/schema/", {"format": "json"}).json()
    paths = schema["paths"]
    create = paths[BASE]["post"]
    assert set(create["responses"]) >= {"201", "400", "401", "403", "409", "413", "415"}
    write = schema["components"]["schemas"]["ScheduleWriteRequest"]["properties"]
    assert schema["components"]["schemas"]["KindEnum"]["enum"] == ["cron", "interval"]
    assert write["name"]["maxLength"] == 200
    assert (write["priority"]["minimum"], write["priority"]["maximum"]) == (0, 255)
    assert paths[f"{BASE}/{{schedule_id}}/run-now"]["post"]["tags"] == ["schedules"]
    assert "404" in paths[f"{BASE}/{{schedule_id}}"]["delete"]["responses"]


# --- schemathesis with a team admin's token on a real schedule -------------------------------

fuzzed = schema.include(path_regex=r"^/api/v1/schedules")


@pytest.mark.slow
@fuzzed.parametrize()
@hypothesis_settings(
    max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
@pytest.mark.usefixtures("keep_db_connection")
def test_the_schedule_endpoints_conform_to_their_schema_for_a_teams_admin(case, schedule_world):
    """Generated requests that reach a real schedule and a real agent (random ids, in
    tests/api/test_schema_fuzz.py, mostly meet 404)."""
    headers, schedule_id, agent_slug = schedule_world
    if not Schedule.objects.filter(pk=schedule_id).exists():  # an earlier example deleted it
        make(
            name=f"fuzzed {uuid.uuid4()}", id=schedule_id, agent=Agent.objects.get(slug=agent_slug)
        )
    if "schedule_id" in case.path_parameters:
        case.path_parameters["schedule_id"] = str(schedule_id)
    if isinstance(case.body, dict) and "agent_id" in case.body:
        case.body["agent_id"] = agent_slug
    case.call_and_validate(headers=headers, checks=CHECKS)


@pytest.fixture
def schedule_world(db, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"api_token": "100000/min"},
    }
    schedule = make()
    raw = token_for(team_member("admin", "red"))
    return {"Authorization": f"Bearer {raw}"}, schedule.pk, schedule.agent.slug


# --- concurrency (PostgreSQL) ------------------------------------------------------------------


def _race(count: int, request: Any) -> list[int]:
    barrier = threading.Barrier(count)
    statuses: list[int] = []

    def send(index: int) -> None:
        try:
            barrier.wait()
            statuses.append(request(index).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return statuses


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_pauses_record_one_pause_and_concurrent_patches_both_apply(settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"api_token": "100000/min"},
    }
    schedule = make()
    raw = token_for(team_member("admin", "red"))
    url = f"{BASE}/{schedule.pk}"
    assert _race(6, lambda i: bearer(raw).post(f"{url}/pause")) == [200] * 6
    assert actions(schedule.pk) == ["schedule.pause"]
    fields = [{"priority": 7}, {"message": "changed"}]
    statuses = _race(2, lambda i: bearer(raw).patch(url, fields[i], format="json"))
    assert statuses == [200, 200]
    fresh = Schedule.objects.get(pk=schedule.pk)
    assert (fresh.priority, fresh.message, fresh.enabled) == (7, "changed", False)
    assert fresh.next_run_at is None
