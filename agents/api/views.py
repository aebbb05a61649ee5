from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents.selectors import agent_list
from common.access import scope
from common.api.base import ApiView, get_or_not_found
from common.api.errors import error_responses

from .serializers import AgentListSerializer, AgentSerializer

VIEW_AGENT = "agents.view_agent"


def visible_agents(request: Request) -> Any:
    """The agents of the teams the user may view (others are not found)."""
    return scope(agent_list().select_related("team"), request.user, "team_id", VIEW_AGENT)


class AgentListView(ApiView):
    required_perms = {"GET": VIEW_AGENT}

    @extend_schema(
        operation_id="agents_list",
        summary="Agents that can run",
        tags=["agents"],
        responses={200: AgentListSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        agents = visible_agents(request).order_by("slug")
        return Response({"items": AgentSerializer(agents, many=True).data})


class AgentDetailView(ApiView):
    required_perms = {"GET": VIEW_AGENT}

    @extend_schema(
        operation_id="agents_retrieve",
        summary="An agent",
        tags=["agents"],
        parameters=[
            OpenApiParameter(
                "agent_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="Agent slug."
            )
        ],
        responses={200: AgentSerializer, **error_responses(404)},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = get_or_not_found(visible_agents(request), "agent", agent_id, by="slug")
        return Response(AgentSerializer(agent).data)
