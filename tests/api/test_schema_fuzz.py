"""Schemathesis against the served OpenAPI schema, through the WSGI app: no 5xx, every
status code documented, every response body and content type as the schema says.
The SSE stream is left out (it is a long-lived response; tests/api/test_stream.py).
Then hostile encodings on every operation of the schema: deeply nested JSON bodies, lone
surrogates in JSON text, NUL and broken UTF-8 in path segments."""

from __future__ import annotations

import json
import uuid

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from agents.models import RemoteEndpoint
from agents.models_mcp import McpServer
from common.models import AuditEntry
from runs.models import Message, Ticket
from runs.services.submission_flow import input_submit
from tests.api.helpers import assert_error
from tests.factories import bearer, token_for, user_with_role, waiting_run

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
def keep_db_connection():
    """Like Django's test client: requests must not close the test's connection."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def operator_headers(db, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"api_token": "100000/min"},
    }
    waiting_run()  # something to list, decide and cancel
    return {"Authorization": f"Bearer {token_for(user_with_role('operator', 'fuzz'))}"}


# Loaded once at collection through the WSGI app (the schema view needs no database).
# (schemathesis.pytest.from_fixture would defer this, but it relies on a pytest internal
# that pytest 9 removed.)
schema = schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", WSGIHandler())
schema.config.phases.update(phases=["examples", "fuzzing"])
schema.config.generation.update(max_examples=20)


# ~20 generated requests on each of the schema's operations: ~10 s in all
@pytest.mark.slow
@schema.exclude(path_regex=r"/events/stream$").parametrize()
@settings(
    max_examples=20,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case, operator_headers, keep_db_connection):
    case.call_and_validate(headers=operator_headers, checks=CHECKS)


# --- hostile encodings -------------------------------------------------------------------------
# What a generator rarely produces but any client can send. PostgreSQL refuses NUL and lone
# surrogates in text, and Python's JSON decoder runs out of stack on deep nesting: each must
# be a 4xx in the error shape, never a 500.

DEEP_BODIES = ["[" * 2000 + "]" * 2000, '{"a": ' * 2000 + "1" + "}" * 2000]
# percent-encoded path segments: NUL, a UTF-8-encoded surrogate, an overlong NUL, a bare byte
HOSTILE_SEGMENTS = ["%00", "a%00b", "%ED%A0%80", "%C0%80", "%FF"]
LONE = "\ud800"  # json.dumps writes it as the escape "\ud800", which decodes to itself
# (path, body): {agent}, {thread} and {ticket} are filled in with real ids
SURROGATE_BODIES = [
    ("/api/v1/runs", {"agent_id": "{agent}", "messages": [{"role": "user", "content": LONE}]}),
    (
        "/api/v1/runs",
        {"agent_id": "{agent}", "messages": [{"content": [{"type": "text", "text": LONE}]}]},
    ),
    ("/api/v1/runs", {"agent_id": "{agent}", "messages": [{"content": "hi"}], LONE: 1}),
    ("/api/v1/threads", {"title": f"t{LONE}"}),
    ("/api/v1/threads/{thread}/messages", {"messages": [{"content": f"x{LONE}"}]}),
    ("/api/v1/tickets/{ticket}/decision", {"action": "reject", "comment": f"no{LONE}"}),
    ("/api/v1/tickets/{ticket}/decision", {"action": "approve", "decision_id": f"k{LONE}"}),
]

_paths = schema.raw_schema["paths"]
BODY_OPERATIONS = [
    (method.upper(), template)
    for template, item in _paths.items()
    for method, operation in item.items()
    if isinstance(operation, dict) and "requestBody" in operation
]
PATH_OPERATIONS = [
    (method.upper(), template)
    for template, item in _paths.items()
    for method in item
    if method in ("get", "post", "put", "patch", "delete") and "{" in template
]


@pytest.fixture
def hostile_world(db, settings):
    """A superuser's token (no 403 in the way) and a real id for every path parameter."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"api_token": "100000/min"},
    }
    run = waiting_run()
    endpoint = RemoteEndpoint.objects.create(
        slug="remote", name="Remote", base_url="http://127.0.0.1:9/"
    )
    ids = {
        "run_id": str(run.pk),
        "thread_id": str(run.thread_id),
        "ticket_id": str(Ticket.objects.get(run=run).pk),
        "agent_id": run.agent.slug,
        "endpoint_id": endpoint.slug,
        "input_id": str(
            input_submit(agent=run.agent, messages="later", thread=run.thread).input.pk
        ),
        "view_id": "1",  # a saved view's id: any integer (the segments are not integers)
        "budget_id": "1",  # a budget's id: any integer
        "set_id": str(uuid.uuid4()),  # a replay set's id: any UUID (the segments are not)
        "schedule_id": str(uuid.uuid4()),  # likewise a schedule's
        "server_id": McpServer.objects.create(
            slug="tools", name="Tools", url="http://127.0.0.1:9/mcp"
        ).slug,  # an MCP server (its check fails: a loopback address)
        "slug": "default",  # the default team (the run's agent's)
        "username": "root",
    }
    raw = token_for(User.objects.create_superuser("root", password="pw"), "root")
    return ids, bearer(raw)


@pytest.mark.parametrize("method, template", BODY_OPERATIONS)
def test_deeply_nested_json_is_a_400_on_every_body(hostile_world, method, template):
    ids, client = hostile_world
    client.raise_request_exception = False
    path = template.format(**ids)
    for body in DEEP_BODIES:
        response = client.generic(method, path, body, content_type="application/json")
        error = assert_error(response, 400, "parse_error")
        assert "deep" in error["message"]


@pytest.mark.parametrize("template, body", SURROGATE_BODIES)
def test_lone_surrogates_in_json_are_a_400(hostile_world, template, body):
    ids, client = hostile_world
    client.raise_request_exception = False
    path = template.format(thread=ids["thread_id"], ticket=ids["ticket_id"])
    text = json.dumps(body).replace("{agent}", ids["agent_id"])
    assert "\\ud800" in text
    before = (Message.objects.count(), AuditEntry.objects.count())
    error = assert_error(
        client.post(path, text, content_type="application/json"), 400, "parse_error"
    )
    assert "surrogate" in error["message"]
    assert (Message.objects.count(), AuditEntry.objects.count()) == before


def test_a_surrogate_pair_is_an_ordinary_character(hostile_world):
    ids, client = hostile_world
    body = json.dumps({"agent_id": ids["agent_id"], "messages": [{"content": "smile \U0001f600"}]})
    assert "\\ud83d\\ude00" in body  # a pair, escaped
    response = client.post("/api/v1/runs", body, content_type="application/json")
    assert response.status_code == 201, response.content[:300]


@pytest.mark.parametrize("method, template", PATH_OPERATIONS)
def test_hostile_path_segments_are_a_json_404(hostile_world, method, template):
    ids, client = hostile_world
    client.raise_request_exception = False
    body = "{}" if method != "GET" else ""
    for segment in HOSTILE_SEGMENTS:
        path = template.format(**{name: segment for name in ids})
        response = client.generic(method, path, body, content_type="application/json")
        assert_error(response, 404, "not_found")
