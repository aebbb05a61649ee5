"""Exports from the pages: a run as JSON, the runs list and the audit log as CSV
(docs/exports.md). The API's exports are in tests/api/test_exports.py."""

from __future__ import annotations

import asyncio
import csv
import datetime as dt
import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.http import QueryDict, StreamingHttpResponse
from django.test import AsyncRequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import Note
from common.audit import Actor, audit_record
from common.models import AuditEntry
from runs import selectors
from runs.models import Run, RunEvent, Thread, Ticket
from runs.operations.services import exports, exports_csv
from runs.operations.services.exports import SCHEMA, run_export, run_export_chunks
from runs.operations.services.exports_csv import (
    AUDIT_COLUMNS,
    RUN_COLUMNS,
    TRUNCATED,
    csv_cell,
    csv_chunks,
    neutralize,
    runs_csv_rows,
    runs_export_queryset,
)
from runs.operations.views.exports import attachment
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from runs.views.lists import run_filters
from tests.factories import (
    AgentFactory,
    done_run,
    scripted_agent,
    step_end_event,
    view_only_user,
    waiting_run,
)
from tests.runs.helpers import drive, event_types

pytestmark = pytest.mark.django_db

FIXED = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def body(response: Any) -> bytes:
    assert isinstance(response, StreamingHttpResponse), type(response)
    return b"".join(response.streaming_content)


def csv_rows(response: Any) -> list[list[str]]:
    return list(csv.reader(io.StringIO(body(response).decode("utf-8"), newline="")))


def decided_run(operator: Any) -> tuple[Run, Run]:
    """A run that waited on write_note, was approved with a comment and finished; then a
    second run of another agent on the same thread ("again" → "second answer")."""
    run = waiting_run()
    ticket = Ticket.objects.get(run=run)
    decision_submit(ticket=ticket, action="approve", comment="fine, go", actor=Actor(user=operator))
    run = drive(run)
    assert run.status == Run.Status.DONE
    later = drive(
        run_start(
            agent=scripted_agent([{"text": "second answer"}]), messages="again", thread=run.thread
        )
    )
    return run, later


def texts(document: dict[str, Any]) -> list[tuple[int, str, str]]:
    return [
        (m["seq"], m["role"], "".join(b.get("text", "") for b in m["content"]))
        for m in document["messages"]
    ]


# --- the run document ------------------------------------------------------------------------


def test_the_run_document_holds_record_messages_events_tickets_and_decisions(operator_user):
    run, later = decided_run(operator_user)
    document = run_export(run, exported_at=FIXED)
    assert (document["schema"], document["schema_version"]) == (SCHEMA, 1)
    assert document["exported_at"] == "2025-01-02T03:04:05+00:00"
    record = document["run"]
    assert record["id"] == str(run.pk) and record["thread_id"] == str(run.thread_id)
    assert (record["agent"], record["agent_version"]) == (run.agent.slug, 1)
    assert (record["status"], record["status_reason"]) == ("done", "natural")
    assert record["termination_reason"] == run.termination_reason
    assert record["final_output"] == "all done"
    assert record["usage"] == {
        "steps": run.steps,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
    }
    assert record["created_at"] == run.created_at.isoformat()
    assert record["finished_at"] == run.finished_at.isoformat()
    assert (record["parent_run_id"], record["child_run_ids"], record["retried_as"]) == (
        None,
        [],
        [],
    )
    # the messages it read and wrote, in order: not the later run's "again"
    assert document["message_range"] == {"from_seq": 1, "to_seq": 5}
    assert texts(document) == [
        (1, "user", "write it down"),
        (2, "assistant", "noting"),
        (3, "tool", "Tool 'write_note' suspended: awaiting decision"),
        (4, "tool", f'{{"note_id": {Note.objects.get().pk}, "title": "lunch"}}'),
        (5, "assistant", "all done"),
    ]
    assert document["messages"][1]["tool_calls"][0]["name"] == "write_note"
    assert document["messages"][1]["run_id"] == str(run.pk)
    # every event, in seq order
    assert [e["seq"] for e in document["events"]] == list(range(1, run.last_event_seq + 1))
    assert [e["event_type"] for e in document["events"]] == event_types(run)
    assert document["events"][0]["payload"]["event_type"] == "run_start"
    # the ticket with its decision
    [ticket] = document["tickets"]
    assert (ticket["tool_name"], ticket["status"]) == ("write_note", "decided")
    assert ticket["arguments"] == {"title": "lunch", "body": "b"}
    decision = ticket["decision"]
    assert (decision["action"], decision["decided_by"], decision["comment"]) == (
        "approve",
        "olga",
        "fine, go",
    )
    assert decision["payload"] == {"approved": True}
    [call] = document["tool_calls"]
    assert (call["tool_name"], call["status"]) == ("write_note", "succeeded")
    assert document["background_tasks"] == [] and document["inputs"] == []
    # the later run read the whole thread and wrote its answer
    assert texts(run_export(later))[-2:] == [
        (6, "user", "again"),
        (7, "assistant", "second answer"),
    ]
    assert json.loads(json.dumps(document)) == document  # JSON-safe as it is


def test_the_streamed_document_is_the_same_json(operator_user, monkeypatch):
    run, _ = decided_run(operator_user)
    monkeypatch.setattr(exports, "FLUSH_CHARS", 100)  # many pieces
    pieces = list(run_export_chunks(run, exported_at=FIXED))
    assert len(pieces) > 5
    assert json.loads(b"".join(pieces)) == run_export(run, exported_at=FIXED)


def test_a_waiting_run_has_its_open_ticket_without_decision_and_its_children():
    run = waiting_run()
    child_agent = AgentFactory()
    child = Run.objects.create(
        thread=Thread.objects.create(),
        agent=child_agent,
        agent_version=child_agent.versions.get(),
        parent_run=run,
    )
    document = run_export(run)
    assert document["run"]["status"] == "waiting"
    assert document["run"]["waiting_reason"] == "tool_permission"
    assert document["run"]["child_run_ids"] == [str(child.pk)]
    assert [(t["status"], t["decision"]) for t in document["tickets"]] == [("pending", None)]
    assert run_export(child)["run"]["parent_run_id"] == str(run.pk)
    assert run_export(child)["messages"] == []  # no range, produced nothing


def test_run_json_download_from_the_page(viewer_client, operator_user):
    run, _ = decided_run(operator_user)
    response = viewer_client.get(f"/runs/{run.pk}/export.json")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}.json"'
    document = json.loads(body(response))
    expected = run_export(run)
    assert {**document, "exported_at": None} == {**expected, "exported_at": None}
    page = viewer_client.get(f"/runs/{run.pk}/")
    assert f'href="/runs/{run.pk}/export.json"' in page.content.decode()


def test_run_json_download_needs_login_and_view_permission(client, operator_user):
    run = waiting_run()
    path = f"/runs/{run.pk}/export.json"
    response = client.get(path)
    assert response.status_code == 302 and "/login/" in response["Location"]
    nobody = User.objects.create_user("nobody", password="pw")
    client.force_login(nobody)
    assert client.get(path).status_code == 403
    client.force_login(view_only_user("reader"))
    assert client.get(path).status_code == 200
    assert client.get("/runs/00000000-0000-0000-0000-000000000000/export.json").status_code == 404


# --- the runs list as CSV ---------------------------------------------------------------------


def test_runs_csv_has_the_header_and_one_row_per_run(viewer_client, operator_user):
    run, later = decided_run(operator_user)
    response = viewer_client.get("/runs/export.csv")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="runs-')
    assert response["X-Export-Max-Rows"] == "100000"
    rows = csv_rows(response)
    assert rows[0] == RUN_COLUMNS
    assert [row[0] for row in rows[1:]] == [str(later.pk), str(run.pk)]  # newest first
    row = dict(zip(RUN_COLUMNS, rows[2], strict=True))
    assert row["created_at"] == run.created_at.isoformat()
    assert (row["status"], row["status_reason"], row["waiting_reason"]) == ("done", "natural", "")
    assert (row["agent"], row["agent_version"]) == (run.agent.slug, "1")
    assert row["thread_id"] == str(run.thread_id) and row["parent_run_id"] == ""
    assert (row["steps"], row["input_tokens"]) == (str(run.steps), str(run.input_tokens))
    assert row["cost_usd"] == "" and row["open_tickets"] == "0"


def test_runs_csv_honours_the_lists_filters(viewer_client):
    first = waiting_run("one")
    second = done_run("bye")
    third = waiting_run("three")
    query = f"agent={first.agent.slug}"
    assert ids_in(viewer_client.get(f"/runs/export.csv?{query}")) == [str(first.pk)]
    waiting = ids_in(viewer_client.get("/runs/export.csv?status=waiting"))
    assert waiting == [str(third.pk), str(first.pk)]
    assert ids_in(viewer_client.get("/runs/export.csv?status=done")) == [str(second.pk)]
    reason = ids_in(viewer_client.get("/runs/export.csv?waiting_reason=tool_permission"))
    assert reason == [str(third.pk), str(first.pk)]
    assert ids_in(viewer_client.get(f"/runs/export.csv?q={second.pk}")) == [str(second.pk)]
    assert ids_in(viewer_client.get("/runs/export.csv?agent=nobody")) == []
    # the list page offers the export with its current query string
    page = viewer_client.get("/runs/?status=waiting&agent=x")
    assert 'href="/runs/export.csv?status=waiting&amp;agent=x"' in page.content.decode()


def ids_in(response: Any) -> list[str]:
    rows = csv_rows(response)
    assert rows[0] == RUN_COLUMNS
    return [row[0] for row in rows[1:]]


@pytest.mark.parametrize(
    "query, count",
    [
        ("", 3),
        ("status=waiting", 2),
        ("waiting_reason=tool_permission", 2),
        ("waiting_tool=write_note", 2),
        ("waiting_tool=write_note&sort=longest_waiting", 2),
        ("q=write", 2),
        ("status=done&since=2000-01-01", 1),
        ("until=2000-01-01", 0),
    ],
)
def test_runs_csv_selects_what_the_list_page_shows(viewer_client, query, count):
    """The export and the page read the same filters through the same code."""
    waiting_run("a")
    done_run("b")
    waiting_run("c")
    filters = run_filters(QueryDict(query))
    shown = [str(run.pk) for run in selectors.run_list(filters=filters).items]
    assert len(shown) == count
    assert ids_in(viewer_client.get(f"/runs/export.csv?{query}")) == shown


def test_runs_csv_needs_login_and_view_permission(client):
    response = client.get("/runs/export.csv")
    assert response.status_code == 302 and "/login/" in response["Location"]
    client.force_login(User.objects.create_user("nobody", password="pw"))
    assert client.get("/runs/export.csv").status_code == 403
    client.force_login(view_only_user("reader"))
    assert client.get("/runs/export.csv").status_code == 200


def plain_runs(count: int) -> None:
    """`count` runs written directly (no worker): rows for the list, cheaply."""
    agent = AgentFactory()
    version = agent.versions.get()
    thread = Thread.objects.create()
    Run.objects.bulk_create(
        Run(thread=thread, agent=agent, agent_version=version, status=Run.Status.DONE)
        for _ in range(count)
    )


def queries_of(client: Any, path: str) -> tuple[int, int]:
    """(queries, rows) of one download, read to its end."""
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
        rows = csv_rows(response)
    return len(queries.captured_queries), len(rows) - 1


def test_csv_exports_read_with_a_constant_number_of_queries(viewer_client, monkeypatch):
    monkeypatch.setattr(exports_csv, "CHUNK_ROWS", 3)  # several chunks
    plain_runs(2)
    for index in range(2):
        audit_record(
            actor=Actor(label="cli"), action="run.start", target_type="run", target_id=index
        )
    viewer_client.get("/runs/export.csv")  # warms the session and the permissions
    small = (
        queries_of(viewer_client, "/runs/export.csv"),
        queries_of(viewer_client, "/audit/export.csv"),
    )
    plain_runs(40)
    for index in range(40):
        audit_record(
            actor=Actor(label="cli"), action="run.start", target_type="run", target_id=index
        )
    large = (
        queries_of(viewer_client, "/runs/export.csv"),
        queries_of(viewer_client, "/audit/export.csv"),
    )
    assert [rows for _, rows in small] == [2, 2] and [rows for _, rows in large] == [42, 42]
    assert [count for count, _ in small] == [count for count, _ in large]


def test_the_run_document_reads_with_a_constant_number_of_queries(viewer_client):
    run = waiting_run()
    path = f"/runs/{run.pk}/export.json"
    viewer_client.get(path)
    with CaptureQueriesContext(connection) as small:
        few = json.loads(body(viewer_client.get(path)))
    RunEvent.objects.bulk_create(
        step_end_event(run, seq) for seq in range(run.last_event_seq + 1, run.last_event_seq + 60)
    )
    with CaptureQueriesContext(connection) as large:
        many = json.loads(body(viewer_client.get(path)))
    assert len(many["events"]) == len(few["events"]) + 59
    assert len(large.captured_queries) == len(small.captured_queries)


# --- the audit log as CSV ---------------------------------------------------------------------


def test_audit_csv_with_its_filters(viewer_client, operator_user):
    run = waiting_run()
    olga = Actor(user=operator_user)
    audit_record(actor=olga, action="run.cancel", target_type="run", target_id=run.pk, run=run)
    audit_record(
        actor=Actor(label="cli", source="cli"),
        action="ticket.approve",
        target_type="ticket",
        target_id="t1",
        before={"title": "a"},
        after={"title": "b"},
        comment="ok",
    )
    response = viewer_client.get("/audit/export.csv")
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith('attachment; filename="audit-')
    rows = csv_rows(response)
    assert rows[0] == AUDIT_COLUMNS
    newest = dict(zip(AUDIT_COLUMNS, rows[1], strict=True))
    assert (newest["actor"], newest["source"], newest["action"]) == ("cli", "cli", "ticket.approve")
    assert (newest["before"], newest["after"], newest["comment"]) == (
        '{"title":"a"}',
        '{"title":"b"}',
        "ok",
    )
    assert (newest["run_id"], newest["actor_id"]) == ("", "")
    assert len(rows) == 1 + AuditEntry.objects.count()

    def actions(query: str) -> list[str]:
        rows = csv_rows(viewer_client.get(f"/audit/export.csv?{query}"))
        return [row[AUDIT_COLUMNS.index("action")] for row in rows[1:]]

    assert actions("action=ticket.") == ["ticket.approve"]
    assert actions("actor=olga") == ["run.cancel"]
    assert actions(f"run={run.pk}") == ["run.cancel", "run.start"]
    page = viewer_client.get("/audit/?action=run.")
    assert 'href="/audit/export.csv?action=run."' in page.content.decode()


def test_audit_csv_needs_the_audit_permission(client):
    response = client.get("/audit/export.csv")
    assert response.status_code == 302 and "/login/" in response["Location"]
    client.force_login(view_only_user("reader"))  # may view runs, not the audit log
    assert client.get("/audit/export.csv").status_code == 403


# --- cells, quoting, the cap, streaming ------------------------------------------------------


@pytest.mark.parametrize(
    "text", ['=HYPERLINK("http://x")', "+1+2", "-3+4", "@SUM(A1)", "\tcmd", "\rcmd"]
)
def test_text_a_spreadsheet_would_evaluate_gets_an_apostrophe(viewer_client, text):
    audit_record(
        actor=Actor(label=text), action="run.start", target_type="run", target_id=1, comment=text
    )
    row = dict(zip(AUDIT_COLUMNS, csv_rows(viewer_client.get("/audit/export.csv"))[1], strict=True))
    assert row["comment"] == "'" + text and row["actor"] == "'" + text


def test_cells_keep_plain_text_numbers_and_times_as_they_are():
    assert [neutralize("plain"), neutralize("a=b"), neutralize("")] == ["plain", "a=b", ""]
    assert [csv_cell(None), csv_cell(-5), csv_cell(True), csv_cell([1])] == ["", -5, "true", "[1]"]
    assert csv_cell(FIXED) == "2025-01-02T03:04:05+00:00"
    assert csv_cell({"a": -1}) == '{"a":-1}'


def test_commas_quotes_and_newlines_survive_the_round_trip(viewer_client):
    tricky = 'first, "quoted"\nsecond line\r\nthird; ünïcode'
    audit_record(
        actor=Actor(label="cli"), action="run.start", target_type="run", target_id=1, comment=tricky
    )
    raw = body(viewer_client.get("/audit/export.csv")).decode("utf-8")
    assert '"first, ""quoted""' in raw  # quoted, quotes doubled
    rows = list(csv.reader(io.StringIO(raw, newline="")))
    assert len(rows) == 2
    assert dict(zip(AUDIT_COLUMNS, rows[1], strict=True))["comment"] == tricky


def test_an_export_stops_at_the_row_cap_and_says_so(viewer_client, settings):
    settings.AWAKEN_EXPORT_MAX_ROWS = 2
    for index in range(2):
        audit_record(
            actor=Actor(label="cli"), action="run.start", target_type="run", target_id=index
        )
    response = viewer_client.get("/audit/export.csv")
    assert response["X-Export-Max-Rows"] == "2"
    rows = csv_rows(response)
    assert len(rows) == 3 and rows[-1][0] != TRUNCATED  # exactly the cap: complete
    audit_record(actor=Actor(label="cli"), action="run.start", target_type="run", target_id=3)
    rows = csv_rows(viewer_client.get("/audit/export.csv"))
    assert len(rows) == 4 and rows[-1][0] == TRUNCATED and "2 rows" in rows[-1][1]
    assert [row[AUDIT_COLUMNS.index("target_id")] for row in rows[1:3]] == ["3", "1"]
    plain_runs(3)
    runs = csv_rows(viewer_client.get("/runs/export.csv"))
    assert len(runs) == 4 and runs[-1][0] == TRUNCATED


def test_rows_are_read_as_the_download_is_written(monkeypatch):
    """What is sent does not wait for all rows: the first piece goes out after the rows
    that fill it."""
    monkeypatch.setattr(exports, "FLUSH_CHARS", 50)
    read = []

    def rows() -> Any:
        for index in range(1000):
            read.append(index)
            yield ["row", index, "x" * 20]

    pieces = csv_chunks(rows())
    first = next(pieces)
    assert first.startswith(b"row,0,") and len(read) < 10
    assert len(list(pieces)) > 100 and len(read) == 1000


def test_the_runs_export_queryset_is_ordered_like_the_list():
    first, second = waiting_run("a"), waiting_run("b")
    newest = runs_export_queryset(run_filters(QueryDict("")))
    assert list(newest.values_list("pk", flat=True)) == [second.pk, first.pk]
    # the longest-waiting sort: by the oldest pending ticket
    Ticket.objects.filter(run=second).update(created_at=timezone.now() - dt.timedelta(hours=1))
    waited = runs_export_queryset(
        run_filters(QueryDict("waiting_tool=write_note&sort=longest_waiting"))
    )
    assert list(waited.values_list("pk", flat=True)) == [second.pk, first.pk]
    rows = list(runs_csv_rows(waited))
    assert [row[0] for row in rows[1:]] == [str(second.pk), str(first.pk)]


def test_under_asgi_the_download_streams_through_the_executor():
    request = AsyncRequestFactory().get("/runs/export.csv")
    closed = []

    def pieces() -> Any:
        try:
            yield b"a"
            yield b"b"
        finally:
            closed.append(True)

    response = attachment(request, pieces(), content_type="text/csv", filename="x.csv")
    assert response.is_async

    async def read_all() -> list[bytes]:
        return [piece async for piece in response.streaming_content]

    assert asyncio.run(read_all()) == [b"a", b"b"] and closed == [True]

    early = attachment(request, pieces(), content_type="text/csv", filename="x.csv")

    async def read_one() -> bytes:
        stream = early.streaming_content.__aiter__()
        piece = await stream.__anext__()
        await stream.aclose()  # the client went away
        return piece

    assert asyncio.run(read_one()) == b"a" and closed == [True, True]
