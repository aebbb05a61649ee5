from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents.selectors import agent_list
from common.api.base import ApiView, get_or_not_found
from common.api.errors import error_responses

from .serializers import AgentListSerializer, AgentSerializer

VIEW_AGENT = "agents.view_agent"


class AgentListView(ApiView):
    required_perms = {"GET": VIEW_AGENT}

    @extend_schema(
        operation_id="agents_list",
        summary="Agents that can run",
        tags=["agents"],
        responses={200: AgentListSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        agents = agent_list().order_by("slug")
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
        agent = get_or_not_found(agent_list(), "agent", agent_id, by="slug")
        return Response(AgentSerializer(agent).data)
