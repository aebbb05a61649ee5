"""The notification channels' forms (docs/notifications.md), beside the routes: a
channel belongs to no team, so site-wide admins create, change and delete them; everyone
who may read channels sees them listed on the routes page. The URL (it may carry a token)
and the signing secret are write-only, as in the admin: stored encrypted, never shown
again, kept when left blank; a generated secret is shown once, on the page after saving.
The form is the admin's (runs/operations/notification_forms.py); every change is audited."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from common.access import site_wide
from common.audit import request_actor
from runs.operations.models.notifications import NotificationChannel
from runs.operations.notification_forms import NotificationChannelForm
from runs.operations.services.notification_routes import channel_delete, channel_save
from runs.permissions import forbidden, require

VIEW = "operations.view_notificationchannel"
ADD = "operations.add_notificationchannel"
CHANGE = "operations.change_notificationchannel"
DELETE = "operations.delete_notificationchannel"
SECRETS = ("url", "signing_secret", "bot_token")
WORDS = {
    "name": ("Name", "Shown in routes and logs."),
    "kind": ("Kind", ""),
    "email_to": ("Recipients", "Email channels: addresses, comma-separated."),
}


class ChannelForm(NotificationChannelForm):
    """The admin's channel form, its fields in plain words."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, (label, help_text) in WORDS.items():
            self.fields[name].label, self.fields[name].help_text = label, help_text
        self.fields["email_to"].widget.attrs["rows"] = 2


def _form_page(
    request: HttpRequest,
    form: NotificationChannelForm,
    channel: NotificationChannel | None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "nav": "notifications",
        "form": form,
        "channel": channel,
        "action": reverse("runs:notification-channel-edit", args=[channel.pk])
        if channel is not None
        else reverse("runs:notification-channel-new"),
    }
    response = render(request, "runs/routes/channel_form.html", context, status=status)
    response["Cache-Control"] = "no-store"  # what was typed (never a stored secret)
    return response


def _save(
    request: HttpRequest, form: NotificationChannelForm, channel: NotificationChannel | None
) -> HttpResponse:
    if not form.is_valid():
        return _form_page(request, form, channel, status=400)
    saved = channel_save(form.save(commit=False), request_actor(request, "ui"))
    secret = getattr(form, "generated_secret", "")
    if not secret:
        messages.success(request, f"Saved the channel {saved.name}.")
        return redirect("runs:notification-routes")
    context = {"nav": "notifications", "channel": saved, "secret": secret}
    response = render(request, "runs/routes/channel_secret.html", context)
    response["Cache-Control"] = "no-store"  # the secret is on this page, once
    return response


@require_http_methods(["GET", "POST"])
@sensitive_post_parameters(*SECRETS)
def channel_new(request: HttpRequest) -> HttpResponse:
    if not site_wide(request.user, ADD):
        return forbidden(request, "create notification channels (site-wide admins do)")
    if request.method != "POST":
        return _form_page(request, ChannelForm(initial={"kind": "webhook"}), None)
    return _save(request, ChannelForm(request.POST), None)


def _channel(request: HttpRequest, channel_id: int) -> NotificationChannel:
    return get_object_or_404(NotificationChannel, pk=channel_id)


@require_http_methods(["GET", "POST"])
@sensitive_post_parameters(*SECRETS)
@require(VIEW, "see notification channels")
def channel_edit(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = _channel(request, channel_id)
    if not site_wide(request.user, CHANGE):
        return forbidden(request, "change notification channels (site-wide admins do)")
    if request.method != "POST":
        return _form_page(request, ChannelForm(instance=channel), channel)
    return _save(request, ChannelForm(request.POST, instance=channel), channel)


@require_POST
@require(VIEW, "see notification channels")
def channel_delete_view(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = _channel(request, channel_id)
    if not site_wide(request.user, DELETE):
        return forbidden(request, "delete notification channels (site-wide admins do)")
    routes = channel_delete(channel, request_actor(request, "ui"))
    gone = f" and its {routes} route(s)" if routes else ""
    messages.success(request, f"Deleted the channel {channel.name}{gone}.")
    return redirect("runs:notification-routes")
