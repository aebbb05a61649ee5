"""Two runs compared (docs/compare.md): `GET /api/v1/runs/compare?a=&b=`, the body the
compare page shows (runs.replays.selectors.compare.run_compare)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.base import ApiView, validated
from common.api.errors import error_responses
from common.errors import NotFound
from runs import permissions as perms
from runs.api import serializers as s
from runs.operations.api.views.exports import NO_FORMAT
from runs.replays.selectors.compare import run_compare, runs_for_compare


class CompareQuerySerializer(serializers.Serializer):
    a = serializers.UUIDField(help_text="Id of the run on the left.")
    b = serializers.UUIDField(help_text="Id of the run on the right (may be a again).")


class CompareRunSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    thread_id = serializers.UUIDField()
    agent = serializers.CharField(help_text="Agent slug.")
    agent_version = serializers.CharField(help_text='"v3", or "v3 draft" for a draft snapshot.')
    status = serializers.ChoiceField(choices=s.RUN_STATUSES)
    status_reason = serializers.CharField(allow_null=True)
    run_mode = serializers.CharField()
    retry_of = serializers.UUIDField(allow_null=True)
    forked_from = serializers.UUIDField(allow_null=True)
    fork_step = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()
    final_output = serializers.CharField(allow_null=True, allow_blank=True)


class CompareSummarySerializer(serializers.Serializer):
    key = serializers.ChoiceField(
        choices=[
            "outcome",
            "steps",
            "input_tokens",
            "output_tokens",
            "cost_usd",
            "duration_seconds",
            "agent",
            "agent_version",
        ]
    )
    label = serializers.CharField()
    a = s.AnyField(allow_null=True, help_text="Run a's value (cost: exact decimal string).")
    b = s.AnyField(allow_null=True)
    a_text = serializers.CharField(help_text="Run a's value as the page shows it.")
    b_text = serializers.CharField()
    different = serializers.BooleanField()


class CompareMessageSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    role = serializers.CharField()
    text = serializers.CharField(allow_blank=True)
    tool_call_id = serializers.CharField(allow_null=True)


class CompareTicketSerializer(serializers.Serializer):
    ticket_id = serializers.CharField()
    tool_name = serializers.CharField()
    arguments = s.AnyField(allow_null=True)
    status = serializers.ChoiceField(choices=s.TICKET_STATUSES)
    step = serializers.IntegerField(allow_null=True, help_text="Step of its tool call.")
    action = serializers.ChoiceField(choices=s.OUR_DECISION_ACTIONS, allow_null=True)
    decided_by = serializers.CharField(allow_null=True)
    comment = serializers.CharField(allow_null=True, allow_blank=True)
    decided_at = serializers.DateTimeField(allow_null=True)


class CompareToolCallSerializer(serializers.Serializer):
    copied = serializers.BooleanField(
        help_text="A fork's side of a copied step: the original's call, shown as copied."
    )
    call_id = serializers.CharField()
    name = serializers.CharField()
    arguments = s.AnyField(allow_null=True)
    status = serializers.CharField()
    result = serializers.CharField(
        allow_null=True, allow_blank=True, help_text="Text of its last tool message."
    )
    duration_ms = serializers.IntegerField(allow_null=True)
    ticket = CompareTicketSerializer(allow_null=True)


class CompareSideSerializer(serializers.Serializer):
    messages = CompareMessageSerializer(many=True)
    text = serializers.CharField(
        allow_blank=True, help_text="The assistant text (input: the input messages' text)."
    )
    tool_calls = CompareToolCallSerializer(many=True)
    left_out = serializers.IntegerField(
        required=False, help_text="Input row only: earlier input messages not listed."
    )


class DiffPartSerializer(serializers.Serializer):
    op = serializers.ChoiceField(
        choices=["equal", "delete", "insert"], help_text="delete: only in a; insert: only in b."
    )
    text = serializers.CharField()


class CompareStepSerializer(serializers.Serializer):
    step = serializers.IntegerField(allow_null=True, help_text="null: the input row.")
    label = serializers.CharField()
    copied = serializers.BooleanField(
        help_text="A step of the original that a fork (the other side) copied."
    )
    different = serializers.BooleanField()
    text_different = serializers.BooleanField()
    tools_different = serializers.BooleanField()
    text_diff = DiffPartSerializer(many=True, allow_null=True)
    a = CompareSideSerializer(allow_null=True, help_text="null: run a has no such step.")
    b = CompareSideSerializer(allow_null=True)


class CompareTicketRowSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    different = serializers.BooleanField()
    a = CompareTicketSerializer(allow_null=True)
    b = CompareTicketSerializer(allow_null=True)


class CompareForkSerializer(serializers.Serializer):
    original = serializers.UUIDField()
    fork = serializers.UUIDField()
    step = serializers.IntegerField(help_text="The fork step: rows before it are copied.")


class RunCompareSerializer(serializers.Serializer):
    same_run = serializers.BooleanField()
    a = CompareRunSerializer()
    b = CompareRunSerializer()
    fork = CompareForkSerializer(
        allow_null=True, help_text="One run is a fork of the other: aligned on the fork step."
    )
    summary = CompareSummarySerializer(many=True)
    steps = CompareStepSerializer(many=True, help_text="The input row, then steps 0, 1, …")
    steps_truncated = serializers.BooleanField()
    different_steps = serializers.ListField(
        child=serializers.IntegerField(allow_null=True), help_text="null: the input row."
    )
    tickets = CompareTicketRowSerializer(many=True)
    tickets_truncated = serializers.BooleanField()


class RunCompareView(ApiView):
    required_perms = {"GET": perms.VIEW}

    @extend_schema(
        operation_id="runs_compare",
        summary="Two runs side by side",
        description="Runs a and b aligned by step: an `input` row (the messages each run "
        "started with), then one row per step index 0 … max(steps) - 1, each with the "
        "assistant text (a word diff when it differs) and the tool calls with their "
        "arguments, status, result and ticket; the runs' tickets and decisions in order; "
        "and a summary (outcome, steps, tokens, cost, duration, agent and version) whose "
        "rows say whether the two differ. See docs/compare.md.",
        tags=["runs"],
        parameters=[CompareQuerySerializer, NO_FORMAT],
        responses={200: RunCompareSerializer, **error_responses(404)},
    )
    def get(self, request: Request) -> Response:
        query = validated(CompareQuerySerializer, request.query_params)
        ids = [query["a"], query["b"]]
        runs = runs_for_compare(ids)
        for ident in ids:
            if ident not in runs or not request.user.has_perm("runs.view_run", runs[ident]):
                raise NotFound(f"run {ident} not found", {"run_id": str(ident)})
        return Response(run_compare(runs[ids[0]], runs[ids[1]]))
