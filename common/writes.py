"""Writes sent together: several INSERTs and upserts whose results nobody reads, as ONE
statement on PostgreSQL.

A run's submission writes its message, the run, the thread, the first event, the audit
entry and an hourly counter; a step's end writes messages, tool calls, events and counters.
Each was a statement of its own: a round trip, and a parse and plan on the server. On
PostgreSQL a statement may carry data-modifying `WITH` parts, each executed once whether
or not anything reads it, so the queued writes go as

    WITH w0 AS (INSERT …), w1 AS (INSERT … ON CONFLICT …) INSERT …

Elsewhere (SQLite, the embedded default) they run one by one, in the order queued.

What may be queued: writes that do not depend on each other within the batch and never
touch the same row twice (PostgreSQL runs the parts of one statement on one snapshot, in
no promised order). Foreign keys are checked at commit (Django declares them deferred), so
a child may be queued before its parent. Any other statement that runs on the connection
while the batch is open first sends what is queued, so a read in between sees the writes
as if each had run at once. The batch is sent when the `with` block ends without an
exception; on an exception it is dropped with the transaction around it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model
from django.db.models.constants import OnConflict
from django.db.models.sql import InsertQuery

try:
    from psycopg import _queries
except ImportError:  # pragma: no cover (psycopg is a dependency; SQLite does not use it)
    _queries = None  # type: ignore[assignment]

# PostgreSQL takes at most 65,535 parameters in one statement: a batch that would pass
# this many is sent first (a checkpoint's writes are far below it)
MAX_PARAMS = 30_000
# The batches psycopg keeps the parsed form of (below)
CACHED_PARAMS, CACHED_LENGTH = 400, 32_768


def cache_batch_statements() -> None:
    """Let psycopg keep the parsed form of a batch's statement. Before sending a query it
    splits the SQL at its `%s` placeholders with a regular expression, and keeps the
    result (an LRU of 128 statements) only for queries of at most 4,096 bytes and 50
    parameters. A checkpoint's batch has 80-130 parameters and comes in a handful of
    shapes, so each was parsed again: 8 % of a plain run's CPU. The limits are module
    constants of psycopg, read at each execute; left alone if a version lacks them."""
    if _queries is None:
        return
    for name, value in (
        ("MAX_CACHED_STATEMENT_PARAMS", CACHED_PARAMS),
        ("MAX_CACHED_STATEMENT_LENGTH", CACHED_LENGTH),
    ):
        if isinstance(getattr(_queries, name, None), int):
            setattr(_queries, name, max(getattr(_queries, name), value))


class WriteBatch:
    def __init__(self, using: str = DEFAULT_DB_ALIAS) -> None:
        self.using = using
        self.connection = connections[using]
        self.pending: list[tuple[str, Sequence[Any]]] = []
        self.params = 0  # in `pending`
        self._sending = False
        self._wrapper: Any = None

    def __enter__(self) -> WriteBatch:
        self._wrapper = self.connection.execute_wrapper(self._before_other_statement)
        self._wrapper.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._wrapper.__exit__(exc_type, exc, traceback)
        if exc_type is None:
            self.send()
        else:
            self.pending, self.params = [], 0

    def _before_other_statement(
        self, execute: Any, sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        if not self._sending:
            self.send()
        return execute(sql, params, many, context)

    def add(self, sql: str, params: Sequence[Any]) -> None:
        """Queue one write given as SQL (placeholders `%s`) and its parameters."""
        if self.params + len(params) > MAX_PARAMS:
            self.send()
        self.pending.append((sql, list(params)))
        self.params += len(params)

    def insert(
        self,
        objs: Iterable[Model],
        *,
        update_conflicts: bool = False,
        unique_fields: Sequence[str] = (),
        update_fields: Sequence[str] = (),
    ) -> None:
        """Queue the INSERT of unsaved model instances of one model, as `bulk_create`
        compiles it (an upsert with `update_conflicts`), without reading anything back:
        the instances count as saved afterwards; an auto-incremented primary key stays
        unset. No signals are sent (as with `bulk_create`)."""
        rows = list(objs)
        if not rows:
            return
        model = type(rows[0])
        opts = model._meta
        fields = [
            f
            for f in opts.concrete_fields
            if not f.generated and not (f.primary_key and getattr(rows[0], f.attname) is None)
        ]
        query = InsertQuery(
            model,
            on_conflict=OnConflict.UPDATE if update_conflicts else None,
            update_fields=[opts.get_field(name) for name in update_fields] or None,
            unique_fields=[opts.get_field(name) for name in unique_fields] or None,
        )
        query.insert_values(fields, rows)
        for sql, params in query.get_compiler(self.using).as_sql():
            self.add(sql, params)
        for row in rows:
            row._state.adding = False
            row._state.db = self.using

    def send(self) -> None:
        """Send what is queued now (one statement on PostgreSQL)."""
        if not self.pending:
            return
        pending, self.pending, self.params = self.pending, [], 0
        if self.connection.vendor == "postgresql" and len(pending) > 1:
            *parts, (last, _) = pending
            with_parts = ", ".join(f"w{index} AS ({sql})" for index, (sql, _) in enumerate(parts))
            pending = [(f"WITH {with_parts} {last}", [p for _, params in pending for p in params])]
        self._sending = True
        try:
            with self.connection.cursor() as cursor:
                for sql, params in pending:
                    cursor.execute(sql, params)
        finally:
            self._sending = False
