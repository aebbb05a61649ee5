"""MCP tool servers (docs/mcp.md): where an agent's `mcp__<server>__<tool>` tools come
from. A module of its own beside `agents.models` (registered by `AgentsConfig`)."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from agents import secrets
from agents.models import SLUG, Configured, HealthFields


class McpServer(Configured, HealthFields):
    """An MCP server agents take tools from, over streamable HTTP (a URL) or stdio (a
    command chosen by name from the AWAKEN_MCP_STDIO_COMMANDS allow-list, never a command
    line typed here). `tools` is what the last successful check listed; agents pick from
    it and a published version freezes the schemas it was validated against."""

    class Transport(models.TextChoices):
        HTTP = "http", "Streamable HTTP (a URL)"
        STDIO = "stdio", "stdio (an allowed command)"

    slug = models.CharField(
        max_length=40,
        unique=True,
        validators=[SLUG],
        help_text="Server id: its tools are named mcp__<id>__<tool>.",
    )
    name = models.CharField(max_length=200, help_text="Shown to admins.")
    team = models.ForeignKey(
        "common.Team",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="mcp_servers",
        help_text="Team whose admins configure it and whose agents use it; empty: shared.",
    )
    transport = models.CharField(
        max_length=10, choices=Transport.choices, default=Transport.HTTP, help_text="How to talk."
    )
    url = models.URLField(blank=True, help_text="The server's streamable HTTP endpoint (http).")
    command = models.CharField(
        max_length=100,
        blank=True,
        help_text="The name of an allowed command in AWAKEN_MCP_STDIO_COMMANDS (stdio).",
    )
    # Write-only (never shown, excluded from audit): a bearer token and extra headers
    # (a JSON object), both encrypted at rest.
    token_encrypted = models.TextField(blank=True, editable=False)
    headers_encrypted = models.TextField(blank=True, editable=False)
    timeout_seconds = models.FloatField(
        default=30,
        validators=[MinValueValidator(0.1), MaxValueValidator(3600)],
        help_text="Per call: connecting, listing tools, one tool call.",
    )
    tools = models.JSONField(
        default=list,
        blank=True,
        editable=False,
        help_text="What the last check listed: [{name, tool, description, input_schema}].",
    )
    tools_changes = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="How the last check's tools differ from the check before it.",
    )
    tools_checked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta(Configured.Meta):
        verbose_name = "MCP server"

    def clean(self) -> None:
        if "__" in (self.slug or ""):
            raise ValidationError(
                {"slug": "No '__' in the id: it separates the tool name's parts."}
            )

    def set_token(self, value: str) -> None:
        self.token_encrypted = secrets.encrypt(value)

    def token(self) -> str:
        return secrets.decrypt(self.token_encrypted)

    @property
    def has_token(self) -> bool:
        return bool(self.token_encrypted)

    def set_headers(self, value: dict[str, str]) -> None:
        self.headers_encrypted = secrets.encrypt(json.dumps(value)) if value else ""

    def stored_headers(self) -> dict[str, Any]:
        return json.loads(secrets.decrypt(self.headers_encrypted)) if self.headers_encrypted else {}

    @property
    def has_headers(self) -> bool:
        return bool(self.headers_encrypted)
