from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from common.audit import Actor
from common.errors import ServiceError
from runs.cli import describe_outcome, event_marks, follow_parents, follow_run
from runs.embedded import start_embedded_worker
from runs.models import Ticket
from runs.services.tickets import ACTIONS, decision_submit


def _json(option: str, raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise CommandError(f"{option} is not valid JSON: {exc}") from exc


class Command(BaseCommand):
    help = "Decide a waiting ticket (approve, reject, edit or respond) and follow the run."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("ticket", help="ticket id (as printed by run_agent)")
        parser.add_argument("action", choices=ACTIONS)
        parser.add_argument("--args", dest="arguments", help="edit: the tool arguments as JSON")
        parser.add_argument("--payload", help="respond: the answer as JSON")
        parser.add_argument("--comment", default="", help="reason or note")
        parser.add_argument(
            "--as", dest="actor", default="cli", help="who decides (shown in audit)"
        )
        parser.add_argument("--no-follow", action="store_true", help="do not wait for the run")
        parser.add_argument("--timeout", type=float, default=600.0)

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            ticket = (
                Ticket.objects.select_related("run", "tool_call").filter(pk=opts["ticket"]).first()
            )
        except Exception as exc:  # a malformed UUID
            raise CommandError(f"unknown ticket {opts['ticket']!r}") from exc
        if ticket is None:
            raise CommandError(f"unknown ticket {opts['ticket']!r}")
        payload = _json("--payload", opts["payload"])
        if opts["action"] == "respond" and payload is None:
            raise CommandError("respond needs --payload JSON (e.g. --payload '\"blue\"')")
        if settings.AWAKEN_EMBEDDED_WORKER and not opts["no_follow"]:
            start_embedded_worker()
        marks = event_marks(ticket.run)
        try:
            decision = decision_submit(
                ticket=ticket,
                action=opts["action"],
                arguments=_json("--args", opts["arguments"]),
                payload=payload,
                comment=opts["comment"],
                actor=Actor(label=opts["actor"], source="cli"),
            )
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(
            f"{decision.action} recorded for ticket {ticket.pk} ({ticket.tool_name})\n"
        )
        if opts["no_follow"]:
            return
        run = follow_run(
            ticket.run_id, self.stdout, after_seq=marks[ticket.run_id], timeout=opts["timeout"]
        )
        describe_outcome(run, self.stdout)
        follow_parents(run, self.stdout, marks, timeout=opts["timeout"])
