"""`UPDATE … RETURNING` through the ORM's own SQL compiler, and compiled once per shape.

Django's `QuerySet.update()` answers a row count only; the hot path (claiming a run,
writing a checkpoint) needs the row it changed, and reading it back costs a second round
trip. PostgreSQL and SQLite (3.35+) both accept `RETURNING` after the UPDATE the ORM
compiles, so the update is compiled as usual and the returned columns are converted with
the same converters a SELECT would use.

Building a queryset and compiling it costs more CPU than PostgreSQL spends running the
statement (about a quarter of a worker's CPU per run went to the five updates of a plain
run). `prepared_update` compiles a statement once per process and shape: the queryset
and values are built once with `Param` placeholders where each call's values go, and
every later call only prepares its values, as the fields would (`get_db_prep_save`), and
sends the SQL Django wrote the first time.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import close_old_connections, connection, connections
from django.db.models import Expression, Field, Model, QuerySet
from django.db.models.sql import UpdateQuery

M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class _Slot:
    """Where a `Param`'s value goes in a compiled statement's parameters."""

    name: str
    field: Field


class Param(Expression):
    """A value given when a prepared statement runs (`prepared_update`), in place of a
    constant in its queryset or values; prepared for the database as `field` would."""

    def __init__(self, name: str, field: Field) -> None:
        super().__init__(output_field=field)
        self.name = name

    def as_sql(self, compiler: Any, connection: Any) -> Any:
        return "%s", [_Slot(self.name, self.output_field)]


class Params:
    """`Param`s of a model's fields: `p.attempt` is the value of `attempt`;
    `p("held", "attempt")` another value of that field, under its own name."""

    def __init__(self, model: type[Model]) -> None:
        self._model = model

    def __call__(self, name: str, field_name: str | None = None) -> Param:
        return Param(name, self._model._meta.get_field(field_name or name))  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Param:
        if name.startswith("_"):
            raise AttributeError(name)
        return self(name)


@dataclass(frozen=True)
class _Statement:
    model: type[Model]
    using: str
    sql: str
    params: tuple[Any, ...]  # constants, and the `_Slot`s of each call's values
    attnames: list[str]  # the returned fields, in the model's field order
    converters: list[list[Any]]  # per returned field
    columns: list[Any]
    extra: tuple[str, ...]


def _compile(
    queryset: QuerySet[Any],
    values: dict[str, Any],
    returning: Sequence[str] | None,
    extra: dict[str, str] | None,
) -> _Statement:
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
    cols = [f.get_col(model._meta.db_table) for f in fields]
    return _Statement(
        model=model,
        using=db,
        sql=f"{sql} RETURNING {columns}",
        params=tuple(params),
        attnames=[f.attname for f in fields],
        converters=[
            connection.ops.get_db_converters(col) + f.get_db_converters(connection)
            for f, col in zip(fields, cols, strict=True)
        ],
        columns=cols,
        extra=tuple(extra or ()),
    )


def _execute(statement: _Statement, params: Sequence[Any]) -> Any:
    connection = connections[statement.using]
    with connection.cursor() as cursor:
        cursor.execute(statement.sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    size = len(statement.attnames)
    values_out = []
    for value, converters, column in zip(
        row[:size], statement.converters, statement.columns, strict=True
    ):
        for converter in converters:
            value = converter(value, column, connection)
        values_out.append(value)
    instance = statement.model.from_db(statement.using, statement.attnames, values_out)
    for name, value in zip(statement.extra, row[size:], strict=True):
        setattr(instance, name, value)
    return instance


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
    statement = _compile(queryset, values, returning, extra)
    return _execute(statement, statement.params)  # type: ignore[no-any-return]


_prepared: dict[tuple[str, str, Hashable], _Statement] = {}


def prepared_update(
    key: Hashable,
    build: Callable[[], tuple[QuerySet[M], dict[str, Any]]],
    args: Mapping[str, Any],
    returning: Sequence[str] | None = None,
    *,
    extra: dict[str, str] | None = None,
    using: str = "default",
) -> M | None:
    """`update_returning` of the queryset and values `build()` makes, compiled once per
    process for `key` (with the database's vendor): `build` writes a `Param` wherever
    a call's value goes and must make the same statement every time it is called for
    that key (a shape that varies needs a key of its own). `args` gives every Param's
    value by name."""
    vendor = connections[using].vendor
    statement = _prepared.get((using, vendor, key))
    if statement is None:
        queryset, values = build()
        statement = _compile(queryset.using(using), values, returning, extra)
        _prepared[(using, vendor, key)] = statement
    conn = connections[using]
    params = [
        p.field.get_db_prep_save(args[p.name], conn) if type(p) is _Slot else p
        for p in statement.params
    ]
    return _execute(statement, params)  # type: ignore[no-any-return]


def release_connection() -> None:
    """Give the connection back to the pool between the reads of a long-lived stream or
    the checkpoints of a run (closed when CONN_MAX_AGE says so or when it broke); left
    alone inside an outer transaction (tests) and on SQLite (no server to spare: closing
    would only cost a reopen and a WAL checkpoint each time)."""
    if not connection.in_atomic_block and connection.vendor != "sqlite":
        close_old_connections()
