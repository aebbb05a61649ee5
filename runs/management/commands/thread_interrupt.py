"""Interrupt a thread: cancel its open run and every pending input."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from common.errors import ServiceError
from runs.management.run_control import cli_actor, find
from runs.models import Run, Thread
from runs.services.inputs import thread_interrupt


class Command(BaseCommand):
    help = "Cancel THREAD's open run and every input still pending, in one action."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("thread", help="thread id")
        parser.add_argument("--as", dest="actor", default="cli", help="who acts (audit)")

    def handle(self, *args: Any, thread: str, actor: str, **options: Any) -> None:
        found = find(Thread.objects.all(), thread, "thread")
        try:
            result = thread_interrupt(thread=found, actor=cli_actor(actor))
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        run = result["run"]
        if run is None:
            self.stdout.write("no open run\n")
        elif Run.objects.filter(pk=run.pk, status=Run.Status.DONE).exists():
            self.stdout.write(f"run {run.pk} cancelled\n")
        else:
            self.stdout.write(f"run {run.pk} asked to stop: it ends at its next check\n")
        cancelled = result["cancelled_inputs"]
        self.stdout.write(
            f"{len(cancelled)} pending input{'' if len(cancelled) == 1 else 's'} cancelled\n"
        )
        for ident in cancelled:
            self.stdout.write(f"  {ident}\n")
