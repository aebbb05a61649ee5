"""Admin for notifications (docs/notifications.md): channels with a write-only URL and
signing secret (a generated secret is shown once, on the page after saving), routing
rules (their forms in runs/operations/notification_forms.py, shared with the routes pages), operators' subscriptions, and the read-only delivery log with a "Redeliver" action
(audited; it needs the permission to change channels)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import CharField, OuterRef, Subquery, Value
from django.db.models.functions import Cast, Concat
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.views.decorators.debug import sensitive_post_parameters

from agents.admin.base import TeamAdmin, VisibleRelatedFilter
from common.access import site_wide
from common.audit import request_actor
from common.errors import ServiceError
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationCircuit,
    NotificationDelivery,
    NotificationRule,
    NotificationSubscription,
)
from runs.operations.notification_forms import (
    NotificationChannelForm,
    NotificationRuleForm,
    NotificationSubscriptionForm,
    events_label,
)
from runs.operations.services.notifications import delivery_redeliver

MAX_REDELIVER = 500
GENERATED_SECRET = "_awaken_generated_secret"  # request attribute: the page shows it once


def with_circuit(channels: Any) -> Any:
    """Channels with their circuit's state (docs/notifications.md), in the same query."""
    circuit = NotificationCircuit.objects.filter(
        destination=Concat(Value("channel:"), Cast(OuterRef("pk"), CharField()))
    )
    return channels.annotate(
        circuit_open_until=Subquery(circuit.values("open_until")[:1]),
        circuit_failures=Subquery(circuit.values("failures")[:1]),
        circuit_error=Subquery(circuit.values("last_error")[:1]),
    )


def circuit_state(open_until: Any, failures: int, error: str) -> str:
    excerpt = error if len(error) <= 120 else error[:117] + "…"
    if open_until is not None and open_until > timezone.now():
        when = timezone.localtime(open_until).strftime("%Y-%m-%d %H:%M:%S")
        return f"paused until {when} after {failures} failures in a row: {excerpt}"
    if failures:
        return f"{failures} failed attempt(s) in a row: {excerpt}"
    return "ok"


@admin.register(NotificationChannel)
class NotificationChannelAdmin(TeamAdmin):
    """Channels belong to no team: shared, configured by site-wide admins; team admins
    see them (to route their agents' events to one)."""

    form = NotificationChannelForm
    team_path = None
    list_display = ("name", "kind", "target", "secret_stored", "enabled", "sending", "updated_at")
    list_filter = ("kind", "enabled")
    search_fields = ("name", "url_display", "email_to")
    readonly_fields = ("url_state", "secret_state", "sending", "created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("name", "kind", "enabled", "sending")}),
        ("Webhook and Slack", {"fields": ("url_state", "url")}),
        ("Signing (webhooks)", {"fields": ("secret_state", "signing_secret", "generate_secret")}),
        ("Slack app", {"fields": ("bot_token", "slack_channel")}),
        ("Email", {"fields": ("email_to",)}),
        ("Record", {"fields": ("created_at", "updated_at")}),
    )

    def get_queryset(self, request: HttpRequest) -> Any:
        return with_circuit(super().get_queryset(request))

    @admin.display(description="sending")
    def sending(self, obj: NotificationChannel) -> str:
        """Its circuit breaker (docs/notifications.md): open (nothing sent until a time),
        failing (failed attempts in a row) or ok."""
        return circuit_state(
            getattr(obj, "circuit_open_until", None),
            getattr(obj, "circuit_failures", None) or 0,
            getattr(obj, "circuit_error", None) or "",
        )

    @admin.display(description="target")
    def target(self, obj: NotificationChannel) -> str:
        return obj.email_to if obj.kind == NotificationChannel.Kind.EMAIL else obj.url_display

    @admin.display(boolean=True, description="secret")
    def secret_stored(self, obj: NotificationChannel) -> bool:
        return bool(obj.signing_secret_encrypted)

    @admin.display(description="stored URL")
    def url_state(self, obj: NotificationChannel) -> str:
        if obj.url_encrypted:
            return f"{obj.url_display}/… (stored encrypted; never shown)"
        return "None stored."

    @admin.display(description="stored secret")
    def secret_state(self, obj: NotificationChannel) -> str:
        return "Stored (encrypted; never shown)." if obj.signing_secret_encrypted else "None."

    @method_decorator(sensitive_post_parameters("url", "signing_secret", "bot_token"))
    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> Any:
        return super().changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request: Any, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        setattr(request, GENERATED_SECRET, getattr(form, "generated_secret", ""))

    def _secret_page(self, request: HttpRequest, obj: NotificationChannel) -> HttpResponse:
        response = render(
            request,
            "admin/operations/notificationchannel/secret_shown.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "channel": obj,
                "secret": getattr(request, GENERATED_SECRET),
                "change_url": reverse("admin:operations_notificationchannel_change", args=[obj.pk]),
                "list_url": reverse("admin:operations_notificationchannel_changelist"),
                "title": f"Signing secret of {obj.name}",
            },
        )
        response["Cache-Control"] = "no-store"  # the secret is on this page, once
        return response

    def response_add(self, request: Any, obj: Any, post_url_continue: Any = None) -> Any:
        if getattr(request, GENERATED_SECRET, ""):
            return self._secret_page(request, obj)
        return super().response_add(request, obj, post_url_continue)

    def response_change(self, request: Any, obj: Any) -> Any:
        if getattr(request, GENERATED_SECRET, ""):
            return self._secret_page(request, obj)
        return super().response_change(request, obj)


@admin.register(NotificationRule)
class NotificationRuleAdmin(TeamAdmin):
    """A rule for one agent belongs to the agent's team; a rule for every agent is
    shared (site-wide admins)."""

    form = NotificationRuleForm
    team_path = "agent__team"
    list_display = ("id", "channel", "event_list", "agent", "tool", "enabled")
    list_filter = ("enabled", "channel", ("agent", VisibleRelatedFilter))
    list_select_related = ("channel", "agent")

    @admin.display(description="events")
    def event_list(self, obj: NotificationRule) -> str:
        return events_label(obj.events)


@admin.register(NotificationSubscription)
class NotificationSubscriptionAdmin(TeamAdmin):
    form = NotificationSubscriptionForm
    team_path = "agent__team"
    list_display = ("id", "user", "event_list", "agent", "tool", "created_at")
    list_filter = (("agent", VisibleRelatedFilter),)
    list_select_related = ("user", "agent")
    search_fields = ("user__username", "user__email")

    @admin.display(description="events")
    def event_list(self, obj: NotificationSubscription) -> str:
        return events_label(obj.events)


@admin.register(NotificationDelivery)
class NotificationDeliveryAdmin(admin.ModelAdmin):
    """The delivery log: read-only; "Redeliver" queues delivered or failed ones again."""

    list_display = (
        "created_at",
        "event",
        "subject",
        "run_link",
        "destination",
        "status",
        "attempts",
        "response_code",
        "error_excerpt",
        "last_attempt_at",
        "next_attempt_at",
        "delivered_at",
    )
    list_filter = ("status", "event", "channel")
    list_select_related = ("channel", "user")
    search_fields = ("=id", "subject")
    ordering = ("-id",)  # ids are UUID v7: newest first, through the primary key
    show_full_result_count = False
    actions = ["redeliver"]

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: Any, obj: Any = None) -> bool:
        """Deliveries tell about every team's runs: site-wide roles only."""
        return site_wide(request.user, "operations.view_notificationdelivery")

    def has_redeliver_permission(self, request: HttpRequest) -> bool:
        return site_wide(request.user, "operations.change_notificationchannel")

    @admin.display(description="destination")
    def destination(self, obj: NotificationDelivery) -> str:
        if obj.channel is not None:
            return str(obj.channel.name)
        return f"user {obj.user.get_username()}" if obj.user is not None else "-"

    @admin.display(description="run")
    def run_link(self, obj: NotificationDelivery) -> str:
        run_id = ((obj.payload or {}).get("run") or {}).get("id")
        if not run_id:
            return "-"
        return format_html(
            '<a href="{}">{}</a>', reverse("runs:run-detail", args=[run_id]), str(run_id)[:8]
        )

    @admin.display(description="last error")
    def error_excerpt(self, obj: NotificationDelivery) -> str:
        error = obj.last_error or ""
        return error if len(error) <= 120 else error[:117] + "…"

    @admin.action(description="Redeliver the selected notifications", permissions=["redeliver"])
    def redeliver(self, request: HttpRequest, queryset: Any) -> None:
        deliveries = list(queryset[: MAX_REDELIVER + 1])
        if len(deliveries) > MAX_REDELIVER:
            self.message_user(
                request, f"Select at most {MAX_REDELIVER} to redeliver at once.", messages.ERROR
            )
            return
        actor = request_actor(request, "admin")
        queued = 0
        for delivery in deliveries:
            try:
                delivery_redeliver(delivery, actor)
                queued += 1
            except ServiceError as exc:
                self.message_user(request, exc.message, messages.WARNING)
        if queued:
            self.message_user(request, f"Queued {queued} notification(s) again.", messages.SUCCESS)
