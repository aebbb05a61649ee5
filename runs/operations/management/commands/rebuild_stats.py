"""Recompute the dashboard's counters and the runs' open-ticket counts from the rows."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand

from runs.services import stats


class Command(BaseCommand):
    help = (
        "Recompute the dashboard's hourly counters, each run's open-ticket count and each "
        "ticket's agent from the rows (after a bulk load or a restore)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.monotonic()
        rows = stats.rebuild()
        self.stdout.write(f"{rows} counter rows rebuilt in {time.monotonic() - started:.1f} s")
