"""The error format for every kind of error, and the same viewer / operator / admin
permissions as the pages: anonymous 401, viewer reads only (403 on writes), operator acts."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from runs.models import Run, Ticket
from tests.api.helpers import assert_error
from tests.api.schema_check import conforms
from tests.factories import bearer, done_run, scripted_agent, token_for, user_with_role, waiting_run

pytestmark = pytest.mark.django_db

RUNS = "/api/v1/runs"


@pytest.fixture
def world():
    """A waiting run, a failed run and an agent: ids for every endpoint."""
    waiting = waiting_run()
    failed_agent = scripted_agent([{"error": "flaky"}])
    from runs.services.submission_flow import run_start
    from tests.runs.helpers import drive

    failed = drive(run_start(agent=failed_agent, messages="go"))
    ticket = Ticket.objects.get(run=waiting)
    return {"waiting": waiting, "failed": failed, "ticket": ticket, "agent": waiting.agent}


def reads(w):
    run, ticket = w["waiting"], w["ticket"]
    return [
        RUNS,
        f"{RUNS}/{run.pk}",
        f"{RUNS}/{run.pk}/events",
        "/api/v1/tickets",
        f"/api/v1/tickets/{ticket.pk}",
        "/api/v1/threads",
        f"/api/v1/threads/{run.thread_id}",
        f"/api/v1/threads/{run.thread_id}/messages",
        "/api/v1/agents",
        f"/api/v1/agents/{w['agent'].slug}",
        "/api/v1/audit",
    ]


def writes(w):
    run, ticket, failed = w["waiting"], w["ticket"], w["failed"]
    message = {"messages": [{"content": "hi"}]}
    return [
        (RUNS, {"agent_id": w["agent"].slug, **message}, 201),
        (f"{RUNS}/{failed.pk}/retry", {}, 201),
        (f"/api/v1/tickets/{ticket.pk}/decision", {"action": "approve"}, 201),
        ("/api/v1/threads", {"title": "t"}, 201),
        (f"/api/v1/threads/{failed.thread_id}/messages", message, 202),  # queued: retry open
        (f"{RUNS}/{run.pk}/cancel", {}, 200),
    ]


def test_anonymous_gets_401_everywhere_with_the_error_format(anonymous_api, world):
    for path in reads(world):
        response = anonymous_api.get(path)
        assert_error(response, 401, "not_authenticated")
        assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    for path, body, _ in writes(world):
        assert_error(anonymous_api.post(path, body, format="json"), 401, "not_authenticated")
    assert_error(
        anonymous_api.get(f"{RUNS}/{world['waiting'].pk}/events/stream"), 401, "not_authenticated"
    )


def test_bad_expired_or_malformed_tokens_are_401(world):
    for header in ["Bearer awk_nope_nope", "Bearer garbage", "Bearer", "Bearer a b"]:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=header)
        assert_error(client.get(RUNS), 401, "authentication_failed")


def test_viewer_reads_but_may_not_act(viewer_api, world):
    for path in reads(world):
        assert viewer_api.get(path).status_code == 200, path
    for path, body, _ in writes(world):
        error = assert_error(viewer_api.post(path, body, format="json"), 403, "permission_denied")
        assert "runs." in error["message"]
    assert Run.objects.count() == 2
    assert Ticket.objects.get().status == "pending"


def test_operator_acts(operator_api, world):
    for path, body, status in writes(world):
        response = operator_api.post(path, body, format="json")
        assert response.status_code == status, (path, response.content)


def test_a_user_without_a_role_reads_nothing(world):
    client = bearer(token_for(User.objects.create_user("nobody"), "x"))
    for path in reads(world):
        assert_error(client.get(path), 403, "permission_denied")


def test_admin_role_acts_too(world):
    client = bearer(token_for(user_with_role("admin", "ada"), "x"))
    path, body, status = writes(world)[0]
    assert client.post(path, body, format="json").status_code == status


def test_browser_session_auth_with_csrf(world):
    user = user_with_role("operator", "sam")
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get(RUNS).status_code == 200
    body = {"agent_id": world["agent"].slug, "messages": [{"content": "hi"}]}
    refused = client.post(RUNS, body, format="json")
    error = assert_error(refused, 403, "permission_denied")
    assert "CSRF" in error["message"]
    client.get("/")  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    response = client.post(RUNS, body, format="json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201
    assert response.json()["request"]["sender_id"] == "sam"


# --- error kinds -------------------------------------------------------------------------------------


def test_malformed_json_is_400_parse_error(operator_api):
    response = operator_api.post(RUNS, data='{"agent_id": "a", ', content_type="application/json")
    error = assert_error(conforms(response, "POST", RUNS), 400, "parse_error")
    assert "JSON" in error["message"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "agent_id"),
        ({"agent_id": "a"}, "messages"),
        ({"agent_id": "a", "messages": []}, "messages"),
        ({"agent_id": "a", "messages": [{"role": "robot", "content": "x"}]}, "messages"),
        ({"agent_id": "a", "messages": "hi", "thread_id": "nope"}, "thread_id"),
        ([1, 2], "non_field_errors"),
    ],
)
def test_validation_errors_are_400_invalid_with_field_details(operator_api, body, field):
    scripted_agent([{"text": "x"}], slug="a")
    response = operator_api.post(RUNS, body, format="json")
    error = assert_error(conforms(response, "POST", RUNS), 400, "invalid")
    assert field in error["details"], error


def test_service_validation_is_400_invalid(operator_api):
    scripted_agent([{"text": "x"}], slug="a")
    body = {"agent_id": "a", "messages": [{"role": "user", "content": "   "}]}
    error = assert_error(operator_api.post(RUNS, body, format="json"), 400, "invalid")
    assert "empty" in error["message"]


def test_wrong_content_type_is_415(operator_api):
    response = operator_api.post(
        RUNS, data="agent_id=a", content_type="application/x-www-form-urlencoded"
    )
    assert_error(response, 415, "unsupported_media_type")


def test_wrong_method_is_405(operator_api):
    run = done_run()
    assert_error(operator_api.get(f"{RUNS}/{run.pk}/cancel"), 405, "method_not_allowed")
    assert_error(operator_api.delete(f"{RUNS}/{run.pk}"), 405, "method_not_allowed")


def test_unknown_endpoint_is_json_404(operator_api):
    assert_error(operator_api.get("/api/v1/nothing/here"), 404, "not_found")
    # a newline in the path (no slug matches it) is the catch-all's too, not Django's HTML
    assert_error(operator_api.get("/api/v1/agents/a%0Ab"), 404, "not_found")


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_unknown_endpoint_is_json_404_for_writes_without_a_csrf_token(operator_user, method):
    # a token client sends no CSRF cookie: Django's CSRF check answered its HTML 403 page
    token_client = APIClient(enforce_csrf_checks=True)
    token_client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_for(operator_user, 'ops')}")
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(operator_user)
    run = done_run()
    for client in (token_client, browser, APIClient(enforce_csrf_checks=True)):
        for path in (f"{RUNS}/{run.pk}/decision", f"{RUNS}/{run.pk}/answers", "/api/v1/nope"):
            response = getattr(client, method)(path, {"action": "approve"}, format="json")
            assert response["Content-Type"] == "application/json", response.content[:200]
            assert_error(response, 404, "not_found")


def test_a_wrong_method_is_json_405_on_the_schema_and_docs_too(operator_user):
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_for(operator_user, 'ops')}")
    run = done_run()
    for path in (f"{RUNS}/{run.pk}/cancel", "/api/v1/schema/", "/api/v1/docs/"):
        response = client.put(path, {}, format="json")
        assert response["Content-Type"] == "application/json", (path, response.content[:200])
        assert_error(response, 405, "method_not_allowed")
    assert client.get("/api/v1/schema/").status_code == 200
    assert client.get("/api/v1/docs/").status_code == 200


def test_illegal_transition_is_409(operator_api):
    run = done_run()
    error = assert_error(
        conforms(operator_api.post(f"{RUNS}/{run.pk}/cancel"), "POST", RUNS + "/{run_id}/cancel"),
        409,
        "conflict",
    )
    assert error["details"] == {"status": "done", "status_reason": "natural"}


def test_too_large_body_is_413(operator_api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    scripted_agent([{"text": "x"}], slug="a")
    body = {"agent_id": "a", "messages": [{"role": "user", "content": "x" * 2000}]}
    response = operator_api.post(RUNS, body, format="json")
    error = assert_error(conforms(response, "POST", RUNS), 413, "too_large")
    assert "1024" in error["message"]
    assert not Run.objects.exists()
    small = {"agent_id": "a", "messages": [{"role": "user", "content": "x" * 100}]}
    assert operator_api.post(RUNS, small, format="json").status_code == 201


def test_throttled_per_token_is_429(operator_api, operator_user, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"api_token": "3/min"},
    }
    for _ in range(3):
        assert operator_api.get(RUNS).status_code == 200
    response = conforms(operator_api.get(RUNS), "GET", RUNS)
    error = assert_error(response, 429, "throttled")
    assert 0 < error["details"]["retry_after"] <= 60
    assert int(response["Retry-After"]) > 0
    other = bearer(token_for(operator_user, "second"))
    assert other.get(RUNS).status_code == 200  # per token, not per user


def test_unexpected_errors_are_json_500(operator_api, monkeypatch):
    from runs import selectors

    def boom(**kwargs):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(selectors, "run_list", boom)
    operator_api.raise_request_exception = False
    error = assert_error(operator_api.get(RUNS), 500, "server_error")
    assert "kaboom" not in error["message"]
