"""The shared records: the audit trail and personal API tokens.

Both tables were created by the `runs` app and keep their names; the audit row names the
run it concerns by the run's model label, so this app imports nothing above it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditEntry(models.Model):
    """One record per operator action (decisions, cancels, retries, runs started), written
    in the same transaction as the action."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_entries",
        help_text="User who acted (null for the system or the CLI).",
    )
    actor_label = models.CharField(
        max_length=200, help_text="Who, as shown: username, 'system', 'cli'."
    )
    action = models.CharField(
        max_length=40, help_text="e.g. run.start, ticket.approve, run.cancel."
    )
    target_type = models.CharField(max_length=40, help_text="run, ticket, thread, agent …")
    target_id = models.CharField(max_length=100, help_text="Id of the target.")
    run = models.ForeignKey(
        "runs.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_entries",
        help_text="Run concerned, for filtering.",
    )
    before = models.JSONField(
        null=True, blank=True, help_text="State before (e.g. the model's arguments)."
    )
    after = models.JSONField(
        null=True, blank=True, help_text="State after (e.g. the edited arguments)."
    )
    comment = models.TextField(blank=True, help_text="Reason given.")
    team = models.ForeignKey(
        "common.Team",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Team whose members see the entry (none: site-wide roles only).",
    )
    source = models.CharField(
        max_length=20, default="ui", help_text="ui, api, cli, admin or system."
    )
    request_id = models.CharField(max_length=64, blank=True, help_text="Request that caused it.")
    created_at = models.DateTimeField(default=timezone.now, help_text="When.")

    class Meta:
        db_table = "runs_auditentry"  # created by the runs app before the move
        verbose_name_plural = "audit entries"  # not Django's "audit entrys"
        ordering = ["-created_at", "-id"]
        # audit page: newest first, filtered by action or actor
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="audit_recent_idx"),
            models.Index(fields=["action", "-created_at", "-id"], name="audit_action_recent_idx"),
            models.Index(
                fields=["actor_label", "-created_at", "-id"], name="audit_actor_recent_idx"
            ),
            models.Index(fields=["team", "-created_at", "-id"], name="audit_team_recent_idx"),
            # the admin's filter by source (and its values)
            models.Index(fields=["source", "-created_at", "-id"], name="audit_source_recent_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.actor_label} {self.action} {self.target_type}:{self.target_id}"


class ApiToken(models.Model):
    """A personal API token (`Authorization: Bearer awk_<lookup>_<secret>`). Only a sha256
    of the full token is stored; the non-secret `prefix` (`awk_<lookup>`) finds the row."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="api_tokens",
        help_text="Owner: the token acts with this user's permissions.",
    )
    name = models.CharField(max_length=100, help_text="What it is for, e.g. 'ci' or 'laptop'.")
    prefix = models.CharField(
        max_length=32, unique=True, help_text="Non-secret lookup part, e.g. awk_1a2b3c4d5e6f."
    )
    token_hash = models.CharField(max_length=64, help_text="sha256 hex digest of the token.")
    created_at = models.DateTimeField(default=timezone.now, help_text="When it was created.")
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="Rejected after this time (never if empty)."
    )
    last_used_at = models.DateTimeField(
        null=True, blank=True, help_text="Last authenticated request (minute precision)."
    )
    revoked_at = models.DateTimeField(null=True, blank=True, help_text="Revoked at; then rejected.")

    class Meta:
        db_table = "runs_apitoken"  # created by the runs app before the move
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.prefix} ({self.name})"

    @property
    def is_active(self) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > timezone.now()


class Role(models.TextChoices):
    """A role in a team (or, as a role group, site-wide); what each grants is in
    common/roles.py."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"


def default_team_id() -> int:
    """The team an agent or thread belongs to when none is named: `default`, made on
    first use (the embedded default has one team and never needs to know)."""
    team, _ = Team.objects.get_or_create(slug=DEFAULT_TEAM, defaults={"name": "Default"})
    return team.pk


DEFAULT_TEAM = "default"


class Team(models.Model):
    """Who sees and runs which agents. An agent belongs to one team; its runs, threads,
    tickets and audit entries are seen by the team's members, and acted on by those
    whose role there allows it. The settings below make destructive actions safer."""

    slug = models.SlugField(max_length=63, unique=True, help_text="Team id, e.g. payments.")
    name = models.CharField(max_length=200, help_text="Shown to users.")
    reason_required = models.BooleanField(
        default=False, help_text="Rejecting a ticket or cancelling a run needs a reason."
    )
    bulk_confirm_above = models.PositiveIntegerField(
        default=10,
        help_text="A bulk action on more than this many items asks to be confirmed "
        "(0: always asks).",
    )
    frozen = models.BooleanField(
        default=False,
        help_text="Incident freeze: nothing of the team may be started, decided, "
        "cancelled or configured until it is lifted.",
    )
    frozen_reason = models.TextField(blank=True, help_text="Why the team is frozen.")
    frozen_at = models.DateTimeField(null=True, blank=True, help_text="When it was frozen.")
    frozen_by = models.CharField(max_length=200, blank=True, help_text="Who froze it.")
    created_at = models.DateTimeField(default=timezone.now, help_text="When it was added.")

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name or self.slug


class Membership(models.Model):
    """A user's role in one team. Users signed in through SSO get theirs from the
    identity provider's claims at each login (source `sso`)."""

    class Source(models.TextChoices):
        LOCAL = "local"
        SSO = "sso"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships"
    )
    role = models.CharField(max_length=20, choices=Role.choices, help_text="Role in the team.")
    source = models.CharField(
        max_length=10, choices=Source.choices, default=Source.LOCAL, help_text="Granted by."
    )
    created_at = models.DateTimeField(default=timezone.now, help_text="When it was granted.")

    class Meta:
        ordering = ["team__slug", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="membership_team_user_uniq")
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.role} in {self.team}"
