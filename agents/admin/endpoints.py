"""Admin for remote endpoints: a write-only bearer token, validation that says what to fix
(including the SSRF guard), health columns and a "Check health" action and button."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html

from agents.admin.base import TeamAdmin
from agents.models import RemoteEndpoint
from agents.services.endpoints import endpoint_check, endpoint_config_errors

FORM_FIELDS = (
    "slug",
    "name",
    "team",
    "backend",
    "base_url",
    "target",
    "timeout_ms",
    "poll_interval_ms",
    "history_length",
)


class RemoteEndpointForm(forms.ModelForm):
    base_url = forms.URLField(
        label="Base URL",
        max_length=200,
        assume_scheme="https",
        help_text=(
            "The remote agent's base URL, where its agent card is served; runs use the "
            "JSON-RPC or HTTP+JSON interface the card offers. A host that resolves to a "
            "private, loopback or link-local address is refused unless "
            "AWAKEN_ENDPOINTS_ALLOW_PRIVATE is set; one that does not resolve yet is saved "
            "with a warning (its health check says it is unreachable)."
        ),
    )
    token = forms.CharField(
        label="Bearer token",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=(
            "Write-only: stored encrypted and never shown again. Leave blank to keep the "
            "current token."
        ),
    )
    clear_token = forms.BooleanField(
        label="Remove the stored token",
        required=False,
        help_text="Call the endpoint without authentication.",
    )

    class Meta:
        model = RemoteEndpoint
        fields = FORM_FIELDS

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        token = data.get("token") or ""
        if token and data.get("clear_token"):
            self.add_error("clear_token", "Either enter a new token or remove it, not both.")
            return data
        if any(name in self.errors for name in FORM_FIELDS):
            return data  # fix the basic field errors first
        candidate = RemoteEndpoint(token_encrypted=self.instance.token_encrypted)
        for name in FORM_FIELDS:
            setattr(candidate, name, data.get(name))
        effective = token if token else ("" if data.get("clear_token") else None)
        self.warnings: list[str] = []  # shown once saved (a host that does not resolve yet)
        found = endpoint_config_errors(candidate, token=effective, warnings=self.warnings)
        for field, message in found.items():
            self.add_error(None if field == "__all__" else field, message)
        return data


def _health_badge(endpoint: RemoteEndpoint) -> str:
    # coloured by static/css/admin_health.css: no inline style under the page's CSP
    return format_html(
        '<span class="health-badge health-{}">{}</span>',
        endpoint.health,
        endpoint.get_health_display(),
    )


@admin.register(RemoteEndpoint)
class RemoteEndpointAdmin(TeamAdmin):
    """A team's admins configure its endpoints; shared ones (no team) are read-only to
    them."""

    form = RemoteEndpointForm
    team_path = "team"
    change_form_template = "admin/agents/remoteendpoint/change_form.html"
    list_display = (
        "slug",
        "name",
        "team",
        "backend",
        "base_url",
        "token_stored",
        "health_status",
        "health_checked_at",
        "health_problem",
    )
    list_filter = ("health", "backend")
    list_select_related = ("team",)
    search_fields = ("slug", "name", "base_url")
    readonly_fields = ("token_state", "health_status", "health_error", "health_checked_at")
    actions = ["check_health"]

    class Media:
        css = {"all": ["css/admin_health.css"]}

    fieldsets = (
        (None, {"fields": ("slug", "name", "team", "backend", "base_url", "target")}),
        ("Authentication", {"fields": ("token_state", "token", "clear_token")}),
        ("Timing", {"fields": ("timeout_ms", "poll_interval_ms", "history_length")}),
        ("Health", {"fields": ("health_status", "health_error", "health_checked_at")}),
    )

    @admin.display(boolean=True, description="token")
    def token_stored(self, obj: RemoteEndpoint) -> bool:
        return obj.has_token

    @admin.display(description="stored token")
    def token_state(self, obj: RemoteEndpoint) -> str:
        return "A token is stored (hidden)." if obj.has_token else "No token stored."

    @admin.display(description="health", ordering="health")
    def health_status(self, obj: RemoteEndpoint) -> str:
        return _health_badge(obj)

    @admin.display(description="last error")
    def health_problem(self, obj: RemoteEndpoint) -> str:
        error = obj.health_error or ""
        return error if len(error) <= 120 else error[:117] + "…"

    def save_model(self, request: Any, obj: RemoteEndpoint, form: Any, change: bool) -> None:
        token = form.cleaned_data.get("token") or ""
        if token:
            obj.set_token(token)
        elif form.cleaned_data.get("clear_token"):
            obj.token_encrypted = ""
        super().save_model(request, obj, form, change)
        for warning in getattr(form, "warnings", []):
            self.message_user(request, f"{obj.slug}: {warning}", messages.WARNING)

    # --- health checks ---------------------------------------------------------------------------

    def _check(self, request: HttpRequest, endpoint: RemoteEndpoint) -> None:
        result = endpoint_check(endpoint=endpoint, actor=self._actor(request))
        if result.ok:
            self.message_user(
                request,
                f"{endpoint.slug}: healthy — agent card '{result.card_name}', "
                f"speaking {result.transport}.",
                messages.SUCCESS,
            )
        else:
            self.message_user(request, f"{endpoint.slug}: failing — {result.error}", messages.ERROR)

    @admin.action(
        description="Check health (fetch the agent card, call its transport)",
        permissions=["change"],
    )
    def check_health(self, request: HttpRequest, queryset: Any) -> None:
        for endpoint in queryset:
            if self.has_change_permission(request, endpoint):
                self._check(request, endpoint)
            else:
                self.message_user(
                    request,
                    f"{endpoint.slug}: you do not configure it; not checked.",
                    messages.ERROR,
                )

    def get_urls(self) -> list[Any]:
        custom = [
            path(
                "<path:object_id>/check-health/",
                self.admin_site.admin_view(self.check_health_view),
                name="agents_remoteendpoint_check_health",
            )
        ]
        return custom + super().get_urls()

    def check_health_view(self, request: HttpRequest, object_id: str) -> HttpResponseRedirect:
        endpoint = self.get_object(request, object_id)
        if endpoint is None:
            raise Http404("no such remote endpoint")
        if request.method != "POST":
            return HttpResponseRedirect(
                reverse("admin:agents_remoteendpoint_change", args=[endpoint.pk])
            )
        if not self.has_change_permission(request, endpoint):
            raise PermissionDenied
        self._check(request, endpoint)
        return HttpResponseRedirect(
            reverse("admin:agents_remoteendpoint_change", args=[endpoint.pk])
        )
