"""Downloads (docs/exports.md): a run as JSON from its page, the runs list with the
page's current filters and the audit log with its filters as CSV. The API's exports
(runs/operations/api/views/exports.py) answer with `attachment` too."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, StreamingHttpResponse
from django.utils.http import content_disposition_header

from common.models import AuditEntry
from runs.accounts.selectors.audit import filter_audit, scope_audit
from runs.accounts.views.audit import audit_response, read_audit_filters
from runs.operations.services.exports import export_filename, run_export_chunks, run_for_export
from runs.operations.services.exports_csv import (
    audit_csv_rows,
    csv_chunks,
    export_max_rows,
    runs_csv_rows,
    runs_export_queryset,
)
from runs.permissions import AUDIT, VIEW, may_see, require, visible_agent_ids
from runs.views.forms import filter_page
from runs.views.lists import read_run_filters, run_list_response

JSON_TYPE = "application/json"
CSV_TYPE = "text/csv; charset=utf-8"


def _next_piece(chunks: Iterator[bytes]) -> bytes | None:
    return next(chunks, None)


async def _in_executor(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """ASGI: each piece is made in the request's thread-sensitive executor, where its
    database connection (and an open server-side cursor) lives. Django would collect a
    plain iterator into memory before sending it."""
    step = sync_to_async(_next_piece)
    try:
        while (chunk := await step(chunks)) is not None:
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:  # the client went away: release the cursor now
            await sync_to_async(close)()


def attachment(
    request: Any, chunks: Iterator[bytes], *, content_type: str, filename: str
) -> StreamingHttpResponse:
    """`chunks` streamed as a download named `filename` (written as they are made, under
    WSGI and ASGI alike). `request` is Django's or DRF's."""
    is_async = isinstance(getattr(request, "_request", request), ASGIRequest)
    response = StreamingHttpResponse(
        _in_executor(chunks) if is_async else chunks, content_type=content_type
    )
    response["Content-Disposition"] = content_disposition_header(True, filename)
    response["Cache-Control"] = "no-store"
    return response


def csv_attachment(request: Any, rows: Iterator[list[Any]], kind: str) -> StreamingHttpResponse:
    response = attachment(
        request, csv_chunks(rows), content_type=CSV_TYPE, filename=export_filename(kind, "csv")
    )
    response["X-Export-Max-Rows"] = str(export_max_rows())
    return response


def run_json_attachment(request: Any, run: Any) -> StreamingHttpResponse:
    return attachment(
        request, run_export_chunks(run), content_type=JSON_TYPE, filename=f"run-{run.pk}.json"
    )


@require(VIEW, "export runs")
def run_export(request: HttpRequest, run_id: Any) -> Any:  # a StreamingHttpResponse
    run = run_for_export(run_id)
    if run is None or not may_see(request.user, run):  # another team's: not found
        raise Http404("no such run")
    return run_json_attachment(request, run)


@filter_page
@require(VIEW, "export runs")
def runs_export(request: HttpRequest) -> Any:  # a StreamingHttpResponse
    filters, errors = read_run_filters(request.GET)
    if errors:  # the list page, saying what to fix: no download of the wrong runs
        return run_list_response(request)
    filters.agent_ids = visible_agent_ids(request.user)  # the user's teams' runs only
    runs = runs_export_queryset(filters)
    return csv_attachment(request, runs_csv_rows(runs), "runs")


@filter_page
@require(AUDIT, "export the audit log")
def audit_export(request: HttpRequest) -> Any:  # a StreamingHttpResponse
    filters, errors = read_audit_filters(request.GET)
    if errors:  # the audit page, saying what to fix
        return audit_response(request)
    entries = filter_audit(
        AuditEntry.objects.all(), filters["action"], filters["actor"], filters["run"]
    )
    entries = scope_audit(entries, request.user)  # the user's teams' entries only
    return csv_attachment(request, audit_csv_rows(entries), "audit")
