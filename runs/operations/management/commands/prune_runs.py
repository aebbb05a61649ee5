from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from common.audit import Actor
from runs.operations.services.retention import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_PAUSE,
    BatchResult,
    PruneResult,
    RetentionError,
    prune_runs,
)


class Command(BaseCommand):
    help = (
        "Delete (optionally archive first) the runs that finished more than N days ago, "
        "with their events, tool calls, tickets and decisions, and the threads left "
        "without runs, in small batches. Audit entries are kept."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--older-than-days",
            type=int,
            required=True,
            metavar="N",
            help="remove run trees whose every run finished more than N days ago (N >= 1)",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=DEFAULT_BATCH_SIZE,
            metavar="SIZE",
            help=f"root runs per batch (one short transaction each; default {DEFAULT_BATCH_SIZE})",
        )
        parser.add_argument(
            "--archive-dir",
            type=Path,
            metavar="DIR",
            help="write the removed runs to DIR/runs-<timestamp>.jsonl.gz first",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would go; change nothing"
        )
        parser.add_argument(
            "--pause",
            type=float,
            default=DEFAULT_PAUSE,
            metavar="SECONDS",
            help=f"sleep between batches (default {DEFAULT_PAUSE})",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        days = opts["older_than_days"]
        if days < 1:
            raise CommandError(f"--older-than-days must be at least 1, got {days}", returncode=2)
        verb = "would remove" if opts["dry_run"] else "removed"

        def progress(batch: BatchResult) -> None:
            self.stdout.write(
                f"batch {batch.number}: {verb} {batch.runs} runs, {batch.events} events, "
                f"{batch.threads} threads, {batch.messages} messages"
                + (f"; kept {batch.skipped} unfinished trees" if batch.skipped else "")
                + f" ({batch.seconds:.3f} s)"
            )

        try:
            result = prune_runs(
                older_than=dt.timedelta(days=days),
                batch_size=opts["batch_size"],
                archive_dir=opts["archive_dir"],
                dry_run=opts["dry_run"],
                pause=opts["pause"],
                actor=Actor(label="cli", source="cli"),
                progress=progress,
            )
        except RetentionError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        self.stdout.write(self._summary(result, verb))

    @staticmethod
    def _summary(result: PruneResult, verb: str) -> str:
        lines = [
            f"{'dry run: ' if result.dry_run else ''}{verb} {result.runs} runs finished before "
            f"{result.cutoff:%Y-%m-%d %H:%M:%S} UTC: {result.events} events, "
            f"{result.tool_calls} tool calls, {result.tickets} tickets, "
            f"{result.decisions} decisions, {result.threads} threads, "
            f"{result.messages} messages; {result.batches} batches in {result.seconds:.2f} s"
        ]
        if result.skipped:
            lines.append(f"kept {result.skipped} old runs whose tree is not all old and done")
        if result.contended:
            lines.append(f"{result.contended} batches met busy rows and were left for the next run")
        if result.archive_path is not None:
            lines.append(f"archive: {result.archive_path}")
        return "\n".join(lines) + "\n"
