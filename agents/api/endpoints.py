"""Remote endpoints over the REST API: `GET /api/v1/endpoints`, `GET /api/v1/endpoints/{slug}`
and `POST /api/v1/endpoints/{slug}/check` (fetch the agent card, record health).

The bearer token is never returned: only whether one is stored (`has_token`)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import RemoteEndpoint
from agents.selectors import endpoint_list
from agents.services.endpoints import endpoint_check
from common.access import visible_teams
from common.api.auth import actor_for
from common.api.base import ApiView, get_or_not_found
from common.api.errors import error_responses
from common.teams import ensure_may_check, shared_or_visible

VIEW_ENDPOINT = "agents.view_remoteendpoint"
CHECK_ENDPOINT = "agents.change_remoteendpoint"  # a check writes the endpoint's health


class EndpointSerializer(serializers.Serializer):
    id = serializers.CharField(source="slug", help_text="Endpoint id (slug).")
    name = serializers.CharField()
    team = serializers.SerializerMethodField(help_text="Team (slug); null: shared.")
    backend = serializers.CharField(help_text="Protocol: a2a.")
    base_url = serializers.CharField()
    target = serializers.CharField(allow_blank=True, help_text="Remote agent / tenant segment.")
    timeout_ms = serializers.IntegerField()
    poll_interval_ms = serializers.IntegerField()
    history_length = serializers.IntegerField(allow_null=True)
    has_token = serializers.BooleanField(help_text="A bearer token is stored (never returned).")
    health = serializers.CharField(help_text="unknown, healthy or failing.")
    health_error = serializers.CharField(allow_blank=True)
    health_checked_at = serializers.DateTimeField(allow_null=True)
    agents = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_team(self, endpoint: RemoteEndpoint) -> str | None:
        return endpoint.team.slug if endpoint.team_id and endpoint.team else None

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_agents(self, endpoint: RemoteEndpoint) -> list[str]:
        """The agents running on it, of the teams the reader sees (a shared endpoint
        serves several teams)."""
        teams = self.context.get("teams")
        return sorted(
            agent.slug for agent in endpoint.agents.all() if teams is None or agent.team_id in teams
        )


class EndpointListSerializer(serializers.Serializer):
    items = EndpointSerializer(many=True)


class EndpointCheckSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    card_name = serializers.CharField(allow_blank=True, help_text="The agent card's name.")
    error = serializers.CharField(allow_blank=True, help_text="Why the check failed.")
    endpoint = EndpointSerializer()


SLUG = OpenApiParameter(
    "endpoint_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="Endpoint slug."
)


def _visible(request: Request) -> QuerySet[RemoteEndpoint]:
    """The shared endpoints and those of the teams the user may view."""
    return shared_or_visible(endpoint_list().select_related("team"), request.user, VIEW_ENDPOINT)


def _endpoint(request: Request, slug: str) -> RemoteEndpoint:
    return get_or_not_found(_visible(request), "endpoint", slug, by="slug")


def _serialized(request: Request, endpoint: Any, **kwargs: Any) -> Any:
    context = {"teams": visible_teams(request.user, "agents.view_agent")}
    return EndpointSerializer(endpoint, context=context, **kwargs).data


class EndpointListView(ApiView):
    required_perms = {"GET": VIEW_ENDPOINT}

    @extend_schema(
        operation_id="endpoints_list",
        summary="Remote endpoints (A2A agents elsewhere)",
        tags=["endpoints"],
        responses={200: EndpointListSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        endpoints = _visible(request).order_by("slug")
        return Response({"items": _serialized(request, endpoints, many=True)})


class EndpointDetailView(ApiView):
    required_perms = {"GET": VIEW_ENDPOINT}

    @extend_schema(
        operation_id="endpoints_retrieve",
        summary="A remote endpoint",
        tags=["endpoints"],
        parameters=[SLUG],
        responses={200: EndpointSerializer, **error_responses(404)},
    )
    def get(self, request: Request, endpoint_id: str) -> Response:
        return Response(_serialized(request, _endpoint(request, endpoint_id)))


class EndpointCheckView(ApiView):
    required_perms = {"POST": CHECK_ENDPOINT}

    @extend_schema(
        operation_id="endpoints_check",
        summary="Check an endpoint's health (fetch its agent card)",
        description=(
            "Fetches the remote agent card with the saved settings (through the SSRF guard) "
            "and records the endpoint's health. A failing check is still a 200: `ok` is false "
            "and `error` says why."
        ),
        tags=["endpoints"],
        parameters=[SLUG],
        request=None,
        responses={200: EndpointCheckSerializer, **error_responses(404, 409)},
    )
    def post(self, request: Request, endpoint_id: str) -> Response:
        endpoint = _endpoint(request, endpoint_id)
        ensure_may_check(request.user, CHECK_ENDPOINT, endpoint, "endpoint")
        result = endpoint_check(endpoint=endpoint, actor=actor_for(request))
        endpoint = _endpoint(request, endpoint_id)
        return Response(
            {
                "ok": result.ok,
                "card_name": result.card_name,
                "error": result.error,
                "endpoint": _serialized(request, endpoint),
            }
        )
