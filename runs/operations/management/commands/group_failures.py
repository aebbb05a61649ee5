"""Group the failed runs of before failure groups existed (runs/operations/services/failures.py)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from runs.operations.services.failures import BACKFILL_BATCH, failures_backfill


class Command(BaseCommand):
    help = (
        "Group the failed runs no failure group counts yet (after an upgrade, a bulk load "
        "or a restore), oldest first, in batches of one transaction each. Safe to stop and "
        "run again: runs already grouped are skipped. No notification is sent for them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch", type=int, default=BACKFILL_BATCH, help="Runs per transaction."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.monotonic()
        log = self.stdout.write if options["verbosity"] > 1 else None
        totals = failures_backfill(batch=max(1, options["batch"]), log=log)
        self.stdout.write(
            f"{totals['runs']} failed runs grouped ({totals['groups']} group updates, "
            f"{totals['batches']} batches) in {time.monotonic() - started:.1f} s"
        )
