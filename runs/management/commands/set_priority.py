"""Change the priority of a run no worker has taken yet."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from common.errors import ServiceError
from runs.management.run_control import check_priority, cli_actor, find
from runs.models import Run
from runs.services.runs import run_set_priority


class Command(BaseCommand):
    help = "Set RUN's priority to N: 0 (high) … 255 (low); only while it is queued (created)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("run", help="run id")
        parser.add_argument("priority", type=int, help="0 (high) … 255 (low)")
        parser.add_argument("--as", dest="actor", default="cli", help="who acts (audit)")

    def handle(self, *args: Any, run: str, priority: int, actor: str, **options: Any) -> None:
        found = find(Run.objects.all(), run, "run")
        check_priority(priority)
        before = found.priority
        try:
            run_set_priority(run=found, priority=priority, actor=cli_actor(actor))
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"run {found.pk}: priority {before} -> {priority}\n")
