"""Cost, tokens and latency at a glance."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.base import ApiView, validated
from common.api.errors import error_responses
from runs import permissions as perms
from runs.operations.api import stats_serializers as s
from runs.operations.selectors.usage import usage, window_bounds


class StatsView(ApiView):
    required_perms = {"GET": perms.VIEW}

    @extend_schema(
        operation_id="stats",
        summary="Cost, tokens and latency per agent, model and tool",
        description="Runs and tool calls that finished in the window, from hourly "
        "counters: per agent and per model runs, success rate, p50/p95 duration, tokens "
        "and cost (in total and per UTC day); per tool calls, failure rate and p95 "
        "latency. Percentiles come from log-spaced buckets (within about 9 %).",
        tags=["stats"],
        parameters=[s.StatsQuerySerializer],
        responses={200: s.StatsSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        query = validated(s.StatsQuerySerializer, request.query_params)
        start, end = s.custom_window(query) or window_bounds(query["window"])
        figures = usage(  # the user's teams' agents only
            start, end, query.get("agent"), agent_ids=perms.visible_agent_ids(request.user)
        )
        return Response(s.StatsSerializer(figures).data)
