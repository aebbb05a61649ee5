"""Cancel or retry many runs at once: POST /api/v1/runs/bulk-action."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from common.access import allowed_unfrozen
from common.api.auth import actor_for
from common.api.base import ApiView, validated
from common.api.errors import error_responses
from common.errors import Forbidden
from runs import permissions as perms
from runs.services.run_bulk import ALREADY, DONE, MAX_BULK, REFUSED, RUN_ACTIONS, bulk_run_action


class RunBulkRequestSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=list(RUN_ACTIONS))
    run_ids = serializers.ListField(
        child=serializers.UUIDField(), min_length=1, max_length=MAX_BULK, help_text="The runs."
    )
    reason = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Why; required to cancel where a run's team requires a reason.",
    )
    confirm = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Required when the action covers more runs than the lowest "
        "bulk_confirm_above of their teams; without it the answer is 400 "
        "confirmation_required (details: count, threshold) and nothing changes.",
    )


class RunBulkResultSerializer(serializers.Serializer):
    run_id = serializers.CharField()
    outcome = serializers.ChoiceField(
        choices=[DONE, ALREADY, REFUSED],
        help_text="done; already (cancelled or retried before: nothing done); refused.",
    )
    message = serializers.CharField(required=False, help_text="already or refused: why.")
    new_run_id = serializers.CharField(required=False, help_text="A retry: the new run.")


class RunBulkResponseSerializer(serializers.Serializer):
    results = RunBulkResultSerializer(many=True)


class RunBulkActionView(ApiView):
    required_perms = {"POST": perms.VIEW}

    @extend_schema(
        operation_id="runs_bulk_action",
        summary="Cancel or retry many runs",
        description="Each named run (each once, in the order given) is cancelled or retried "
        "on its own: `done`, `already` (a cancelled run, one asked to stop, or a run retried "
        "before: never a second retry) or `refused` with `message` (no such run, your role "
        "in its team, its team's freeze, not failed, already finished). Each action is "
        "audited as a single one is, plus one runs.bulk_cancel / runs.bulk_retry entry.",
        tags=["runs"],
        request=RunBulkRequestSerializer,
        examples=[
            OpenApiExample(
                "Cancel two runs",
                value={"action": "cancel", "run_ids": ["0197…", "0197…"], "reason": "stuck"},
                request_only=True,
            )
        ],
        responses={200: RunBulkResponseSerializer, **error_responses(body=True)},
    )
    def post(self, request: Request) -> Response:
        data = validated(RunBulkRequestSerializer, request.data)
        action = data["action"]
        if not allowed_unfrozen(request.user, RUN_ACTIONS[action][0]):
            raise Forbidden(f"you may not {action} runs")
        outcome = bulk_run_action(
            data["run_ids"], action, data["reason"], actor_for(request), confirm=data["confirm"]
        )
        return Response({"results": [item.to_json() for item in outcome.items]})
