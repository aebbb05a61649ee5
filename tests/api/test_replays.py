"""/api/v1/replays (docs/replays.md): 201/400/403/404/409, the schema, and the items'
original and replay summaries; plus the replay pages (list, form preview, table)."""

from __future__ import annotations

from typing import Any

import pytest

from runs.models import Run
from runs.replays.models.replays import ReplaySet
from runs.services.execution import run_advance
from runs.services.submission_flow import run_start
from tests.api.helpers import assert_error
from tests.api.schema_check import conforms
from tests.factories import bearer, scripted_agent, token_for, user_with_role
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_user() -> Any:
    return user_with_role("admin", "ada")


@pytest.fixture
def admin_api(admin_user: Any) -> Any:
    return bearer(token_for(admin_user, "admin"))


@pytest.fixture
def agent() -> Any:
    agent = scripted_agent([{"text": "ok"}])
    for index in range(3):
        drive(run_start(agent=agent, messages=f"question {index}"))
    return agent


def finish_all() -> None:
    for _ in range(50):
        run = Run.objects.filter(run_mode="replay", due=True).first()
        if run is None:
            return
        run_advance(run_id=run.pk, worker="test-worker")


def test_create_list_read_and_cancel(admin_api, agent):
    body = {
        "agent_id": agent.slug,
        "version": "latest",
        "filters": {"outcome": "completed"},
        "limit": 2,
        "ticket_policy": "reject_all",
        "http_mode": "recorded",
        "concurrency": 1,
    }
    created = conforms(
        admin_api.post("/api/v1/replays", body, format="json"), "post", "/api/v1/replays"
    )
    assert created.status_code == 201
    data = created.json()
    assert data["agent_id"] == agent.slug and data["status"] == "running"
    assert data["progress"]["total"] == 2 and data["progress"]["running"] == 1
    assert data["filters"]["outcome"] == "completed" and data["ticket_policy"] == "reject_all"
    listed = conforms(admin_api.get("/api/v1/replays"), "get", "/api/v1/replays")
    assert [s["id"] for s in listed.json()["items"]] == [data["id"]]
    finish_all()
    read = admin_api.get(f"/api/v1/replays/{data['id']}")
    conforms(read, "get", "/api/v1/replays/{set_id}")
    detail = read.json()
    assert detail["status"] == "done"
    assert [item["status"] for item in detail["items"]] == ["done", "done"]
    item = detail["items"][0]
    assert item["original"]["outcome"] == item["replay"]["outcome"] == "completed"
    assert item["changed"] is False
    assert item["compare_url"].endswith(f"?a={item['original']['id']}&b={item['replay']['id']}")
    refused = admin_api.post(f"/api/v1/replays/{data['id']}/cancel")
    conforms(refused, "post", "/api/v1/replays/{set_id}/cancel")
    assert_error(refused, 409, "conflict")


def test_cancel_through_the_api(admin_api, agent):
    created = admin_api.post(
        "/api/v1/replays", {"agent_id": agent.slug, "concurrency": 1}, format="json"
    ).json()
    response = admin_api.post(f"/api/v1/replays/{created['id']}/cancel")
    conforms(response, "post", "/api/v1/replays/{set_id}/cancel")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert response.json()["progress"]["skipped"] == 2


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"agent_id": "nobody"},
        {"limit": 500},
        {"concurrency": 0},
        {"version": "v2"},
        {"version": "9"},
        {"version": 0},
        {"version": False},
        {"version": -3},
        {"version": 99999999999999},
        {"ticket_policy": "approve_some"},
        {"http_mode": "replay"},
        {"filters": {"outcome": "great"}},
        {"filters": {"created_before": "not a date"}},
        {"filters": "outcome=any"},
        {"filters": {"outcome": "failed"}},  # nothing matches
    ],
)
def test_bad_bodies_are_400_and_start_nothing(admin_api, agent, body):
    full = {"agent_id": agent.slug, **body} if body else {}
    response = admin_api.post("/api/v1/replays", full, format="json")
    conforms(response, "post", "/api/v1/replays")
    assert_error(response, 400, "invalid")
    assert not ReplaySet.objects.exists()
    assert not Run.objects.filter(run_mode="replay").exists()


def test_operators_and_viewers_cannot_start_or_cancel(operator_api, viewer_api, admin_api, agent):
    body = {"agent_id": agent.slug}
    for api in (operator_api, viewer_api):
        response = api.post("/api/v1/replays", body, format="json")
        conforms(response, "post", "/api/v1/replays")
        assert_error(response, 403, "permission_denied")
    assert not ReplaySet.objects.exists()
    created = admin_api.post("/api/v1/replays", body, format="json").json()
    assert_error(
        operator_api.post(f"/api/v1/replays/{created['id']}/cancel"), 403, "permission_denied"
    )
    # viewers read
    assert viewer_api.get(f"/api/v1/replays/{created['id']}").status_code == 200
    assert viewer_api.get("/api/v1/replays").status_code == 200


def test_unknown_set_is_404(admin_api):
    response = admin_api.get("/api/v1/replays/01234567-89ab-7def-8123-456789abcdef")
    conforms(response, "get", "/api/v1/replays/{set_id}")
    assert_error(response, 404, "not_found")
    assert_error(admin_api.get("/api/v1/replays/nope"), 404, "not_found")


# --- the pages ----------------------------------------------------------------------------------


def test_pages_form_preview_table_and_nav(client, admin_user, agent):
    client.force_login(admin_user)
    page = client.get("/replays/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'href="/replays/"' in html and "New replay" in html
    preview = client.get("/replays/preview", {"agent_id": agent.slug, "limit": "2"})
    assert 'data-matched="3"' in preview.content.decode()
    assert "2 would be replayed" in preview.content.decode()
    bad = client.get("/replays/preview", {"agent_id": agent.slug, "limit": "999"})
    assert "limit must be between 1 and 200" in bad.content.decode()
    response = client.post(
        "/replays/",
        {
            "agent_id": agent.slug,
            "version": "draft",
            "outcome": "any",
            "limit": "3",
            "ticket_policy": "as_recorded",
            "http_mode": "recorded",
            "concurrency": "2",
        },
    )
    replay_set = ReplaySet.objects.get()
    assert response.status_code == 302 and response.url == f"/replays/{replay_set.pk}/"
    detail = client.get(response.url).content.decode()
    assert 'data-refresh-url="/replays/' in detail and "0 of 3 replayed" in detail
    finish_all()
    table = client.get(f"/replays/{replay_set.pk}/table").content.decode()
    assert "3 of 3 replayed" in table and "0 changed" in table
    assert "/runs/compare/?a=" in table
    assert "data-refresh-url" not in client.get(response.url).content.decode()  # finished


def test_pages_refuse_bad_input_and_other_roles(client, admin_user, agent):
    client.force_login(admin_user)
    bad = client.post("/replays/", {"agent_id": agent.slug, "limit": "0"})
    assert bad.status_code == 400 and "limit must be between" in bad.content.decode()
    assert not ReplaySet.objects.exists()
    client.force_login(user_with_role("operator", "olga"))
    page = client.get("/replays/")
    assert page.status_code == 200 and "New replay" not in page.content.decode()
    assert client.post("/replays/", {"agent_id": agent.slug}).status_code == 403
    assert not ReplaySet.objects.exists()
    client.force_login(user_with_role("viewer", "vic"))
    assert 'href="/replays/"' in client.get("/").content.decode()


def test_rendered_text_is_escaped(client, admin_user):
    agent = scripted_agent([{"text": "ok"}])
    drive(run_start(agent=agent, messages="<script>alert(1)</script>"))
    client.force_login(admin_user)
    client.post("/replays/", {"agent_id": agent.slug})
    replay_set = ReplaySet.objects.get()
    html = client.get(f"/replays/{replay_set.pk}/").content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
