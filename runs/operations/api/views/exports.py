"""Exports over the API (docs/exports.md): a run as one JSON document, the runs list and
the audit log as CSV, each with the filters of its list endpoint and its permission."""

from __future__ import annotations

import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.base import ApiView, validated
from common.api.errors import error_responses
from runs import permissions as perms
from runs.accounts.api.views.audit import audit_entries
from runs.api import request_serializers as sq
from runs.api import serializers as s
from runs.api.views.lookups import get_run
from runs.api.views.params import RUN_ID
from runs.api.views.runs import run_filters
from runs.operations.services.exports import SCHEMA
from runs.operations.services.exports_csv import (
    AUDIT_COLUMNS,
    RUN_COLUMNS,
    TRUNCATED,
    audit_csv_rows,
    runs_csv_rows,
    runs_export_queryset,
)
from runs.operations.views.exports import csv_attachment, run_json_attachment

NO_FORMAT = OpenApiParameter("format", exclude=True)


class CsvRenderer(BaseRenderer):
    """Lets clients send `Accept: text/csv`; errors are still answered in JSON."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> bytes:
        return json.dumps(data, cls=DjangoJSONEncoder).encode()


class CsvExportView(ApiView):
    renderer_classes = [JSONRenderer, CsvRenderer]

    def finalize_response(self, request: Any, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        if isinstance(response, Response):  # an error: JSON whatever the client accepts
            response.accepted_renderer = JSONRenderer()
            response.accepted_media_type = "application/json"
        return response


def json_errors(*codes: int) -> dict[Any, OpenApiResponse]:
    """error_responses(), documented as JSON only (next to a CSV success)."""
    return {(code, "application/json"): answer for code, answer in error_responses(*codes).items()}


def csv_success(columns: list[str], what: str) -> dict[Any, OpenApiResponse]:
    return {
        (200, "text/csv"): OpenApiResponse(
            OpenApiTypes.STR,
            description=f"{what} as CSV (UTF-8, RFC 4180), a header row then one row per "
            f"entry; columns: {', '.join(columns)}. At most AWAKEN_EXPORT_MAX_ROWS rows (the "
            f"`X-Export-Max-Rows` header); a longer export ends with a row whose first cell "
            f"is `{TRUNCATED}`. Text that a spreadsheet would read as a formula (starting "
            "with =, +, -, @, tab or carriage return) starts with an apostrophe.",
        )
    }


# --- the run document, for the schema ---------------------------------------------------------


def any_list(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(child=serializers.JSONField(), **kwargs)


class ExportUsageSerializer(serializers.Serializer):
    steps = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()


class ExportRunSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    thread_id = serializers.UUIDField()
    agent = serializers.CharField(help_text="Agent slug.")
    agent_version = serializers.IntegerField(help_text="Number of the pinned version.")
    parent_run_id = serializers.UUIDField(allow_null=True)
    parent_tool_call_id = serializers.CharField(allow_null=True)
    child_run_ids = serializers.ListField(child=serializers.UUIDField())
    retry_of = serializers.UUIDField(allow_null=True)
    retried_as = serializers.ListField(child=serializers.UUIDField())
    origin = serializers.CharField()
    run_mode = serializers.CharField()
    schedule_id = serializers.UUIDField(allow_null=True)
    priority = serializers.IntegerField()
    status = serializers.ChoiceField(choices=s.RUN_STATUSES)
    status_reason = serializers.CharField(allow_null=True)
    waiting_reason = serializers.CharField(allow_null=True)
    termination_reason = s.AnyField(allow_null=True)
    final_output = serializers.CharField(allow_null=True, allow_blank=True)
    error = s.AnyField(allow_null=True, help_text="The error payload of a failed run.")
    waiting = s.AnyField(allow_null=True)
    request = s.AnyField(allow_null=True)
    input = s.AnyField(allow_null=True)
    output = s.AnyField(allow_null=True)
    state = s.AnyField(allow_null=True)
    usage = ExportUsageSerializer()
    cost_usd = serializers.CharField(allow_null=True, help_text="Exact decimal; null: unpriced.")
    input_price_per_million_usd = serializers.CharField(allow_null=True)
    output_price_per_million_usd = serializers.CharField(allow_null=True)
    last_event_seq = serializers.IntegerField()
    open_tickets = serializers.IntegerField()
    pending_inputs = serializers.IntegerField()
    attempt = serializers.IntegerField()
    recoveries = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField()
    cancel_requested_at = serializers.DateTimeField(allow_null=True)


class ExportRangeSerializer(serializers.Serializer):
    from_seq = serializers.IntegerField()
    to_seq = serializers.IntegerField()


class ExportMessageSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    seq = serializers.IntegerField()
    role = serializers.CharField()
    content = any_list()
    tool_calls = any_list(allow_null=True)
    tool_call_id = serializers.CharField(allow_null=True)
    run_id = serializers.UUIDField(allow_null=True, help_text="Run that produced it.")
    step_index = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()


class ExportToolCallSerializer(serializers.Serializer):
    call_id = serializers.CharField()
    tool_name = serializers.CharField()
    arguments = s.AnyField(allow_null=True)
    status = serializers.CharField()
    resume_mode = serializers.CharField()
    suspension_id = serializers.CharField(allow_null=True)
    suspension_reason = serializers.CharField(allow_null=True)
    resume_input = s.AnyField(allow_null=True)
    step_index = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ExportEventSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    event_type = serializers.CharField()
    created_at = serializers.DateTimeField()
    payload = serializers.DictField(help_text="The event as persisted (docs/run-model.md).")


class ExportDecisionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    action = serializers.ChoiceField(choices=s.OUR_DECISION_ACTIONS)
    decided_by = serializers.CharField(help_text="username, 'user (token name)' or system.")
    comment = serializers.CharField(allow_blank=True)
    decision_id = serializers.CharField()
    payload = s.AnyField(allow_null=True)
    arguments_before = s.AnyField(allow_null=True)
    arguments_after = s.AnyField(allow_null=True)
    created_at = serializers.DateTimeField()


class ExportTicketSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    ticket_id = serializers.CharField()
    tool_call_id = serializers.CharField()
    tool_name = serializers.CharField()
    arguments = s.AnyField(allow_null=True)
    resume_mode = serializers.CharField()
    reason = serializers.CharField(allow_null=True)
    message = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=s.TICKET_STATUSES)
    deadline_at = serializers.DateTimeField(allow_null=True)
    default_action = serializers.CharField()
    assigned_to = serializers.CharField(allow_null=True)
    claimed_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    closed_at = serializers.DateTimeField(allow_null=True)
    decision = ExportDecisionSerializer(allow_null=True)


class ExportBackgroundTaskSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    tool_call_id = serializers.CharField()
    kind = serializers.CharField()
    label = serializers.CharField(allow_blank=True)
    arguments = s.AnyField()
    status = serializers.CharField()
    result = s.AnyField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    attempt = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    delivered_at = serializers.DateTimeField(allow_null=True)


class ExportInputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    seq = serializers.IntegerField()
    mode = serializers.CharField()
    status = serializers.CharField()
    boundary = serializers.CharField(allow_null=True)
    priority = serializers.IntegerField()
    messages = any_list()
    message_ids = serializers.ListField(child=serializers.CharField())
    sent_by = serializers.CharField()
    delivered_to_this_run = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    closed_at = serializers.DateTimeField(allow_null=True)


class RunExportSerializer(serializers.Serializer):
    schema = serializers.CharField(help_text=f"What this document is: `{SCHEMA}`.")
    schema_version = serializers.IntegerField(help_text="1; raised when a field changes meaning.")
    exported_at = serializers.DateTimeField()
    run = ExportRunSerializer()
    message_range = ExportRangeSerializer(
        allow_null=True, help_text="The thread's messages the run read and wrote."
    )
    messages = ExportMessageSerializer(many=True)
    tool_calls = ExportToolCallSerializer(many=True)
    events = ExportEventSerializer(many=True, help_text="Every event, in seq order.")
    tickets = ExportTicketSerializer(many=True)
    background_tasks = ExportBackgroundTaskSerializer(many=True)
    inputs = ExportInputSerializer(many=True)


# --- the views --------------------------------------------------------------------------------


class RunExportView(ApiView):
    required_perms = {"GET": perms.VIEW}

    @extend_schema(
        operation_id="runs_export",
        summary="A run as one JSON document",
        description="The run's record; its thread's messages from the first it read to the "
        "last it wrote (internal ones left out); its tool calls; every event in seq order; "
        "its tickets, each with its decision; its background tasks and the input sent to "
        "it. The same document as the run page's Download JSON, streamed, as an attachment.",
        tags=["runs"],
        parameters=[RUN_ID],
        responses={200: RunExportSerializer, **error_responses(404)},
    )
    def get(self, request: Request, run_id: str) -> StreamingHttpResponse:
        run = get_run(run_id, request)  # another team's run: not found
        return run_json_attachment(request, run)


class RunExportQuerySerializer(sq.RunListQuerySerializer):
    cursor = None
    limit = None


class RunsCsvExportView(CsvExportView):
    required_perms = {"GET": perms.VIEW}

    @extend_schema(
        operation_id="runs_export_csv",
        summary="The runs list as CSV",
        description="The runs GET /runs lists with the same filters, in the same order, "
        "all of them (up to the row cap) rather than a page.",
        tags=["runs"],
        parameters=[RunExportQuerySerializer, NO_FORMAT],
        responses={**csv_success(RUN_COLUMNS, "The runs"), **json_errors()},
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        query = validated(RunExportQuerySerializer, request.query_params)
        filters = run_filters(query)
        filters.agent_ids = perms.visible_agent_ids(request.user)  # the user's teams' only
        runs = runs_export_queryset(filters)
        return csv_attachment(request, runs_csv_rows(runs), "runs")


class AuditExportQuerySerializer(sq.AuditQuerySerializer):
    cursor = None
    limit = None


class AuditCsvExportView(CsvExportView):
    required_perms = {"GET": perms.AUDIT}

    @extend_schema(
        operation_id="audit_export_csv",
        summary="The audit log as CSV",
        description="The entries GET /audit lists with the same filters, newest first, all "
        "of them (up to the row cap); `before` and `after` as compact JSON.",
        tags=["audit"],
        parameters=[AuditExportQuerySerializer, NO_FORMAT],
        responses={**csv_success(AUDIT_COLUMNS, "The audit entries"), **json_errors()},
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        query = validated(AuditExportQuerySerializer, request.query_params)
        return csv_attachment(request, audit_csv_rows(audit_entries(query, request.user)), "audit")
