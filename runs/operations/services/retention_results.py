"""What a prune reports (counts per batch and in all) and the errors it raises;
`runs.operations.services.retention` re-exports them."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any


class RetentionError(ValueError):
    """Bad input: a cutoff, batch size, pause or archive directory that cannot work."""


class RetentionUnsafe(RuntimeError):
    """The models gained a link into the deleted tables that retention does not handle."""


@dataclass(kw_only=True)
class Removed:
    runs: int = 0
    threads: int = 0
    messages: int = 0
    events: int = 0
    tool_calls: int = 0
    tickets: int = 0
    decisions: int = 0
    skipped: int = 0  # roots kept because a run of their tree is not old and done yet


@dataclass(kw_only=True)
class BatchResult(Removed):
    number: int
    seconds: float = 0.0


@dataclass(kw_only=True)
class PruneResult(Removed):
    cutoff: dt.datetime
    dry_run: bool = False
    batches: int = 0
    contended: int = 0  # batches left for a later run because their rows stayed busy
    seconds: float = 0.0
    complete: bool = False  # False: stopped by the budget or a contended batch
    archive_path: Path | None = None

    def add(self, batch: BatchResult) -> None:
        self.batches += 1
        for item in fields(Removed):
            setattr(self, item.name, getattr(self, item.name) + getattr(batch, item.name))

    def counts(self) -> dict[str, Any]:
        """What the audit entry and the beat task report (JSON-ready)."""
        data = asdict(self)
        data["cutoff"] = self.cutoff.isoformat()
        data["seconds"] = round(self.seconds, 3)
        data["archive_path"] = str(self.archive_path) if self.archive_path else None
        return data
