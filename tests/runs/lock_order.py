"""A recorder of the row locks each transaction takes, from the SQL it sends, and the
check of the lock order (runs.services.locks, docs/run-model.md "Lock order"): a run,
then its thread, then the rows that belong to them (tickets, tool calls, pending input,
background work, counters); a parent's run and thread before its children's.

Under pytest-django's `db` fixture every service transaction is a savepoint of the test's
transaction: a transaction is what runs between a SAVEPOINT at depth 0 and its release,
and a statement outside any is one of its own. A lock is what an UPDATE, an upsert or a
`SELECT … FOR [NO KEY] UPDATE` takes; one that cannot wait (SKIP LOCKED, NOWAIT) or on a
row the transaction inserted or holds already cannot break the order."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from runs.models import Run, Thread

RUN, THREAD, BELONGING = 1, 2, 3
RANKS = {"runs_run": RUN, "runs_thread": THREAD}
BELONGING_TABLES = {
    "runs_ticket",
    "runs_toolcall",
    "runs_pendinginput",
    "runs_backgroundtask",
    "runs_hourlystat",
    "runs_hourlyusage",
}
NAMES = {RUN: "run", THREAD: "thread", BELONGING: "row of a run"}


@dataclass
class Lock:
    table: str
    row: str | None
    waits: bool
    sql: str


@dataclass
class Transaction:
    statements: list[Any] = field(default_factory=list)  # Lock, ("savepoint"|…, name)
    inserted: set[tuple[str, str]] = field(default_factory=set)


def _row_id(sql: str, params: Any, table: str) -> str | None:
    # (a prepared statement's parameter is compiled in parentheses: runs.sql.Param)
    found = re.search(rf'"{table}"\."id" = \(?%s', sql)
    if found is None or not params:
        return None
    value = params[sql[: found.start()].count("%s")]
    return str(uuid.UUID(str(value))) if value is not None else None


def _inserted_id(sql: str, params: Any, table: str) -> str | None:
    columns = re.match(rf'INSERT INTO "{table}" \(([^)]*)\)', sql)
    if columns is None or not params:
        return None
    names = [c.strip() for c in columns.group(1).split(",")]
    if '"id"' not in names:
        return None
    return str(uuid.UUID(str(params[names.index('"id"')])))


def classify(sql: str, params: Any) -> Lock | tuple[str, str] | None:
    """The lock a statement takes, a savepoint step, or None."""
    head = sql.lstrip()[:40].upper()
    if head.startswith("SAVEPOINT"):
        return ("savepoint", sql.split()[1])
    if head.startswith("RELEASE SAVEPOINT"):
        return ("release", sql.split()[2])
    if head.startswith("ROLLBACK TO SAVEPOINT"):
        return ("rollback", sql.split()[3])
    table = None
    if head.startswith("UPDATE"):
        matched = re.match(r'\s*UPDATE "(\w+)"', sql)
        table = matched.group(1) if matched else None
    elif head.startswith("INSERT") and "ON CONFLICT" in sql and "DO UPDATE" in sql:
        matched = re.match(r'\s*INSERT INTO "(\w+)"', sql)
        table = matched.group(1) if matched else None
    elif head.startswith("INSERT"):
        matched = re.match(r'\s*INSERT INTO "(\w+)"', sql)
        if matched and matched.group(1) in RANKS:
            row = _inserted_id(sql, params, matched.group(1))
            return ("insert", f"{matched.group(1)}:{row}")
        return None
    elif head.startswith("SELECT") and re.search(r"FOR (NO KEY )?UPDATE", sql):
        matched = re.search(r'FROM "(\w+)"', sql)
        table = matched.group(1) if matched else None
    if table is None or (table not in RANKS and table not in BELONGING_TABLES):
        return None
    waits = "SKIP LOCKED" not in sql and "NOWAIT" not in sql
    row = _row_id(sql, params, table) if table in RANKS else None
    return Lock(table, row, waits, sql[:160])


class Recorder:
    def __init__(self) -> None:
        self.transactions: list[Transaction] = []
        self._depth = 0

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        step = classify(sql, params if not many else None)
        if isinstance(step, tuple):
            kind, name = step
            if kind == "savepoint":
                if self._depth == 0:
                    self.transactions.append(Transaction())
                self._depth += 1
            if kind == "insert":
                if self._depth == 0:
                    self.transactions.append(Transaction())
                table, row = name.split(":")
                self.transactions[-1].inserted.add((table, row))
            else:
                self.transactions[-1].statements.append(step)
            if kind == "release":
                self._depth -= 1
        elif step is not None:
            if self._depth == 0:
                self.transactions.append(Transaction())
            self.transactions[-1].statements.append(step)
        return execute(sql, params, many, context)


@contextmanager
def recording() -> Iterator[Recorder]:
    recorder = Recorder()
    with connection.execute_wrapper(recorder):
        yield recorder


def _depth(table: str, row: str, cache: dict[tuple[str, str], int]) -> int:
    """How deep in its run tree a run or thread is (a root's: 0)."""
    key = (table, row)
    if key not in cache:
        if table == "runs_run":
            parent = Run.objects.filter(pk=row).values_list("parent_run_id", flat=True).first()
        else:
            parent = (
                Thread.objects.filter(pk=row).values_list("parent_thread_id", flat=True).first()
            )
        cache[key] = 0 if parent is None else 1 + _depth(table, str(parent), cache)
    return cache[key]


def violations(recorder: Recorder) -> list[str]:
    """Every lock that a transaction took (or waited for) after one that comes later in
    the order, described."""
    found: list[str] = []
    depths: dict[tuple[str, str], int] = {}
    for number, tx in enumerate(recorder.transactions):
        held: set[tuple[str, str]] = set()
        highest = (0, 0)
        taken: list[str] = []
        stack: list[tuple[str, set[tuple[str, str]], tuple[int, int], int]] = []
        for step in tx.statements:
            if isinstance(step, tuple):
                kind, name = step
                if kind == "savepoint":
                    stack.append((name, set(held), highest, len(taken)))
                elif kind == "rollback":  # what the savepoint's part locked is let go
                    while stack and stack[-1][0] != name:
                        stack.pop()
                    if stack:
                        _, saved, saved_highest, count = stack[-1]
                        held, highest, taken = set(saved), saved_highest, taken[:count]
                elif kind == "release":
                    while stack and stack[-1][0] != name:
                        stack.pop()
                    if stack:
                        stack.pop()
                continue
            lock: Lock = step
            rank = RANKS.get(lock.table, BELONGING)
            key = (lock.table, lock.row) if lock.row else None
            if key is not None and (key in held or key in tx.inserted):
                continue
            depth = _depth(lock.table, lock.row, depths) if lock.row else highest[0]
            place = (depth, rank)
            if lock.waits and place < highest:
                found.append(
                    f"transaction {number}: {NAMES[rank]} {lock.row or ''} (depth {depth}) "
                    f"locked after {taken[-1]}: {lock.sql}"
                )
            if key is not None:
                held.add(key)
            if place > highest:
                highest = place
            taken.append(f"{NAMES[rank]} {lock.row or ''} (depth {depth})")
    return found


def tables_locked(recorder: Recorder) -> set[str]:
    return {
        step.table
        for tx in recorder.transactions
        for step in tx.statements
        if isinstance(step, Lock)
    }
