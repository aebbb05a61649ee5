"""Notifications: where they go (channels), which events go where (rules set by admins,
subscriptions set by each operator), and the durable outbox of deliveries a Celery task
drains with retries (docs/notifications.md)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from runs.fields import uuid7_default


class NotificationEvent(models.TextChoices):
    TICKET_OPENED = "ticket.opened", "a ticket opens"
    TICKET_DEADLINE_NEAR = "ticket.deadline_near", "a ticket's deadline nears"
    RUN_FAILED = "run.failed", "a run fails"
    RUN_GIVEN_UP = "run.given_up", "a run is given up after repeated crashes"
    FAILURE_GROUP_NEW = (
        "failure_group.new",
        "a new kind of failure appears (or a resolved one again)",
    )
    BUDGET_WARNING = "budget.warning", "a budget's spend reaches its warning level"
    # not routed by rules or subscriptions: queued for the Slack app channels that posted
    # a ticket's message, to update it once the ticket is decided, expires or is cancelled
    TICKET_CLOSED = "ticket.closed", "a ticket posted to Slack is closed (its message updated)"


# what rules and subscriptions may route (ticket.closed only follows a Slack message)
ROUTABLE_EVENT_CHOICES = [
    (value, label) for value, label in NotificationEvent.choices if value != "ticket.closed"
]


class NotificationChannel(models.Model):
    """One destination: a signed JSON webhook, a Slack-compatible incoming webhook, a
    Slack app (a bot posting to one Slack channel, with Approve / Reject / Answer buttons
    on tickets: docs/approvals-slack-email.md), or email to fixed addresses. The URL (it
    may carry a token), the signing secret and the bot token are stored encrypted and
    never shown again."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook", "Webhook (signed JSON)"
        SLACK = "slack", "Slack incoming webhook"
        SLACK_APP = "slack_app", "Slack app (buttons to decide tickets)"
        EMAIL = "email", "Email"

    name = models.CharField(max_length=100, unique=True, help_text="Shown in rules and logs.")
    kind = models.CharField(max_length=10, choices=Kind.choices, help_text="How it delivers.")
    url_encrypted = models.TextField(
        blank=True,
        editable=False,
        help_text="Webhook URL, encrypted at rest (it may carry a token).",
    )
    url_display = models.CharField(
        max_length=300,
        blank=True,
        help_text="The URL's scheme and host, for lists and logs (no path, no token).",
    )
    signing_secret_encrypted = models.TextField(
        blank=True,
        editable=False,
        help_text="HMAC-SHA256 signing secret for webhooks (for a Slack app: the app's "
        "signing secret, which Slack signs its requests with), encrypted at rest.",
    )
    bot_token_encrypted = models.TextField(
        blank=True,
        editable=False,
        help_text="Slack app: the bot token (xoxb-...), encrypted at rest.",
    )
    slack_channel = models.CharField(
        max_length=100,
        blank=True,
        help_text="Slack app: the Slack channel's id (C0123...) the bot posts to.",
    )
    email_to = models.TextField(blank=True, help_text="Email channel: recipients, comma-separated.")
    enabled = models.BooleanField(default=True, help_text="Disabled channels get nothing.")
    created_at = models.DateTimeField(default=timezone.now, help_text="Created at.")
    updated_at = models.DateTimeField(default=timezone.now, help_text="Last changed at.")

    class Meta:
        app_label = "operations"
        db_table = "runs_notificationchannel"  # its table from when it was the core's
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class NotificationRule(models.Model):
    """Routing set by admins: events of an agent (or any) and a tool pattern (or any) go
    to a channel."""

    channel = models.ForeignKey(
        NotificationChannel,
        on_delete=models.CASCADE,
        related_name="rules",
        help_text="Where matching events go.",
    )
    events = models.JSONField(
        default=list, blank=True, help_text="Event names it routes; empty: every event."
    )
    agent = models.ForeignKey(
        "agents.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="Only this agent's runs; empty: every agent.",
    )
    tool = models.CharField(
        max_length=200,
        blank=True,
        help_text="Only tickets for tools matching this glob (send_*); empty: any.",
    )
    enabled = models.BooleanField(default=True, help_text="Disabled rules route nothing.")
    created_at = models.DateTimeField(default=timezone.now, help_text="Created at.")

    class Meta:
        app_label = "operations"
        db_table = "runs_notificationrule"  # its table from when it was the core's
        ordering = ["channel__name", "id"]

    def __str__(self) -> str:
        return f"rule {self.pk} -> {self.channel.name}"


class NotificationSubscription(models.Model):
    """What one operator wants to hear about, by email to their own address."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="notification_subscriptions",
        help_text="Subscriber (gets email at their account's address).",
    )
    events = models.JSONField(
        default=list, blank=True, help_text="Event names; empty: every event."
    )
    agent = models.ForeignKey(
        "agents.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="Only this agent's runs; empty: every agent.",
    )
    tool = models.CharField(
        max_length=200, blank=True, help_text="Only tools matching this glob; empty: any."
    )
    created_at = models.DateTimeField(default=timezone.now, help_text="Subscribed at.")

    class Meta:
        app_label = "operations"
        db_table = "runs_notificationsubscription"  # its table from when it was the core's
        ordering = ["user_id", "id"]

    def __str__(self) -> str:
        return f"subscription {self.pk} of user {self.user_id}"


class NotificationDelivery(models.Model):
    """One notification to one destination (a channel, or a subscriber's email): the
    outbox row, written in the transaction of the event it tells about, then sent with
    retries until delivered or out of attempts. (destination, event, subject) is unique,
    so an event is queued once however often its transaction is retried."""

    class Status(models.TextChoices):
        PENDING = "pending"  # waiting for its next attempt
        SENDING = "sending"  # taken by a drainer until next_attempt_at (a lease)
        DELIVERED = "delivered"
        FAILED = "failed"  # out of attempts (an admin may redeliver)

    id = models.UUIDField(
        primary_key=True, default=uuid7_default, editable=False, help_text="Delivery id."
    )
    # No database constraint on either destination: a checkpoint queues a delivery to
    # the channels it read in its own transaction, and an admin deleting one of them
    # meanwhile must not make that checkpoint fail at commit. Deleting a channel or a
    # user still deletes its deliveries (Django's cascade); a delivery queued in that
    # moment finds its destination gone and fails for good when it is sent.
    channel = models.ForeignKey(
        NotificationChannel,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        db_constraint=False,
        related_name="deliveries",
        help_text="Channel it goes to (or a subscriber).",
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        db_constraint=False,
        related_name="+",
        help_text="Subscriber it goes to by email (or a channel).",
    )
    event = models.CharField(
        max_length=40, choices=NotificationEvent.choices, help_text="What happened."
    )
    subject = models.CharField(
        max_length=100, help_text="What it is about: ticket:<id> or run:<id>."
    )
    payload = models.JSONField(help_text="The event's body as sent (without secrets).")
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, help_text="Where it is."
    )
    attempts = models.PositiveIntegerField(default=0, help_text="Attempts made so far.")
    next_attempt_at = models.DateTimeField(
        default=timezone.now,
        help_text="Pending: when to try next. Sending: when the drainer's lease lapses.",
    )
    last_attempt_at = models.DateTimeField(null=True, blank=True, help_text="Last try at.")
    response_code = models.PositiveIntegerField(
        null=True, blank=True, help_text="HTTP status of the last attempt."
    )
    last_error = models.TextField(blank=True, help_text="Why the last attempt failed.")
    created_at = models.DateTimeField(default=timezone.now, help_text="Queued at.")
    delivered_at = models.DateTimeField(null=True, blank=True, help_text="Delivered at.")

    class Meta:
        app_label = "operations"
        db_table = "runs_notificationdelivery"  # its table from when it was the core's
        ordering = ["-created_at"]
        verbose_name_plural = "notification deliveries"
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(status__in=["pending", "sending"]),
                name="notification_due_idx",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["channel", "event", "subject"],
                condition=models.Q(channel__isnull=False),
                name="notification_once_per_channel",
            ),
            models.UniqueConstraint(
                fields=["user", "event", "subject"],
                condition=models.Q(user__isnull=False),
                name="notification_once_per_user",
            ),
            models.CheckConstraint(
                condition=models.Q(channel__isnull=False) ^ models.Q(user__isnull=False),
                name="notification_one_destination",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.subject} ({self.status})"


class NotificationCircuit(models.Model):
    """Per destination (a channel, or a subscriber's email): the circuit breaker and the
    drainer that sends to it now. After AWAKEN_NOTIFY_CIRCUIT_FAILURES failed attempts in
    a row the circuit opens: its deliveries stay pending, unattempted, until
    `open_until`, then one drainer tries again. One drainer at a time sends to a
    destination (`busy_until`, a lease), so a receiver that hangs holds one sender."""

    destination = models.CharField(
        max_length=40, unique=True, help_text="channel:<id> or user:<id>."
    )
    failures = models.PositiveIntegerField(default=0, help_text="Failed attempts in a row.")
    open_until = models.DateTimeField(
        null=True, blank=True, help_text="Open: nothing is sent to it before this time."
    )
    busy_until = models.DateTimeField(
        null=True, blank=True, help_text="A drainer sends to it until this time (its lease)."
    )
    last_error = models.TextField(blank=True, help_text="Why the last failed attempt failed.")
    last_failure_at = models.DateTimeField(null=True, blank=True, help_text="Last failure.")
    last_success_at = models.DateTimeField(null=True, blank=True, help_text="Last delivery.")

    class Meta:
        app_label = "operations"
        db_table = "runs_notificationcircuit"  # its table from when it was the core's
        ordering = ["destination"]

    def __str__(self) -> str:
        return self.destination

    def is_open(self, now: Any = None) -> bool:
        return self.open_until is not None and self.open_until > (now or timezone.now())
