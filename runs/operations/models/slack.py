"""Slack approvals (docs/approvals-slack-email.md): the messages a Slack app channel
posted about tickets (so that they can be updated when the ticket closes), and which
Slack user is which user here."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class SlackMessage(models.Model):
    """One message a Slack app channel posted about a ticket: where (`slack_channel`,
    `ts`, as chat.postMessage answered), to update it with chat.update once the ticket is
    decided, expires or is cancelled."""

    channel = models.ForeignKey(
        "operations.NotificationChannel",
        on_delete=models.CASCADE,
        related_name="slack_messages",
        help_text="The Slack app channel that posted it.",
    )
    ticket_id = models.UUIDField(
        help_text="The ticket it is about (no foreign key: retention "
        "removes runs without these rows; an update finds the ticket gone)."
    )
    slack_channel = models.CharField(max_length=100, help_text="Slack's channel id.")
    ts = models.CharField(max_length=50, help_text="Slack's message timestamp (its id).")
    posted_at = models.DateTimeField(default=timezone.now, help_text="Posted at.")
    updated_at = models.DateTimeField(null=True, blank=True, help_text="Last updated at.")

    class Meta:
        app_label = "operations"
        ordering = ["posted_at"]
        indexes = [models.Index(fields=["ticket_id", "channel"], name="slack_message_ticket_idx")]
        constraints = [
            models.UniqueConstraint(fields=["slack_channel", "ts"], name="slack_message_once")
        ]

    def __str__(self) -> str:
        return f"slack message {self.slack_channel}/{self.ts} (ticket {self.ticket_id})"


class SlackUserLink(models.Model):
    """A Slack user (of one Slack workspace) is this user here: their button presses
    decide as this user, with this user's roles. Made once by the user from their
    notifications page (following the link Slack showed them), or by a verified e-mail
    address when AWAKEN_SLACK_LINK_BY_EMAIL allows it."""

    class How(models.TextChoices):
        PAGE = "page", "by the user, from their notifications page"
        EMAIL = "email", "by the verified e-mail address Slack gave"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="slack_links",
        help_text="The user here.",
    )
    slack_team_id = models.CharField(max_length=50, help_text="Slack workspace id (T...).")
    slack_user_id = models.CharField(max_length=50, help_text="Slack user id (U...).")
    slack_name = models.CharField(max_length=200, blank=True, help_text="Slack user name.")
    how = models.CharField(max_length=10, choices=How.choices, help_text="How it was made.")
    linked_at = models.DateTimeField(default=timezone.now, help_text="Linked at.")

    class Meta:
        app_label = "operations"
        ordering = ["user_id", "linked_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["slack_team_id", "slack_user_id"], name="slack_user_linked_once"
            )
        ]

    def __str__(self) -> str:
        return f"slack {self.slack_team_id}/{self.slack_user_id} -> user {self.user_id}"
