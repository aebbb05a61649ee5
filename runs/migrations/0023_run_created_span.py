"""The runs list sorted by duration within a creation range (runs.selectors.run_sort).

`run_created_span_idx` (PostgreSQL only) holds the finished runs by creation time with
their start, end, id and agent, so the longest runs of a range are found from the index
alone, without reading the table. Like run_duration_idx (0021) it holds columns written
once each, at a run's creation, start and end."""

from django.db import migrations

SPAN_INDEX = (
    "CREATE INDEX IF NOT EXISTS run_created_span_idx ON runs_run "
    "(created_at) INCLUDE (started_at, finished_at, id, agent_id) "
    "WHERE finished_at IS NOT NULL AND started_at IS NOT NULL"
)


def postgres_only(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(SPAN_INDEX)


def drop_postgres_only(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS run_created_span_idx")


class Migration(migrations.Migration):
    dependencies = [("runs", "0022_failure_groups")]

    operations = [migrations.RunPython(postgres_only, drop_postgres_only)]
