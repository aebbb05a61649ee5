"""Runs waiting on tickets of chosen tools and arguments, aged on demand: what the
bulk-by-policy, waiting-filter and saved-view tests share."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

from django.utils import timezone

from runs.models import Run, Ticket
from runs.services.submission_flow import run_start
from tests.factories import call, scripted_agent
from tests.runs.helpers import drive

ASK = {"default_behavior": "ask"}
TOOLS = ["calculator", "write_note", "send_email"]
_serial = itertools.count()


def waiting_on(slug: str, *calls: tuple[str, dict[str, Any]]) -> list[Ticket]:
    """A run of a new agent `slug` (asks before every tool) waiting on one ticket per
    (tool, arguments) in `calls`, all made in one step; its tickets in that order."""
    script = [{"text": "", "tool_calls": [call(tool, args) for tool, args in calls]}]
    agent = scripted_agent([*script, {"text": "ok"}], slug=slug, permission=ASK, tools=TOOLS)
    run = drive(run_start(agent=agent, messages=f"please, {next(_serial)}"))
    assert run.status == Run.Status.WAITING, run.status_reason
    pending = list(Ticket.objects.filter(run=run, status=Ticket.Status.PENDING))
    assert len(pending) == len(calls)
    return _in_call_order(pending, calls)


def _in_call_order(
    tickets: list[Ticket], calls: tuple[tuple[str, dict[str, Any]], ...]
) -> list[Ticket]:
    left = list(tickets)
    ordered = []
    for tool, args in calls:
        match = next(t for t in left if t.tool_name == tool and t.arguments == args)
        left.remove(match)
        ordered.append(match)
    return ordered


def note(title: str) -> tuple[str, dict[str, Any]]:
    return ("write_note", {"title": title, "body": "b"})


def calc(expression: str) -> tuple[str, dict[str, Any]]:
    return ("calculator", {"expression": expression})


def email(*to: str) -> tuple[str, dict[str, Any]]:
    return ("send_email", {"to": list(to), "subject": "hi", "body": "b"})


def age(ticket: Ticket, minutes: float) -> Ticket:
    """Make the ticket `minutes` older than now."""
    when = timezone.now() - dt.timedelta(minutes=minutes)
    Ticket.objects.filter(pk=ticket.pk).update(created_at=when)
    ticket.refresh_from_db()
    return ticket
