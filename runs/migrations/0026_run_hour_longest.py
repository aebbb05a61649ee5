"""The runs list sorted by duration within a creation range, read hour by hour
(runs.selectors.run_sort).

`run_hour_longest_idx` (PostgreSQL only) holds the finished runs by their creation hour in
UTC, longest first within an hour, with the columns the list's filters and its page read,
so the longest runs of each hour of a range come from a short read of the index alone.
Like run_duration_idx (0021) it holds columns written once each, at a run's creation,
start and end. The index expression `date_trunc('hour', created_at AT TIME ZONE 'UTC')`
is immutable (a timestamp without a zone), as an index requires."""

from django.db import migrations

HOUR_INDEX = (
    "CREATE INDEX IF NOT EXISTS run_hour_longest_idx ON runs_run "
    "((date_trunc('hour', created_at AT TIME ZONE 'UTC')), "
    "(finished_at - started_at) DESC, id DESC) "
    "INCLUDE (created_at, started_at, finished_at, agent_id) "
    "WHERE finished_at IS NOT NULL AND started_at IS NOT NULL"
)


def postgres_only(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(HOUR_INDEX)


def drop_postgres_only(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS run_hour_longest_idx")


class Migration(migrations.Migration):
    dependencies = [("runs", "0025_roles_schedules_operators")]

    operations = [migrations.RunPython(postgres_only, drop_postgres_only)]
