"""The runs list's sort by duration and each operator's time display.

`run_duration_idx` (PostgreSQL only) orders the finished runs by how long they ran, longest
first, so the runs list sorted by duration reads a page of index entries at a million runs.
It is an expression index: no new column, nothing more to write while a run runs (its
`started_at` and `finished_at` are written once each). Tokens and cost are not indexed:
they change at every step, and an index on them would turn each checkpoint's update of
the run row into one that writes every index of the table."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

DURATION_INDEX = (
    "CREATE INDEX IF NOT EXISTS run_duration_idx ON runs_run "
    "((finished_at - started_at) DESC, id DESC) "
    "WHERE finished_at IS NOT NULL AND started_at IS NOT NULL"
)


def postgres_only(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DURATION_INDEX)


def drop_postgres_only(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS run_duration_idx")


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0020_scale_pages"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="OperatorPreference",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "time_display",
                    models.CharField(
                        choices=[("relative", "Relative"), ("local", "Local time"), ("utc", "UTC")],
                        default="relative",
                        help_text="How pages show a moment: relative (3 minutes ago), the "
                        "browser's local time, or UTC.",
                        max_length=10,
                    ),
                ),
                (
                    "user",
                    models.OneToOneField(
                        help_text="Whose preferences these are.",
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="operator_preference",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
        migrations.RunPython(postgres_only, drop_postgres_only),
    ]
