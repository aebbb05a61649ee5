"""Forks: fork a run at a step boundary, list a run's forks (docs/forks.md)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.auth import actor_for
from common.api.base import ApiView, validated
from common.api.errors import error_responses
from runs import permissions as perms
from runs.api import serializers as s
from runs.api.views.lookups import get_run
from runs.api.views.params import RUN_ID
from runs.api.views.records import run_record_json
from runs.replays.api import fork_serializers as sf
from runs.replays.selectors.forks import run_forks
from runs.replays.services.forks import run_fork

FORKS_LISTED = 200

FORK_EXAMPLE = OpenApiExample(
    "Fork after step 2 with an edited tool result",
    value={"step": 2, "version": "original", "edit": {"seq": 5, "text": '{"result": 36}'}},
    request_only=True,
)


class RunForkView(ApiView):
    required_perms = {"POST": perms.FORK}

    @extend_schema(
        operation_id="runs_fork",
        summary="Fork a run at a step boundary",
        description="A new run of the same agent on a new thread whose messages are copies "
        "(new ids, seq 1…k) of the run's thread up to step boundary `step`: the conversation "
        "before the run, its input and what it wrote in steps before `step`. `edit` changes "
        "the last user message or a tool result of the copy. The new run is pinned to "
        "`version`, records `forked_from`, `fork_step`, `fork_edit` and `run_mode` fork, "
        "and starts at once. The original is not changed. 400 for a step out of range, an "
        "unknown version, an invalid draft or a message that cannot be edited.",
        tags=["runs"],
        parameters=[RUN_ID],
        request=sf.RunForkSerializer,
        examples=[FORK_EXAMPLE],
        responses={
            201: OpenApiResponse(s.RunRecordSerializer, description="The new run."),
            **error_responses(404, body=True),
        },
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = get_run(run_id, request)  # an unknown run is a 404 whatever the body
        data = validated(sf.RunForkSerializer, request.data)
        edit = data.get("edit")
        fork = run_fork(
            run=run,
            step=data["step"],
            version=data["version"],
            edit=dict(edit) if edit else None,
            actor=actor_for(request),
        )
        return Response(run_record_json(fork), status=201)


class RunForksView(ApiView):
    required_perms = {"GET": perms.VIEW}

    @extend_schema(
        operation_id="runs_forks",
        summary="The runs forked from a run, newest first",
        description=f"At most the latest {FORKS_LISTED}.",
        tags=["runs"],
        parameters=[RUN_ID],
        responses={200: sf.ForkListSerializer, **error_responses(404)},
    )
    def get(self, request: Request, run_id: str) -> Response:
        forks = run_forks(get_run(run_id, request))[:FORKS_LISTED]
        return Response({"items": sf.ForkSummarySerializer(forks, many=True).data})
