"""Failure groups (docs/failure-groups.md): two new tables, nothing added to runs, so it is
instant at a million runs. The failed runs of before are grouped by
`manage.py group_failures` (a command: batches, resumable), not here. Viewers see the
groups, operators resolve, ignore and reopen them (common/roles.py)."""

import django.db.models.deletion
import django.utils.timezone
import runs.fields
from django.conf import settings
from django.db import migrations, models


def grant(apps, schema_editor):
    from common.roles import sync_roles

    sync_roles(apps)


class Migration(migrations.Migration):
    dependencies = [
        ("common", "0003_scale_pages"),
        ("runs", "0021_run_list"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="notificationdelivery",
            name="event",
            field=models.CharField(
                choices=[
                    ("ticket.opened", "a ticket opens"),
                    ("ticket.deadline_near", "a ticket's deadline nears"),
                    ("run.failed", "a run fails"),
                    ("run.given_up", "a run is given up after repeated crashes"),
                    (
                        "failure_group.new",
                        "a new kind of failure appears (or a resolved one again)",
                    ),
                ],
                help_text="What happened.",
                max_length=40,
            ),
        ),
        migrations.CreateModel(
            name="FailureGroup",
            fields=[
                (
                    "id",
                    models.UUIDField(
                        default=runs.fields.uuid7_default,
                        editable=False,
                        help_text="Group id (UUID v7).",
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                (
                    "fingerprint",
                    models.CharField(
                        help_text="SHA-256 of the error type, where it failed and the message.",
                        max_length=64,
                    ),
                ),
                (
                    "error_type",
                    models.CharField(
                        help_text="The runs' reason: error, timeout or stopped:<condition>.",
                        max_length=100,
                    ),
                ),
                (
                    "source",
                    models.CharField(
                        blank=True,
                        help_text="Where it failed: provider:<slug>, endpoint:<slug> or tool:<name>.",
                        max_length=220,
                    ),
                ),
                (
                    "title",
                    models.CharField(
                        help_text="The message with ids, numbers and quoted values masked.",
                        max_length=300,
                    ),
                ),
                (
                    "sample_message",
                    models.TextField(blank=True, help_text="The first occurrence's message."),
                ),
                (
                    "count",
                    models.PositiveBigIntegerField(default=0, help_text="Failed runs so far."),
                ),
                (
                    "first_seen",
                    models.DateTimeField(
                        default=django.utils.timezone.now, help_text="First failure."
                    ),
                ),
                (
                    "last_seen",
                    models.DateTimeField(
                        default=django.utils.timezone.now, help_text="Latest failure."
                    ),
                ),
                (
                    "last_run_id",
                    models.UUIDField(blank=True, help_text="The latest failed run.", null=True),
                ),
                (
                    "agent_ids",
                    models.JSONField(
                        blank=True,
                        default=list,
                        help_text="Ids of the agents affected (the first 50).",
                    ),
                ),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("open", "open"),
                            ("resolved", "resolved"),
                            ("ignored", "ignored"),
                        ],
                        default="open",
                        help_text="Triage state.",
                        max_length=10,
                    ),
                ),
                (
                    "state_changed_at",
                    models.DateTimeField(
                        blank=True,
                        help_text="When it was last resolved, ignored or reopened.",
                        null=True,
                    ),
                ),
                (
                    "state_changed_by_label",
                    models.CharField(
                        blank=True,
                        help_text="Who did, as the audit log names them.",
                        max_length=200,
                    ),
                ),
                (
                    "regressed_at",
                    models.DateTimeField(
                        blank=True,
                        help_text="When it last failed again after being resolved.",
                        null=True,
                    ),
                ),
                (
                    "state_changed_by",
                    models.ForeignKey(
                        blank=True,
                        help_text="Who did (none: reopened by a new failure).",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "team",
                    models.ForeignKey(
                        db_index=False,
                        help_text="Team of the failed runs' agents: its members see the group.",
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="common.team",
                    ),
                ),
            ],
            options={
                "ordering": ["-last_seen"],
            },
        ),
        migrations.CreateModel(
            name="FailureGroupRun",
            fields=[
                (
                    "run_id",
                    models.UUIDField(
                        help_text="The failed run.", primary_key=True, serialize=False
                    ),
                ),
                (
                    "created_at",
                    models.DateTimeField(help_text="When the run was created (the list's order)."),
                ),
                (
                    "group",
                    models.ForeignKey(
                        db_index=False,
                        help_text="Its group.",
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="runs",
                        to="runs.failuregroup",
                    ),
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="failuregroup",
            index=models.Index(fields=["state", "-last_seen"], name="failuregroup_state_idx"),
        ),
        migrations.AddIndex(
            model_name="failuregroup",
            index=models.Index(
                fields=["team", "state", "-last_seen"], name="failuregroup_team_state_idx"
            ),
        ),
        migrations.AddConstraint(
            model_name="failuregroup",
            constraint=models.UniqueConstraint(
                fields=("team", "fingerprint"), name="failuregroup_unique_team_fingerprint"
            ),
        ),
        migrations.AddIndex(
            model_name="failuregrouprun",
            index=models.Index(
                fields=["group", "-created_at", "-run_id"], name="failuregrouprun_idx"
            ),
        ),
        migrations.RunPython(grant, migrations.RunPython.noop),
    ]
