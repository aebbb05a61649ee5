"""A thread's pending input: list it, or edit or retract one input."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from common.errors import ServiceError
from runs.management.run_control import check_priority, cli_actor, find, input_line
from runs.models import PendingInput, Thread
from runs.services.creation import thread_open_run
from runs.services.inputs import input_edit, input_retract


class Command(BaseCommand):
    help = (
        "List THREAD's pending input in order (--all: with what was delivered, retracted or "
        'cancelled); or --retract INPUT_ID; or --edit INPUT_ID "new text" [--priority N].'
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "target", nargs="?", help="thread id (to list), or the new text (with --edit)"
        )
        parser.add_argument("--all", action="store_true", help="every input, not only pending")
        parser.add_argument("--retract", metavar="INPUT_ID", help="retract this pending input")
        parser.add_argument("--edit", metavar="INPUT_ID", help="edit this pending input")
        parser.add_argument("--priority", type=int, help="--edit: the new priority (0…255)")
        parser.add_argument("--as", dest="actor", default="cli", help="who acts (audit)")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["retract"] and opts["edit"]:
            raise CommandError("--retract and --edit are separate actions: give one")
        try:
            if opts["retract"]:
                self._retract(opts)
            elif opts["edit"]:
                self._edit(opts)
            else:
                self._list(opts)
        except ServiceError as exc:
            raise CommandError(exc.message) from exc

    def _list(self, opts: dict[str, Any]) -> None:
        if not opts["target"]:
            raise CommandError("give a thread id (or --retract / --edit INPUT_ID)")
        thread = find(Thread.objects.all(), opts["target"], "thread")
        rows = PendingInput.objects.filter(thread=thread).order_by("seq")
        if not opts["all"]:
            rows = rows.filter(status=PendingInput.Status.PENDING)
        found = list(rows)
        open_run = thread_open_run(thread)
        state = f"open run {open_run.pk} ({open_run.status})" if open_run else "no open run"
        kind = "inputs" if opts["all"] else "pending inputs"
        self.stdout.write(f"thread {thread.pk}: {len(found)} {kind}; {state}\n")
        for input_ in found:
            self.stdout.write(input_line(input_))

    def _retract(self, opts: dict[str, Any]) -> None:
        input_ = find(PendingInput.objects.all(), opts["retract"], "input")
        retracted = input_retract(input_id=input_.pk, actor=cli_actor(opts["actor"]))
        self.stdout.write(f"input #{retracted.seq} retracted: it will not be delivered\n")

    def _edit(self, opts: dict[str, Any]) -> None:
        input_ = find(PendingInput.objects.all(), opts["edit"], "input")
        text, priority = opts["target"], check_priority(opts["priority"])
        if text is None and priority is None:
            raise CommandError("--edit needs the new text, --priority N, or both")
        edited = input_edit(
            input_id=input_.pk, messages=text, priority=priority, actor=cli_actor(opts["actor"])
        )
        self.stdout.write(f"input #{edited.seq} changed\n" + input_line(edited))
