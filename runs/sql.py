"""`UPDATE … RETURNING` through the ORM's own SQL compiler.

Django's `QuerySet.update()` answers a row count only; the hot path (claiming a run,
writing a checkpoint) needs the row it changed, and reading it back costs a second round
trip. PostgreSQL and SQLite (3.35+) both accept `RETURNING` after the UPDATE the ORM
compiles, so the update is compiled as usual and the returned columns are converted with
the same converters a SELECT would use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from django.db import close_old_connections, connection, connections
from django.db.models import Model, QuerySet
from django.db.models.sql import UpdateQuery

M = TypeVar("M", bound=Model)


def update_returning(
    queryset: QuerySet[M],
    values: dict[str, Any],
    returning: Sequence[str] | None = None,
    *,
    extra: dict[str, str] | None = None,
) -> M | None:
    """Apply `values` to the one row `queryset` matches and return that row as it is after
    the update (only the `returning` fields loaded; all concrete fields by default), or
    None when nothing matched. The queryset must match at most one row. `extra` names
    more SQL expressions to return (constant SQL, no parameters), set as attributes."""
    model = queryset.model
    db = queryset.db
    connection = connections[db]
    wanted = {model._meta.get_field(name).attname for name in returning or ()}  # type: ignore[union-attr]
    # in the model's field order, as `Model.from_db` expects them
    fields = [
        f
        for f in model._meta.concrete_fields
        if returning is None or f.primary_key or f.attname in wanted
    ]
    query: UpdateQuery = queryset.query.chain(UpdateQuery)  # type: ignore[assignment]
    query.add_update_values(values)
    compiler = query.get_compiler(db)
    compiler.pre_sql_setup()
    sql, params = compiler.as_sql()
    table = connection.ops.quote_name(model._meta.db_table)
    columns = ", ".join(
        [f"{table}.{connection.ops.quote_name(str(f.column))}" for f in fields]
        + list((extra or {}).values())
    )
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} RETURNING {columns}", params)
        row = cursor.fetchone()
    if row is None:
        return None
    values_out = []
    for field, value in zip(fields, row[: len(fields)], strict=True):
        column = field.get_col(model._meta.db_table)
        for converter in connection.ops.get_db_converters(column) + field.get_db_converters(
            connection
        ):
            value = converter(value, column, connection)
        values_out.append(value)
    instance = model.from_db(db, [f.attname for f in fields], values_out)
    for name, value in zip(extra or {}, row[len(fields) :], strict=True):
        setattr(instance, name, value)
    return instance


def release_connection() -> None:
    """Give the connection back to the pool between the reads of a long-lived stream or
    the checkpoints of a run (closed when CONN_MAX_AGE says so or when it broke); left
    alone inside an outer transaction (tests) and on SQLite (no server to spare: closing
    would only cost a reopen and a WAL checkpoint each time)."""
    if not connection.in_atomic_block and connection.vendor != "sqlite":
        close_old_connections()
