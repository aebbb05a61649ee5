from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents.models import Agent


class AgentSerializer(serializers.Serializer):
    id = serializers.CharField(source="slug", help_text="Agent id (slug): agent_id in runs.")
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    model = serializers.CharField(source="model.slug", help_text="Model slug.")
    system_prompt = serializers.CharField(allow_blank=True)
    tools = serializers.ListField(child=serializers.CharField(), help_text="Tool names offered.")
    permission = serializers.DictField(help_text="{default_behavior, rules: [{tool, behavior}]}.")
    max_rounds = serializers.IntegerField()
    stop_conditions = serializers.ListField(child=serializers.DictField())
    ticket_deadline_seconds = serializers.IntegerField(allow_null=True)
    ticket_default_action = serializers.CharField()
    delegates = serializers.SerializerMethodField()
    version = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_delegates(self, agent: Agent) -> list[str]:
        return [d.slug for d in agent.delegates.all()]

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_version(self, agent: Agent) -> Any:
        versions = [v.number for v in agent.versions.all()]
        return max(versions) if versions else None


class AgentListSerializer(serializers.Serializer):
    items = AgentSerializer(many=True)
