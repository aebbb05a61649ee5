from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Agent
from runs.api.base import ApiView
from runs.api.errors import error_responses
from runs.services.errors import NotFound

from .serializers import AgentListSerializer, AgentSerializer

VIEW_AGENT = "agents.view_agent"


def agents_query() -> Any:
    return Agent.objects.select_related("model", "endpoint").prefetch_related(
        "delegates", "versions"
    )


class AgentListView(ApiView):
    required_perms = {"GET": VIEW_AGENT}

    @extend_schema(
        operation_id="agents_list",
        summary="Agents that can run",
        tags=["agents"],
        responses={200: AgentListSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        agents = agents_query().order_by("slug")
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
        agent = agents_query().filter(slug=agent_id).first()
        if agent is None:
            raise NotFound(f"agent {agent_id} not found")
        return Response(AgentSerializer(agent).data)
