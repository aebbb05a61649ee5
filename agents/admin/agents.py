"""Admin for agents (drafts), their published versions and notes."""

from __future__ import annotations

from django.contrib import admin

from agents.admin.base import AuditedAdmin
from agents.models import Agent, AgentVersion, Note


class AgentVersionInline(admin.TabularInline):
    model = AgentVersion
    extra = 0
    can_delete = False
    readonly_fields = ("number", "spec", "created_at")

    def has_add_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False


@admin.register(Agent)
class AgentAdmin(AuditedAdmin):
    list_display = ("slug", "name", "model", "max_rounds", "updated_at")
    list_select_related = ("model",)
    search_fields = ("slug", "name")
    filter_horizontal = ("delegates",)
    inlines = [AgentVersionInline]


@admin.register(Note)
class NoteAdmin(admin.ModelAdmin):
    list_display = ("title", "run", "tool_call_id", "created_at")
    search_fields = ("title", "body")
    readonly_fields = ("run", "tool_call_id", "created_at")
