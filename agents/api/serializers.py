from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents.models import Agent, AgentVersion
from agents.services.agents import agent_draft_status


class AgentSerializer(serializers.Serializer):
    id = serializers.CharField(source="slug", help_text="Agent id (slug): agent_id in runs.")
    name = serializers.CharField()
    team = serializers.CharField(source="team.slug", help_text="Team (slug) it belongs to.")
    description = serializers.CharField(allow_blank=True)
    model = serializers.SerializerMethodField(help_text="Model slug (null: a remote agent).")
    endpoint = serializers.SerializerMethodField(
        help_text="Remote endpoint slug (null: a local agent)."
    )
    system_prompt = serializers.CharField(allow_blank=True)
    tools = serializers.ListField(child=serializers.CharField(), help_text="Tool names offered.")
    permission = serializers.DictField(help_text="{default_behavior, rules: [{tool, behavior}]}.")
    max_rounds = serializers.IntegerField()
    stop_conditions = serializers.ListField(child=serializers.DictField())
    ticket_deadline_seconds = serializers.IntegerField(allow_null=True)
    ticket_default_action = serializers.CharField(help_text="reject, approve or respond.")
    ticket_default_response = serializers.JSONField(
        allow_null=True, help_text="The answer given at the deadline when the action is respond."
    )
    ticket_warning_seconds = serializers.IntegerField(
        allow_null=True, help_text="Operators are warned this many seconds before a deadline."
    )
    delegates = serializers.SerializerMethodField()
    version = serializers.SerializerMethodField(
        help_text="Latest published version number (what new runs pin); null: never published."
    )
    draft_status = serializers.SerializerMethodField(
        help_text="never_published, matches (the draft equals the latest version) or changed."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_delegates(self, agent: Agent) -> list[str]:
        return [d.slug for d in agent.delegates.all()]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_model(self, agent: Agent) -> str | None:
        return agent.model.slug if agent.model_id and agent.model else None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_endpoint(self, agent: Agent) -> str | None:
        return agent.endpoint.slug if agent.endpoint_id and agent.endpoint else None

    def _latest(self, agent: Agent) -> AgentVersion | None:
        return max(agent.versions.all(), key=lambda v: v.number, default=None)

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_version(self, agent: Agent) -> Any:
        latest = self._latest(agent)
        return latest.number if latest else None

    @extend_schema_field(serializers.ChoiceField(choices=["never_published", "matches", "changed"]))
    def get_draft_status(self, agent: Agent) -> str:
        latest = self._latest(agent)
        return agent_draft_status(agent, latest).state if latest else "never_published"


class AgentListSerializer(serializers.Serializer):
    items = AgentSerializer(many=True)
