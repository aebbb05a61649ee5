"""Exports over the API: a run as one JSON document, the runs list and the audit log as
CSV, with their list endpoints' filters and permissions (docs/exports.md)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.http import HttpResponse, StreamingHttpResponse
from django.test import Client
from django.test.utils import CaptureQueriesContext

from common.audit import Actor, audit_record
from runs.models import Run, Thread, Ticket
from runs.operations.services.exports import run_export
from runs.operations.services.exports_csv import AUDIT_COLUMNS, RUN_COLUMNS, TRUNCATED
from runs.services.tickets import decision_submit
from tests.api.helpers import assert_error
from tests.api.schema_check import conforms
from tests.factories import (
    AgentFactory,
    bearer,
    done_run,
    token_for,
    view_only_user,
    waiting_run,
)
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

RUNS_CSV = "/api/v1/runs/export.csv"
AUDIT_CSV = "/api/v1/audit/export.csv"


def read(response: Any) -> bytes:
    assert isinstance(response, StreamingHttpResponse), (response.status_code, type(response))
    return b"".join(response.streaming_content)


def settled(response: Any) -> HttpResponse:
    """The streamed response as a plain one (for the schema check), same status and
    headers."""
    plain = HttpResponse(read(response), status=response.status_code)
    for name, value in response.items():
        plain[name] = value
    return plain


def csv_rows(response: Any) -> list[list[str]]:
    return list(csv.reader(io.StringIO(read(response).decode("utf-8"), newline="")))


def run_ids(response: Any) -> list[str]:
    rows = csv_rows(response)
    assert rows[0] == RUN_COLUMNS
    return [row[0] for row in rows[1:]]


def no_permission_api() -> Any:
    return bearer(token_for(User.objects.create_user("nobody", password="pw"), "none"))


# --- the run document ------------------------------------------------------------------------


def test_run_export_is_the_document_of_the_run_page(viewer_api, operator_user):
    run = waiting_run()
    decision_submit(
        ticket=Ticket.objects.get(run=run),
        action="reject",
        comment="not today",
        actor=Actor(user=operator_user),
    )
    run = drive(run)
    path = f"/api/v1/runs/{run.pk}/export"
    response = viewer_api.get(path)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}.json"'
    plain = conforms(settled(response), "GET", "/api/v1/runs/{run_id}/export")
    document = json.loads(plain.content)
    assert {**document, "exported_at": None} == {**run_export(run), "exported_at": None}
    [ticket] = document["tickets"]
    assert ticket["decision"]["action"] == "reject"
    assert ticket["decision"]["comment"] == "not today"
    assert ticket["decision"]["decided_by"] == "olga"
    assert [e["seq"] for e in document["events"]] == list(range(1, run.last_event_seq + 1))
    page = Client()
    page.force_login(User.objects.get(username="vic"))
    from_page = json.loads(read(page.get(f"/runs/{run.pk}/export.json")))
    assert {**from_page, "exported_at": None} == {**document, "exported_at": None}


def test_run_export_permissions_and_unknown_ids(anonymous_api, viewer_api):
    run = waiting_run()
    path = f"/api/v1/runs/{run.pk}/export"
    assert_error(anonymous_api.get(path), 401, "not_authenticated")
    assert_error(no_permission_api().get(path), 403, "permission_denied")
    reader = bearer(token_for(view_only_user("reader"), "read"))
    assert reader.get(path).status_code == 200
    missing = "/api/v1/runs/00000000-0000-0000-0000-000000000000/export"
    assert_error(viewer_api.get(missing), 404, "not_found")
    assert_error(viewer_api.get("/api/v1/runs/not-a-uuid/export"), 404, "not_found")
    assert_error(viewer_api.post(path), 405, "method_not_allowed")


# --- the runs list as CSV ---------------------------------------------------------------------


def test_runs_csv_with_the_lists_filters(viewer_api):
    first, second, third = waiting_run("one"), done_run("bye"), waiting_run("three")
    response = viewer_api.get(RUNS_CSV)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="runs-')
    conforms(settled(response), "GET", RUNS_CSV)
    assert run_ids(viewer_api.get(RUNS_CSV)) == [str(third.pk), str(second.pk), str(first.pk)]
    assert run_ids(viewer_api.get(RUNS_CSV, {"agent_id": first.agent.slug})) == [str(first.pk)]
    assert run_ids(viewer_api.get(RUNS_CSV, {"status": "done"})) == [str(second.pk)]
    waiting = run_ids(viewer_api.get(RUNS_CSV, {"waiting_reason": "tool_permission"}))
    assert waiting == [str(third.pk), str(first.pk)]
    by_thread = run_ids(viewer_api.get(RUNS_CSV, {"thread_id": str(second.thread_id)}))
    assert by_thread == [str(second.pk)]
    # the same runs, in the same order, as the list endpoint
    for query in ({}, {"status": "waiting"}, {"waiting_tool": "write_note"}):
        listed = viewer_api.get("/api/v1/runs", query).json()["items"]
        assert run_ids(viewer_api.get(RUNS_CSV, query)) == [item["run_id"] for item in listed]


def test_runs_csv_refuses_bad_filters_in_json(viewer_api):
    error = assert_error(viewer_api.get(RUNS_CSV, {"status": "bogus"}), 400, "invalid")
    assert "status" in error["details"]
    assert_error(viewer_api.get(RUNS_CSV, {"created_after": "soon"}), 400, "invalid")
    # an error stays JSON for a client that asked for CSV
    response = viewer_api.get(RUNS_CSV, {"status": "bogus"}, HTTP_ACCEPT="text/csv")
    assert response["Content-Type"] == "application/json"
    assert_error(response, 400, "invalid")


def test_runs_csv_answers_a_client_that_accepts_only_csv(viewer_api):
    run = done_run()
    response = viewer_api.get(RUNS_CSV, HTTP_ACCEPT="text/csv")
    assert response.status_code == 200 and run_ids(response) == [str(run.pk)]


def test_runs_csv_permissions(anonymous_api):
    assert_error(anonymous_api.get(RUNS_CSV), 401, "not_authenticated")
    assert_error(no_permission_api().get(RUNS_CSV), 403, "permission_denied")
    reader = bearer(token_for(view_only_user("reader"), "read"))
    assert csv_rows(reader.get(RUNS_CSV)) == [RUN_COLUMNS]


def test_runs_csv_stops_at_the_row_cap(viewer_api, settings):
    settings.AWAKEN_EXPORT_MAX_ROWS = 2
    agent = AgentFactory()
    version = agent.versions.get()
    thread = Thread.objects.create()
    Run.objects.bulk_create(
        Run(thread=thread, agent=agent, agent_version=version) for _ in range(5)
    )
    response = viewer_api.get(RUNS_CSV)
    assert response["X-Export-Max-Rows"] == "2"
    rows = csv_rows(response)
    assert len(rows) == 4 and rows[-1][0] == TRUNCATED


def test_runs_csv_reads_with_a_constant_number_of_queries(viewer_api):
    agent = AgentFactory()
    version = agent.versions.get()
    thread = Thread.objects.create()

    def grow(count: int) -> None:
        Run.objects.bulk_create(
            Run(thread=thread, agent=agent, agent_version=version) for _ in range(count)
        )

    def measure() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as queries:
            rows = csv_rows(viewer_api.get(RUNS_CSV, {"agent_id": agent.slug}))
        return len(queries.captured_queries), len(rows) - 1

    grow(3)
    measure()  # warms the token cache
    small = measure()
    grow(50)
    large = measure()
    assert (small[1], large[1]) == (3, 53)
    assert small[0] == large[0]


# --- the audit log as CSV ---------------------------------------------------------------------


def test_audit_csv_with_the_lists_filters(viewer_api, operator_api):
    runs = [waiting_run(f"t{i}") for i in range(2)]
    for run in runs:
        assert operator_api.post(f"/api/v1/runs/{run.pk}/cancel").status_code == 200
    response = viewer_api.get(AUDIT_CSV)
    assert response.status_code == 200
    conforms(settled(response), "GET", AUDIT_CSV)
    rows = csv_rows(viewer_api.get(AUDIT_CSV, {"action": "run.cancel"}))
    assert rows[0] == AUDIT_COLUMNS
    entries = [dict(zip(AUDIT_COLUMNS, row, strict=True)) for row in rows[1:]]
    assert [e["run_id"] for e in entries] == [str(runs[1].pk), str(runs[0].pk)]
    assert entries[0]["actor"] == "olga (token ops)" and entries[0]["source"] == "api"
    # the actor filter matches the username too, as GET /audit does
    by_user = csv_rows(viewer_api.get(AUDIT_CSV, {"actor": "olga"}))[1:]
    assert {row[AUDIT_COLUMNS.index("action")] for row in by_user} == {"run.cancel"}
    by_run = csv_rows(viewer_api.get(AUDIT_CSV, {"run": str(runs[0].pk)}))[1:]
    assert [row[AUDIT_COLUMNS.index("action")] for row in by_run] == ["run.cancel", "run.start"]
    assert_error(viewer_api.get(AUDIT_CSV, {"run": "nope"}), 400, "invalid")


def test_audit_csv_permissions(anonymous_api, viewer_api):
    audit_record(actor=Actor(label="cli"), action="run.start", target_type="run", target_id=1)
    assert_error(anonymous_api.get(AUDIT_CSV), 401, "not_authenticated")
    reader = bearer(token_for(view_only_user("reader"), "read"))  # runs, not the audit log
    assert_error(reader.get(AUDIT_CSV), 403, "permission_denied")
    rows = csv_rows(viewer_api.get(AUDIT_CSV, {"action": "run."}))
    assert [row[AUDIT_COLUMNS.index("actor")] for row in rows[1:]] == ["cli"]


def test_audit_csv_neutralizes_formulas(viewer_api):
    audit_record(
        actor=Actor(label="@evil"),
        action="run.start",
        target_type="run",
        target_id=1,
        comment='=HYPERLINK("http://x", "click")',
    )
    [header, values] = csv_rows(viewer_api.get(AUDIT_CSV, {"action": "run.start"}))
    row = dict(zip(header, values, strict=True))
    assert row["actor"] == "'@evil"
    assert row["comment"] == '\'=HYPERLINK("http://x", "click")'


# --- the schema ---------------------------------------------------------------------------------


def test_the_schema_documents_the_exports(client):
    paths = client.get("/api/v1/schema/", {"format": "json"}).json()["paths"]
    runs_csv = paths[RUNS_CSV]["get"]
    assert set(runs_csv["responses"]["200"]["content"]) == {"text/csv"}
    assert set(runs_csv["responses"]["403"]["content"]) == {"application/json"}
    names = {parameter["name"] for parameter in runs_csv["parameters"]}
    assert {"status", "agent_id", "waiting_tool", "sort"} <= names
    assert not names & {"cursor", "limit", "format"}
    audit_csv = paths[AUDIT_CSV]["get"]
    assert {parameter["name"] for parameter in audit_csv["parameters"]} == {
        "action",
        "actor",
        "run",
    }
    document = paths["/api/v1/runs/{run_id}/export"]["get"]["responses"]["200"]
    assert document["content"]["application/json"]["schema"]["$ref"].endswith("/RunExport")
