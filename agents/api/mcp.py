"""MCP servers over the REST API: `GET /api/v1/mcp-servers`, `GET /api/v1/mcp-servers/{slug}`
and `POST /api/v1/mcp-servers/{slug}/check` (list the server's tools, record its health).

The token and headers are never returned: only whether they are stored."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models_mcp import McpServer
from agents.services.mcp import mcp_check
from common.api.auth import actor_for
from common.api.base import ApiView, get_or_not_found
from common.api.errors import error_responses
from common.teams import ensure_may_check, shared_or_visible

VIEW_SERVER = "agents.view_mcpserver"
CHECK_SERVER = "agents.change_mcpserver"  # a check writes the server's health and tools


class McpToolSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The agents' name for it: mcp__<server>__<tool>.")
    tool = serializers.CharField(help_text="The server's name for it.")
    description = serializers.CharField(allow_blank=True)
    input_schema = serializers.JSONField(help_text="Its input JSON schema, as listed.")


class McpToolChangesSerializer(serializers.Serializer):
    added = serializers.ListField(child=serializers.CharField(), required=False)
    removed = serializers.ListField(child=serializers.CharField(), required=False)
    changed = serializers.ListField(child=serializers.CharField(), required=False)


class McpServerSerializer(serializers.Serializer):
    id = serializers.CharField(source="slug", help_text="Server id (slug).")
    name = serializers.CharField()
    team = serializers.SerializerMethodField(help_text="Team (slug); null: shared.")
    transport = serializers.CharField(help_text="http or stdio.")
    url = serializers.CharField(allow_blank=True, help_text="http: the endpoint.")
    command = serializers.CharField(allow_blank=True, help_text="stdio: the allowed command.")
    timeout_seconds = serializers.FloatField()
    has_token = serializers.BooleanField(help_text="A bearer token is stored (never returned).")
    has_headers = serializers.BooleanField(help_text="Extra headers are stored (never returned).")
    health = serializers.CharField(help_text="unknown, healthy or failing.")
    health_error = serializers.CharField(allow_blank=True)
    health_checked_at = serializers.DateTimeField(allow_null=True)
    tools = McpToolSerializer(many=True, help_text="What the last check listed.")
    tools_changes = McpToolChangesSerializer(help_text="Changed since the check before.")
    tools_checked_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_team(self, server: McpServer) -> str | None:
        return server.team.slug if server.team_id and server.team else None


class McpServerListSerializer(serializers.Serializer):
    items = McpServerSerializer(many=True)


class McpServerCheckSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    error = serializers.CharField(allow_blank=True, help_text="Why the check failed.")
    skipped = serializers.ListField(
        child=serializers.CharField(), help_text="Tools not offered to agents, and why."
    )
    server = McpServerSerializer()


SLUG = OpenApiParameter(
    "server_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="MCP server slug."
)


def _visible(request: Request) -> QuerySet[McpServer]:
    """The shared servers and those of the teams the user may view."""
    return shared_or_visible(McpServer.objects.select_related("team"), request.user, VIEW_SERVER)


def _server(request: Request, slug: str) -> McpServer:
    return get_or_not_found(_visible(request), "MCP server", slug, by="slug")


def _serialized(server: Any, **kwargs: Any) -> Any:
    return McpServerSerializer(server, **kwargs).data


class McpServerListView(ApiView):
    required_perms = {"GET": VIEW_SERVER}

    @extend_schema(
        operation_id="mcp_servers_list",
        summary="MCP tool servers",
        tags=["mcp-servers"],
        responses={200: McpServerListSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        return Response({"items": _serialized(_visible(request).order_by("slug"), many=True)})


class McpServerDetailView(ApiView):
    required_perms = {"GET": VIEW_SERVER}

    @extend_schema(
        operation_id="mcp_servers_retrieve",
        summary="An MCP server and the tools its last check listed",
        tags=["mcp-servers"],
        parameters=[SLUG],
        responses={200: McpServerSerializer, **error_responses(404)},
    )
    def get(self, request: Request, server_id: str) -> Response:
        return Response(_serialized(_server(request, server_id)))


class McpServerCheckView(ApiView):
    required_perms = {"POST": CHECK_SERVER}

    @extend_schema(
        operation_id="mcp_servers_check",
        summary="Check an MCP server (list its tools)",
        description=(
            "Opens a session with the saved settings (through the address guard for HTTP), "
            "lists the server's tools and records its health and tools. A failing check is "
            "still a 200: `ok` is false and `error` says why."
        ),
        tags=["mcp-servers"],
        parameters=[SLUG],
        request=None,
        responses={200: McpServerCheckSerializer, **error_responses(404, 409)},
    )
    def post(self, request: Request, server_id: str) -> Response:
        server = _server(request, server_id)
        ensure_may_check(request.user, CHECK_SERVER, server, "MCP server")
        result = mcp_check(server=server, actor=actor_for(request))
        server = _server(request, server_id)
        return Response(
            {
                "ok": result.ok,
                "error": result.error,
                "skipped": result.skipped,
                "server": _serialized(server),
            }
        )
