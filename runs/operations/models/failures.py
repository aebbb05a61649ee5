"""Failure groups: failed runs grouped by fingerprint (runs/operations/services/fingerprint.py), per
team, with their count, first and last occurrence, the agents affected and a triage state
(docs/failure-groups.md)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from runs.fields import uuid7_default

AGENTS_KEPT = 50  # affected agents a group lists (the rest are counted in the runs)


class FailureGroup(models.Model):
    """One failure as it recurs: kept by one upsert in the transaction that ends each of
    its runs failed (runs.operations.services.failures.failure_record). A resolved group that fails
    again is open again (`regressed_at`); an ignored one stays ignored and still counts."""

    class State(models.TextChoices):
        OPEN = "open", "open"
        RESOLVED = "resolved", "resolved"
        IGNORED = "ignored", "ignored"

    id = models.UUIDField(
        primary_key=True, default=uuid7_default, editable=False, help_text="Group id (UUID v7)."
    )
    team = models.ForeignKey(
        "common.Team",
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,  # the (team, fingerprint) constraint starts with it
        help_text="Team of the failed runs' agents: its members see the group.",
    )
    fingerprint = models.CharField(
        max_length=64, help_text="SHA-256 of the error type, where it failed and the message."
    )
    error_type = models.CharField(
        max_length=100, help_text="The runs' reason: error, timeout or stopped:<condition>."
    )
    source = models.CharField(
        max_length=220,
        blank=True,
        help_text="Where it failed: provider:<slug>, endpoint:<slug> or tool:<name>.",
    )
    title = models.CharField(
        max_length=300, help_text="The message with ids, numbers and quoted values masked."
    )
    sample_message = models.TextField(blank=True, help_text="The first occurrence's message.")
    count = models.PositiveBigIntegerField(default=0, help_text="Failed runs so far.")
    first_seen = models.DateTimeField(default=timezone.now, help_text="First failure.")
    last_seen = models.DateTimeField(default=timezone.now, help_text="Latest failure.")
    last_run_id = models.UUIDField(null=True, blank=True, help_text="The latest failed run.")
    agent_ids = models.JSONField(
        default=list, blank=True, help_text=f"Ids of the agents affected (the first {AGENTS_KEPT})."
    )
    state = models.CharField(
        max_length=10, choices=State.choices, default=State.OPEN, help_text="Triage state."
    )
    state_changed_at = models.DateTimeField(
        null=True, blank=True, help_text="When it was last resolved, ignored or reopened."
    )
    state_changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who did (none: reopened by a new failure).",
    )
    state_changed_by_label = models.CharField(
        max_length=200, blank=True, help_text="Who did, as the audit log names them."
    )
    regressed_at = models.DateTimeField(
        null=True, blank=True, help_text="When it last failed again after being resolved."
    )

    class Meta:
        app_label = "operations"
        db_table = "runs_failuregroup"  # its table from when it was the core's
        ordering = ["-last_seen"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "fingerprint"], name="failuregroup_unique_team_fingerprint"
            ),
        ]
        indexes = [
            # the failure groups page and the dashboard: by state, latest first
            models.Index(fields=["state", "-last_seen"], name="failuregroup_state_idx"),
            models.Index(
                fields=["team", "state", "-last_seen"], name="failuregroup_team_state_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.error_type}: {self.title[:60]}"


class FailureGroupRun(models.Model):
    """Which group a failed run belongs to: the runs list filtered to a group reads them
    by (group, newest first). No database constraint to the run: retention deletes runs
    by batches of raw deletes and removes these rows with them."""

    run_id = models.UUIDField(primary_key=True, help_text="The failed run.")
    group = models.ForeignKey(
        FailureGroup,
        on_delete=models.CASCADE,
        related_name="runs",
        db_index=False,
        help_text="Its group.",
    )
    created_at = models.DateTimeField(help_text="When the run was created (the list's order).")

    class Meta:
        app_label = "operations"
        db_table = "runs_failuregrouprun"  # its table from when it was the core's
        indexes = [
            models.Index(fields=["group", "-created_at", "-run_id"], name="failuregrouprun_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} in {self.group_id}"
