"""Admin for remote endpoints."""

from __future__ import annotations

from django.contrib import admin

from agents.admin.base import AuditedAdmin
from agents.models import RemoteEndpoint


@admin.register(RemoteEndpoint)
class RemoteEndpointAdmin(AuditedAdmin):
    list_display = ("slug", "name", "backend", "base_url", "health")
    search_fields = ("slug", "name", "base_url")
