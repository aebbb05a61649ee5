"""What a scale database holds: the row counts of the loaded tables, and the meta row the
load writes last (what was loaded, when, at which scale), which `--reuse` reads back.

Django is imported inside the functions: it needs django.setup(), which runs after the
environment is set (see bench/common.py)."""

from __future__ import annotations

import json

from bench.scale_data.dataset import LOADED_TABLES, META_TABLE, Loaded
from bench.scale_data.sql import execute, scalar


def table_counts() -> dict[str, int]:
    from django.db import connection

    counts = {}
    for table in (*LOADED_TABLES, "runs_hourlystat"):
        try:
            counts[table] = int(scalar(f"SELECT count(*) FROM {table}"))
        except Exception:  # a table that does not exist (yet)
            if not connection.get_autocommit():
                raise
            counts[table] = -1
    return counts


def write_meta(loaded: Loaded) -> None:
    execute(f"CREATE TABLE IF NOT EXISTS {META_TABLE} (key text PRIMARY KEY, value jsonb)")
    execute(
        f"INSERT INTO {META_TABLE} VALUES ('loaded', %s::jsonb)"
        " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        [json.dumps(loaded.to_json())],
    )


def read_meta() -> Loaded | None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [META_TABLE])
        if cursor.fetchone()[0] is None:
            return None
        cursor.execute(f"SELECT value FROM {META_TABLE} WHERE key = 'loaded'")
        row = cursor.fetchone()
    if row is None:
        return None
    value = row[0]
    if isinstance(value, str):
        value = json.loads(value)
    return Loaded.from_json(value)
