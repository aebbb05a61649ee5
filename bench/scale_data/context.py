"""One scale load's shared facts (its sizes, the moment it is loaded at, the ids of the
configuration rows) and its steps, each timed and printed as it ends."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from bench.scale_data.dataset import Sizes
from bench.scale_data.sql import execute, insert_select, q


@dataclass
class LoadContext:
    sizes: Sizes
    t0: dt.datetime
    config: dict[str, Any]
    log_prefix: str = "  "

    @property
    def t0_sql(self) -> str:
        """The load's "now" as a SQL timestamptz literal."""
        return f"{q(self.t0.isoformat())}::timestamptz"

    @property
    def big_thread(self) -> int:
        """Plan number of the big thread (the regular ones are 1..threads)."""
        return self.sizes.threads + 1

    @property
    def huge_thread(self) -> int:
        """Plan number of the huge run's thread."""
        return self.sizes.threads + 2

    def log(self, what: str, started: float, rows: int | None = None) -> None:
        extra = f" ({rows:,} rows)" if rows is not None and rows >= 0 else ""
        print(f"{self.log_prefix}{what}{extra}: {time.monotonic() - started:.1f}s", flush=True)

    def step(self, what: str, sql: str, params: list[Any] | None = None) -> int:
        started = time.monotonic()
        rows = execute(sql, params)
        self.log(what, started, rows)
        return rows

    def insert(self, what: str, model: Any, exprs: dict[str, str], source: str) -> int:
        started = time.monotonic()
        rows = insert_select(model, exprs, source)
        self.log(what, started, rows)
        return rows
