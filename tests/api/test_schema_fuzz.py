"""Schemathesis against the served OpenAPI schema, through the WSGI app: no 5xx, every
status code documented, every response body and content type as the schema says.
The SSE stream is left out (it is a long-lived response; tests/api/test_stream.py)."""

from __future__ import annotations

import pytest
import schemathesis
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

from tests.api.conftest import token_for, user_in, waiting_run

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
    return {"Authorization": f"Bearer {token_for(user_in('operator', 'fuzz'))}"}


# Loaded once at collection through the WSGI app (the schema view needs no database).
# (schemathesis.pytest.from_fixture would defer this, but it relies on a pytest internal
# that pytest 9 removed.)
schema = schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", WSGIHandler())
schema.config.phases.update(phases=["examples", "fuzzing"])
schema.config.generation.update(max_examples=20)


@schema.exclude(path_regex=r"/events/stream$").parametrize()
@settings(
    max_examples=20,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case, operator_headers, keep_db_connection):
    case.call_and_validate(headers=operator_headers, checks=CHECKS)
