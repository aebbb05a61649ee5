"""Admin for model providers and models.

The API key is write-only: the form never renders it (not even after a validation error),
a blank field keeps the stored key, a checkbox clears it, and the page shows only whether
one is stored. It is encrypted before it reaches the row; audit records say that the key
changed, never what it is. "Test connection" (an action, and a button on the change page)
lists the provider's models through the official SDK and records the provider's health.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from agents.admin.base import TeamAdmin, VisibleRelatedFilter
from agents.models import Model, ModelProvider
from agents.services.providers import provider_address_error, provider_check

# Set by the client from the API key field, or by the HTTP client itself per connection.
CREDENTIAL_HEADERS = {"authorization", "proxy-authorization", "cookie"}
HOP_BY_HOP_HEADERS = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an RFC 9110 token
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_HEADERS = 50
MAX_ACTION_PROVIDERS = 20


def header_errors(headers: Any) -> list[str]:
    """What is wrong with a provider's extra headers, as messages saying what to fix."""
    if not isinstance(headers, dict):
        return ['Headers must be a JSON object of names to values, e.g. {"X-Team": "ops"}.']
    if len(headers) > MAX_HEADERS:
        return [f"At most {MAX_HEADERS} headers."]
    errors: list[str] = []
    for name, value in headers.items():
        lowered = name.lower()
        if not HEADER_NAME.match(name):
            errors.append(
                f"Header name {name!r} is not valid: use letters, digits and - (e.g. X-Team)."
            )
        elif lowered in CREDENTIAL_HEADERS:
            errors.append(
                f"Remove the {name!r} header: credentials go in the API key field, which is "
                "stored encrypted and sent as the Authorization header."
            )
        elif lowered in HOP_BY_HOP_HEADERS:
            errors.append(
                f"Remove the {name!r} header: the HTTP client sets it for each connection."
            )
        if not isinstance(value, str):
            errors.append(f"The value of header {name!r} must be a string, not {value!r}.")
        elif "\r" in value or "\n" in value or len(value) > 4000:
            errors.append(
                f"The value of header {name!r} must be one line of at most 4000 characters."
            )
    return errors


class ModelProviderForm(forms.ModelForm):
    base_url = forms.URLField(
        label="Base URL",
        required=False,
        max_length=200,
        assume_scheme="https",
        help_text="API base URL, e.g. https://api.openai.com/v1 (OpenAI-compatible providers). "
        "Its host must resolve to a public address unless AWAKEN_PROVIDERS_ALLOW_PRIVATE "
        "allows it (a local model server).",
    )
    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        max_length=4000,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    clear_api_key = forms.BooleanField(
        label="Clear the stored key",
        required=False,
        help_text="Remove the stored key (the environment variable, if named, is used instead).",
    )

    class Meta:
        model = ModelProvider
        fields = [
            "slug",
            "name",
            "team",
            "kind",
            "base_url",
            "api_key_env",
            "headers",
            "timeout_seconds",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stored = self.instance.pk is not None and self.instance.has_stored_api_key
        self.fields["api_key"].help_text = (
            "A key is stored (encrypted). Leave blank to keep it; type a new one to replace it."
            if stored
            else "No key is stored. Type one to store it encrypted, or name an environment "
            "variable below; local servers may need none."
        )

    def clean_api_key_env(self) -> str:
        value = (self.cleaned_data.get("api_key_env") or "").strip()
        if value and not ENV_NAME.match(value):
            raise forms.ValidationError(
                f"{value!r} is not an environment variable name: use letters, digits and _, "
                "not starting with a digit (e.g. OPENAI_API_KEY). Put the key itself in the "
                "API key field."
            )
        return value

    def clean_headers(self) -> dict[str, str]:
        headers = self.cleaned_data.get("headers")
        if headers in (None, ""):
            return {}
        errors = header_errors(headers)
        if errors:
            raise forms.ValidationError(errors)
        return dict(headers)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("kind")
        base_url = (data.get("base_url") or "").strip()
        if kind == ModelProvider.Kind.OPENAI and "base_url" not in self.errors:
            if not base_url:
                self.add_error(
                    "base_url",
                    "An OpenAI-compatible provider needs its API base URL, e.g. "
                    "https://api.openai.com/v1 or http://localhost:11434/v1.",
                )
            elif base_url.rstrip("/").endswith(("/chat/completions", "/completions", "/models")):
                self.add_error(
                    "base_url",
                    "Give the API base URL (usually ending in /v1), not an endpoint such as "
                    "/chat/completions.",
                )
        scheme = urlsplit(base_url).scheme
        if base_url and "base_url" not in self.errors and scheme not in ("http", "https"):
            self.add_error("base_url", "Use an http:// or https:// URL.")
        if kind == ModelProvider.Kind.OPENAI and base_url and "base_url" not in self.errors:
            problem = provider_address_error(base_url)  # the SSRF guard, at save time
            if problem:
                self.add_error("base_url", problem)
        if data.get("api_key") and data.get("clear_api_key"):
            self.add_error(
                "clear_api_key", "Either type a new key or clear the stored one, not both."
            )
        return data

    def save(self, commit: bool = True) -> ModelProvider:
        provider: ModelProvider = super().save(commit=False)
        if self.cleaned_data.get("api_key"):
            provider.set_api_key(self.cleaned_data["api_key"])
        elif self.cleaned_data.get("clear_api_key"):
            provider.api_key_encrypted = ""
        if commit:
            provider.save()
        return provider


@admin.register(ModelProvider)
class ModelProviderAdmin(TeamAdmin):
    """A team's admins configure its providers; shared ones (no team) are read-only to
    them."""

    form = ModelProviderForm
    team_path = "team"
    list_display = (
        "slug",
        "name",
        "team",
        "kind",
        "base_url",
        "key_stored",
        "health",
        "health_checked_at",
    )
    list_select_related = ("team",)
    list_filter = ("kind", "health")
    search_fields = ("slug", "name")
    readonly_fields = ("api_key_status", "health", "health_error", "health_checked_at")
    actions = ["test_connection"]
    fieldsets = [
        (None, {"fields": ["slug", "name", "team", "kind"]}),
        (
            "Connection",
            {
                "fields": [
                    "base_url",
                    "api_key_status",
                    "api_key",
                    "clear_api_key",
                    "api_key_env",
                    "headers",
                    "timeout_seconds",
                ]
            },
        ),
        ("Health", {"fields": ["health", "health_error", "health_checked_at"]}),
    ]

    @admin.display(boolean=True, description="key stored")
    def key_stored(self, obj: ModelProvider) -> bool:
        return obj.has_stored_api_key

    @admin.display(description="Stored API key")
    def api_key_status(self, obj: ModelProvider) -> str:
        if obj.pk is not None and obj.has_stored_api_key:
            return "Stored (encrypted at rest; never shown)."
        if obj.api_key_env:
            state = "set" if obj.api_key_env in os.environ else "NOT set"
            return f"None stored; uses the environment variable {obj.api_key_env} ({state})."
        return "None stored."

    @method_decorator(sensitive_post_parameters("api_key"))
    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> Any:
        return super().changeform_view(request, object_id, form_url, extra_context)

    # --- test connection ---------------------------------------------------------------------

    def get_urls(self) -> list[Any]:
        return [
            path(
                "<path:object_id>/test-connection/",
                self.admin_site.admin_view(require_POST(self.test_connection_view)),
                name=f"{self.opts.app_label}_{self.opts.model_name}_test_connection",
            ),
            *super().get_urls(),
        ]

    def _test_one(self, request: HttpRequest, provider: ModelProvider) -> None:
        check = provider_check(provider=provider, actor=self._actor(request))
        if check.ok:
            self.message_user(request, f"{provider.slug}: {check.summary}", messages.SUCCESS)
        else:
            self.message_user(
                request, f"{provider.slug}: connection failed: {check.error}", messages.ERROR
            )

    def test_connection_view(self, request: HttpRequest, object_id: str) -> HttpResponseRedirect:
        provider = self.get_object(request, object_id)
        if provider is None:
            raise Http404("no such model provider")
        if not self.has_change_permission(request, provider):
            raise PermissionDenied
        self._test_one(request, provider)
        change = f"admin:{self.opts.app_label}_{self.opts.model_name}_change"
        return HttpResponseRedirect(reverse(change, args=[quote(provider.pk)]))

    @admin.action(
        description="Test connection (list the provider's models)", permissions=["test_connection"]
    )
    def test_connection(self, request: HttpRequest, queryset: QuerySet[ModelProvider]) -> None:
        providers = list(queryset.order_by("slug")[: MAX_ACTION_PROVIDERS + 1])
        if len(providers) > MAX_ACTION_PROVIDERS:
            self.message_user(
                request,
                f"Select at most {MAX_ACTION_PROVIDERS} providers to test at once.",
                messages.ERROR,
            )
            return
        for provider in providers:
            if self.has_change_permission(request, provider):
                self._test_one(request, provider)
            else:
                self.message_user(
                    request,
                    f"{provider.slug}: you do not configure it; not tested.",
                    messages.ERROR,
                )

    def has_test_connection_permission(self, request: HttpRequest) -> bool:
        return self.has_change_permission(request)  # it records the provider's health


@admin.register(Model)
class ModelAdmin(TeamAdmin):
    """A model belongs to its provider's team (a shared provider's models are shared)."""

    team_path = "provider__team"
    list_display = (
        "slug",
        "provider",
        "upstream_model",
        "context_window",
        "input_price_per_million_usd",
        "output_price_per_million_usd",
    )
    list_select_related = ("provider",)
    list_filter = (("provider", VisibleRelatedFilter),)
    search_fields = ("slug", "upstream_model")
    fieldsets = [
        (None, {"fields": ["slug", "provider", "upstream_model", "context_window"]}),
        (
            "Prices (USD per million tokens; runs show their cost when set)",
            {"fields": ["input_price_per_million_usd", "output_price_per_million_usd"]},
        ),
        ("Scripted models", {"fields": ["script"]}),
    ]
