"""Admin for model providers and models."""

from __future__ import annotations

from django.contrib import admin

from agents.admin.base import AuditedAdmin
from agents.models import Model, ModelProvider


@admin.register(ModelProvider)
class ModelProviderAdmin(AuditedAdmin):
    list_display = ("slug", "name", "kind", "base_url")
    search_fields = ("slug", "name")


@admin.register(Model)
class ModelAdmin(AuditedAdmin):
    list_display = ("slug", "provider", "upstream_model")
    list_select_related = ("provider",)
    search_fields = ("slug", "upstream_model")
