"""The notification forms the admin and the notification routes pages share
(docs/notifications.md): channels with a write-only URL and signing secret (stored
encrypted, never shown again; a generated secret is shown once), and routing rules and
subscriptions whose events and tool pattern are checked by the service (`route_errors`)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.utils import timezone

from runs.operations.models.notifications import (
    ROUTABLE_EVENT_CHOICES,
    NotificationChannel,
    NotificationRule,
    NotificationSubscription,
)
from runs.operations.services.notifications import route_errors
from runs.operations.services.notify_send import (
    channel_set_secret,
    channel_set_url,
    new_signing_secret,
    target_url_error,
)
from runs.operations.services.notify_slack import channel_set_bot_token

MIN_SECRET_CHARS = 16
WRITE_ONLY = forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"})


def email_list(raw: str) -> list[str]:
    return [address.strip() for address in (raw or "").split(",") if address.strip()]


class NotificationChannelForm(forms.ModelForm):
    url = forms.CharField(
        label="URL",
        required=False,
        strip=True,
        max_length=2000,
        widget=WRITE_ONLY,
        help_text="Webhook and Slack channels: where to POST. Write-only: stored encrypted "
        "(it may carry a token) and never shown again; leave blank to keep the stored one. "
        "Its host must resolve to a public address unless AWAKEN_NOTIFY_ALLOW_PRIVATE is set.",
    )
    signing_secret = forms.CharField(
        label="Signing secret",
        required=False,
        strip=True,
        max_length=500,
        widget=WRITE_ONLY,
        help_text=f"Webhook channels: the HMAC-SHA256 key receivers verify with (at least "
        f"{MIN_SECRET_CHARS} characters). Write-only; leave blank to keep the stored one, or "
        "tick the box below to have one generated.",
    )
    bot_token = forms.CharField(
        label="Bot token",
        required=False,
        strip=True,
        max_length=500,
        widget=WRITE_ONLY,
        help_text="Slack app channels: the bot's token (xoxb-...), with the chat:write scope "
        "(and users:read.email to link users by e-mail). Write-only: stored encrypted, never "
        "shown again; leave blank to keep the stored one.",
    )
    generate_secret = forms.BooleanField(
        label="Generate a new signing secret",
        required=False,
        help_text="It is shown once, on the page after saving. A new webhook channel with "
        "no secret typed gets one generated.",
    )

    class Meta:
        model = NotificationChannel
        fields = ["name", "kind", "enabled", "email_to", "slack_channel"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        kind = data.get("kind")
        url, secret = data.get("url") or "", data.get("signing_secret") or ""
        Kind = NotificationChannel.Kind
        if kind != Kind.SLACK_APP:
            if data.get("bot_token"):
                self.add_error("bot_token", "Only Slack app channels have a bot token.")
            if data.get("slack_channel"):
                self.add_error("slack_channel", "Only Slack app channels post to a Slack channel.")
        if kind == Kind.SLACK_APP:
            self._clean_slack_app(data, url, secret)
            return data
        if kind == Kind.EMAIL:
            self._clean_email(data, url, secret)
        elif kind in (Kind.WEBHOOK, Kind.SLACK):
            if url:
                problem = target_url_error(url)
                if problem:
                    self.add_error("url", problem)
            elif not self.instance.url_encrypted:
                self.add_error("url", "Enter the URL to POST notifications to.")
            if data.get("email_to"):
                self.add_error("email_to", "Only email channels have recipients.")
        if kind == Kind.WEBHOOK:
            if secret and data.get("generate_secret"):
                self.add_error("generate_secret", "Either type a secret or generate one, not both.")
            elif secret and len(secret) < MIN_SECRET_CHARS:
                self.add_error("signing_secret", f"Use at least {MIN_SECRET_CHARS} characters.")
        elif secret or data.get("generate_secret"):
            self.add_error("signing_secret", "Only webhook channels sign what they send.")
        return data

    def _clean_slack_app(self, data: dict[str, Any], url: str, secret: str) -> None:
        if url:
            self.add_error("url", "Slack app channels have no URL: they use the bot token.")
        if data.get("email_to"):
            self.add_error("email_to", "Only email channels have recipients.")
        if data.get("generate_secret"):
            self.add_error("generate_secret", "Slack makes the app's signing secret: paste it.")
        if not data.get("bot_token") and not self.instance.bot_token_encrypted:
            self.add_error("bot_token", "Enter the bot token (xoxb-...).")
        if not secret and not self.instance.signing_secret_encrypted:
            self.add_error("signing_secret", "Enter the Slack app's signing secret.")
        if not (data.get("slack_channel") or "").strip():
            self.add_error("slack_channel", "Enter the Slack channel's id (C0123...).")

    def _clean_email(self, data: dict[str, Any], url: str, secret: str) -> None:
        recipients = email_list(data.get("email_to") or "")
        if not recipients:
            self.add_error("email_to", "Enter one or more addresses, comma-separated.")
        for address in recipients:
            try:
                validate_email(address)
            except ValidationError:
                self.add_error("email_to", f"'{address}' is not an email address.")
        data["email_to"] = ", ".join(recipients)
        if url:
            self.add_error("url", "Email channels have no URL.")
        if secret:
            self.add_error("signing_secret", "Only webhook channels sign what they send.")

    def save(self, commit: bool = True) -> NotificationChannel:
        channel: NotificationChannel = super().save(commit=False)
        data = self.cleaned_data
        self.generated_secret = ""
        if channel.kind != NotificationChannel.Kind.SLACK_APP:
            channel.bot_token_encrypted, channel.slack_channel = "", ""
        if channel.kind == NotificationChannel.Kind.EMAIL:
            channel_set_url(channel, "")
            channel_set_secret(channel, "")
        elif channel.kind == NotificationChannel.Kind.SLACK_APP:
            channel_set_url(channel, "")
            channel.slack_channel = channel.slack_channel.strip()
            if data.get("bot_token"):
                channel_set_bot_token(channel, data["bot_token"])
            if data.get("signing_secret"):
                channel_set_secret(channel, data["signing_secret"])
        else:
            if data.get("url"):
                channel_set_url(channel, data["url"])
            if channel.kind == NotificationChannel.Kind.SLACK:
                channel_set_secret(channel, "")
            elif data.get("signing_secret"):
                channel_set_secret(channel, data["signing_secret"])
            elif data.get("generate_secret") or not channel.signing_secret_encrypted:
                self.generated_secret = new_signing_secret()
                channel_set_secret(channel, self.generated_secret)
        channel.updated_at = timezone.now()
        if commit:
            channel.save()
        return channel


class RouteForm(forms.ModelForm):
    """Events as checkboxes (none: every event), an agent (none: every agent) and a tool
    glob (ticket events only)."""

    events = forms.MultipleChoiceField(
        choices=ROUTABLE_EVENT_CHOICES,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every event.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        data["tool"] = (data.get("tool") or "").strip()
        for field, message in route_errors(list(data.get("events") or []), data["tool"]).items():
            self.add_error(field, message)
        return data


class NotificationRuleForm(RouteForm):
    class Meta:
        model = NotificationRule
        fields = ["channel", "events", "agent", "tool", "enabled"]


class NotificationSubscriptionForm(RouteForm):
    class Meta:
        model = NotificationSubscription
        fields = ["user", "events", "agent", "tool"]


def events_label(events: list[str]) -> str:
    return ", ".join(events) if events else "every event"
