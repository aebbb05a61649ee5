"""SQL helpers of the scale load: literals for text this package controls, statements on
Django's one connection, `INSERT ... SELECT` that fills the columns a model defaults, and
dropping / rebuilding the loaded tables' secondary indexes around the load.

Django is imported inside the functions: it needs django.setup(), which runs after the
environment is set (see bench/common.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from bench.scale_data.dataset import LOADED_TABLES, LoadError


def q(text: str) -> str:
    """A SQL string literal for text this module controls."""
    return "'" + text.replace("'", "''") + "'"


def sql_array(words: list[str] | tuple[str, ...]) -> str:
    return "ARRAY[" + ", ".join(q(w) for w in words) + "]"


def execute(sql: str, params: list[Any] | None = None) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        if params:
            cursor.execute(sql, params)
        else:
            cursor.execute(sql)
        return cursor.rowcount


def scalar(sql: str) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql)
        row = cursor.fetchone()
        return row[0] if row else None


def insert_select(model: Any, exprs: dict[str, str], source: str) -> int:
    """INSERT INTO <model's table> (...) SELECT <exprs> <source>. Columns not in `exprs`
    get the model field's default (Django defaults live in Python, not in the schema),
    so a column added by a new migration does not break the load; a required column
    without a default does, with its name."""
    from django.db import connection

    fields = {f.column: f for f in model._meta.concrete_fields}
    unknown = sorted(set(exprs) - set(fields))
    if unknown:
        raise LoadError(f"{model._meta.db_table} has no column(s) {', '.join(unknown)}")
    columns, values, params = [], [], []
    for column, f in fields.items():
        if column in exprs:
            columns.append(column)
            values.append(exprs[column])
            continue
        if f.primary_key and f.get_internal_type() in ("AutoField", "BigAutoField"):
            continue  # the sequence
        default = f.get_default()
        if default is None:
            if f.null:
                continue
            raise LoadError(
                f"{model._meta.db_table}.{column} is required and has no default: "
                "bench/scale_data/ must generate it"
            )
        columns.append(column)
        values.append("%s")
        params.append(f.get_db_prep_save(default, connection))
    table = connection.ops.quote_name(model._meta.db_table)
    sql = f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(values)} {source}"
    return execute(sql, params or None)


def has_column(model: Any, name: str) -> bool:
    return any(f.column == name for f in model._meta.concrete_fields)


# --- index and constraint handling ----------------------------------------------------------


@dataclass
class DroppedDefinitions:
    constraints: list[tuple[str, str, str]]  # table, name, definition
    indexes: list[tuple[str, str]]  # name, CREATE INDEX statement


def drop_secondary_indexes() -> DroppedDefinitions:
    """Drop the loaded tables' unique constraints and non-constraint indexes (primary
    keys stay); returns what `restore_indexes` recreates."""
    from django.db import connection

    tables = list(LOADED_TABLES)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT cl.relname, co.conname, pg_get_constraintdef(co.oid) FROM pg_constraint co"
            " JOIN pg_class cl ON cl.oid = co.conrelid"
            " WHERE co.contype = 'u' AND cl.relname = ANY(%s) ORDER BY cl.relname, co.conname",
            [tables],
        )
        constraints = [(t, n, d) for t, n, d in cursor.fetchall()]
        cursor.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i"
            " WHERE i.schemaname = current_schema() AND i.tablename = ANY(%s)"
            " AND NOT EXISTS (SELECT 1 FROM pg_constraint co WHERE co.conname = i.indexname)"
            " ORDER BY i.tablename, i.indexname",
            [tables],
        )
        indexes = [(n, d) for n, d in cursor.fetchall()]
        for table, name, _ in constraints:
            cursor.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"')
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
    return DroppedDefinitions(constraints, indexes)


def restore_indexes(dropped: DroppedDefinitions, log: Any) -> None:
    for table, name, definition in dropped.constraints:
        started = time.monotonic()
        execute(f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" {definition}')
        log(f"constraint {name}", started)
    for name, definition in dropped.indexes:
        started = time.monotonic()
        execute(definition)
        log(f"index {name}", started)
