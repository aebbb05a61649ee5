"""Admin for MCP tool servers: a URL (streamable HTTP, behind the SSRF guard) or an
allowed command (stdio, chosen by name from AWAKEN_MCP_STDIO_COMMANDS), a write-only
token and headers, health columns, and "Check", which lists the server's tools, records
its health and shows how its tools changed since the check before."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from agents.admin.base import TeamAdmin
from agents.models_mcp import McpServer
from agents.services.mcp import (
    McpCheckResult,
    header_errors,
    mcp_check,
    mcp_server_config_errors,
    stdio_commands,
)
from common.jsonsafe import json_loads

FORM_FIELDS = ("slug", "name", "team", "transport", "url", "command", "timeout_seconds")
WRITE_ONLY = forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"})


class McpServerForm(forms.ModelForm):
    url = forms.URLField(
        label="URL",
        required=False,
        max_length=200,
        assume_scheme="https",
        help_text="http: the server's streamable HTTP endpoint, e.g. https://tools.example.com/mcp. "
        "A host on a private, loopback or link-local address is refused unless "
        "AWAKEN_MCP_ALLOW_PRIVATE allows it; every connection is checked again.",
    )
    command = forms.ChoiceField(
        required=False,
        help_text="stdio: the name of a command of the AWAKEN_MCP_STDIO_COMMANDS allow-list "
        "(a command line cannot be typed here).",
    )
    token = forms.CharField(
        label="Bearer token",
        required=False,
        strip=True,
        widget=WRITE_ONLY,
        help_text="Write-only: stored encrypted, never shown again; blank keeps the current one.",
    )
    clear_token = forms.BooleanField(label="Remove the stored token", required=False)
    headers = forms.CharField(
        label="Extra headers",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60, "autocomplete": "off"}),
        help_text='Write-only JSON object, e.g. {"X-Api-Key": "…"}: stored encrypted, never '
        "shown again; blank keeps the current ones.",
    )
    clear_headers = forms.BooleanField(label="Remove the stored headers", required=False)

    class Meta:
        model = McpServer
        fields = FORM_FIELDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = sorted(stdio_commands())
        current = self.instance.command
        field = self.fields["command"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "—")] + [(name, name) for name in names]
        if current and current not in names:
            field.choices += [(current, f"{current} (no longer allowed)")]

    def clean_headers(self) -> dict[str, str] | None:
        raw = (self.cleaned_data.get("headers") or "").strip()
        if not raw:
            return None
        try:
            value = json_loads(raw)
        except ValueError as exc:
            raise forms.ValidationError(f"Enter the headers as a JSON object ({exc}).") from exc
        problem = header_errors(value)
        if problem:
            raise forms.ValidationError(problem)
        return dict(value)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        for secret in ("token", "headers"):
            if data.get(secret) and data.get(f"clear_{secret}"):
                self.add_error(f"clear_{secret}", f"Either enter new {secret} or remove them.")
        if any(name in self.errors for name in (*FORM_FIELDS, "headers")):
            return data
        candidate = McpServer(
            token_encrypted=self.instance.token_encrypted,
            headers_encrypted=self.instance.headers_encrypted,
        )
        for name in FORM_FIELDS:
            setattr(candidate, name, data.get(name) or ("" if name != "team" else None))
        headers = data.get("headers")
        if headers is None and data.get("clear_headers"):
            headers = {}
        self.warnings: list[str] = []
        found = mcp_server_config_errors(candidate, headers=headers, warnings=self.warnings)
        for field, message in found.items():
            self.add_error(field if field in self.fields else None, message)
        return data


def _tools_table(tools: list[dict[str, Any]]) -> str:
    if not tools:
        return "No tools listed yet: save, then Check."
    rows = format_html_join(
        "",
        "<tr><td><code>{}</code></td><td>{}</td><td><code>{}</code></td></tr>",
        (
            (
                entry["name"],
                entry.get("description", ""),
                ", ".join(sorted((entry.get("input_schema") or {}).get("properties") or {}))[:300],
            )
            for entry in tools
        ),
    )
    return format_html(
        "<table><thead><tr><th>tool</th><th>description</th><th>arguments</th></tr></thead>"
        "<tbody>{}</tbody></table>",
        rows,
    )


def _changes_text(changes: dict[str, list[str]]) -> str:
    parts = [
        f"{label}: {', '.join(changes[key])}"
        for key, label in (("added", "added"), ("removed", "removed"), ("changed", "changed"))
        if changes.get(key)
    ]
    return "; ".join(parts)


@admin.register(McpServer)
class McpServerAdmin(TeamAdmin):
    """A team's admins configure its servers; shared ones (no team) are read-only to them."""

    form = McpServerForm
    team_path = "team"
    change_form_template = "admin/agents/mcpserver/change_form.html"
    list_display = ("slug", "name", "team", "transport", "where", "tool_count", "health_status")
    list_filter = ("health", "transport")
    list_select_related = ("team",)
    search_fields = ("slug", "name", "url", "command")
    readonly_fields = (
        "secrets_state",
        "health_status",
        "health_error",
        "health_checked_at",
        "tools_listed",
        "tools_changed",
        "tools_checked_at",
    )
    actions = ["check_servers"]

    class Media:
        css = {"all": ["css/admin_health.css"]}

    fieldsets = (
        (None, {"fields": ("slug", "name", "team", "transport", "url", "command")}),
        (
            "Authentication (HTTP)",
            {"fields": ("secrets_state", "token", "clear_token", "headers", "clear_headers")},
        ),
        ("Timing", {"fields": ("timeout_seconds",)}),
        ("Health", {"fields": ("health_status", "health_error", "health_checked_at")}),
        ("Tools", {"fields": ("tools_listed", "tools_changed", "tools_checked_at")}),
    )

    @admin.display(description="URL or command")
    def where(self, obj: McpServer) -> str:
        return obj.url if obj.transport == McpServer.Transport.HTTP else f"command {obj.command}"

    @admin.display(description="tools")
    def tool_count(self, obj: McpServer) -> int:
        return len(obj.tools or [])

    @admin.display(description="stored secrets")
    def secrets_state(self, obj: McpServer) -> str:
        token = "a token is stored (hidden)" if obj.has_token else "no token"
        headers = "headers are stored (hidden)" if obj.has_headers else "no extra headers"
        return f"{token}; {headers}."

    @admin.display(description="health", ordering="health")
    def health_status(self, obj: McpServer) -> str:
        return format_html(
            '<span class="health-badge health-{}">{}</span>', obj.health, obj.get_health_display()
        )

    @admin.display(description="tools listed by the last check")
    def tools_listed(self, obj: McpServer) -> str:
        return _tools_table(list(obj.tools or []))

    @admin.display(description="changed since the check before")
    def tools_changed(self, obj: McpServer) -> str:
        return _changes_text(obj.tools_changes or {}) or "Nothing changed."

    def save_model(self, request: Any, obj: McpServer, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if data.get("token"):
            obj.set_token(data["token"])
        elif data.get("clear_token"):
            obj.token_encrypted = ""
        if data.get("headers"):
            obj.set_headers(data["headers"])
        elif data.get("clear_headers"):
            obj.headers_encrypted = ""
        super().save_model(request, obj, form, change)
        for warning in getattr(form, "warnings", []):
            self.message_user(request, f"{obj.slug}: {warning}", messages.WARNING)

    # --- the check ---------------------------------------------------------------------------

    def _check(self, request: HttpRequest, server: McpServer) -> McpCheckResult:
        result = mcp_check(server=server, actor=self._actor(request))
        if not result.ok:
            self.message_user(request, f"{server.slug}: failing — {result.error}", messages.ERROR)
            return result
        names = ", ".join(entry["name"] for entry in result.tools) or "none"
        changed = _changes_text(result.changes)
        self.message_user(
            request,
            f"{server.slug}: healthy — {len(result.tools)} tools: {names}."
            + (f" Changed since the last check: {changed}." if changed else ""),
            messages.SUCCESS,
        )
        for skipped in result.skipped:
            self.message_user(request, f"{server.slug}: not offered: {skipped}.", messages.WARNING)
        return result

    @admin.action(description="Check (list the servers' tools)", permissions=["change"])
    def check_servers(self, request: HttpRequest, queryset: Any) -> None:
        for server in queryset:
            if self.has_change_permission(request, server):
                self._check(request, server)
            else:
                self.message_user(
                    request, f"{server.slug}: you do not configure it; not checked.", messages.ERROR
                )

    def get_urls(self) -> list[Any]:
        custom = [
            path(
                "<path:object_id>/check/",
                self.admin_site.admin_view(self.check_view),
                name="agents_mcpserver_check",
            )
        ]
        return custom + super().get_urls()

    def check_view(self, request: HttpRequest, object_id: str) -> HttpResponseRedirect:
        server = self.get_object(request, object_id)
        if server is None:
            raise Http404("no such MCP server")
        back = HttpResponseRedirect(reverse("admin:agents_mcpserver_change", args=[server.pk]))
        if request.method != "POST":
            return back
        if not self.has_change_permission(request, server):
            raise PermissionDenied
        self._check(request, server)
        return back
