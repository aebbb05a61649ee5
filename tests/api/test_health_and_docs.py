"""Health and readiness probes, the OpenAPI schema and the docs page."""

from __future__ import annotations

import pytest
from django.test import Client
from kombu.exceptions import OperationalError

from runs.api import health

pytestmark = pytest.mark.django_db


def test_healthz_needs_no_login(client: Client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_checks_database_broker_and_channel_layer(client: Client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"database", "broker", "channel_layer"}
    assert all(check["ok"] for check in body["checks"].values())


def test_readyz_is_503_naming_the_failing_check(client: Client, monkeypatch):
    def broker_down() -> None:
        raise ConnectionRefusedError("broker unreachable")

    monkeypatch.setitem(health.CHECKS, "broker", broker_down)
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["broker"]["ok"] is False
    assert "broker unreachable" in body["checks"]["broker"]["error"]
    assert body["checks"]["database"]["ok"] is True


def test_readyz_broker_check_fails_fast_on_an_unreachable_broker(settings):
    from awaken_site.celery import app

    old = app.conf.broker_write_url
    app.conf.broker_write_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    try:
        with pytest.raises(OperationalError):
            health.check_broker()
    finally:
        app.conf.broker_write_url = old


def test_schema_is_public_and_describes_every_endpoint(client: Client):
    response = client.get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = response.json()
    paths = schema["paths"]
    expected = {
        "/api/v1/runs": {"get", "post"},
        "/api/v1/runs/{run_id}": {"get"},
        "/api/v1/runs/bulk-action": {"post"},
        "/api/v1/runs/{run_id}/cancel": {"post"},
        "/api/v1/runs/{run_id}/retry": {"post"},
        "/api/v1/runs/{run_id}/events": {"get"},
        "/api/v1/runs/{run_id}/events/stream": {"get"},
        "/api/v1/runs/{run_id}/decisions": {"post"},
        "/api/v1/runs/{run_id}/inputs": {"post"},
        "/api/v1/runs/{run_id}/priority": {"post"},
        "/api/v1/runs/{run_id}/export": {"get"},
        "/api/v1/runs/export.csv": {"get"},
        "/api/v1/tickets": {"get"},
        "/api/v1/tickets/{ticket_id}": {"get"},
        "/api/v1/tickets/{ticket_id}/decision": {"post"},
        "/api/v1/tickets/{ticket_id}/claim": {"post", "delete"},
        "/api/v1/tickets/{ticket_id}/assign": {"post"},
        "/api/v1/tickets/{ticket_id}/rule-proposal": {"post"},
        "/api/v1/tickets/bulk-decision": {"post"},
        "/api/v1/threads": {"get", "post"},
        "/api/v1/threads/{thread_id}": {"get"},
        "/api/v1/threads/{thread_id}/messages": {"get", "post"},
        "/api/v1/threads/{thread_id}/inputs": {"get"},
        "/api/v1/threads/{thread_id}/interrupt": {"post"},
        "/api/v1/inputs/{input_id}": {"get", "patch", "delete"},
        "/api/v1/agents": {"get"},
        "/api/v1/agents/{agent_id}": {"get"},
        "/api/v1/agents/{agent_id}/ag-ui": {"post"},
        "/api/v1/endpoints": {"get"},
        "/api/v1/endpoints/{endpoint_id}": {"get"},
        "/api/v1/endpoints/{endpoint_id}/check": {"post"},
        "/api/v1/mcp-servers": {"get"},
        "/api/v1/mcp-servers/{server_id}": {"get"},
        "/api/v1/mcp-servers/{server_id}/check": {"post"},
        "/api/v1/stats": {"get"},
        "/api/v1/budgets": {"get", "post"},
        "/api/v1/budgets/{budget_id}": {"get", "patch", "delete"},
        "/api/v1/audit": {"get"},
        "/api/v1/audit/export.csv": {"get"},
        "/api/v1/saved-views": {"get", "post"},
        "/api/v1/saved-views/{view_id}": {"delete"},
        "/api/v1/runs/{run_id}/fork": {"post"},
        "/api/v1/runs/{run_id}/forks": {"get"},
        "/api/v1/runs/compare": {"get"},
        "/api/v1/replays": {"get", "post"},
        "/api/v1/replays/{set_id}": {"get"},
        "/api/v1/replays/{set_id}/cancel": {"post"},
        "/api/v1/teams": {"get"},
        "/api/v1/teams/{slug}": {"get", "patch"},
        "/api/v1/teams/{slug}/freeze": {"post"},
        "/api/v1/teams/{slug}/unfreeze": {"post"},
        "/api/v1/teams/{slug}/members": {"get"},
        "/api/v1/teams/{slug}/members/{username}": {"put", "delete"},
        "/api/v1/schedules": {"get", "post"},
        "/api/v1/schedules/{schedule_id}": {"get", "patch", "delete"},
        "/api/v1/schedules/{schedule_id}/pause": {"post"},
        "/api/v1/schedules/{schedule_id}/resume": {"post"},
        "/api/v1/schedules/{schedule_id}/run-now": {"post"},
        "/api/v1/schedules/{schedule_id}/runs": {"get"},
    }
    assert set(paths) == set(expected)
    for path, methods in expected.items():
        assert set(paths[path]) - {"parameters"} == methods, path
        for method in methods:
            operation = paths[path][method]
            responses = operation["responses"]
            for status in ("401", "403", "429"):
                ref = responses[status]["content"]["application/json"]["schema"]["$ref"]
                assert ref == "#/components/schemas/Error", (path, method, status)
            assert operation["security"] == [{"bearerAuth": []}, {"cookieAuth": []}]
            if method == "post" and "requestBody" in operation:
                assert {"400", "413", "415"} <= set(responses), (path, method)
    decide = paths["/api/v1/tickets/{ticket_id}/decision"]["post"]
    assert "409" in decide["responses"] and "201" in decide["responses"]
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert (
        "text/event-stream"
        in paths["/api/v1/runs/{run_id}/events/stream"]["get"]["responses"]["200"]["content"]
    )


def test_docs_page_serves_vendored_swagger_ui(client: Client):
    response = client.get("/api/v1/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert 'src="http' not in html and 'href="http' not in html  # nothing from another host
    assert "/api/v1/schema/" in html
