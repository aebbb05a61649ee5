"""Replays: past runs' first user input run again on a chosen agent version (a draft
included), to compare outcomes before publishing (docs/fork-replay-compare.md)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.timezone import now

from runs.fields import uuid7_default


class ReplaySet(models.Model):
    """A set of past runs replayed on one version, at most `concurrency` at a time."""

    class TicketPolicy(models.TextChoices):
        APPROVE_ALL = "approve_all"
        REJECT_ALL = "reject_all"
        AS_RECORDED = "as_recorded"

    class HttpMode(models.TextChoices):
        LIVE = "live"
        RECORDED = "recorded"

    class Status(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"

    id = models.UUIDField(
        primary_key=True, default=uuid7_default, editable=False, help_text="Replay set id."
    )
    agent = models.ForeignKey(
        "agents.Agent", on_delete=models.PROTECT, related_name="+", help_text="Agent replayed."
    )
    version = models.ForeignKey(
        "agents.AgentVersion",
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Version the replays run on (a published one or a draft snapshot).",
    )
    filters = models.JSONField(
        default=dict, blank=True, help_text="How the original runs were picked."
    )
    ticket_policy = models.CharField(
        max_length=20,
        choices=TicketPolicy.choices,
        default=TicketPolicy.AS_RECORDED,
        help_text="How the replays' tickets are decided (never by a person).",
    )
    http_mode = models.CharField(
        max_length=10,
        choices=HttpMode.choices,
        default=HttpMode.RECORDED,
        help_text="http_get: called for real, or answered from the original run's result.",
    )
    concurrency = models.PositiveSmallIntegerField(
        default=2, help_text="Replays of this set running at once, at most."
    )
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.RUNNING, help_text="State."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who started it.",
    )
    created_at = models.DateTimeField(default=now, help_text="When it started.")
    finished_at = models.DateTimeField(
        null=True, blank=True, help_text="When its last replay ended."
    )

    class Meta:
        app_label = "replays"
        db_table = "runs_replayset"  # its table from when it was the core's
        ordering = ["-created_at"]
        permissions = [("replay_runs", "Can replay past runs on an agent version")]

    def __str__(self) -> str:
        return f"replay {self.pk} of {self.agent_id}"


class ReplayItem(models.Model):
    """One original run and its replay (none until the set's turn comes)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        SKIPPED = "skipped"

    replay_set = models.ForeignKey(
        ReplaySet, on_delete=models.CASCADE, related_name="items", help_text="Its set."
    )
    position = models.PositiveIntegerField(help_text="Order in the set (oldest original first).")
    original_run = models.ForeignKey(
        "runs.Run",
        null=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Run replayed (empty once retention deleted it).",
    )
    replay_run = models.OneToOneField(
        "runs.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="replay_item",
        help_text="The replay (empty until started).",
    )
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, help_text="State."
    )
    note = models.CharField(max_length=300, blank=True, help_text="Why it was skipped.")

    class Meta:
        app_label = "replays"
        db_table = "runs_replayitem"  # its table from when it was the core's
        ordering = ["replay_set", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["replay_set", "position"], name="replayitem_unique_position"
            )
        ]
        indexes = [
            models.Index(
                fields=["replay_set", "position"],
                condition=models.Q(status="pending"),
                name="replayitem_pending_idx",
            )
        ]

    def __str__(self) -> str:
        return f"replay {self.replay_set_id} #{self.position}"
